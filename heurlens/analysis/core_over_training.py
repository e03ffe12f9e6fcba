"""The heuristic core over training (Heuristic Core paper, Section 4): are the heads of the final model's core
already kept by the subnetworks of earlier fine-tuning checkpoints?

For each checkpoint (its pruning runs, as ``heurlens effective-size`` writes them: one folder per
checkpoint, ``step-N``) and each core head, the fraction of that checkpoint's subnetworks at one
target sparsity that keep the head. The paper finds the core heads present in the subnetworks of
the checkpoint just before the model starts to generalise.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import pandas as pd
import plotly.graph_objects as go

from heurlens.analysis.effective_size import checkpoint_step
from heurlens.errors import HeurlensError
from heurlens.interventions.units import Unit
from heurlens.pruning.run_folder import find_subnetworks
from heurlens.pruning.subnetwork import Subnetwork


def checkpoint_subnetworks(folder: Path, sparsity: float) -> dict[int, list[Subnetwork]]:
    """The subnetworks at ``sparsity`` of every checkpoint run under ``folder`` (``folder/<checkpoint>/
    sparsity-*/seed-*``), by training step (from the checkpoint folder's name, e.g. ``step-200``)."""
    runs: dict[int, list[Subnetwork]] = {}
    checkpoints = sorted(p for p in Path(folder).iterdir() if p.is_dir() and find_subnetworks(p))
    for index, checkpoint in enumerate(checkpoints):
        found = [s for s in map(Subnetwork.load, find_subnetworks(checkpoint)) if abs(s.target_sparsity - sparsity) < 1e-9]
        if found:
            runs[checkpoint_step(checkpoint, index)] = found
    if not runs:
        raise HeurlensError(f"{folder} holds no checkpoint runs with subnetworks at sparsity {sparsity:g}; make them "
                            f"with heurlens effective-size --out {folder} (then runs/ft/checkpoints/*)")
    return dict(sorted(runs.items()))


def core_presence(core: Sequence[Unit], runs: Mapping[int, Sequence[Subnetwork]]) -> pd.DataFrame:
    """One row per (checkpoint step, core head): how many of that checkpoint's subnetworks keep the head,
    out of how many, and the fraction."""
    if not core:
        raise HeurlensError("the core is empty: give the heads to follow (core=L2.H5,...) or a run with a core")
    rows = []
    for step, subnetworks in runs.items():
        for unit in core:
            kept = sum(unit in set(s.kept) for s in subnetworks)
            rows.append({"step": step, "unit": str(unit), "kept": kept, "subnetworks": len(subnetworks),
                         "frequency": kept / len(subnetworks)})
    return pd.DataFrame(rows)


def core_presence_figure(table: pd.DataFrame) -> go.Figure:
    """Heatmap: core heads (rows) against checkpoint step (columns), the fraction of subnetworks keeping each."""
    wide = table.pivot_table(index="unit", columns="step", values="frequency", sort=False)
    figure = go.Figure(go.Heatmap(z=wide.values, x=[str(c) for c in wide.columns], y=list(wide.index), zmin=0, zmax=1,
                                  colorscale="Blues", colorbar={"title": "kept by"}))
    figure.update_layout(title="Core heads in the subnetworks of each checkpoint", xaxis_title="training step",
                         yaxis_title="core head")
    return figure
