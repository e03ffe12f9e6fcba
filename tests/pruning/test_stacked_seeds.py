"""Pruning seeds stacked in one forward pass (``train_unit_masks``, ``prune(stack_seeds=True)``) give each seed
what it gets alone: the padding of every seed's batch to the longest changes no example's scores, each example
is masked by its own seed's draw, and each seed keeps its own optimizer, so the log_alphas agree to float
rounding and the binary subnetworks are the same."""

import pytest
import torch
from planted import PLANTED, build_planted_model

import heurlens
from heurlens.data.snli import load_snli
from heurlens.evaluate import predict_logits, tokenize_pairs
from heurlens.interventions.means import compute_means
from heurlens.interventions.unit_masks import UnitMaskHooks
from heurlens.interventions.units import UnitLayout
from heurlens.pruning.mask_loop import stacked_batches
from heurlens.pruning.train import train_unit_masks
from heurlens.tasks import token_batches


def test_stacked_batches_pad_each_batch_on_the_right_and_keep_its_rows():
    short = {"input_ids": torch.tensor([[5, 6]]), "attention_mask": torch.tensor([[1, 1]])}
    long = {"input_ids": torch.tensor([[7, 8, 9], [1, 2, 0]]), "attention_mask": torch.tensor([[1, 1, 1], [1, 1, 0]])}
    stacked = stacked_batches([short, long], pad_token_id=3)
    assert stacked["input_ids"].tolist() == [[5, 6, 3], [7, 8, 9], [1, 2, 0]]
    assert stacked["attention_mask"].tolist() == [[1, 1, 0], [1, 1, 1], [1, 1, 0]]


def test_a_per_example_mask_masks_each_example_as_its_own_mask_would(random_bert_dir):
    model = heurlens.load_model(random_bert_dir(2, 4))
    data = tokenize_pairs("pairs", load_snli("train", limit=6, seed=0), model.tokenizer, 6)
    means = compute_means(model, data)
    layout = UnitLayout(model.n_layers, model.n_heads)
    masks = torch.rand(2, layout.n_units, generator=torch.Generator().manual_seed(0))
    batch = data.batches[0]
    alone = []
    for row, mask in zip((slice(0, 3), slice(3, 6)), masks):
        hooks = UnitMaskHooks(means, *layout.split(mask))
        with hooks.attached(model), torch.no_grad():
            alone.append(model(**{key: value[row] for key, value in batch.items()}))
    hooks = UnitMaskHooks(means, *layout.split(masks.repeat_interleave(3, dim=0)))  # per example: [6, layer, ...]
    with hooks.attached(model), torch.no_grad():
        together = model(**batch)
    assert torch.allclose(together, torch.cat(alone), atol=1e-5)
    assert not torch.allclose(alone[0], alone[1][:3], atol=1e-3)  # the two masks do differ


def test_stacked_seeds_train_what_each_seed_trains_alone(random_bert_dir):
    """Length-sorted batches of different lengths, so the stacked passes pad; 3 seeds, 40 steps."""
    model = heurlens.load_model(random_bert_dir(4, 8))
    data = tokenize_pairs("snli-train", load_snli("train", limit=256, seed=0), model.tokenizer, 16,
                          sort_by_length=True)
    assert len({batch["input_ids"].shape[1] for batch in data.batches}) > 3
    full, means = predict_logits(model, data), compute_means(model, data)
    config = heurlens.PruneSettings(total_steps=40, warmup_steps=20, log_alpha_init=1.0, lr_log_alpha=0.3)
    stacked = train_unit_masks(model, data, full, means, 0.5, [0, 1, 2], config, progress=False)
    for seed, together in zip([0, 1, 2], stacked):
        [alone] = train_unit_masks(model, data, full, means, 0.5, [seed], config, progress=False)
        assert torch.allclose(together.log_alpha, alone.log_alpha, atol=1e-4)  # heads and MLPs
        assert together.final_loss == pytest.approx(alone.final_loss, rel=1e-3, abs=1e-6)
    assert not torch.allclose(stacked[0].log_alpha, stacked[1].log_alpha, atol=1e-2)  # seeds differ


def test_stacked_prune_keeps_the_planted_units_and_resumes_only_missing_seeds(tmp_path, monkeypatch):
    from heurlens.pruning import runs as runs_module

    model = build_planted_model()
    data = token_batches(torch.randint(0, 4, (128, 6), generator=torch.Generator().manual_seed(0)), batch_size=16)
    settings = heurlens.PruneSettings()
    first = heurlens.prune(model, data, sparsity=2 / 3, seeds=[0], out=tmp_path, config=settings, progress=False)
    calls = []
    real = runs_module.train_unit_masks
    monkeypatch.setattr(runs_module, "train_unit_masks", lambda *a, **k: calls.append(list(a[5])) or real(*a, **k))
    found = heurlens.prune(model, data, sparsity=2 / 3, seeds=[0, 1, 2], out=tmp_path, config=settings, progress=False,
                           stack_seeds=True)
    assert calls == [[1, 2]]  # seed 0 came from the folder; 1 and 2 trained together
    assert [s.seed for s in found] == [0, 1, 2] and found[0].kept == first[0].kept
    assert all({str(unit) for unit in s.kept} == set(PLANTED) for s in found)
    alone = heurlens.prune(model, data, sparsity=2 / 3, seeds=[2], config=settings, progress=False)[0]
    assert torch.allclose(alone.log_alpha_heads, found[2].log_alpha_heads, atol=1e-4)


def test_seeds_must_be_given_once_each(random_bert_dir):
    model = heurlens.load_model(random_bert_dir(2, 4))
    data = tokenize_pairs("pairs", load_snli("train", limit=8, seed=0), model.tokenizer, 4)
    with pytest.raises(heurlens.HeurlensError, match="each once"):
        train_unit_masks(model, data, predict_logits(model, data), compute_means(model, data), 0.5, [1, 1],
                         progress=False)


@pytest.mark.slow
def test_stacked_seeds_give_the_same_subnetworks_as_one_by_one_on_the_default_model():
    """The issue's check: the default model at 50%, 3 seeds, a shortened run (60 of 1,516 steps, the warm-up
    scaled with it), stacked against one seed after another."""
    model = heurlens.load_model("default")
    data = tokenize_pairs("snli-train", load_snli("train", limit=1000, seed=0), model.tokenizer, 16,
                          sort_by_length=True)
    means = compute_means(model, data)
    config = heurlens.PruneSettings(total_steps=60)
    one_by_one = heurlens.prune(model, data, sparsity=0.5, seeds=range(3), means=means, config=config, progress=False,
                                stack_seeds=False)
    stacked = heurlens.prune(model, data, sparsity=0.5, seeds=range(3), means=means, config=config, progress=False,
                             stack_seeds=True)
    for alone, together in zip(one_by_one, stacked):
        assert together.kept == alone.kept
        assert torch.allclose(together.log_alpha_heads, alone.log_alpha_heads, atol=1e-3)
    assert one_by_one[0].kept != one_by_one[1].kept  # the seeds find different subnetworks
