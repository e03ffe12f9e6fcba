"""Addressing attention heads and MLP layers: ``L4.H0``, ``L4.H0,L2.H5``, ``L4.*``, ``L4.MLP``.

A *unit* is what structured pruning keeps or drops: one attention head, or one whole MLP layer.
Its activation lives at a TransformerLens hook point: ``blocks.{L}.attn.hook_z`` (per head,
shape ``[batch, pos, head, d_head]``) or ``blocks.{L}.hook_mlp_out``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import total_ordering
from typing import ClassVar, Literal

import torch
from jaxtyping import Bool, Float
from torch import Tensor

from heurlens.errors import HeurlensError

_ITEM = re.compile(r"^L(\d+)\.(?:H(\d+)|(\*)|(MLP))$", re.IGNORECASE)
_GRAMMAR = "expected L<layer>.H<head>, L<layer>.* (every head of a layer) or L<layer>.MLP, comma-separated"


@total_ordering
@dataclass(frozen=True)
class Unit:
    """One attention head (``head`` set) or one MLP layer (``head`` is None)."""

    layer: int
    head: int | None = None

    @property
    def is_mlp(self) -> bool:
        """Whether it is a layer's MLP (else one attention head)."""
        return self.head is None

    @property
    def hook_name(self) -> str:
        """The hook point holding its output: ``blocks.{L}.attn.hook_z`` (every head) or ``blocks.{L}.hook_mlp_out``."""
        return mlp_hook_name(self.layer) if self.is_mlp else heads_hook_name(self.layer)

    def __str__(self) -> str:
        return f"L{self.layer}.MLP" if self.is_mlp else f"L{self.layer}.H{self.head}"

    def __lt__(self, other: Unit) -> bool:  # heads of a layer first, then its MLP
        return (self.layer, self.head is None, self.head or 0) < (
            other.layer, other.head is None, other.head or 0)


def heads_hook_name(layer: int) -> str:
    """The hook point holding every head's output of ``layer``: ``[batch, pos, head, d_head]``."""
    return f"blocks.{layer}.attn.hook_z"


def mlp_hook_name(layer: int) -> str:
    """The hook point holding the MLP output of ``layer``: ``[batch, pos, d_model]``."""
    return f"blocks.{layer}.hook_mlp_out"


@dataclass(frozen=True)
class UnitLayout:
    """The units of a model with ``n_layers`` layers of ``n_heads`` heads and one MLP each, and the one
    order in which a flat vector lists them: per layer its heads, then its MLP (``units()``'s order,
    the order of the pruning masks). Masks are passed around as (heads ``[layer, head]``, MLPs
    ``[layer]``); ``join`` and ``split`` convert between the two forms."""

    n_layers: int
    n_heads: int
    level: ClassVar[Literal["node"]] = "node"  # ``layouts.ItemLayout``: what its items are
    noun: ClassVar[str] = "unit"

    @property
    def n_units(self) -> int:
        return self.n_layers * (self.n_heads + 1)

    @property
    def n_items(self) -> int:
        """``n_units`` (``layouts.ItemLayout``)."""
        return self.n_units

    def item_names(self) -> list[str]:
        """Every unit's name (``L0.H1``, ``L0.MLP``), in the flat order."""
        return [str(unit) for unit in self.units()]

    def units(self, include_mlps: bool = True) -> list[Unit]:
        """Every head of every layer (and every MLP), in layer order."""
        units = []
        for layer in range(self.n_layers):
            units += [Unit(layer, h) for h in range(self.n_heads)]
            if include_mlps:
                units.append(Unit(layer))
        return units

    def split(self, flat: Float[Tensor, "*row unit"]
              ) -> tuple[Float[Tensor, "*row layer head"], Float[Tensor, "*row layer"]]:
        """(heads, MLPs) of a flat vector in the layout's order (of each row, for a stack of vectors)."""
        per_layer = flat.view(*flat.shape[:-1], self.n_layers, self.n_heads + 1)
        return per_layer[..., :self.n_heads], per_layer[..., self.n_heads]

    def join(self, heads: Float[Tensor, "layer head"], mlps: Float[Tensor, " layer"]) -> Float[Tensor, " unit"]:
        """The flat vector of (heads, MLPs), in the layout's order."""
        return torch.cat([heads, mlps[:, None]], dim=1).flatten()

    def mask(self, units_off: Iterable[Unit], device: torch.device | str = "cpu"
             ) -> tuple[Float[Tensor, "layer head"], Float[Tensor, " layer"]]:
        """(heads, MLPs) masks on ``device`` that are 1 everywhere except 0 at ``units_off``."""
        heads, mlps = torch.ones(self.n_layers, self.n_heads, device=device), torch.ones(self.n_layers, device=device)
        for unit in units_off:
            if unit.is_mlp:
                mlps[unit.layer] = 0
            else:
                heads[unit.layer, unit.head] = 0
        return heads, mlps

    def keep_mask(self, kept: Iterable[Unit], device: torch.device | str = "cpu") -> Float[Tensor, " unit"]:
        """A flat 0/1 vector in the layout's order that is 1 at ``kept`` and 0 elsewhere (as ``EdgeLayout.keep_mask``)."""
        kept = set(kept)
        return self.join(*self.mask([unit for unit in self.units() if unit not in kept], device))

    def units_where(self, keep: Bool[Tensor, " unit"]) -> list[Unit]:
        """The units whose entry of a flat boolean vector is True, in the layout's order."""
        return [unit for unit, kept in zip(self.units(), keep.flatten().tolist()) if kept]


def all_units(n_layers: int, n_heads: int, include_mlps: bool = True) -> list[Unit]:
    """Every head of every layer (and every MLP), in layer order.

    Args:
        n_layers: the model's layers.
        n_heads: its heads a layer.
        include_mlps: the MLPs too.

    Returns:
        The units in layer order (per layer its heads, then its MLP)."""
    return UnitLayout(n_layers, n_heads).units(include_mlps)


def parse_units(spec: str, n_layers: int, n_heads: int) -> list[Unit]:
    """Parse a spec such as ``"L4.H0,L2.*,L3.MLP"`` into units, in the order given, without repeats.

    Raises HeurlensError naming the model's valid range for a malformed or out-of-range item.

    Args:
        spec: units such as ``"L4.H0,L2.*,L3.MLP"``.
        n_layers: the model's layers.
        n_heads: its heads a layer.

    Returns:
        The units, in the order given, once each.
    """
    if n_layers < 1 or n_heads < 1:
        raise HeurlensError(f"a model with {n_layers} layers of {n_heads} heads has no units to name")
    valid = f"this model has layers L0-L{n_layers - 1} and heads H0-H{n_heads - 1}"
    items = [item.strip() for item in spec.split(",")]
    if not spec.strip() or any(not item for item in items):
        raise HeurlensError(f"empty unit in {spec!r}: {_GRAMMAR}; {valid}")
    units: list[Unit] = []
    for item in items:
        match = _ITEM.match(item)
        if match is None:
            raise HeurlensError(f"cannot read {item!r}: {_GRAMMAR}, e.g. L4.H0,L2.H5; {valid}")
        layer = int(match.group(1))
        if layer >= n_layers:
            raise HeurlensError(f"{item}: layer {layer} is out of range; {valid}")
        if match.group(2) is not None:
            head = int(match.group(2))
            if head >= n_heads:
                raise HeurlensError(f"{item}: head {head} is out of range; {valid}")
            new = [Unit(layer, head)]
        elif match.group(3):
            new = [Unit(layer, h) for h in range(n_heads)]
        else:
            new = [Unit(layer)]
        units += [u for u in new if u not in units]
    return units


UnitsLike = str | Unit | Iterable[str | Unit]  # "L4.H0,L2.*", Unit(4, 0), or a list of either


def as_units(units: UnitsLike, n_layers: int, n_heads: int) -> list[Unit]:
    """Units given as a spec string (``"L4.H0,L2.*"``), a ``Unit``, or a list of strings and ``Unit``s, checked
    against a model of ``n_layers`` layers of ``n_heads`` heads, in the order given, without repeats.

    Args:
        units: a spec string, a ``Unit``, or a list of strings and ``Unit``s.
        n_layers: the model's layers.
        n_heads: its heads a layer.

    Returns:
        The units, in the order given, once each."""
    if isinstance(units, str):
        return parse_units(units, n_layers, n_heads)
    items = [units] if isinstance(units, Unit) else list(units)
    result: list[Unit] = []
    for item in items:
        if isinstance(item, str):
            new = parse_units(item, n_layers, n_heads)
        elif isinstance(item, Unit):
            if not (0 <= item.layer < n_layers and (item.head is None or 0 <= item.head < n_heads)):
                raise HeurlensError(f"{item} is out of range: this model has layers L0-L{n_layers - 1} and heads "
                                    f"H0-H{n_heads - 1}")
            new = [item]
        else:
            raise HeurlensError(f"cannot read {item!r} as a unit: give 'L4.H0', 'L4.*', 'L4.MLP' or heurlens.Unit(4, 0)")
        result += [unit for unit in new if unit not in result]
    return result


def format_units(units: Iterable[Unit], n_heads: int | None = None) -> str:
    """The inverse of ``parse_units``; with ``n_heads`` a layer with all its heads prints as ``L4.*``.

    Args:
        units: the units.
        n_heads: the model's heads a layer, to print a whole layer's heads as ``L4.*`` (None: each head).

    Returns:
        The spec, e.g. ``"L4.H0,L2.*"``."""
    units = list(units)
    parts: list[str] = []
    done: set[Unit] = set()
    for unit in units:
        if unit in done:
            continue
        layer_heads = [Unit(unit.layer, h) for h in range(n_heads)] if n_heads else []
        if not unit.is_mlp and layer_heads and all(u in units for u in layer_heads):
            parts.append(f"L{unit.layer}.*")
            done.update(layer_heads)
        else:
            parts.append(str(unit))
            done.add(unit)
    return ",".join(parts)
