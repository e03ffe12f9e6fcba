"""Faithfulness over circuit sizes, as the MIB benchmark scores circuit discovery (Mueller et al., ICML 2025):

    f(k) = (m(circuit_k) - m(empty)) / (m(full) - m(empty)),

m a metric of the model's scores (the logit difference by default for a prompt task with distractors),
circuit_k a circuit keeping ``int(k n)`` of the n units or edges (every other one ablated), empty: every one
ablated. f is measured at MIB's ten sizes k (0.1%-100%, ``faithfulness_areas.MIB_GRID``), nothing assumed, and CPR
and CMD are MIB's trapezoids over them (``FaithfulnessCurve``). heurlens' circuits are node circuits (heads and
MLPs: ``Subnetwork``s of a pruning sweep, or units given by name) and edge circuits (``EdgeCircuit``s of ``prune
--level edge``, k over edges, the empty circuit the run on the corrupted prompts); a ranking (a mask run's log_alpha,
attribution scores: ``interventions.rankings``) gives the circuit of every size (``ranking_curve``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any

import pandas as pd
import torch

from heurlens.circuits.drawing import faithfulness_figure as faithfulness_figure  # where it was
from heurlens.circuits.faithfulness_areas import FaithfulnessCurve, grid_count
from heurlens.circuits.settings import UNSET, FaithfulnessSettings, from_keywords
from heurlens.data.prompt_tasks import PromptSet, logit_difference
from heurlens.errors import HeurlensError
from heurlens.interventions.activation_cache import full_model_logits
from heurlens.interventions.circuits import Level, axis_of
from heurlens.interventions.graph import EdgeLayout
from heurlens.interventions.layouts import layout_of
from heurlens.interventions.means import UnitMeans
from heurlens.interventions.rankings import Ranking, check_rankings
from heurlens.interventions.scoring import (
    DEFAULT_ABLATION,
    Method,
    MethodName,
    as_method,
    one_chunk_at_a_time,
    scores_with_masks,
)
from heurlens.interventions.units import UnitsLike, as_units
from heurlens.metrics import metric_value
from heurlens.models.classifier import as_model
from heurlens.protocols import Metric, ModelLike, PreparedModel, Task
from heurlens.pruning.subnetwork import Subnetwork
from heurlens.runtime.argument_checks import checked
from heurlens.runtime.call_context import call_context
from heurlens.runtime.progress import progress_bar
from heurlens.tasks import TaskLike, as_task


@checked
def faithfulness_curve(model: ModelLike, circuits: Sequence[Subnetwork] | Mapping[str, UnitsLike], task: TaskLike,
                       settings: FaithfulnessSettings | None = None, *, means: UnitMeans | None = None,
                       edges: bool = False, progress: bool = True, metric: Any = UNSET, method: Any = UNSET,
                       cache: Any = UNSET, grid: Any = UNSET) -> FaithfulnessCurve:
    """f(k) = (m(circuit) - m(empty)) / (m(full) - m(empty)) of each circuit on ``task``. A circuit is a point of
    its curve at a size of ``grid`` when it keeps exactly ``int(size n)`` items; CPR and CMD need every size
    (``ranking_curve`` cuts a run's ranking at each).

    Args:
        model: a ``HookedModel`` or a bare ``TransformerBridge``.
        circuits: subnetworks or edge circuits (a pruning sweep: each seed's one curve), or kept units by label
            (``{"top 10%": "L9.H6,L9.H9,..."}``: one curve).
        task: the prompts scored.
        settings: the metric, the ablation outside a circuit (None: "corrupt" on edges, MIB's patching, "mean" on
            units), the grid of sizes and the cache (``FaithfulnessSettings``; default: MIB's).
        means: the means mean ablation puts in place.
        edges: score on the edge axis: k the fraction of edges kept, node circuits as the edges between their units
            (``EdgeLayout.edges_between``).
        progress: a bar on stderr.
        metric: deprecated: ``settings.metric``.
        method: deprecated: ``settings.ablation``.
        cache: deprecated: ``settings.cache``.
        grid: deprecated: ``settings.grid``.

    Returns:
        A ``FaithfulnessCurve``: each circuit's f, the curve at the grid's sizes, CPR and CMD."""
    settings = from_keywords(settings, FaithfulnessSettings(), {"metric": metric, "ablation": method, "cache": cache,
                                                               "grid": grid}, "faithfulness_curve")
    model = as_model(model)
    task = as_task(model, task)
    if isinstance(circuits, Mapping):
        named = {label: as_units(units, model.n_layers, model.n_heads) for label, units in circuits.items()}
        curves = dict.fromkeys(named, "circuits")
    else:
        for subnetwork in circuits:
            subnetwork.check_model(model)
        named = {subnetwork.label: list(subnetwork.kept) for subnetwork in circuits}
        if len(named) < len(circuits):
            [(twice, _)] = Counter(sub.label for sub in circuits).most_common(1)
            raise HeurlensError(f"two circuits share the label {twice!r} (the same target and seed, from two "
                                "runs?): give them as {label: subnetwork.kept} with labels of your own")
        curves = {subnetwork.label: f"seed {subnetwork.seed}" for subnetwork in circuits}
    if not named:
        raise HeurlensError("give at least one circuit: subnetworks of a pruning run, or {label: units}")
    records = {} if isinstance(circuits, Mapping) else {circuit.label: circuit for circuit in circuits}
    level = axis_of(list(records.values()), edges)
    layout = layout_of(model, level)
    kept: dict[str, list] = dict(named)
    if isinstance(layout, EdgeLayout):  # a node circuit as the edges between its units (EdgeLayout.edges_between)
        kept = {label: records[label].kept_edges(layout) if label in records else layout.edges_between(units)
                for label, units in named.items()}
    masks, of = [layout.keep_mask(items) for items in kept.values()], layout.n_items
    rows = [(curves[label], label, len(kept_here)) for label, kept_here in kept.items()]
    return _scored(model, task, level, masks, rows, of, settings, means=means, progress=progress)


@checked
def ranking_curve(model: ModelLike, rankings: Ranking | Sequence[Ranking], task: TaskLike,
                  settings: FaithfulnessSettings | None = None, *, means: UnitMeans | None = None,
                  progress: bool = True, metric: Any = UNSET, method: Any = UNSET, cache: Any = UNSET,
                  grid: Any = UNSET) -> FaithfulnessCurve:
    """f at every size of ``grid`` of each ranking's top ``int(size n)`` units or edges, as MIB cuts attribution
    scores. A ``signed`` ranking (attribution scores, a MIB file) is cut by score and by |score|, its CPR taken from
    the first and its CMD from the second, as MIB's scripts report them (``Ranking.area_orders``; a circuit both
    orders keep is scored once).

    Args:
        model: the model the rankings rank (an edge ranking on MIB's graph: its ungrouped copy).
        rankings: one ranking, or several of one level (e.g. a mask run's seeds, ``rankings.ranking_of``): one curve
            each, their CPR and CMD averaged.
        task: as ``faithfulness_curve``'s.
        settings: as ``faithfulness_curve``'s.
        means: as ``faithfulness_curve``'s.
        progress: as ``faithfulness_curve``'s.
        metric: deprecated: ``settings.metric``.
        method: deprecated: ``settings.ablation``.
        cache: deprecated: ``settings.cache``.
        grid: deprecated: ``settings.grid``.

    Returns:
        A ``FaithfulnessCurve`` with a point at every size of the grid."""
    settings = from_keywords(settings, FaithfulnessSettings(), {"metric": metric, "ablation": method, "cache": cache,
                                                               "grid": grid}, "ranking_curve")
    model = as_model(model)
    task = as_task(model, task)
    rankings = [rankings] if isinstance(rankings, Ranking) else list(rankings)
    check_rankings(rankings)
    level: Level = rankings[0].level
    of = items_on(model, level)
    if rankings[0].n_items != of:
        raise HeurlensError(f"the rankings rank {rankings[0].n_items} {level}s and this model has {of}: rank this "
                            "model's (a run of another model, or of the other level?)")
    counts = sorted({grid_count(size, of) for size in settings.grid})
    orders = rankings[0].area_orders()
    two = len(orders) > 1
    masks = [ranking.top(count, by) for ranking in rankings for by in orders for count in counts]
    rows = [(ranking.label, f"{ranking.label}, top {count}" + (f" by {by}" if two else ""), count, by)
            for ranking in rankings for by in orders for count in counts]
    [cpr_from] = [by for by, areas in orders.items() if "cpr" in areas]
    [cmd_from] = [by for by, areas in orders.items() if "cmd" in areas]
    return _scored(model, task, level, masks, rows, of, settings, means=means, progress=progress,
                   areas_from=(cpr_from, cmd_from))


@checked
def keep_mask_curve(model: ModelLike, level: Level, masks: Mapping[str, torch.Tensor], task: TaskLike,
                    settings: FaithfulnessSettings | None = None, *, means: UnitMeans | None = None,
                    progress: bool = True, metric: Any = UNSET, method: Any = UNSET, cache: Any = UNSET,
                    grid: Any = UNSET) -> FaithfulnessCurve:
    """f of circuits given as 0/1 keep masks (e.g. the circuit files of another tool): one curve, a point at each
    size of ``grid`` that a circuit's count matches.

    Args:
        model: the model the masks are on.
        level: "node" (``UnitLayout``'s order) or "edge" (``EdgeLayout``'s).
        masks: each circuit's keep mask (1: kept) by label.
        task: as ``faithfulness_curve``'s.
        settings: as ``faithfulness_curve``'s.
        means: as ``faithfulness_curve``'s.
        progress: as ``faithfulness_curve``'s.
        metric: deprecated: ``settings.metric``.
        method: deprecated: ``settings.ablation``.
        cache: deprecated: ``settings.cache``.
        grid: deprecated: ``settings.grid``.

    Returns:
        A ``FaithfulnessCurve``."""
    settings = from_keywords(settings, FaithfulnessSettings(), {"metric": metric, "ablation": method, "cache": cache,
                                                               "grid": grid}, "keep_mask_curve")
    model = as_model(model)
    task = as_task(model, task)
    of = items_on(model, level)
    for label, mask in masks.items():
        if mask.shape != (of,):
            raise HeurlensError(f"circuit {label!r} has {mask.numel()} entries and this model has {of} {level}s")
    rows = [("circuits", label, int(mask.sum())) for label, mask in masks.items()]
    return _scored(model, task, level, [mask.float() for mask in masks.values()], rows, of, settings, means=means,
                   progress=progress)


def items_on(model: PreparedModel, level: Level) -> int:
    """How many units (``level`` "node": heads and MLPs) or edges ("edge") the model's circuits choose among."""
    return layout_of(model, level).n_items


def _method_on(level: Level, method: MethodName | None) -> Method:
    """The ablation on ``level``: ``method``, by default "corrupt" on edges (MIB's patching) and "mean" on units."""
    return as_method(method) if method else DEFAULT_ABLATION[level]


def _scored(model, task: Task, level: Level, masks: list[torch.Tensor], rows: list[tuple], of: int,
            settings: FaithfulnessSettings, *, means: UnitMeans | None, progress: bool = True,
            areas_from: tuple[str | None, str | None] = (None, None)) -> FaithfulnessCurve:
    """The curve of the circuits ``masks`` (rows: curve, label, items kept and, for a ranking's circuits, the order
    they were cut by; out of ``of``): each distinct circuit scored once with the others ablated, beside the full
    model and the empty circuit, with ``settings``' ablation on ``level`` (``DEFAULT_ABLATION`` when None);
    ``areas_from``: the orders CPR and CMD are taken from (``FaithfulnessCurve``)."""
    metric = settings.metric or _default_metric(task)
    method = _method_on(level, settings.ablation)
    context = call_context(model, cache=settings.cache)
    full_scores = full_model_logits(model, task, context)
    full = metric_value(metric, full_scores, task, "metric")
    keys = [mask.detach().float().cpu().numpy().tobytes() for mask in [*masks, torch.zeros(of)]]
    distinct = {key: place for place, key in enumerate(dict.fromkeys(keys))}  # a circuit -> its place among those scored
    unique = [torch.frombuffer(bytearray(key), dtype=torch.float32) for key in distinct]
    with progress_bar(total=len(unique) * len(task.batches), desc=f"scoring {len(unique)} circuits", unit="pass",
                      disable=not progress) as bar:
        score = partial(scores_with_masks, model, level, task=task, method=method, means=means, context=context,
                        bar=bar)
        metrics = [metric_value(metric, scores, task, "metric") for _, scores in one_chunk_at_a_time(
            unique, full_scores.numel() * 4, score)]
    *values, empty = [metrics[distinct[key]] for key in keys]
    what = f"{layout_of(model, level).noun}s"
    if full == empty:
        raise HeurlensError(f"the metric is {full:g} for the full model and for the model with every {what[:-1]} "
                            "ablated, so faithfulness (m(circuit) - m(empty)) / (m(full) - m(empty)) is undefined: use "
                            f"a metric the {what} change")
    table = pd.DataFrame([{"curve": row[0], "circuit": row[1], "kept_fraction": row[2] / of, f"{what}_kept": row[2],
                           **({"ranked_by": row[3]} if len(row) > 3 else {}),
                           "metric": value, "faithfulness": (value - empty) / (full - empty)}
                          for row, value in zip(rows, values)])
    return FaithfulnessCurve(table, full, empty, of, settings.grid, *areas_from, ablation=method)


def _default_metric(task: Task) -> Metric:
    """The logit difference of a prompt task with distractors (Wang et al.'s IOI metric, MIB's m)."""
    if not isinstance(task, PromptSet) or not task.distractors.shape[1]:
        raise HeurlensError(f"the task {task.name!r} has no distractors, so there is no default logit difference: give "
                            "metric=function(scores, task) (e.g. a logit difference of your answers)")
    return logit_difference
