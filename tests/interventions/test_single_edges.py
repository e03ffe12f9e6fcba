"""One edge at a time against the same patch written by hand with TransformerLens hooks (issue 63). With every edge
kept or every edge pruned the masked model is exact by construction, whatever each edge does; only a single edge shows
whether heurlens' writer outputs (``hook_z @ W_O``, ``hook_mlp_out``) are what the block really adds to the residual
stream. The hand-written patch measures the write instead of computing it: the writer's output replaced by its
corrupted one, and the change of the residual stream just after its add (``hook_resid_mid`` for a head,
``hook_resid_post`` for an MLP) added to the one reader's input alone. Under mean ablation (MIB's "mean") the same
with the writer's activation replaced by its mean (``compute_means``: hook_z's, hook_mlp_out's, the embeddings')."""

import pytest
import torch

import heurlens
from heurlens.errors import HeurlensError
from heurlens.interventions.edge_masks import EdgeMaskHooks, edge_mask_forward
from heurlens.interventions.graph import edge_layout

CLEAN = torch.tensor([[2, 4, 10, 5, 6], [3, 5, 10, 9, 7]])  # word-level tokens, no padding
CORRUPTED = torch.tensor([[3, 9, 10, 4, 6], [2, 4, 10, 9, 8]])
# edges out of a head, an MLP and the embeddings into every kind of reader (key-value heads: KV when grouped)
EDGES = ["L0.H1->L1.H2.q", "L0.H1->L1.{kv}1.k", "L0.H1->L1.{kv}0.v", "L0.H1->L1.MLP", "L0.H3->logits",
         "L1.H0->logits", "L1.H2->L1.MLP", "L0.MLP->L1.H2.q", "L0.MLP->L1.{kv}1.v", "L1.MLP->logits",
         "embed->L0.H2.q", "embed->L1.{kv}1.k", "embed->L0.MLP"]
WEIGHT_SCALE = 8


def batch(ids):
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids)}


def hand_patched(model, writer: str, reader: str, means=None) -> torch.Tensor:
    """The model's scores on ``CLEAN`` with ``reader``'s input moved by the change ``writer``'s corrupted output (with
    ``means``: its mean) makes to the residual stream, every other input clean: TransformerLens hooks only."""
    bridge = model.bridge
    if writer == "embed":
        site, after = "blocks.0.hook_resid_pre", "blocks.0.hook_resid_pre"
        mean = None if means is None else means.embeddings
    else:
        layer, part = writer.split(".")
        site = f"blocks.{layer[1:]}.attn.hook_z" if part.startswith("H") else f"blocks.{layer[1:]}.hook_mlp_out"
        after = f"blocks.{layer[1:]}.hook_resid_mid" if part.startswith("H") else f"blocks.{layer[1:]}.hook_resid_post"
        mean = None if means is None else (means.heads if part.startswith("H") else means.mlps)[int(layer[1:])]
    seen = {}

    def keep(name):
        def hook(x, hook):
            seen[name] = x.detach().clone()
        return hook

    with torch.no_grad(), model.hooks([(site, keep("corrupted"))]):
        model(**batch(CORRUPTED))
    if mean is not None:  # every position, every example: the writer's mean
        seen["corrupted"] = mean.expand_as(seen["corrupted"]).clone()

    def replace(x, hook):
        if writer.split(".")[-1].startswith("H"):
            x = x.clone()
            head = int(writer.split(".H")[1])
            x[:, :, head] = seen["corrupted"][:, :, head]
            return x
        return seen["corrupted"]

    with torch.no_grad():
        with model.hooks([(after, keep("clean"))]):
            model(**batch(CLEAN))
        with model.hooks([(site, replace), (after, keep("patched"))]):
            model(**batch(CLEAN))
    delta = seen["patched"] - seen["clean"]  # the writer's corrupted write minus its clean one

    if reader == "logits":
        point, index = "ln_final.hook_in", None
    else:
        layer, part = reader.split(".")[:2]
        if part == "MLP":
            point, index = f"blocks.{layer[1:]}.hook_mlp_in", None
        else:
            point, index = f"blocks.{layer[1:]}.attn.hook_{reader.split('.')[2]}_input", int(part.lstrip("KVH"))

    def move(x, hook):
        x = x.clone()
        if index is None:
            x += delta
        else:
            x[:, :, index] += delta
        return x

    split, mlp_in = bridge.cfg.use_split_qkv_input, bridge.cfg.use_hook_mlp_in
    bridge.set_use_split_qkv_input(True)
    bridge.set_use_hook_mlp_in(True)
    try:
        with torch.no_grad(), model.hooks([(point, move)]):
            return model(**batch(CLEAN))
    finally:
        bridge.set_use_split_qkv_input(split)
        bridge.set_use_hook_mlp_in(mlp_in)


def scaled_model(folder):
    """The model in ``folder`` with its weights scaled to matter (initialised at 0.02, a query edge would move the
    logits by 1e-5), its edge layout, how its key-value heads are named in ``EDGES`` and its scores on ``CLEAN``."""
    model = heurlens.load_model(folder)
    with torch.no_grad():
        for weight in model.bridge.parameters():
            weight.mul_(WEIGHT_SCALE if weight.dim() > 1 else 1)
        full = model(**batch(CLEAN))
    layout = edge_layout(model)
    return model, layout, "KV" if layout.n_kv_heads < layout.n_heads else "H", full


@pytest.mark.parametrize("family", ["gpt2", "llama", "qwen2"])
def test_each_single_edge_pruned_equals_the_patch_written_by_hand(family, tiny_decoder_dirs, tiny_gpt2_dirs):
    model, layout, kv, full = scaled_model(tiny_gpt2_dirs["lm"] if family == "gpt2" else tiny_decoder_dirs[family])
    for edge in (e.format(kv=kv) for e in EDGES):
        writer, reader = edge.split("->")
        mask = 1 - layout.keep_mask([edge])
        with torch.no_grad():
            by_heurlens = edge_mask_forward(model, mask, batch(CLEAN), batch(CORRUPTED))
        by_hand = hand_patched(model, writer, reader)
        assert (by_hand - full).abs().max() > 50 * 2e-6, edge  # the edge matters: the comparison can tell
        torch.testing.assert_close(by_heurlens, by_hand, atol=2e-6, rtol=0, msg=lambda m, e=edge: f"{e}: {m}")


@pytest.mark.parametrize("family", ["gpt2", "llama", "qwen2"])
def test_each_single_edge_mean_ablated_equals_the_patch_written_by_hand(family, tiny_decoder_dirs, tiny_gpt2_dirs):
    """Mean ablation: the pruned edge carries its writer's mean over the reference tokens (MIB's "mean"); the edges
    out of a writer all pruned are the writer mean-ablated (heurlens' unit ablation, and for the embeddings a hook
    that replaces them by their mean)."""
    model, layout, kv, full = scaled_model(tiny_gpt2_dirs["lm"] if family == "gpt2" else tiny_decoder_dirs[family])
    means = heurlens.compute_means(model, torch.cat([CLEAN, CORRUPTED]))
    for edge in (e.format(kv=kv) for e in EDGES):
        writer, reader = edge.split("->")
        with torch.no_grad():
            by_heurlens = edge_mask_forward(model, 1 - layout.keep_mask([edge]), batch(CLEAN), means=means)
        by_hand = hand_patched(model, writer, reader, means)
        assert (by_hand - full).abs().max() > 50 * 2e-6, edge
        assert (by_hand - hand_patched(model, writer, reader)).abs().max() > 50 * 2e-6, edge  # not the corrupt patch
        torch.testing.assert_close(by_heurlens, by_hand, atol=2e-6, rtol=0, msg=lambda m, e=edge: f"{e}: {m}")
    for writer in ("L0.H1", "L1.MLP", "embed"):
        out = [edge for edge in layout.edges() if str(edge.writer) == writer]
        with torch.no_grad():
            by_heurlens = edge_mask_forward(model, 1 - layout.keep_mask(out), batch(CLEAN), means=means)
            if writer == "embed":
                with model.hooks([("blocks.0.hook_resid_pre", lambda x, hook: means.embeddings.expand_as(x))]):
                    unit_ablated = model(**batch(CLEAN))
            else:
                unit_ablated = heurlens.predict_logits(model, CLEAN, fwd_hooks=heurlens.ablation_hooks(
                    model, writer, means=means))
        assert (unit_ablated - full).abs().max() > 1e-4, writer
        torch.testing.assert_close(by_heurlens, unit_ablated, atol=1e-5, rtol=1e-4, msg=lambda m, w=writer: f"{w}: {m}")


def test_edges_are_not_mean_ablated_with_means_that_lack_the_embeddings(tiny_gpt2_dirs):
    """Means saved before 2026-11-29 hold no mean of the embeddings: an edge out of the embeddings has nothing to
    carry, refused by name with what to do (units still mean-ablate with them); so are edge masks given neither a
    corrupted batch nor means, and a corrupted batch given to masks built with means."""
    from dataclasses import replace

    model = heurlens.load_model(tiny_gpt2_dirs["lm"])
    old = replace(heurlens.compute_means(model, CLEAN), embeddings=None)
    layout = edge_layout(model)
    with pytest.raises(HeurlensError, match="no mean of the embeddings.*compute them again"):
        edge_mask_forward(model, layout.keep_mask([]), batch(CLEAN), means=old)
    with pytest.raises(HeurlensError, match="a corrupted batch .corrupt ablation. or means, one of them"):
        edge_mask_forward(model, layout.keep_mask([]), batch(CLEAN))
    hooks = EdgeMaskHooks(layout, layout.keep_mask([]), heurlens.compute_means(model, CLEAN))
    with pytest.raises(HeurlensError, match="writers' means .mean ablation., not by their outputs on a corrupted"):
        hooks.use_corrupted(model, batch(CORRUPTED))
    heurlens.predict_logits(model, CLEAN, fwd_hooks=heurlens.ablation_hooks(model, "L0.H1", means=old))


@pytest.mark.parametrize("architecture", ["Gemma2ForCausalLM", "Gemma3ForCausalLM", "Olmo2ForCausalLM"])
def test_post_norm_models_are_refused_edge_masks_by_name(architecture, tmp_path):
    """Gemma-2/3 and OLMo-2 normalise the attention and MLP outputs before the add: a head's write is not
    ``hook_z @ W_O``, so a single pruned edge would be off by about its own effect (issue 63). The refusal names the
    norm; their nodes still prune (the node path ablates at hook_z, before the norm: docs/architectures.md)."""
    from architectures import build

    model = heurlens.load_model(build(architecture, tmp_path))
    with pytest.raises(HeurlensError, match=r"blocks.0.hook_attn_out is read after ln1_post.*--level node"):
        edge_layout(model)
    layout_would_be = heurlens.interventions.graph.EdgeLayout(model.n_layers, model.n_heads,
                                                int(model.bridge.cfg.n_key_value_heads or model.n_heads))
    assert layout_would_be.n_edges > 0
    # what the refusal prevents: heurlens' write for L0.H1 is not the change the block makes
    hooks = EdgeMaskHooks(layout_would_be, 1 - layout_would_be.keep_mask(["L0.H1->logits"]))
    with hooks.attached(model), torch.no_grad():
        hooks.use_corrupted(model, batch(CORRUPTED))
        by_heurlens = model(**batch(CLEAN))
    assert (by_heurlens - hand_patched(model, "L0.H1", "logits")).abs().max() > 1e-3
