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
        return self.head is None

    @property
    def hook_name(self) -> str:
        if self.is_mlp:
            return f"blocks.{self.layer}.hook_mlp_out"
        return f"blocks.{self.layer}.attn.hook_z"

    def __str__(self) -> str:
        return f"L{self.layer}.MLP" if self.is_mlp else f"L{self.layer}.H{self.head}"

    def __lt__(self, other: Unit) -> bool:  # heads of a layer first, then its MLP
        return (self.layer, self.head is None, self.head or 0) < (
            other.layer, other.head is None, other.head or 0)


def all_units(n_layers: int, n_heads: int, include_mlps: bool = True) -> list[Unit]:
    """Every head of every layer (and every MLP), in layer order."""
    units = []
    for layer in range(n_layers):
        units += [Unit(layer, h) for h in range(n_heads)]
        if include_mlps:
            units.append(Unit(layer))
    return units


def parse_units(spec: str, n_layers: int, n_heads: int) -> list[Unit]:
    """Parse a spec such as ``"L4.H0,L2.*,L3.MLP"`` into units, in the order given, without repeats.

    Raises HeurlensError naming the model's valid range for a malformed or out-of-range item.
    """
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


def format_units(units: Iterable[Unit], n_heads: int | None = None) -> str:
    """The inverse of ``parse_units``; with ``n_heads`` a layer with all its heads prints as ``L4.*``."""
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
