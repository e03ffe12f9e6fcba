"""A circuit as heurlens intervenes on it, whatever its level: a *node* circuit keeps heads and MLPs (the Heuristic
Core's subnetworks), an *edge* circuit keeps writer-reader edges (Edge Pruning's). Either is a flat 0/1 *keep mask*
(1: kept) in its layout's order (``UnitLayout``, ``EdgeLayout``), applied to a bridge by the hooks of its level
(``mask_hooks``: the one way heurlens attaches a mask), which training, scoring and tables all use through the one
``MaskHooks`` protocol. The records that hold circuits (``Subnetwork``, ``EdgeCircuit``) are ``Circuit``s.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import torch
from jaxtyping import Float
from torch import Tensor

from heurlens.errors import HeurlensError
from heurlens.interventions.edge_masks import EdgeMaskHooks
from heurlens.interventions.graph import EdgeLayout
from heurlens.interventions.layouts import Level, layout_of
from heurlens.interventions.means import UnitMeans
from heurlens.interventions.unit_masks import UnitMaskHooks
from heurlens.interventions.units import Unit
from heurlens.protocols import MaskHooks, PreparedModel


class Circuit(Protocol):
    """What heurlens needs of a circuit record: how tables name it, its level, the units it keeps (an edge circuit:
    the heads and MLPs its edges touch), and the keep mask it sets on a model."""

    @property
    def label(self) -> str:
        """How tables name it ('50% seed 2', '95% of edges seed 0')."""
        ...

    @property
    def level(self) -> Level:
        """What it keeps: units ("node") or edges ("edge")."""
        ...

    kept: list[Unit]

    def keep_mask(self) -> Float[Tensor, " mask"]:
        """The flat 0/1 mask it sets, 1 at what it keeps, in its level's layout order."""
        ...


def mask_hooks(model: PreparedModel, level: Level, replacement: UnitMeans | None = None,
               device: torch.device | str = "cpu") -> MaskHooks:
    """Hooks that mask ``model`` at ``level`` with every component kept until ``set_masks``: unit masks at each
    layer's ``hook_z`` and ``hook_mlp_out`` replacing pruned units by ``replacement`` (means or zeros, on ``device``;
    corrupt ablation sets it per batch through ``use_corrupted``), or edge masks at the split inputs, pruned edges
    carrying the writers' means (``replacement``: means with the embeddings', or zeros) or, without ``replacement``,
    their outputs on the corrupted batch (``use_corrupted``).

    Args:
        model: a prepared model (``as_model``).
        level: "node" or "edge".
        replacement: what pruned items carry: means or zeros (None at edge level: the writers' corrupted outputs).
        device: where the masks and replacement live.

    Returns:
        The level's ``MaskHooks`` (every item kept until ``set_masks``)."""
    layout = layout_of(model, level)
    if isinstance(layout, EdgeLayout):
        return EdgeMaskHooks(layout, torch.ones(layout.n_edges, device=device), replacement)
    if replacement is None:
        raise HeurlensError("unit masks need what a pruned unit is replaced by: means, zeros, or (corrupt ablation) "
                            "its activations on the corrupted batch, set by use_corrupted")
    return UnitMaskHooks(replacement, *layout.mask([], device))


def check_level(model: PreparedModel, level: Level) -> None:
    """Refuse, before any work, a model that cannot be masked at ``level`` (edges: ``edge_layout``'s refusals)."""
    layout_of(model, level)


def axis_of(circuits: Sequence[Circuit], edges: bool = False) -> Level:
    """The level circuits are compared on: edges when asked (``edges``) or when any of them is an edge circuit (a node
    circuit is then the edges between its units, ``EdgeLayout.edges_between``), else nodes."""
    return "edge" if edges or any(circuit.level == "edge" for circuit in circuits) else "node"


def level_of(circuits: Sequence[Circuit]) -> Level:
    """The one level of ``circuits`` (node or edge), refused when they mix them."""
    levels = {circuit.level for circuit in circuits}
    if len(levels) > 1:
        raise HeurlensError("evaluate edge circuits (heurlens prune --level edge) and node subnetworks apart: a circuit "
                            "prunes edges, a subnetwork units")
    return levels.pop() if levels else "node"
