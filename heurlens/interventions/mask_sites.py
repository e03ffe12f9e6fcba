"""Where a unit mask acts, the one formula it applies, and the one way its replacement (a mean) is taken.

Heuristic Core paper, Section 2: with mask m and replacement c (a unit's mean activation, or zero), a
unit's activation x becomes

    m * x + (1 - m) * c,

so m = 1 keeps the unit, m = 0 replaces it, and values in between interpolate (what makes masks
trainable). A *mask site* is one place in a model that holds a group of units, and how the unit axis
sits in its activation. Two adapters reach a site:

* ``hook point``: a TransformerLens hook point (text models through ``TransformerBridge``):
  ``blocks.L.attn.hook_z`` holds layer L's heads (``[batch, pos, head, d_head]``, the input of W_O,
  so a head's whole contribution W_O^h z_h is what its mask changes), ``blocks.L.hook_mlp_out`` its
  MLP. The site gives ``(name, hook function)`` pairs for ``model.hooks``.
* ``module input`` / ``module output``: a PyTorch forward (pre-)hook on a module (timm vision models,
  which TransformerLens does not bridge): ``blocks.L.attn.proj``'s input holds a ViT layer's heads
  packed as ``[batch, token, head * d_head]``, a ResNet block's output its channels.

``SiteMeans`` averages the activations seen at sites: over every real token (text: one vector per
head and MLP, the same at every position) or per position (vision: per token or pixel).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal

import torch
from jaxtyping import Float
from torch import Tensor, nn
from torch.utils.hooks import RemovableHandle

from heurlens.interventions.units import heads_hook_name, mlp_hook_name

Kind = Literal["heads", "packed heads", "mlp", "residual", "channels"]
Adapter = Literal["hook point", "module input", "module output"]


@dataclass(frozen=True)
class MaskSite:
    """One group of units: where (``name``: a hook point or a module path, reached through ``adapter``),
    how many, and how the unit axis sits in the activation (``kind``)."""

    name: str
    n_units: int
    kind: Kind
    adapter: Adapter = "hook point"

    def unit_view(self, activation: Tensor) -> Tensor:
        """The activation with the unit axis placed for broadcasting a mask of shape [n_units]:
        heads ``[..., head, d_head]`` (packed heads unflattened), channels ``[batch, H, W, channel]``."""
        if self.kind == "packed heads":
            return activation.unflatten(-1, (self.n_units, -1))
        if self.kind == "channels":
            return activation.movedim(1, -1)
        return activation

    def mask_view(self, mask: Float[Tensor, "*example unit"], activation_dims: int, per_example: bool = False
                  ) -> Tensor:
        """The mask shaped to broadcast against a ``unit_view`` of ``activation_dims`` axes (a head's mask covers its
        d_head). ``per_example``: the mask has one more, leading axis, one row per example of the batch (several
        pruning seeds stacked in one forward pass, each on its own examples)."""
        m = mask[..., None] if self.kind in ("heads", "packed heads") else mask
        if per_example:
            m = m.view(m.shape[0], *([1] * (activation_dims - m.dim())), *m.shape[1:])
        return m

    def from_unit_view(self, view: Tensor) -> Tensor:
        if self.kind == "packed heads":
            return view.flatten(-2)
        if self.kind == "channels":
            return view.movedim(-1, 1)
        return view

    def masked(self, activation: Tensor, mask: Float[Tensor, "*example unit"], replacement: Tensor | None,
               per_example: bool = False) -> Tensor:
        """m * x + (1 - m) * c at this site; ``replacement`` (c) is shaped like one example's activation,
        or like any suffix of it that broadcasts (a head's mean ``[head, d_head]``), or like the whole batch's
        activation (corrupt ablation: each example's own value at each position), or None for zero.
        ``per_example``: ``mask`` holds one row per example (``mask_view``)."""
        view = self.unit_view(activation)
        m = self.mask_view(mask.to(activation.device, activation.dtype), view.dim(), per_example)
        if replacement is None:
            return self.from_unit_view(view * m)
        replacement = replacement.to(activation.device, activation.dtype)
        c = self.unit_view(replacement if replacement.dim() == activation.dim() else replacement[None])
        return self.from_unit_view(view * m + (1 - m) * c)

    def hook(self, edit: Callable[[Tensor], Tensor | None]) -> tuple[str, Callable]:
        """``(hook point name, hook function)`` for ``model.hooks``: ``edit`` sees the activation, and a
        tensor it returns replaces it."""
        if self.adapter != "hook point":
            raise ValueError(f"{self.name} is reached by a module hook; use register")
        return self.name, lambda activation, hook: edit(activation)

    def register(self, model: nn.Module, edit: Callable[[Tensor], Tensor | None]) -> RemovableHandle:
        """Attach ``edit`` to this module site with a forward (pre-)hook; remove it with the handle."""
        if self.adapter == "hook point":
            raise ValueError(f"{self.name} is a TransformerLens hook point; use hook with model.hooks")
        module = model.get_submodule(self.name)
        if self.adapter == "module input":
            def pre_hook(module, args):
                new = edit(args[0])
                return None if new is None else (new, *args[1:])
            return module.register_forward_pre_hook(pre_hook)
        return module.register_forward_hook(lambda module, args, output: edit(output))


Edit = Callable[[Tensor], Tensor | None]  # sees an activation; a tensor it returns replaces it


@contextmanager
def attached(model: Any, edits: Sequence[tuple[MaskSite, Edit]]) -> Iterator[None]:
    """The one way heurlens attaches mask edits: inside the block each ``(site, edit)`` acts at its site,
    through the adapter that reaches it (TransformerLens hook points through ``model.hooks``; timm modules
    through forward hooks on ``model``'s submodules). On leaving, by an error too, every edit is removed and the
    model is as before (as SAELens' ``saes()`` context manager restores its model)."""
    handles: list[RemovableHandle] = []
    try:
        for site, edit in edits:
            if site.adapter != "hook point":
                handles.append(site.register(model, edit))
        hook_points = [site.hook(edit) for site, edit in edits if site.adapter == "hook point"]
        if hook_points:
            with model.hooks(hook_points):
                yield
        else:
            yield
    finally:
        for handle in handles:
            handle.remove()


def head_site(layer: int, n_heads: int) -> MaskSite:
    """A TransformerLens model's heads of one layer, at ``blocks.L.attn.hook_z``."""
    return MaskSite(heads_hook_name(layer), n_heads, "heads")


def mlp_site(layer: int) -> MaskSite:
    """A TransformerLens model's MLP of one layer, at ``blocks.L.hook_mlp_out``."""
    return MaskSite(mlp_hook_name(layer), 1, "mlp")


class SiteMeans:
    """Running means of the activations at mask sites (``add`` them as they are seen, read ``means()``).

    ``per_position=False`` (text): the mean over batch and positions of the real tokens, weighted by
    ``token_weights`` ([batch, pos], the attention mask; all ones when None). ``per_position=True``
    (vision): the mean over the batch only, one value per token or pixel position. Sums run in float32 whatever
    the model's precision (a bfloat16 sum over 200,000 tokens would keep about 3 significant digits)."""

    def __init__(self, per_position: bool):
        self.per_position = per_position
        self.sums: dict[str, Tensor] = {}
        self.counts: dict[str, Tensor] = {}

    def add(self, name: str, activation: Tensor, token_weights: Tensor | None = None) -> None:
        activation = activation.float()
        if self.per_position:
            total, count = activation.sum(0), torch.tensor(float(activation.shape[0]), device=activation.device)
        else:
            weights = (token_weights if token_weights is not None
                       else torch.ones(activation.shape[:2], device=activation.device))
            weights = weights.to(activation.device, activation.dtype)
            weights = weights.view(*weights.shape[:2], *([1] * (activation.dim() - 2)))
            total, count = (activation * weights).sum(dim=(0, 1)), weights.sum()
        self.sums[name] = self.sums[name] + total if name in self.sums else total
        self.counts[name] = self.counts[name] + count if name in self.counts else count

    def means(self) -> dict[str, Tensor]:
        return {name: total / self.counts[name] for name, total in self.sums.items()}
