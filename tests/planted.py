"""A hand-set model in which exactly one head and one MLP carry information (used by the pruning tests)."""

import torch

from heurlens.models import load_native

PLANTED = ("L0.H0", "L1.MLP")  # the only units whose output changes from one sequence to another


def build_planted_model():
    """Two layers of two heads (d_head 2) and an MLP each, d_model 4, no LayerNorm, one-hot token embeddings.

    Head L0.H0 attends uniformly to the positions up to the query (W_Q = W_K = 0) and copies residual
    dims 0-1 of those tokens (W_V = I) into dims 2-3, times 4 (W_O): the mean of the prefix's one-hots. The MLP of
    layer 1 adds 6 relu(x) of the whole residual stream (W_in = I, W_out = 6 I); the unembedding is twice the identity.
    Every other head has W_V = 0 and the other MLP is all zeros: their outputs are 0 on every input, so
    mean-ablating them changes nothing, while mean-ablating L0.H0 or L1.MLP changes the logits. A subnetwork
    of a third of the units faithful to the model must be exactly ``PLANTED``."""
    model = load_native(dict(n_layers=2, d_model=4, n_heads=2, d_head=2, d_mlp=4, d_vocab=4, n_ctx=8,
                             act_fn="relu", normalization_type=None), seed=0)
    params = dict(model.bridge.original_model.named_parameters())
    prefix = "layers.{}._original_component.{}._original_component.{}._original_component.weight"
    with torch.no_grad():
        for parameter in params.values():
            parameter.zero_()
        params["tok_embed._original_component.weight"].copy_(torch.eye(4))
        params[prefix.format(0, "attn", "v")][0:2, 0:2] = torch.eye(2)  # head 0 reads dims 0-1
        params[prefix.format(0, "attn", "o")][2:4, 0:2] = 4 * torch.eye(2)  # and writes 4x them to dims 2-3
        params[prefix.format(1, "mlp", "fc_in")].copy_(torch.eye(4))
        params[prefix.format(1, "mlp", "fc_out")].copy_(6 * torch.eye(4))
        params["head._original_component.weight"].copy_(2 * torch.eye(4))
    return model
