"""A hand-set one-layer native model whose outputs can be derived by hand (used by several tests)."""

import torch

from heurlens.evaluate import EvalSet
from heurlens.models import load_native

# Token embeddings (rows) of the hand-set model below, in a 2-d residual stream.
EMBED = torch.tensor([[1.0, 0.0], [0.0, 1.0], [2.0, 0.0], [0.0, 3.0]])
MLP_BIAS = torch.tensor([0.5, -0.25])


def build_hand_model():
    """One layer, two heads with d_head 1, no LayerNorm, no positional signal.

    W_Q = W_K = 0, so each head attends uniformly to positions <= the query (causal). Head 0 reads
    and writes residual dim 0, head 1 dim 1 (W_V = W_O = I). The MLP outputs the constant MLP_BIAS.
    The unembedding is the identity on dims 0, 1. So at the last of n positions,
        logits = x_last + (mean_t x_t[0], mean_t x_t[1]) + MLP_BIAS.
    """
    model = load_native(dict(n_layers=1, d_model=2, n_heads=2, d_head=1, d_mlp=4, d_vocab=4, n_ctx=8,
                             act_fn="relu", normalization_type=None), seed=0)
    params = dict(model.bridge.original_model.named_parameters())
    with torch.no_grad():
        for name, p in params.items():
            p.zero_()
            if name.startswith("tok_embed"):
                p.copy_(EMBED)
            elif ".v._original_component.weight" in name or ".o._original_component.weight" in name:
                p.copy_(torch.eye(2))
            elif "fc_out._original_component.bias" in name:
                p.copy_(MLP_BIAS)
            elif name.startswith("head"):
                p[:2].copy_(torch.eye(2))
    return model


def one_sequence(tokens):
    ids = torch.tensor([tokens])
    return EvalSet("hand", [{"input_ids": ids, "attention_mask": torch.ones_like(ids)}],
                   torch.tensor([0]), ("label_0", "label_1", "label_2", "label_3"))
