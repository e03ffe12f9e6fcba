"""Unit masks of a TransformerLens model applied through its hook points (``mask_sites``: each unit's output
becomes m * x + (1 - m) * c). With a binary m the result is exactly x or exactly c."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from functools import partial

from jaxtyping import Float
from torch import Tensor

from heurlens.interventions.corruption import corrupted_activations
from heurlens.interventions.mask_sites import Edit, MaskSite, attached, head_site, mlp_site
from heurlens.interventions.means import UnitMeans
from heurlens.interventions.units import UnitLayout
from heurlens.protocols import Batch, HookList, PreparedModel


class UnitMaskHooks:
    """Hook functions for every layer that read the current ``heads`` and ``mlps`` masks.

    Set ``heads`` ([n_layers, n_heads]) and ``mlps`` ([n_layers]) before each forward pass; the
    hooks (``self.hooks``) read them when they fire, so a training loop can resample masks per
    step without re-registering anything. Masks with a leading example axis (heads [example, n_layers,
    n_heads], mlps [example, n_layers]) give each example of the batch its own mask: several pruning seeds
    in one forward pass.
    """

    def __init__(self, replacement: UnitMeans, heads: Float[Tensor, "*example layer head"],
                 mlps: Float[Tensor, "*example layer"]):
        self.replacement = replacement
        self.heads = heads
        self.mlps = mlps
        self.enabled = True  # off: the hooks leave every activation as it is (a pass of the model as it was)

    def set_masks(self, flat: Float[Tensor, "*example unit"]) -> None:
        """``heads`` and ``mlps`` from one flat vector in ``UnitLayout``'s order (one row per example: per-example masks)."""
        self.heads, self.mlps = UnitLayout(*self.heads.shape[-2:]).split(flat)

    def use_corrupted(self, model: PreparedModel, batch: Batch) -> None:
        """Corrupt ablation: masked units take their activations on ``batch`` (the corrupted inputs, on the
        model's device), computed with the masks off."""
        with self.disabled():
            self.replacement = corrupted_activations(model, batch)

    @property
    def edits(self) -> list[tuple[MaskSite, Edit]]:
        """``(site, edit)`` pairs: every layer's heads, then every layer's MLP."""
        n_layers, n_heads = self.heads.shape[-2:]
        heads = [head_site(layer, n_heads) for layer in range(n_layers)]
        mlps = [mlp_site(layer) for layer in range(n_layers)]
        edits: list[tuple[MaskSite, Edit]] = [(site, partial(self._mask_heads, site, layer))
                                              for layer, site in enumerate(heads)]
        return edits + [(site, partial(self._mask_mlp, site, layer)) for layer, site in enumerate(mlps)]

    @property
    def hooks(self) -> HookList:
        """The edits as ``(hook point, function)`` pairs, for TransformerLens' ``model.hooks(fwd_hooks=...)``."""
        return [site.hook(edit) for site, edit in self.edits]

    @property
    def changing_hooks(self) -> HookList:
        """``hooks`` less those of the sites whose masks are all 1, which leave their activations exactly as they
        are (1 * x + 0 * c): for masks that stay fixed, so an ablation hooks only the layers it changes (and a
        classifier's final block without a hook can run at [CLS] only: ``heurlens.models.pooled_final_block``)."""
        n_layers = self.heads.shape[-2]
        changes = ([bool((self.heads[..., layer, :] != 1).any()) for layer in range(n_layers)]
                   + [bool((self.mlps[..., layer] != 1).any()) for layer in range(n_layers)])
        return [site.hook(edit) for (site, edit), change in zip(self.edits, changes) if change]

    @property
    def pass_hooks(self) -> HookList:
        """What one pass with the current (fixed) masks needs: ``changing_hooks``."""
        return self.changing_hooks

    def start_layer(self) -> int:
        """The lowest layer whose masks are not all 1 (0 when none is): a pass may resume there (``resumed_passes``)."""
        n_layers = self.heads.shape[-2]
        return next((layer for layer in range(n_layers) if bool((self.heads[..., layer, :] != 1).any())
                     or bool((self.mlps[..., layer] != 1).any())), 0)

    def prepared(self, model: PreparedModel) -> AbstractContextManager[None]:
        """Unit masks need nothing of the bridge beyond their hooks."""
        return nullcontext()

    def attached(self, model: PreparedModel) -> AbstractContextManager[None]:
        """Inside the block the masks act on ``model`` (``mask_sites.attached``); removed on leaving."""
        return attached(model, self.edits)

    @contextmanager
    def disabled(self) -> Iterator[None]:
        """Inside the block the hooks change nothing (a run of the unmasked model with them attached)."""
        self.enabled = False
        try:
            yield
        finally:
            self.enabled = True

    def _mask_heads(self, site: MaskSite, layer: int, z: Float[Tensor, "batch pos head d_head"]) -> Tensor | None:
        if not self.enabled:
            return None
        return site.masked(z, self.heads[..., layer, :], self.replacement.heads[layer], self.heads.dim() == 3)

    def _mask_mlp(self, site: MaskSite, layer: int, out: Float[Tensor, "batch pos d_model"]) -> Tensor | None:
        if not self.enabled:
            return None
        return site.masked(out, self.mlps[..., layer], self.replacement.mlps[layer], self.mlps.dim() == 2)
