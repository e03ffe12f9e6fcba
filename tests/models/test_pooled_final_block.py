"""A BERT classifier's final block at [CLS] only: the same logits as the whole block, used only when no hook
watches the final block or what comes after it."""

import pytest
import torch
from test_resumed_passes import random_set
from transformers import BertForSequenceClassification

import heurlens.models.pooled_final_block as pooled
from heurlens.evaluate import predict_logits
from heurlens.interventions.ablation import ablation_hooks
from heurlens.interventions.units import Unit
from heurlens.models import load_model


@pytest.fixture(scope="module")
def bert_dir(random_bert_dir):
    return random_bert_dir(2, 4, seed=3)


@pytest.fixture
def cls_only_calls(monkeypatch):
    """How many forward passes ran the [CLS]-only final block."""
    calls = []
    original = pooled.cls_only_forward

    def counted(block):
        forward = original(block)

        def run(*args, **kwargs):
            calls.append(args[0].shape)
            return forward(*args, **kwargs)
        return run

    monkeypatch.setattr(pooled, "cls_only_forward", counted)
    return calls


def hf_logits(model_dir, data) -> torch.Tensor:
    """The plain HF classifier's logits (no TransformerLens, every position of every block computed)."""
    hf = BertForSequenceClassification.from_pretrained(model_dir).eval()
    with torch.no_grad():
        return torch.cat([hf(**batch).logits for batch in data.batches])


@pytest.mark.parametrize("attention", ["sdpa", "eager"])
def test_cls_only_final_block_gives_the_whole_models_logits(bert_dir, cls_only_calls, attention):
    """Padded batches of uneven lengths, with token types, with either attention implementation (their masks
    differ in form): equal to HF's own classifier to float rounding."""
    model = load_model(bert_dir, attn_implementation=attention)
    data = random_set(30522, token_types=True)
    ours = predict_logits(model, data)
    assert len(cls_only_calls) == len(data.batches)  # every batch ran the short final block
    theirs = hf_logits(bert_dir, data)
    assert (ours - theirs).abs().max() < 1e-5
    assert theirs.std() > 0.1  # logits that differ between examples: a wrong row would show


def test_a_hook_in_the_final_block_or_after_it_gets_every_position(bert_dir, cls_only_calls):
    """A hook on the final block (an ablation there, a user's own) sees every position; the logits are the same
    either way."""
    model = load_model(bert_dir)
    data = random_set(30522, token_types=True)
    seen = []

    def watch(activation, hook):
        seen.append(activation.shape[1])

    short = predict_logits(model, data)
    calls_before = len(cls_only_calls)
    for point in ("blocks.1.attn.hook_z", "blocks.1.hook_mlp_out", "blocks.1.hook_resid_post"):
        seen.clear()
        whole = predict_logits(model, data, fwd_hooks=[(point, watch)])
        assert seen == [batch["input_ids"].shape[1] for batch in data.batches], point
        assert (whole - short).abs().max() < 1e-5, point
    assert len(cls_only_calls) == calls_before  # none of the hooked passes took the short block


def test_an_ablation_below_the_final_block_uses_it_and_keeps_hf_logits(bert_dir, cls_only_calls):
    """Mean-ablating a layer-0 head hooks layer 0 only, so the final block runs at [CLS] only; the logits
    equal the HF classifier's with the same head's context replaced by zeros in plain torch."""
    model = load_model(bert_dir)
    data = random_set(30522, token_types=True)
    hooks = ablation_hooks(model, [Unit(0, 2)], method="zero")
    assert [name for name, _ in hooks] == ["blocks.0.attn.hook_z"]
    ours = predict_logits(model, data, fwd_hooks=hooks)
    assert len(cls_only_calls) == len(data.batches)

    hf = BertForSequenceClassification.from_pretrained(bert_dir).eval()

    def zero_head(module, inputs, output):
        context = output[0].clone()
        context[..., 2 * 8:3 * 8] = 0  # head 2 of 4, d_head 8
        return (context, *output[1:])

    handle = hf.bert.encoder.layer[0].attention.self.register_forward_hook(zero_head)
    with torch.no_grad():
        theirs = torch.cat([hf(**batch).logits for batch in data.batches])
    handle.remove()
    assert (ours - theirs).abs().max() < 1e-5
    assert (theirs - hf_logits(bert_dir, data)).abs().max() > 1e-3  # the ablation changed the logits
