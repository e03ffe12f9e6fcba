"""A ranking of every unit or edge, and the circuit of any size it gives: the top n, as MIB cuts attribution scores
(EAP-IG's ``Graph.apply_topn``). A mask run ranks by its trained log_alpha (the masks the run would keep first), an
attribution method by its scores, so one run gives a circuit of every size.

Scores whose sign means something (``signed``: attribution scores in EAP-IG's sign, higher where ablating the item
lowers the metric more; a MIB file's) are reported as MIB's ``print_results.py`` reports them: CPR from the ranking
by score (MIB's ``absolute=False`` evaluation, its default) and CMD from the ranking by |score| (``absolute=True``).
A mask run's or a random ranking has one order, used for both areas (``area_orders``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import torch
from jaxtyping import Float
from torch import Tensor

from heurlens.errors import HeurlensError
from heurlens.interventions.circuits import Level
from heurlens.interventions.layouts import GraphName
from heurlens.interventions.units import UnitLayout

RankedBy = Literal["score", "|score|"]  # the two orders of a ranking (MIB's absolute=False and absolute=True)
Area = Literal["cpr", "cmd"]


@dataclass(frozen=True)
class Ranking:
    """``scores`` of every unit (``level`` "node": ``UnitLayout``'s order) or edge ("edge": ``EdgeLayout``'s order),
    higher kept first (|score| when ``absolute``), named ``label`` in tables. ``signed``: the scores' signs mean
    something (attribution scores, MIB files), so CPR is taken from the order by score and CMD from the order by
    |score|, as MIB's scripts report them; ``absolute`` then ranks both by |score| (MIB's ``--absolute`` alone).
    ``graph``: the graph an edge ranking's items are on, "heurlens" (the model's own edges) or "mib" (its ungrouped
    copy's, ``models.ungrouped``: a key-value head per query head), so it is scored on the model it ranks."""

    label: str
    level: Level
    scores: Float[Tensor, " item"]
    absolute: bool = False
    signed: bool = False
    graph: GraphName = "heurlens"

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

    @property
    def ranked_by(self) -> RankedBy:
        """The order ``order`` and ``top`` use: "|score|" when ``absolute``, else "score"."""
        return "|score|" if self.absolute else "score"

    def area_orders(self) -> dict[RankedBy, tuple[Area, ...]]:
        """Which order each of MIB's areas is taken from: a ``signed`` ranking's CPR from the order by score and its
        CMD from the order by |score| (MIB's ``print_results.py``), unless ``absolute``; any other ranking's both
        from its one order."""
        if self.signed and not self.absolute:
            return {"score": ("cpr",), "|score|": ("cmd",)}
        return {self.ranked_by: ("cpr", "cmd")}

    def order(self, by: RankedBy | None = None) -> Tensor:
        """The items from first kept to last by ``by`` (default ``ranked_by``; ties: the layout's order)."""
        keys = self.scores.detach().float().cpu()
        return torch.argsort(keys.abs() if (by or self.ranked_by) == "|score|" else keys, descending=True, stable=True)

    def top(self, count: int, by: RankedBy | None = None) -> Float[Tensor, " item"]:
        """The keep mask of the ``count`` items ranked first (by ``by``, default ``ranked_by``): 1 on them, 0
        elsewhere."""
        if not 0 <= count <= self.n_items:
            raise HeurlensError(f"ranking {self.label!r} ranks {self.n_items} items; cannot keep {count}")
        mask = torch.zeros(self.n_items)
        mask[self.order(by)[:count]] = 1.0
        return mask


def ranking_of(circuit: Any) -> Ranking:
    """The ranking a mask run's record holds: its trained log_alpha (a unit subnetwork's heads and MLPs joined in
    ``UnitLayout``'s order, an edge circuit's edges), labelled by its seed (and target).

    Args:
        circuit: a mask run's record (``Subnetwork`` or ``EdgeCircuit``).

    Returns:
        Its ``Ranking`` (log_alpha, higher kept first)."""
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
    CPR 0.25), labelled ``random seed N``.

    Args:
        level: "node" or "edge".
        n_items: how many items it ranks.
        seed: the order's seed.

    Returns:
        A ``Ranking`` in a random order."""
    return Ranking(f"random seed {seed}", level, torch.rand(n_items, generator=torch.Generator().manual_seed(seed)))


def check_rankings(rankings: Sequence[Ranking]) -> None:
    """Refuse rankings that are not of one level and one number of items (they could not share a curve's axis), or
    whose areas come from different orders (signed scores beside a mask run's: give them to separate curves)."""
    if not rankings:
        raise HeurlensError("give at least one ranking")
    kinds = {(ranking.level, ranking.n_items) for ranking in rankings}
    if len(kinds) > 1:
        raise HeurlensError(f"the rankings rank different things ({', '.join(f'{n} {lvl}s' for lvl, n in sorted(kinds))}):"
                            " score rankings of one level of one model together")
    if len({tuple(ranking.area_orders().items()) for ranking in rankings}) > 1:
        raise HeurlensError("the rankings take MIB's areas from different orders (signed scores, whose CPR comes from "
                            "the order by score and CMD by |score|, beside rankings of one order): score them as "
                            "separate curves")
