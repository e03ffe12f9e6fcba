"""Effective size over training (seed 001, Section 4, Figure 6).

A subnetwork is *faithful* to its model on a data set D when their accuracies on D differ by at
most 3 points; the *effective size* on D is the size (kept heads and MLPs) of the smallest
faithful subnetwork among those found by pruning at sparsities in steps of 5%. D is the
in-domain set, the out-of-domain sets (mean accuracy over the HANS-style subcases), or the equal
mix of the two.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from heurlens.errors import HeurlensError
from heurlens.evaluate import EvalSet
from heurlens.means import UnitMeans
from heurlens.models.classifier import HookedClassifier
from heurlens.pruning.runs import evaluate_subnetworks, prune
from heurlens.pruning.train import PruneConfig

SPARSITY_GRID = [round(0.05 * i, 2) for i in range(1, 20)]  # 5%, 10%, ..., 95%
DATA_KINDS = ("in_domain", "ood", "mixed")


def accuracy_by_kind(evaluation: pd.DataFrame) -> pd.DataFrame:
    """Per subnetwork (and the full model) of ``evaluate_subnetworks``' table: accuracy in-domain (its
    first eval set), OOD (mean over the other sets) and mixed (the average of the two)."""
    first = evaluation["eval_set"].iloc[0]
    keys = ["subnetwork", "target_sparsity", "achieved_sparsity", "seed"]
    grouped = evaluation.assign(in_domain=evaluation["eval_set"] == first).groupby(keys, sort=False, dropna=False)
    rows = []
    for key, group in grouped:
        in_domain = group.loc[group["in_domain"], "accuracy"].mean()
        ood = group.loc[~group["in_domain"], "accuracy"].mean()
        if pd.isna(ood):
            raise HeurlensError("effective size needs out-of-domain sets next to the in-domain one")
        rows.append(dict(zip(keys, key)) | {"in_domain": in_domain, "ood": ood, "mixed": (in_domain + ood) / 2})
    return pd.DataFrame(rows)


def effective_sizes(evaluation: pd.DataFrame, n_units: int, tolerance: float = 0.03) -> dict[str, int]:
    """Kept units of the smallest faithful subnetwork per data kind (``n_units`` when none is faithful)."""
    table = accuracy_by_kind(evaluation)
    full = table[table["subnetwork"] == "full model"].iloc[0]
    subs = table[table["subnetwork"] != "full model"]
    sizes = {}
    for kind in DATA_KINDS:
        faithful = subs[(subs[kind] - full[kind]).abs() <= tolerance]
        sizes[kind] = n_units if faithful.empty else int(round(n_units * (1 - faithful["achieved_sparsity"].max())))
    return sizes


def checkpoint_step(path: Path, index: int) -> int:
    """Training step of a checkpoint directory named like ``step-1200`` (else its position)."""
    match = re.search(r"(\d+)$", Path(path).name)
    return int(match.group(1)) if match else index


def effective_size_of(model: HookedClassifier, train: EvalSet, eval_sets: list[EvalSet], means: UnitMeans,
                      sparsities: Sequence[float] = SPARSITY_GRID, seeds: Sequence[int] = range(3),
                      out: Path | None = None, config: PruneConfig = PruneConfig(), tolerance: float = 0.03,
                      search: Literal["grid", "bisect"] = "grid",
                      progress: bool = True) -> tuple[dict[str, int], pd.DataFrame]:
    """Prune ``model`` at the sparsities (every seed), evaluate, and return (effective sizes, evaluation).

    ``search="grid"`` prunes at every sparsity (the paper). ``"bisect"`` assumes faithfulness only
    gets lost as sparsity grows and bisects the sorted grid for each data kind, pruning at about
    log2(len(grid)) sparsities per kind instead of all of them.
    """
    grid = sorted(sparsities)
    n_units = model.n_layers * (model.n_heads + 1)
    evaluated: dict[float, pd.DataFrame] = {}

    def evaluation_at(sparsity: float) -> pd.DataFrame:
        if sparsity not in evaluated:
            subnetworks = prune(model, train, sparsity, seeds, out, config, means, progress=progress)
            evaluated[sparsity] = evaluate_subnetworks(model, subnetworks, eval_sets, means)
        return evaluated[sparsity]

    if search == "grid":
        for sparsity in grid:
            evaluation_at(sparsity)
    elif search == "bisect":
        for kind in DATA_KINDS:
            low, high = -1, len(grid)  # grid[low] is faithful (or low = -1), grid[high] is not (or = len)
            while high - low > 1:
                middle = (low + high) // 2
                if effective_sizes(evaluation_at(grid[middle]), n_units, tolerance)[kind] < n_units:
                    low = middle
                else:
                    high = middle
    else:
        raise HeurlensError(f"unknown search {search!r}; use grid or bisect")
    tables = [evaluated[s] for s in sorted(evaluated)]
    evaluation = pd.concat([tables[0]] + [t[t["subnetwork"] != "full model"] for t in tables[1:]], ignore_index=True)
    return effective_sizes(evaluation, n_units, tolerance), evaluation


def effective_size_figure(table: pd.DataFrame) -> go.Figure:
    """Figure 6: accuracy and effective size against training step, per data kind.

    ``table`` has one row per checkpoint: step, full-model accuracy ``acc_<kind>`` and effective
    size ``size_<kind>`` for each kind."""
    figure = make_subplots(rows=1, cols=2, subplot_titles=("Accuracy of the full model", "Effective size"))
    for kind in DATA_KINDS:
        figure.add_trace(go.Scatter(x=table["step"], y=100 * table[f"acc_{kind}"], name=f"accuracy ({kind})",
                                    mode="lines+markers"), row=1, col=1)
        figure.add_trace(go.Scatter(x=table["step"], y=table[f"size_{kind}"], name=f"effective size ({kind})",
                                    mode="lines+markers"), row=1, col=2)
    figure.update_xaxes(title_text="training step")
    figure.update_yaxes(title_text="accuracy (%)", row=1, col=1)
    figure.update_yaxes(title_text="kept heads + MLPs", row=1, col=2)
    return figure
