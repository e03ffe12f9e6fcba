"""A model's identity (``heurlens.runtime.model_identity``): the same digest as before for float32 weights, any dtype,
hashed once per state of the weights, and a new identity whenever a weight changes."""

import hashlib

import torch
from planted import build_planted_model

from heurlens.runtime import model_identity
from heurlens.runtime.model_identity import forget_identity


def digest_as_before(model) -> str:
    """The fingerprint as heurlens computed it up to 2026-11-26 (host copy of each weight, numpy bytes)."""
    digest = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        digest.update(name.encode())
        digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    digest.update(repr(sorted(model.tokenizer.get_vocab().items())).encode())
    digest.update(repr(sorted(map(str, model.tokenizer.all_special_tokens))).encode())
    return digest.hexdigest()[:16]


def counting_hashes(monkeypatch) -> list[int]:
    """A list that grows by one each time a tensor's bytes are read for hashing."""
    reads: list[int] = []
    original = model_identity.weight_bytes
    monkeypatch.setattr(model_identity, "weight_bytes", lambda tensor: reads.append(1) or original(tensor))
    return reads


def test_float32_fingerprints_are_the_ones_written_before(tiny_gpt2_dirs):
    import heurlens

    for model in (heurlens.load_model(tiny_gpt2_dirs["classifier"]), heurlens.load_model(tiny_gpt2_dirs["lm"])):
        assert model.fingerprint() == digest_as_before(model)


def test_an_unchanged_model_is_hashed_once_and_an_in_place_change_is_seen(monkeypatch):
    model = build_planted_model()
    reads = counting_hashes(monkeypatch)
    first = model.fingerprint()
    hashed_once = len(reads)
    assert hashed_once == len(model.state_dict()) and model.fingerprint() == first and len(reads) == hashed_once
    weight = model.bridge.original_model.head._original_component.weight
    with torch.no_grad():
        weight.add_(1.0)  # written in place through torch: its version counter moves
    changed = model.fingerprint()
    assert changed != first and len(reads) == 2 * hashed_once
    with torch.no_grad():
        weight.sub_(1.0)
    assert model.fingerprint() == first  # the same bytes again: the same identity
    model.load_state_dict({k: v.clone() for k, v in model.state_dict().items()})
    assert model.fingerprint() == first


def test_a_weight_replaced_or_written_through_data_gives_a_new_identity():
    model = build_planted_model()
    first = model.fingerprint()
    head = model.bridge.original_model.head._original_component
    head.weight = torch.nn.Parameter(head.weight.detach() * 3)  # another tensor in its place
    replaced = model.fingerprint()
    assert replaced != first
    head.weight.data[0, 0] = 7.0  # .data bypasses the version counter, as the module docstring says
    assert model.fingerprint() == replaced
    forget_identity(model)
    assert model.fingerprint() not in (first, replaced)


def test_bfloat16_weights_have_a_fingerprint_of_their_own():
    model = build_planted_model()
    float32 = model.fingerprint()
    model.to(torch.bfloat16)
    bfloat16 = model.fingerprint()
    assert bfloat16 != float32 and len(bfloat16) == 16
    assert model.known_fingerprints()[0] == bfloat16


def test_a_bridge_passed_to_every_call_is_hashed_once(tiny_decoder_dirs, monkeypatch):
    """Library calls on a user's own bridge wrap it each time; the wrapper is kept with the bridge, so the
    identity (and its hashing of every weight) is shared by the calls, and a weight changed between them is seen."""
    from transformer_lens.model_bridge import TransformerBridge

    import heurlens

    llama_bridge = TransformerBridge.boot_transformers(str(tiny_decoder_dirs["llama"]), device="cpu")
    reads = counting_hashes(monkeypatch)
    texts = ["the man sees the", "a dog sleeps"]
    means = heurlens.compute_means(llama_bridge, texts)
    first = heurlens.ablate(llama_bridge, "L1.H0", [texts], means=means, metrics={})
    hashed = len(reads)
    heurlens.ablate(llama_bridge, "L1.H1", [texts], means=means, metrics={})
    assert hashed > 0 and len(reads) == hashed
    assert heurlens.wrap_bridge(llama_bridge) is heurlens.wrap_bridge(llama_bridge)
    assert not any("wrapper" in name for name, _ in llama_bridge.named_modules())  # not a submodule of the bridge
    assert heurlens.wrap_bridge(llama_bridge, "other").model_id == "other"
    with torch.no_grad():  # an MLP's weight (the embeddings changed would make the means another model's)
        next(weight for name, weight in llama_bridge.named_parameters() if "mlp" in name).mul_(1.5)
    changed = heurlens.ablate(llama_bridge, "L1.H0", [texts], means=means, metrics={})
    assert len(reads) > hashed and changed["kl"].item() != first["kl"].item()
