"""The writers' writes (``interventions.writers``), checked against the residual stream itself: in a pre-norm model
without attention or MLP biases (the tiny Llama) the last block's output is exactly the embeddings plus every head's
W_O^h z_h plus every MLP's output, so the writes ``writer_blocks`` computes must sum to it."""

import torch

import heurlens
from heurlens.interventions.means import UnitMeans
from heurlens.interventions.writers import replacement_activations, writer_blocks, writer_hook_names


def test_the_writers_writes_sum_to_the_residual_stream(tiny_decoder_dirs):
    model = heurlens.load_model(tiny_decoder_dirs["llama"])
    bridge = model.bridge
    tokens = torch.tensor([[1, 5, 7, 2, 9], [3, 4, 6, 8, 1]])
    last = f"blocks.{model.n_layers - 1}.hook_resid_post"
    names = writer_hook_names(model.n_layers)
    assert names[:3] == ["blocks.0.hook_resid_pre", "blocks.0.attn.hook_z", "blocks.0.hook_mlp_out"]
    _, cache = bridge.run_with_cache(tokens, names_filter=lambda name: name in names or name == last)
    w_o = [bridge.blocks[layer].attn.W_O.detach() for layer in range(model.n_layers)]
    blocks = writer_blocks({name: cache[name] for name in names}, w_o)
    assert [block.shape[1] for block in blocks] == [1] + [model.n_heads, 1] * model.n_layers  # writers per block
    total = sum(block.sum(dim=1) for block in blocks)
    torch.testing.assert_close(total, cache[last], atol=1e-5, rtol=1e-5)
    one_head = blocks[1][:, 2]  # a head in the middle: its own z times its own W_O, nothing of the others
    torch.testing.assert_close(one_head, cache["blocks.0.attn.hook_z"][:, :, 2] @ w_o[0][2])


def test_mean_ablation_puts_the_means_at_the_writers_hook_points():
    heads, mlps = {0: torch.randn(4, 8), 1: torch.randn(4, 8)}, {0: torch.randn(32), 1: torch.randn(32)}
    means = UnitMeans(heads=heads, mlps=mlps, source="test", embeddings=torch.randn(32))
    found = replacement_activations(means, 2)
    assert list(found) == writer_hook_names(2)
    assert found["blocks.1.attn.hook_z"] is heads[1] and found["blocks.0.hook_mlp_out"] is mlps[0]
    assert found["blocks.0.hook_resid_pre"] is means.embeddings
    without = UnitMeans(heads=heads, mlps=mlps, source="test")
    assert "blocks.0.hook_resid_pre" not in replacement_activations(without, 2)
