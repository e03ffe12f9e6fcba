"""CPU and CUDA give the same results on the same tiny models. Skipped where torch sees no CUDA device (this
project's own machine has none: these run where a GPU is lent, ``python -m pytest -m gpu``)."""

import pandas as pd
import pytest
import torch
from planted import PLANTED, build_planted_model

import heurlens
from heurlens.tasks import token_batches

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")]


@pytest.fixture()
def planted_data():
    return token_batches(torch.randint(0, 4, (128, 6), generator=torch.Generator().manual_seed(0)), batch_size=16)


def test_ablation_tables_equal_on_cpu_and_cuda(tiny_bert_dir, tmp_path, monkeypatch):
    """A head and an MLP mean-ablated on HANS-style pairs: the same table to 1e-4 (each device its own cache)."""
    from heurlens.data.hans import generate_hans

    tables = []
    for device in ("cpu", "cuda"):
        monkeypatch.setenv("HEURLENS_CACHE", str(tmp_path / device))
        model = heurlens.load_model(tiny_bert_dir, device=device)
        data = heurlens.tokenize_pairs("SO-Swap", generate_hans(64, ["SO-Swap"], seed=0), model.tokenizer)
        means = heurlens.compute_means(model, data)
        tables.append(heurlens.ablate(model, "L0.H1,L1.MLP", [data], method="mean", means=means))
    pd.testing.assert_frame_equal(tables[0], tables[1], check_exact=False, atol=1e-4, rtol=0)


def test_pruning_on_cuda_keeps_exactly_the_planted_units(planted_data):
    """The known answer of tests/pruning/test_planted_pruning.py on the GPU (its mask draws come from a CUDA generator,
    so the path differs from the CPU's; the answer must not)."""
    model = build_planted_model().to("cuda")
    for subnetwork in heurlens.prune(model, planted_data, sparsity=2 / 3, seeds=[0, 1], progress=False,
                                     config=heurlens.PruneSettings()):
        assert {str(unit) for unit in subnetwork.kept} == set(PLANTED)
        assert subnetwork.metrics["trained_on"] == f"cuda, {torch.cuda.get_device_name()}"


def test_stacked_seeds_on_cuda_match_the_seeds_one_by_one_there(random_bert_dir):
    """Stacking is the default on CUDA; forced off, the same seeds one by one on the same GPU give the same
    log_alphas to float rounding."""
    from heurlens.data.snli import load_snli

    model = heurlens.load_model(random_bert_dir(4, 8), device="cuda")
    data = heurlens.tokenize_pairs("snli-train", load_snli("train", limit=256, seed=0), model.tokenizer, 16,
                                   sort_by_length=True)
    config = heurlens.PruneSettings(total_steps=40, warmup_steps=20, log_alpha_init=1.0, lr_log_alpha=0.3)
    stacked = heurlens.prune(model, data, sparsity=0.5, seeds=range(3), config=config, progress=False)
    alone = heurlens.prune(model, data, sparsity=0.5, seeds=range(3), config=config, progress=False, stack_seeds=False)
    for together, single in zip(stacked, alone):
        assert torch.allclose(together.log_alpha_heads, single.log_alpha_heads, atol=1e-3)


def test_a_transfer_epoch_has_the_same_losses_on_cpu_and_cuda():
    """One epoch of next-token training of the same arithmetic model (weights drawn on the CPU) on each device:
    the loss after the epoch and the evaluation accuracy agree."""
    from heurlens.subtask.arithmetic import ArithmeticTask, evaluation_set, training_set
    from heurlens.subtask.training import arithmetic_model, train_next_token

    task = ArithmeticTask("a+b", max_value=20)
    train, evaluation = training_set(task, 0.5, 0), evaluation_set(task, 100, 1)
    results = [train_next_token(arithmetic_model(task, 2, 0, device), train, evaluation, evaluation, epochs=1,
                                progress=False) for device in ("cpu", "cuda")]
    assert results[0].history[0]["loss"] == pytest.approx(results[1].history[0]["loss"], abs=1e-4)
    assert results[0].history[0]["eval"] == results[1].history[0]["eval"]
