"""The writers of the residual stream and what each writes, defined once for the edge masks and for attribution
(EAP, EAP-IG): the embeddings (read at ``blocks.0.hook_resid_pre``), each head h of layer L (its write W_O^h z_h,
from ``blocks.L.attn.hook_z``) and each layer's MLP (``blocks.L.hook_mlp_out``), in ``EdgeLayout.writers``' order.
Every function is linear in the activations it is given, so differences of activations give differences of writes.
TransformerLens 4.3's ``capture_writer_outputs`` reads a head's write at ``attn.hook_result`` instead, which keeps
``[batch, pos, head, d_model]`` for every layer (its docstring's memory caveat) and needs ``set_use_attn_result``;
``hook_z`` is d_model / d_head times smaller, and W_O^h is applied where the write is needed.

What an ablated writer carries under mean or zero ablation is built here too, from the unit means
(``scoring.unit_replacement`` gives the means or zeros): the same activations at the same hook points."""

from __future__ import annotations

import torch
from jaxtyping import Float
from torch import Tensor

from heurlens.interventions.means import EMBED_HOOK, UnitMeans
from heurlens.interventions.units import heads_hook_name, mlp_hook_name


def writer_hook_names(n_layers: int) -> list[str]:
    """The writers' hook points, in order: the embeddings, then per layer its heads' ``hook_z`` and its MLP's output."""
    return [EMBED_HOOK] + [name for layer in range(n_layers) for name in (heads_hook_name(layer), mlp_hook_name(layer))]


def head_writes(z: Float[Tensor, "batch pos head d_head"], w_o: Float[Tensor, "head d_head d_model"]
                ) -> Float[Tensor, "batch head pos d_model"]:
    """Each head's write W_O^h z_h into the residual stream (before the attention's output bias, which no head owns)."""
    return torch.einsum("bphd,hdm->bhpm", z, w_o.to(z.dtype))


def writer_blocks(seen: dict[str, Tensor], w_o: list[Tensor]) -> list[Float[Tensor, "batch writer pos d_model"]]:
    """Every writer's write from the activations ``seen`` at ``writer_hook_names`` (``w_o``: each layer's W_O), one
    block per hook point in their order: the embeddings (one writer), a layer's heads (one writer each), its MLP."""
    blocks = [seen[EMBED_HOOK][:, None]]
    for layer, layer_w_o in enumerate(w_o):
        blocks += [head_writes(seen[heads_hook_name(layer)], layer_w_o), seen[mlp_hook_name(layer)][:, None]]
    return blocks


def replacement_activations(replacement: UnitMeans, n_layers: int) -> dict[str, Tensor]:
    """What mean or zero ablation puts at each writer's hook point, one position's worth (``[d_model]`` for the
    embeddings and an MLP, ``[head, d_head]`` for a layer's heads): the units' means (or zeros), and the embeddings'
    mean where ``replacement`` has one."""
    found = {} if replacement.embeddings is None else {EMBED_HOOK: replacement.embeddings}
    for layer in range(n_layers):
        found |= {heads_hook_name(layer): replacement.heads[layer], mlp_hook_name(layer): replacement.mlps[layer]}
    return found
