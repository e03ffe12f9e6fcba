"""Ablated passes resumed at the first ablated layer: the same bits as whole passes, on encoders and decoders,
with the lower blocks really skipped."""

import pytest
import torch

from heurlens.evaluate import EvalSet, predict_logits
from heurlens.interventions.ablation import ablate_groups, ablation_hooks
from heurlens.interventions.resumed_passes import ablated_logits
from heurlens.interventions.units import Unit
from heurlens.models import load_model
from heurlens.runtime.call_context import call_context


@pytest.fixture(autouse=True)
def own_activation_cache(tmp_path, monkeypatch):
    """Each test its own activation cache: these compare bits, and a residual stream stored by another process
    (another torch thread count, so another summation order) may differ from this one's in the last bit."""
    monkeypatch.setenv("HEURLENS_CACHE", str(tmp_path / "cache"))


@pytest.fixture(scope="module")
def three_layer_bert(random_bert_dir):
    """A random 3-layer, 4-head BERT NLI classifier (one layer more than the shared tiny BERT, so that
    ablations can start at a middle block)."""
    return load_model(random_bert_dir(3, 4, seed=1))


def random_set(vocab: int, token_types: bool, seed: int = 0) -> EvalSet:
    """Three right-padded batches of random tokens (uneven lengths and sizes) with random labels."""
    generator = torch.Generator().manual_seed(seed)
    batches = []
    for size, length in ((4, 7), (3, 11), (5, 5)):
        ids = torch.randint(3, vocab, (size, length), generator=generator)
        mask = (torch.arange(length) < torch.randint(2, length + 1, (size, 1), generator=generator)).long()
        batch = {"input_ids": ids * mask, "attention_mask": mask}
        if token_types:
            batch["token_type_ids"] = (torch.arange(length) >= length // 2).long().expand(size, -1) * mask
        batches.append(batch)
    return EvalSet("random", batches, torch.randint(0, 3, (12,), generator=generator),
                   ("entailment", "neutral", "contradiction"))


def check_same_bits(model, groups: list[list[Unit]], data: EvalSet, dtype: str = "float32") -> None:
    """Resumed logits equal whole-pass logits bit for bit, and every group's ablation changes them."""
    hooks = [ablation_hooks(model, group, method="zero") for group in groups]
    resumed = ablated_logits(model, [(min(u.layer for u in group), h) for group, h in zip(groups, hooks)], data,
                             call_context(model, dtype))
    full = predict_logits(model, data, dtype=dtype)
    for group, group_hooks, logits in zip(groups, hooks, resumed):
        assert torch.equal(logits, predict_logits(model, data, fwd_hooks=group_hooks, dtype=dtype)), group
        assert not torch.equal(logits, full), group  # the hooks fired in the resumed blocks


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_resumed_passes_equal_whole_passes_on_bert(three_layer_bert, dtype):
    """In float32, and with bfloat16 matrix products (the lower blocks kept from a bf16 pass too)."""
    groups = [[Unit(0, 1)], [Unit(1, 2)], [Unit(2, 0)], [Unit(2)], [Unit(1, 0), Unit(2, 3)], [Unit(1), Unit(2, 1)]]
    check_same_bits(three_layer_bert, groups, random_set(30522, token_types=True), dtype)


@pytest.mark.parametrize("family", ["gpt2", "llama", "qwen2", "gpt_neox"])
def test_resumed_passes_equal_whole_passes_on_decoders(family, tiny_gpt2_dirs, tiny_decoder_dirs):
    """GPT-2 as a classifier, and next-token Llama, Qwen2 (rotary position embeddings handed to every block,
    grouped-query attention) and GPT-NeoX (parallel attention and MLP)."""
    model = load_model(tiny_gpt2_dirs["classifier"] if family == "gpt2" else tiny_decoder_dirs[family])
    groups = [[Unit(0, 3)], [Unit(1, 1)], [Unit(1)], [Unit(1, 0), Unit(1, 2)]]
    check_same_bits(model, groups, random_set(11, token_types=False))


def test_lower_blocks_run_once_then_never_again(three_layer_bert, tmp_path, monkeypatch):
    """First call, per batch: blocks 0 and 1 run once to fill the activation cache (the pass stops after block 1);
    block 1 once more for the ablation that starts there; block 2 once per ablation (3). Second call: the residual
    streams come from the cache, so block 0 never runs and block 1 only for the ablation that starts there."""
    monkeypatch.setenv("HEURLENS_CACHE", str(tmp_path))
    model = three_layer_bert
    runs = [0, 0, 0]
    # counted at each block's first MLP layer, which the final block's [CLS]-only form runs too
    handles = [model.bridge.blocks[i].original_component.intermediate.register_forward_pre_hook(
        lambda *_, i=i: runs.__setitem__(i, runs[i] + 1)) for i in range(3)]
    ablations = [(2, ablation_hooks(model, [Unit(2, 0)], method="zero")),
                 (2, ablation_hooks(model, [Unit(2)], method="zero")),
                 (1, ablation_hooks(model, [Unit(1, 3)], method="zero"))]
    data = random_set(30522, token_types=True)
    try:
        first = ablated_logits(model, ablations, data)
        assert runs == [3 * 1, 3 * 2, 3 * 3]  # three batches
        runs[:] = [0, 0, 0]
        second = ablated_logits(model, ablations, data)
        assert runs == [0, 3 * 1, 3 * 3]
    finally:
        for handle in handles:
            handle.remove()
    assert all(torch.equal(a, b) for a, b in zip(first, second))


def test_blocks_are_whole_again_after_an_error(three_layer_bert):
    model = three_layer_bert
    data = random_set(30522, token_types=True)
    before = predict_logits(model, data)

    def failing(activation, hook):
        raise RuntimeError("hook failed")

    with pytest.raises(RuntimeError, match="hook failed"):
        ablated_logits(model, [(2, [("blocks.2.hook_mlp_out", failing)])], data)
    assert all("forward" not in vars(block) for block in model.bridge.blocks)
    assert torch.equal(predict_logits(model, data), before)


def test_ablate_groups_rows_group_by_group(three_layer_bert):
    """One row per (group, set) in group order; the rows equal ablating each group on its own."""
    from heurlens.interventions.ablation import ablate

    model = three_layer_bert
    sets = [random_set(30522, True, seed=0), random_set(30522, True, seed=1)]
    sets[1].name = "random-2"
    groups = [[Unit(2, 1)], [Unit(0, 0), Unit(2)], [Unit(1, 3)]]
    table = ablate_groups(model, groups, sets, method="zero", full_logits={s.name: predict_logits(model, s) for s in sets})
    assert list(table["ablated"]) == ["L2.H1", "L2.H1", "L0.H0,L2.MLP", "L0.H0,L2.MLP", "L1.H3", "L1.H3"]
    assert list(table["eval_set"]) == ["random", "random-2"] * 3
    for index, group in enumerate(groups):
        alone = ablate(model, group, sets, method="zero", full_logits={s.name: predict_logits(model, s) for s in sets})
        together = table.iloc[2 * index:2 * index + 2].drop(columns="ablated").reset_index(drop=True)
        assert together.equals(alone)


def test_a_first_ablation_keeps_its_streams_from_the_full_models_pass(three_layer_bert, tmp_path, monkeypatch):
    """With nothing cached, ablating from layers 1 and 2 runs block 0 once per batch (the full model's pass, which
    also stores the streams entering layers 1 and 2), not twice; the streams are those of a pass of their own and
    the table that of a run with no cache at all."""
    from heurlens.interventions.activation_cache import _compute, _unpadded, residual_streams

    monkeypatch.setenv("HEURLENS_CACHE", str(tmp_path))
    model = three_layer_bert
    data = random_set(30522, token_types=True)
    runs = []
    handle = model.bridge.blocks[0].original_component.intermediate.register_forward_pre_hook(
        lambda *_: runs.append(1))
    try:
        cached = ablate_groups(model, [[Unit(2, 0)], [Unit(1, 3)]], [data], method="zero")
    finally:
        handle.remove()
    assert len(runs) == len(data.batches)
    context = call_context(model, "float32")
    stored = residual_streams(model, data, [1, 2], context)
    separate = _compute(model, data, [1, 2], context)[1]
    for layer in (1, 2):  # the real tokens' rows (stored streams hold zeros at padding)
        assert torch.equal(_unpadded(stored[layer].batches, data), _unpadded(separate[layer].batches, data))
    uncached = ablate_groups(model, [[Unit(2, 0)], [Unit(1, 3)]], [data], method="zero", cache=False)
    assert cached.equals(uncached)
