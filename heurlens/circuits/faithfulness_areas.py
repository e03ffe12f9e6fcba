"""MIB's yardstick for circuits (Mueller et al., ICML 2025; hannamw/MIB-circuit-track, ``evaluation.py``): the
faithfulness f(k) of a circuit keeping ``int(k n)`` of the ``n`` units or edges at each of its ten sizes

    k = 0.1%, 0.2%, 0.5%, 1%, 2%, 5%, 10%, 20%, 50%, 100%    (``MIB_GRID``),

and the areas over them by the trapezoidal rule on a linear k axis from 0.001 to 1:

    CPR = sum_i (k_{i+1} - k_i) (f_i + f_{i+1}) / 2               (higher is better; may exceed 1),
    CMD = sum_i (k_{i+1} - k_i) (|1 - f_i| + |1 - f_{i+1}|) / 2   (lower is better).

A ranking with signed scores (attribution, a MIB file) has two curves' worth of circuits, its top items by score and
by |score| (the table's ``ranked_by``): CPR is taken from the first and CMD from the second, as MIB's
``print_results.py`` takes CPR from its ``abs-False`` results and CMD from its ``abs-True`` ones (``cpr_from``,
``cmd_from``). Nothing is assumed: a curve that lacks a circuit at one of the sizes has no CPR or CMD (NaN,
``missing`` names the sizes). A circuit stands at size k when it keeps exactly ``int(k n)`` items, as MIB cuts them
(Python's ``int``, so 0.1% of 300 units is 0, the empty circuit).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import cast

import pandas as pd

from heurlens.errors import HeurlensError

MIB_GRID = (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0)


def check_grid(grid: Sequence[float]) -> tuple[float, ...]:
    """``grid`` as a tuple of sizes, refused by name unless it is two or more fractions kept in (0, 1], strictly
    ascending (MIB's trapezoid sums left to right: a descending grid gives negative areas, one size gives none)."""
    sizes = tuple(grid)
    if (len(sizes) < 2 or not all(isinstance(size, int | float) and not isinstance(size, bool) and 0 < size <= 1
                                  for size in sizes) or any(a >= b for a, b in zip(sizes, sizes[1:]))):
        raise HeurlensError(f"grid={list(sizes)}: give two or more fractions kept in (0, 1], strictly ascending "
                            "(e.g. MIB's (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0), MIB_GRID)")
    return tuple(float(size) for size in sizes)


def grid_count(fraction: float, n_items: int) -> int:
    """How many of ``n_items`` a circuit of size ``fraction`` keeps: ``int(fraction * n_items)``, MIB's cut."""
    return int(fraction * n_items)


def trapezoid(grid: Sequence[float], heights: Sequence[float]) -> float:
    """The area under ``heights`` over ``grid`` by the trapezoidal rule, as MIB sums it (left to right)."""
    area = 0.0
    for i in range(len(grid) - 1):
        area += (grid[i + 1] - grid[i]) * (heights[i] + heights[i + 1]) / 2
    return area


def cpr_and_cmd(grid: Sequence[float], faithfulness: Sequence[float]) -> tuple[float, float]:
    """(CPR, CMD) of one curve, f at each size of ``grid``; NaN for both when a point is missing (NaN)."""
    if len(faithfulness) != len(grid) or any(math.isnan(f) for f in faithfulness):
        return math.nan, math.nan
    return trapezoid(grid, faithfulness), trapezoid(grid, [abs(1 - f) for f in faithfulness])


@dataclass
class FaithfulnessCurve:
    """Circuits scored on a task, one a row (``circuits``: ``curve``, the ranking or run the circuit belongs to;
    ``circuit``; ``kept_fraction``; ``units_kept`` or ``edges_kept``; ``metric``; ``faithfulness``), the metric of the
    full and of the empty model, ``n_items`` (the units or edges the counts are out of) and the ``grid`` of sizes.

    Each curve (a ranking cut at every size, or one seed's sweep over sparsities) has a point at a size when one of
    its circuits keeps ``grid_count(size, n_items)`` items (several: their mean); CPR and CMD are each curve's
    areas averaged over the curves (``areas``), NaN while any curve misses a size (``missing``). When the circuits
    carry a ``ranked_by`` column (a ranking's top items by "score" or by "|score|"), CPR is taken from the circuits
    ranked by ``cpr_from`` and CMD from those ranked by ``cmd_from``."""

    circuits: pd.DataFrame
    full: float
    empty: float
    n_items: int | None = None
    grid: tuple[float, ...] = field(default=MIB_GRID)
    cpr_from: str | None = None  # the ``ranked_by`` of the circuits CPR is taken from (None: every circuit)
    cmd_from: str | None = None  # and CMD's
    ablation: str | None = None  # what the items outside a circuit carried: "mean", "zero" or "corrupt"

    def __post_init__(self) -> None:
        if "curve" not in self.circuits:  # a table of heurlens 0.1.0: its circuits one curve
            self.circuits = self.circuits.assign(curve="circuits")
        if self.n_items is None:  # as heurlens 0.1.0's tables imply it: kept / kept_fraction
            sized = self.circuits[self.circuits["kept_fraction"] > 0].iloc[0]
            self.n_items = round(sized[self.kept_column] / sized["kept_fraction"])

    @property
    def kept_column(self) -> str:
        """``units_kept`` or ``edges_kept``: what the circuits keep."""
        return "edges_kept" if "edges_kept" in self.circuits else "units_kept"

    @property
    def points(self) -> pd.DataFrame:
        """One row per curve and size: ``curve``, ``kept_fraction`` (the size), ``kept`` (its count) and
        ``faithfulness`` (NaN where the curve has no circuit of that count), of the circuits CPR is taken from."""
        return self.points_of(self.cpr_from)

    def points_of(self, ranked_by: str | None) -> pd.DataFrame:
        """``points`` of the circuits ranked by ``ranked_by`` (None: of every circuit)."""
        rows = []
        chosen = self.circuits if ranked_by is None else self.circuits[self.circuits["ranked_by"] == ranked_by]
        for name, circuits in chosen.groupby("curve", sort=False):
            by_count = circuits.groupby(self.kept_column)["faithfulness"].mean()
            for size in self.grid:
                count = grid_count(size, cast(int, self.n_items))
                rows.append({"curve": name, "kept_fraction": size, "kept": count,
                             "faithfulness": float(by_count.get(count, math.nan))})
        return pd.DataFrame(rows, columns=["curve", "kept_fraction", "kept", "faithfulness"])

    @property
    def curve(self) -> pd.DataFrame:
        """Mean faithfulness per size over the curves (NaN where one misses it): ``kept_fraction``, ``faithfulness``."""
        means = self.points.groupby("kept_fraction", sort=True)["faithfulness"].agg(lambda f: f.mean(skipna=False))
        return means.rename_axis("kept_fraction").reset_index(name="faithfulness")

    @property
    def areas(self) -> pd.DataFrame:
        """Each curve's ``cpr`` and ``cmd`` (NaN where it misses a size), each from its circuits (``cpr_from``,
        ``cmd_from``)."""
        columns = {}
        for area, ranked_by in (("cpr", self.cpr_from), ("cmd", self.cmd_from)):
            column = 0 if area == "cpr" else 1
            columns[area] = {name: cpr_and_cmd(self.grid, points["faithfulness"].tolist())[column]
                             for name, points in self.points_of(ranked_by).groupby("curve", sort=False)}
        names = list(dict.fromkeys([*columns["cpr"], *columns["cmd"]]))
        return pd.DataFrame([{"curve": name, "cpr": columns["cpr"].get(name, math.nan),
                              "cmd": columns["cmd"].get(name, math.nan)} for name in names],
                            columns=["curve", "cpr", "cmd"])

    @property
    def missing(self) -> list[float]:
        """The sizes of the grid at which some curve has no circuit (then there is no CPR or CMD)."""
        points = pd.concat([self.points_of(self.cpr_from), self.points_of(self.cmd_from)])
        return sorted(set(points.loc[points["faithfulness"].isna(), "kept_fraction"]))

    @property
    def area_rankings(self) -> str:
        """Which ranking each area used, for tables: "score" (both areas from the one order, e.g. a mask run's
        log_alpha), "CPR by score, CMD by |score|" (signed scores, MIB's way), "" for circuits given as such."""
        if self.cpr_from == self.cmd_from:
            return self.cpr_from or ""
        return f"CPR by {self.cpr_from}, CMD by {self.cmd_from}"

    @property
    def cpr(self) -> float:
        """Area under f over the grid (MIB's trapezoid), averaged over the curves; NaN when a size is missing."""
        return self._mean_area("cpr")

    @property
    def cmd(self) -> float:
        """Area under |1 - f| over the grid, averaged over the curves; NaN when a size is missing."""
        return self._mean_area("cmd")

    def _mean_area(self, column: str) -> float:
        values = self.areas[column]
        return float(values.mean(skipna=False)) if len(values) else math.nan


def areas_text(curve: FaithfulnessCurve) -> str:
    """"CPR 0.812, CMD 0.204" (with the orders they came from for signed scores: "CPR 0.812 (by score), CMD 0.204
    (by |score|)"), or what is missing for them ("CPR, CMD n/a: no circuit at 0.1%, 0.2%")."""
    if curve.missing:
        return f"CPR, CMD n/a: no circuit at {', '.join(f'{size:.3g}' for size in [100 * m for m in curve.missing])}%"
    if curve.cpr_from != curve.cmd_from:
        return f"CPR {curve.cpr:.3f} (by {curve.cpr_from}), CMD {curve.cmd:.3f} (by {curve.cmd_from})"
    return f"CPR {curve.cpr:.3f}, CMD {curve.cmd:.3f}"
