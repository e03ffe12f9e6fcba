"""A ranking of every unit or edge, and the circuit of any size it gives: the top n, as MIB cuts attribution scores
(EAP-IG's ``Graph.apply_topn``). A mask run ranks by its trained log_alpha (the masks the run would keep first), an
attribution method by its scores (by |score| when ``absolute``), so one run gives a circuit of every size."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from jaxtyping import Float
from torch import Tensor

from heurlens.errors import HeurlensError
from heurlens.interventions.circuits import Level
from heurlens.interventions.units import UnitLayout


@dataclass(frozen=True)
class Ranking:
    """``scores`` of every unit (``level`` "node": ``UnitLayout``'s order) or edge ("edge": ``EdgeLayout``'s order),
    higher kept first (|score| when ``absolute``), named ``label`` in tables."""

    label: str
    level: Level
    scores: Float[Tensor, " item"]
    absolute: bool = False

    def __post_init__(self) -> None:
        if self.scores.dim() != 1 or not len(self.scores):
            raise HeurlensError(f"ranking {self.label!r}: give one score per unit or edge (a 1-d tensor), not a "
                                f"tensor of shape {tuple(self.scores.shape)}")
        if torch.isnan(self.scores).any():
            raise HeurlensError(f"ranking {self.label!r} has NaN scores: every unit or edge needs a score to be ranked")

    @property
    def n_items(self) -> int:
        """How many units or edges it ranks."""
        return len(self.scores)

    def order(self) -> Tensor:
        """The items from first kept to last (ties: the layout's order)."""
        keys = self.scores.detach().float().cpu()
        return torch.argsort(keys.abs() if self.absolute else keys, descending=True, stable=True)

    def top(self, count: int) -> Float[Tensor, " item"]:
        """The keep mask of the ``count`` items ranked first: 1 on them, 0 elsewhere."""
        if not 0 <= count <= self.n_items:
            raise HeurlensError(f"ranking {self.label!r} ranks {self.n_items} items; cannot keep {count}")
        mask = torch.zeros(self.n_items)
        mask[self.order()[:count]] = 1.0
        return mask


def ranking_of(circuit: Any) -> Ranking:
    """The ranking a mask run's record holds: its trained log_alpha (a unit subnetwork's heads and MLPs joined in
    ``UnitLayout``'s order, an edge circuit's edges), labelled by its seed (and target)."""
    label = str(circuit.label)
    edges = getattr(circuit, "log_alpha_edges", None)
    if edges is not None:
        return Ranking(label, "edge", edges.detach().float().cpu())
    heads, mlps = getattr(circuit, "log_alpha_heads", None), getattr(circuit, "log_alpha_mlps", None)
    if heads is None or mlps is None:
        raise HeurlensError(f"{label} has no trained log_alpha to rank by (only records of heurlens prune carry "
                            "them): score it as the circuit it keeps")
    layout = UnitLayout(int(circuit.n_layers), int(circuit.n_heads))
    return Ranking(label, "node", layout.join(heads.detach().float().cpu(), mlps.detach().float().cpu()))


def random_ranking(level: Level, n_items: int, seed: int) -> Ranking:
    """A ranking of ``n_items`` in a random order drawn with ``seed``: MIB's baseline (its random circuits sit near
    CPR 0.25), labelled ``random seed N``."""
    return Ranking(f"random seed {seed}", level, torch.rand(n_items, generator=torch.Generator().manual_seed(seed)))


def check_rankings(rankings: Sequence[Ranking]) -> None:
    """Refuse rankings that are not of one level and one number of items (they could not share a curve's axis)."""
    if not rankings:
        raise HeurlensError("give at least one ranking")
    kinds = {(ranking.level, ranking.n_items) for ranking in rankings}
    if len(kinds) > 1:
        raise HeurlensError(f"the rankings rank different things ({', '.join(f'{n} {lvl}s' for lvl, n in sorted(kinds))}):"
                            " score rankings of one level of one model together")
