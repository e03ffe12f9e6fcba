"""Accuracy against sparsity (Heuristic Core paper, Section 3, Figure 2): how much subnetworks keep of the full
model's in-domain and out-of-domain accuracy as more heads and MLPs are pruned.

In-domain accuracy is the first evaluation set's, out-of-domain the mean over the others (the
HANS-style subcases), as ``effective_size.accuracy_by_kind`` defines them. Per target sparsity the
curve shows the mean over seeds and their spread (min and max).
"""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from heurlens.analysis.effective_size import accuracy_by_kind

KINDS = {"in_domain": "in-domain", "ood": "out-of-domain"}


def accuracy_by_sparsity(evaluation: pd.DataFrame) -> pd.DataFrame:
    """One row per target sparsity (0 = the full model) of ``evaluate_subnetworks``' table: seeds, and the
    mean, min and max over seeds of in-domain and out-of-domain accuracy."""
    table = accuracy_by_kind(evaluation)
    grouped = table.groupby("target_sparsity", sort=True)
    summary = grouped.size().rename("seeds").to_frame()
    for kind in KINDS:
        summary[f"{kind}_mean"] = grouped[kind].mean()
        summary[f"{kind}_min"] = grouped[kind].min()
        summary[f"{kind}_max"] = grouped[kind].max()
    return summary.reset_index()


def highest_faithful_sparsity(evaluation: pd.DataFrame, margin: float = 0.03) -> float:
    """The highest target sparsity at which every seed's in-domain accuracy is at least the full model's
    minus ``margin`` (0.0 when none is)."""
    summary = accuracy_by_sparsity(evaluation)
    full = summary.loc[summary["target_sparsity"] == 0, "in_domain_mean"].iloc[0]
    faithful = summary[(summary["target_sparsity"] > 0) & (summary["in_domain_min"] >= full - margin)]
    return float(faithful["target_sparsity"].max()) if len(faithful) else 0.0


def accuracy_curve_figure(evaluation: pd.DataFrame) -> go.Figure:
    """Figure 2's layout: accuracy (%) against sparsity, mean over seeds with the min-max spread as error bars."""
    summary = accuracy_by_sparsity(evaluation)
    figure = go.Figure()
    for kind, label in KINDS.items():
        mean = 100 * summary[f"{kind}_mean"]
        figure.add_trace(go.Scatter(
            x=summary["target_sparsity"], y=mean, mode="lines+markers", name=label,
            error_y={"type": "data", "symmetric": False, "array": 100 * summary[f"{kind}_max"] - mean,
                     "arrayminus": mean - 100 * summary[f"{kind}_min"]}))
    figure.update_layout(title="Accuracy against sparsity (mean over seeds, min-max bars)",
                         xaxis_title="sparsity (fraction of heads and MLPs pruned)", yaxis_title="accuracy (%)")
    return figure
