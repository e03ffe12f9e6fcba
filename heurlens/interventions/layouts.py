"""What a circuit's items are, whatever its level: one protocol that the two layouts satisfy (``UnitLayout``: heads and
MLPs, the Heuristic Core's units; ``EdgeLayout``: writer-reader edges, Edge Pruning's) and the one place that picks a
model's layout for a level (``layout_of``). Code that needs how many items there are, their names or a keep mask
asks the layout, not the level's name."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal, Protocol

import torch
from jaxtyping import Float
from torch import Tensor

from heurlens.interventions.graph import EdgeLayout, edge_layout
from heurlens.interventions.units import UnitLayout
from heurlens.protocols import PreparedModel

Level = Literal["node", "edge"]
GraphName = Literal["heurlens", "mib"]  # the graph edges are on: heurlens' (key-value heads grouped) or MIB's


class ItemLayout(Protocol):
    """The items of one level in their one flat order: what every mask, score and ranking of that level lists."""

    @property
    def level(self) -> Level:
        """"node" (units) or "edge"."""
        ...

    @property
    def noun(self) -> str:
        """What one item is called in a table or a message ("unit", "edge")."""
        ...

    @property
    def n_items(self) -> int:
        """How many items there are."""
        ...

    def item_names(self) -> list[str]:
        """Every item's name, in the flat order."""
        ...

    def keep_mask(self, kept: Iterable[Any], device: torch.device | str = "cpu") -> Float[Tensor, " item"]:
        """The flat 0/1 mask, 1 at the items ``kept``."""
        ...


def layout_of(model: PreparedModel, level: Level) -> UnitLayout | EdgeLayout:
    """``model``'s layout at ``level``.

    Args:
        model: a prepared model (``as_model``).
        level: "node" (its units) or "edge" (its edges; refused by name on a model that cannot be masked at edges,
            ``edge_layout``).

    Returns:
        Its ``UnitLayout`` or ``EdgeLayout``, both ``ItemLayout``s."""
    return edge_layout(model) if level == "edge" else UnitLayout(model.n_layers, model.n_heads)  # the one test


LAYOUTS: tuple[type[ItemLayout], ...] = (UnitLayout, EdgeLayout)  # every level's layout (mypy checks the protocol)
