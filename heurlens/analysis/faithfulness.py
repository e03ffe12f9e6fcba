"""Faithfulness over circuit sizes, as the MIB benchmark scores circuit discovery (Mueller et al., ICML 2025):

    f(k) = (m(circuit_k) - m(empty)) / (m(full) - m(empty)),

m a metric of the model's scores (the logit difference by default for a prompt task with distractors),
circuit_k a circuit keeping the fraction k of the units (every other unit ablated), empty: every unit ablated.
CPR is the area under f over k in [0, 1] (higher is better), CMD the area under |1 - f| (lower is better), both
by the trapezoidal rule over the sizes measured, with f(0) = 0 and f(1) = 1 by definition (MIB integrates over its
sizes 0.1%-100% the same way). heurlens' circuits are node circuits: heads and MLPs (``Subnetwork``s of a pruning
sweep over sparsities, or any units given by name) or edge circuits (``EdgeCircuit``s of ``prune --level edge``: k the
fraction of edges kept, the empty circuit the run on the corrupted prompts).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import partial

import pandas as pd
import torch

from heurlens.data.prompt_tasks import PromptSet, logit_difference
from heurlens.errors import HeurlensError
from heurlens.interventions.activation_cache import full_model_logits
from heurlens.interventions.circuits import axis_of
from heurlens.interventions.graph import edge_layout
from heurlens.interventions.means import UnitMeans
from heurlens.interventions.scoring import MethodName, as_method, one_chunk_at_a_time, scores_with_masks
from heurlens.interventions.units import UnitLayout, UnitsLike, as_units
from heurlens.metrics import metric_value
from heurlens.models.classifier import as_model
from heurlens.protocols import Metric, ModelLike, Task
from heurlens.pruning.subnetwork import Subnetwork
from heurlens.runtime.argument_checks import checked
from heurlens.runtime.call_context import call_context
from heurlens.tasks import TaskLike, as_task


@dataclass
class FaithfulnessCurve:
    """One circuit a row (``circuits``: label, kept_fraction, units_kept or edges_kept, metric, faithfulness), the
    metric of the full and of the empty model, and the curve's areas."""

    circuits: pd.DataFrame
    full: float
    empty: float

    @property
    def curve(self) -> pd.DataFrame:
        """Mean faithfulness per kept fraction (over the circuits of that size, e.g. seeds), with the endpoints
        f(0) = 0 and f(1) = 1 added where not measured."""
        means = self.circuits.groupby("kept_fraction")["faithfulness"].mean()
        ends = pd.Series({0.0: 0.0, 1.0: 1.0})
        return (pd.concat([ends[~ends.index.isin(means.index)], means]).sort_index()
                .rename_axis("kept_fraction").reset_index(name="faithfulness"))

    @property
    def cpr(self) -> float:
        """Area under f(k) over k in [0, 1] (trapezoidal): 1 for a circuit as good as the model at any size."""
        return _area(self.curve, lambda f: f)

    @property
    def cmd(self) -> float:
        """Area under |1 - f(k)| over k in [0, 1] (trapezoidal): 0 for a perfect curve."""
        return _area(self.curve, lambda f: (1 - f).abs())


def _area(curve: pd.DataFrame, height) -> float:
    k, f = curve["kept_fraction"], height(curve["faithfulness"])
    return float(((k.diff()) * (f + f.shift()) / 2).sum())


@checked
def faithfulness_curve(model: ModelLike, circuits: Sequence[Subnetwork] | Mapping[str, UnitsLike], task: TaskLike, *,
                       metric: Metric | None = None, method: MethodName | None = None, means: UnitMeans | None = None,
                       cache: bool | None = None, edges: bool = False) -> FaithfulnessCurve:
    """f(k) of each circuit on ``task``: ``circuits`` are subnetworks (a pruning sweep) or kept units by label
    (``{"top 10%": "L9.H6,L9.H9,..."}``); every unit outside a circuit is ablated by ``method`` ("mean" with
    ``means``, "zero", or "corrupt": its activation on the example's corrupted prompt). ``metric``: a function of
    (scores, task) or (scores) to one number; default the logit difference of a prompt task with distractors.
    ``edges``: k is the fraction of edges kept (node circuits as the edges between their units,
    ``EdgeLayout.edges_between``), every other edge carrying its writer's output on the corrupted prompt, as edge
    circuits (``prune --level edge``) are always scored: ``method`` None is "corrupt" there and "mean" for units,
    and another ``method`` on the edge axis is refused."""
    model = as_model(model)
    task = as_task(model, task)
    method = as_method(method) if method else None
    metric = metric or _default_metric(task)
    context = call_context(model, cache=cache)
    full_scores = full_model_logits(model, task, context)
    full = metric_value(metric, full_scores, task, "metric")
    if isinstance(circuits, Mapping):
        named = {label: as_units(units, model.n_layers, model.n_heads) for label, units in circuits.items()}
    else:
        for subnetwork in circuits:
            subnetwork.check_model(model)
        named = {subnetwork.label: list(subnetwork.kept) for subnetwork in circuits}
        if len(named) < len(circuits):
            [(twice, _)] = Counter(sub.label for sub in circuits).most_common(1)
            raise HeurlensError(f"two circuits share the label {twice!r} (the same target and seed, from two "
                                "runs?): give them as {label: subnetwork.kept} with labels of your own")
    if not named:
        raise HeurlensError("give at least one circuit: subnetworks of a pruning run, or {label: units}")
    records = {} if isinstance(circuits, Mapping) else {circuit.label: circuit for circuit in circuits}
    level = axis_of(list(records.values()), edges)
    if level == "edge" and method not in (None, "corrupt"):
        raise HeurlensError(f"method={method!r}: on the edge axis every edge outside a circuit carries its writer's "
                            "output on the corrupted prompt (corrupt ablation), the only ablation heurlens defines "
                            "for edges; give method='corrupt' (or None)")
    if level == "edge":  # a node circuit as the edges between its units (EdgeLayout.edges_between)
        layout = edge_layout(model)
        kept: dict[str, list] = {label: records[label].kept_edges(layout) if label in records
                                 else layout.edges_between(units) for label, units in named.items()}
        masks, of = [layout.keep_mask(edges) for edges in kept.values()], layout.n_edges
    else:
        units_layout = UnitLayout(model.n_layers, model.n_heads)
        kept = dict(named)
        masks, of = [units_layout.keep_mask(units) for units in kept.values()], units_layout.n_units
    score = partial(scores_with_masks, model, level, task=task, method=method or ("corrupt" if level == "edge" else
                                                                                  "mean"), means=means, context=context)
    *values, empty = [metric_value(metric, scores, task, "metric") for _, scores in one_chunk_at_a_time(
        masks + [torch.zeros(of)], full_scores.numel() * 4, score)]
    return _curve(full, empty, [(label, len(kept_here), of, value)
                                for (label, kept_here), value in zip(kept.items(), values)],
                  "edges" if level == "edge" else "units")


def _curve(full: float, empty: float, circuits: list[tuple[str, int, int, float]], what: str) -> FaithfulnessCurve:
    """The curve of circuits given as (label, kept, of how many, metric), ``what`` they keep (units or edges)."""
    if full == empty:
        raise HeurlensError(f"the metric is {full:g} for the full model and for the model with every {what[:-1]} "
                            "ablated, so faithfulness (m(circuit) - m(empty)) / (m(full) - m(empty)) is undefined: use "
                            f"a metric the {what} change")
    rows = []
    for label, kept, total, value in circuits:
        rows.append({"circuit": label, "kept_fraction": kept / total, f"{what}_kept": kept,
                     "metric": value, "faithfulness": (value - empty) / (full - empty)})
    return FaithfulnessCurve(pd.DataFrame(rows), full, empty)


def _default_metric(task: Task) -> Metric:
    """The logit difference of a prompt task with distractors (Wang et al.'s IOI metric, MIB's m)."""
    if not isinstance(task, PromptSet) or not task.distractors.shape[1]:
        raise HeurlensError(f"the task {task.name!r} has no distractors, so there is no default logit difference: give "
                            "metric=function(scores, task) (e.g. a logit difference of your answers)")
    return logit_difference


def faithfulness_figure(curves: Mapping[str, FaithfulnessCurve], task_name: str):
    """The curves (plotly), one per discovery method: mean f against the fraction of units kept, each circuit a
    point, CPR and CMD in the legend."""
    import plotly.graph_objects as go

    figure = go.Figure()
    for name, curve in curves.items():
        figure.add_trace(go.Scatter(x=curve.curve["kept_fraction"], y=curve.curve["faithfulness"], mode="lines+markers",
                                    name=f"{name} (CPR {curve.cpr:.3f}, CMD {curve.cmd:.3f})"))
        figure.add_trace(go.Scatter(x=curve.circuits["kept_fraction"], y=curve.circuits["faithfulness"],
                                    mode="markers", text=curve.circuits["circuit"], name=f"{name}: circuits",
                                    marker={"symbol": "x"}))
    figure.add_hline(y=1.0, line_dash="dot")
    figure.update_layout(title=f"Faithfulness on {task_name}", xaxis_title="fraction of units kept (k)",
                         yaxis_title="f(k)")
    return figure
