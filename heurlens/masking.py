"""Unit masks applied through hook points: each unit's output becomes m * x + (1 - m) * c.

m = 1 keeps the unit, m = 0 replaces its output by the constant c (its mean activation for mean
ablation, zero for zero ablation), and values in between interpolate, which is what makes masks
trainable (Heuristic Core paper, Section 2). With a binary m the result is exactly x or exactly c.
"""

from __future__ import annotations

from jaxtyping import Float
from torch import Tensor

from heurlens.means import UnitMeans
from heurlens.units import heads_hook_name, mlp_hook_name


class UnitMaskHooks:
    """Hook functions for every layer that read the current ``heads`` and ``mlps`` masks.

    Set ``heads`` ([n_layers, n_heads]) and ``mlps`` ([n_layers]) before each forward pass; the
    hooks (``self.hooks``) read them when they fire, so a training loop can resample masks per
    step without re-registering anything.
    """

    def __init__(self, replacement: UnitMeans, heads: Float[Tensor, "layer head"],
                 mlps: Float[Tensor, " layer"]):
        self.replacement = replacement
        self.heads = heads
        self.mlps = mlps

    @property
    def hooks(self) -> list:
        layers = range(self.heads.shape[0])
        return ([(heads_hook_name(layer), self._head_hook(layer)) for layer in layers]
                + [(mlp_hook_name(layer), self._mlp_hook(layer)) for layer in layers])

    def _head_hook(self, layer: int):
        def hook(z: Float[Tensor, "batch pos head d_head"], hook) -> Tensor:
            m = self.heads[layer].to(z.dtype)[:, None]
            return z * m + (1 - m) * self.replacement.heads[layer].to(z.dtype)
        return hook

    def _mlp_hook(self, layer: int):
        def hook(out: Float[Tensor, "batch pos d_model"], hook) -> Tensor:
            m = self.mlps[layer].to(out.dtype)
            return out * m + (1 - m) * self.replacement.mlps[layer].to(out.dtype)
        return hook
