"""Ablation against answers derived by hand and against an independent plain-torch computation."""

import pandas as pd
import pytest
import torch
from hand_model import MLP_BIAS, build_hand_model, one_sequence

from heurlens.errors import HeurlensError
from heurlens.evaluate import EvalSet, mean_kl, predict_logits, tokenize_pairs
from heurlens.interventions.ablation import ablate, ablate_groups, ablation_hooks
from heurlens.interventions.means import UnitMeans, compute_means
from heurlens.interventions.units import Unit, parse_units
from heurlens.models import load_model
from heurlens.runtime.call_context import call_context


@pytest.fixture
def hand_model():
    return build_hand_model()


def test_hand_model_full_output(hand_model):
    # tokens 0, 2, 3 embed to (1,0), (2,0), (0,3): head means (1, 1); last x (0, 3); MLP (.5, -.25)
    logits = predict_logits(hand_model, one_sequence([0, 2, 3]))
    assert torch.allclose(logits[0], torch.tensor([1.5, 3.75, 0.0, 0.0]))


def test_zero_ablating_a_head_removes_exactly_its_contribution(hand_model):
    data = one_sequence([0, 2, 3])
    head0 = predict_logits(hand_model, data, fwd_hooks=ablation_hooks(hand_model, [Unit(0, 0)], method="zero"))
    assert torch.allclose(head0[0], torch.tensor([0.5, 3.75, 0.0, 0.0]))  # loses mean x[0] = 1
    both = predict_logits(hand_model, data,
                          fwd_hooks=ablation_hooks(hand_model, parse_units("L0.*,L0.MLP", 1, 2), method="zero"))
    assert torch.allclose(both[0], torch.tensor([0.0, 3.0, 0.0, 0.0]))  # only x_last is left


def test_mean_ablation_uses_the_mean_over_reference_tokens(hand_model):
    reference = one_sequence([0, 2, 3])
    means = compute_means(hand_model, reference)
    # head 0 output per position: 1, (1+2)/2, (1+2+0)/3 -> mean 7/6; head 1: 0, 0, 1 -> mean 1/3
    assert torch.allclose(means.heads[0].flatten(), torch.tensor([7 / 6, 1 / 3]))
    assert torch.allclose(means.mlps[0], MLP_BIAS)
    ablated = predict_logits(hand_model, one_sequence([1, 1]),
                             fwd_hooks=ablation_hooks(hand_model, [Unit(0, 1)], method="mean", means=means))
    # x_last (0,1); head 0 over [(0,1),(0,1)] -> 0; head 1 replaced by 1/3; MLP (.5, -.25)
    assert torch.allclose(ablated[0], torch.tensor([0.5, 1 + 1 / 3 - 0.25, 0.0, 0.0]))
    mlp = predict_logits(hand_model, one_sequence([1, 1]),
                         fwd_hooks=ablation_hooks(hand_model, [Unit(0)], method="mean", means=means))
    assert torch.allclose(mlp, predict_logits(hand_model, one_sequence([1, 1])))  # constant MLP: no change


def test_means_ignore_padding(hand_model):
    ids = torch.tensor([[0, 2, 3], [1, 0, 0]])
    mask = torch.tensor([[1, 1, 1], [1, 0, 0]])
    padded = EvalSet("pad", [{"input_ids": ids, "attention_mask": mask}], torch.tensor([0, 0]), ("a", "b", "c", "d"))
    means = compute_means(hand_model, padded)
    # real tokens only: head 0 outputs 1, 1.5, 1 and 0 -> 3.5/4
    assert torch.allclose(means.heads[0].flatten(), torch.tensor([3.5 / 4, (0 + 0 + 1 + 1) / 4]))


def test_means_save_and_load(hand_model, tmp_path):
    means = compute_means(hand_model, one_sequence([0, 2, 3]))
    means.save(tmp_path / "m.safetensors")
    loaded = UnitMeans.load(tmp_path / "m.safetensors")
    assert loaded.source == means.source
    assert torch.equal(loaded.heads[0], means.heads[0]) and torch.equal(loaded.mlps[0], means.mlps[0])


def test_mean_ablation_matches_plain_torch_hooks(tiny_bert_dir):
    """Means and ablated logits computed independently with forward hooks on the HF modules."""
    from transformers import BertForSequenceClassification

    from heurlens.data.hans import generate_hans

    model = load_model(tiny_bert_dir)
    data = generate_hans(4, ["SO-Swap", "Embed-If", "sn_NP/Z"], seed=0)
    eval_set = tokenize_pairs("hans", data, model.tokenizer, batch_size=5)  # uneven batches, padding
    means = compute_means(model, eval_set)
    units = [Unit(0, 1), Unit(1, 3), Unit(1, 0), Unit(0)]
    ours = predict_logits(model, eval_set, fwd_hooks=ablation_hooks(model, units, method="mean", means=means))

    hf = BertForSequenceClassification.from_pretrained(tiny_bert_dir).eval()
    d_head = 32 // 4
    context_sum = {layer: torch.zeros(32) for layer in range(2)}
    mlp_sum = {layer: torch.zeros(32) for layer in range(2)}
    tokens = 0
    handles = []

    def add_to(total, output_index=None):
        def hook(module, inputs, output):  # returns None: observes, changes nothing
            out = output if output_index is None else output[output_index]
            total.add_((out * mask[..., None]).sum((0, 1)))
        return hook

    for layer in range(2):
        block = hf.bert.encoder.layer[layer]
        handles.append(block.attention.self.register_forward_hook(add_to(context_sum[layer], 0)))
        handles.append(block.output.dense.register_forward_hook(add_to(mlp_sum[layer])))
    with torch.no_grad():
        for batch in eval_set.batches:
            mask = batch["attention_mask"].float()
            tokens += mask.sum()
            hf(**batch)
    for h in handles:
        h.remove()
    head_mean = {L: (context_sum[L] / tokens).view(4, d_head) for L in range(2)}
    assert torch.allclose(head_mean[1], means.heads[1].reshape(4, d_head), atol=1e-5)

    def replace_heads(layer, heads):
        def hook(m, i, o):
            ctx = o[0].clone()
            for h in heads:
                ctx[..., h * d_head:(h + 1) * d_head] = head_mean[layer][h]
            return (ctx, *o[1:])
        return hook

    handles = [hf.bert.encoder.layer[0].attention.self.register_forward_hook(replace_heads(0, [1])),
               hf.bert.encoder.layer[1].attention.self.register_forward_hook(replace_heads(1, [3, 0])),
               hf.bert.encoder.layer[0].output.dense.register_forward_hook(
                   lambda m, i, o: (mlp_sum[0] / tokens).expand_as(o))]
    with torch.no_grad():
        theirs = torch.cat([hf(**batch).logits for batch in eval_set.batches])
    for h in handles:
        h.remove()
    assert (ours - theirs).abs().max() < 1e-4
    assert (ours - predict_logits(model, eval_set)).abs().max() > 1e-3  # the ablation did something


def test_ablate_table_reports_accuracy_delta_and_kl(tiny_bert_dir, tmp_path, monkeypatch):
    from heurlens.data.hans import generate_hans

    # full-model logits computed here, not read from a cache another process filled (another thread count
    # rounds differently, and "nothing ablated" must then give exactly the full model's table)
    monkeypatch.setenv("HEURLENS_CACHE", str(tmp_path))
    model = load_model(tiny_bert_dir)
    sets = [tokenize_pairs(name, generate_hans(20, [name], seed=0), model.tokenizer) for name in ("SO-Swap", "le_passive")]
    table = ablate(model, [Unit(1, 2)], sets, method="zero")
    assert isinstance(table, pd.DataFrame)
    assert list(table["eval_set"]) == ["SO-Swap", "le_passive"]
    full = predict_logits(model, sets[0])
    gold_non_entailment = (full.argmax(-1) != 0).float().mean().item()  # 3-way -> 2-way mapping
    assert table["full_accuracy"][0] == pytest.approx(gold_non_entailment)
    assert (table["delta"] == table["ablated_accuracy"] - table["full_accuracy"]).all()
    assert (table["kl"] > 0).all()
    nothing = ablate_groups(model, [[]], sets, method="zero")  # no unit ablated: the full model's numbers
    assert (nothing["kl"].abs() < 1e-9).all() and (nothing["delta"] == 0).all()
    with pytest.raises(HeurlensError, match="units= names no unit"):  # a silent all-zero table from the public call
        ablate(model, [], sets, method="zero")


def test_mean_ablation_without_means_is_a_clear_error(hand_model):
    with pytest.raises(HeurlensError, match="compute_means"):
        ablation_hooks(hand_model, [Unit(0, 0)], method="mean", means=None)
    with pytest.raises(HeurlensError, match="method='resample' is not one of 'mean', 'zero', 'corrupt'$"):
        ablation_hooks(hand_model, [Unit(0, 0)], method="resample")


def test_full_model_logits_are_kept_per_model_and_data(tiny_bert_dir, tmp_path, monkeypatch):
    """The full model runs once per (weights, tokens); a second call reads the disk, other weights or other
    tokens compute again, and a damaged cache file is recomputed rather than trusted."""
    from heurlens.data.hans import generate_hans
    from heurlens.interventions.activation_cache import full_model_logits

    monkeypatch.setenv("HEURLENS_CACHE", str(tmp_path))
    model = load_model(tiny_bert_dir)
    data = tokenize_pairs("SO-Swap", generate_hans(12, ["SO-Swap"], seed=0), model.tokenizer)
    other = tokenize_pairs("SO-Swap", generate_hans(12, ["SO-Swap"], seed=1), model.tokenizer)
    passes = []
    model.bridge.blocks[0].register_forward_hook(lambda *args: passes.append(1))
    first = full_model_logits(model, data, call_context(model))
    assert len(passes) == len(data.batches) and torch.equal(first, predict_logits(model, data))
    passes.clear()
    assert torch.equal(full_model_logits(model, data, call_context(model)), first) and not passes  # read from disk
    full_model_logits(model, other, call_context(model))
    assert len(passes) == len(other.batches)  # other tokens: computed
    files = list((tmp_path / "activations").glob("*/logits.safetensors"))
    assert len(files) == 2
    with torch.no_grad():
        model.bridge.blocks[1].mlp.out.bias += 1.0  # other weights: another key
    passes.clear()
    changed = full_model_logits(model, data, call_context(model))
    assert passes and not torch.equal(changed, first) and torch.equal(changed, predict_logits(model, data))
    newest = max((tmp_path / "activations").glob("*/logits.safetensors"), key=lambda f: f.stat().st_mtime_ns)
    newest.write_bytes(b"damaged")
    passes.clear()
    again = full_model_logits(model, data, call_context(model))
    assert torch.equal(again, changed) and passes  # a damaged entry is computed again


@pytest.mark.parametrize("dtype, significant_bits", [("bfloat16", 8), ("float16", 11)])
def test_half_precision_evaluation_is_close_to_float32_and_cached_apart(tiny_bert_dir, tmp_path, monkeypatch, dtype,
                                                                         significant_bits):
    """dtype runs the matrix products in bfloat16 or float16: logits within that rounding of float32's but not
    equal to them (so the cast happened), float32 out, and the cache keeps them apart from float32 logits."""
    from heurlens.data.hans import generate_hans
    from heurlens.interventions.activation_cache import full_model_logits
    from heurlens.runtime.call_context import call_context

    monkeypatch.setenv("HEURLENS_CACHE", str(tmp_path))
    model = load_model(tiny_bert_dir)
    data = tokenize_pairs("SO-Swap", generate_hans(24, ["SO-Swap"], seed=0), model.tokenizer)
    exact, low = predict_logits(model, data), predict_logits(model, data, dtype=dtype)
    assert low.dtype == torch.float32 and not torch.equal(low, exact)
    # each product's relative error is at most 2^-bits (bfloat16 keeps 8 significant bits, float16 11)
    tolerance = 12.5 * 2 ** -significant_bits
    assert torch.allclose(low, exact, rtol=tolerance, atol=tolerance * float(exact.abs().max()))
    assert torch.equal(full_model_logits(model, data, call_context(model)), exact)
    assert torch.equal(full_model_logits(model, data, call_context(model, dtype)), low)  # not the float32 entry
    assert len(list((tmp_path / "activations").glob("*/logits.safetensors"))) == 2
    table = ablate(model, [Unit(0, 0)], [data], method="zero", dtype=dtype)
    assert table["kl"][0] == pytest.approx(mean_kl(low, predict_logits(model, data, fwd_hooks=ablation_hooks(
        model, [Unit(0, 0)], method="zero"), dtype=dtype)), abs=1e-7)


def test_an_unknown_precision_is_refused_naming_the_choices(tiny_bert_dir):
    model = load_model(tiny_bert_dir)
    from heurlens.data.hans import generate_hans

    data = tokenize_pairs("SO-Swap", generate_hans(4, ["SO-Swap"], seed=0), model.tokenizer)
    with pytest.raises(HeurlensError, match="dtype='bf16' is not one of 'float32', 'bfloat16', 'float16'"):
        predict_logits(model, data, dtype="bf16")


def test_generic_label_names_map_by_position():
    """A model saved without label names (HF writes LABEL_0, LABEL_1...) predicts the data's labels in order;
    named labels map by name, and a 3-way NLI model's on 2-way data to non-entailment."""
    from heurlens.evaluate import label_map

    nli = ("entailment", "neutral", "contradiction")
    assert label_map(("LABEL_0", "LABEL_1", "LABEL_2"), nli).tolist() == [0, 1, 2]
    assert label_map(("label_0", "label_1", "label_2"), nli).tolist() == [0, 1, 2]
    assert label_map(("contradiction", "entailment", "neutral"), nli).tolist() == [2, 0, 1]
    assert label_map(nli, ("entailment", "non-entailment")).tolist() == [0, 1, 1]
    with pytest.raises(HeurlensError, match="do not match"):
        label_map(("LABEL_0", "LABEL_1"), nli)
