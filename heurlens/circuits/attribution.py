"""Attribution patching of units and edges: the first-order estimate of what ablating one item (a unit, or an edge
between two) does to a metric m, from a few forward and backward passes per batch,

    delta_m(item) ~ sum over examples and positions of (r - a) . g,

- unit u (node level; Nanda 2023, node EAP): a its activation on the clean input (a head's ``hook_z`` slice, an MLP's
  ``hook_mlp_out``), r what an ablation puts in its place (its mean, zero, or its activation on the corrupted input),
  g = dm/da_u;
- edge w -> v (edge level; EAP, Syed et al. 2023): a the writer's output in the residual stream on the clean input
  (the embeddings, a head's W_O^h z_h, an MLP's output), r its output on the corrupted input (or its mean output
  over a reference set, or zero: MIB's mean and zero ablations, as ``edge_masks``), g = dm/dx_v the gradient
  at the reader's own input (``interventions.graph``: TransformerLens' split query/key/value inputs, MLP input,
  final residual). An edge's patch changes only its reader's input, by r - a.

g is the total derivative (taken through a zero added at each site), either
- EAP (``ig_steps=None``): on the clean run, or
- EAP-IG on the inputs (``ig_steps=n``; Hanna et al. 2024, MIB's EAP-IG-inputs): the mean of g over n runs whose
  input embeddings are x~ + (k / n) (x - x~), k = 0 ... n - 1, from the corrupted input x~ towards the clean x (the
  points EAP-IG takes: n = 1 is the gradient on the corrupted run, TransformerLens' ``attribution_patch`` point).

The sign is the ablation's: delta_m < 0 where ablating the item lowers m (TransformerLens' ``attribution_patch``
reports the patch the other way, corrupted to clean: the same numbers negated). m over the task is the batches'
values weighted by their rows (a mean over examples, such as the logit difference), so delta_m is the mean over
prompts. A unit's score is the sum of its outgoing edges' scores: its output reaches m only through the readers after
it. The tables (``attribution_scores``, ``edge_attribution_scores``) give delta_m; the ``Ranking`` holds -delta_m,
EAP-IG's sign (its metric is the loss -m, so its scores are -delta_m; its files divide them further by its batch
size), so the items that ablating lowers m most come first: a ``signed`` ranking, whose circuit of every size is its
top items by score for CPR and by |score| for CMD, as MIB reports them (``interventions.rankings``).
"""

from __future__ import annotations

from contextlib import nullcontext
from typing import Any, Literal, cast

import pandas as pd
from torch import Tensor

from heurlens.circuits.attribution_passes import Pass, batch_scores
from heurlens.circuits.settings import IG_STEPS as IG_STEPS  # where it was
from heurlens.circuits.settings import UNSET, AttributionSettings, from_keywords
from heurlens.circuits.settings import check_attribution as check_attribution  # where it was
from heurlens.errors import HeurlensError
from heurlens.interventions.circuits import Level
from heurlens.interventions.corruption import corruption_of
from heurlens.interventions.graph import EdgeLayout, reader_inputs
from heurlens.interventions.layouts import layout_of
from heurlens.interventions.means import UnitMeans
from heurlens.interventions.rankings import Ranking
from heurlens.interventions.scoring import Method, unit_replacement
from heurlens.interventions.units import Unit, as_units
from heurlens.models.classifier import as_model
from heurlens.protocols import Metric, ModelLike, PreparedModel, Task
from heurlens.runtime.devices import device_of, to_device
from heurlens.runtime.progress import progress_bar
from heurlens.tasks import TaskLike, as_task, batch_rows, scored_rows
from heurlens.training_helpers import frozen_parameters

AttributionMethod = Literal["eap", "eap-ig"]


def attribution_ranking(model: ModelLike, task: TaskLike, metric: Metric, settings: AttributionSettings | None = None,
                        *, means: UnitMeans | None = None, progress: bool = True, level: Any = UNSET,
                        ig_steps: Any = UNSET, method: Any = UNSET) -> Ranking:
    """Every unit's or edge's estimated drop of ``metric`` when it alone is ablated (-delta_m, the module's formula:
    EAP-IG's sign).

    Args:
        model: a ``HookedModel`` or a bare ``TransformerBridge``.
        task: the prompts attributed over (a task, texts or tokens).
        metric: ``metric(scores, task)`` or ``metric(scores)`` to a one-element tensor with a gradient (e.g.
            ``prompt_tasks.logit_difference``).
        settings: the level, EAP or EAP-IG, the ablation (``AttributionSettings``; default: EAP of the units with
            corrupt ablation).
        means: mean ablation's means (edges: with the embeddings' mean, as ``compute_means`` takes it).
        progress: a bar on stderr, a batch a step.
        level: deprecated: ``settings.level``.
        ig_steps: deprecated: ``settings.ig_steps``.
        method: deprecated: ``settings.ablation``.

    Returns:
        A ``signed`` ``Ranking`` labelled "EAP" or "EAP-IG (n steps)", higher kept first (units in ``UnitLayout``'s
        order, edges in ``EdgeLayout``'s)."""
    settings = from_keywords(settings, AttributionSettings(), {"level": level, "ig_steps": ig_steps, "ablation": method},
                             "attribution_ranking")
    model = as_model(model)
    return ranking_of_attribution(model, as_task(model, task), metric, settings, means, progress)


def ranking_of_attribution(model: PreparedModel, task: Task, metric: Metric, settings: AttributionSettings,
                           means: UnitMeans | None, progress: bool = True) -> Ranking:
    """``attribution_ranking`` on a prepared model and task (the public functions adapt them once)."""
    chosen = layout_of(model, settings.level)
    layout = chosen if isinstance(chosen, EdgeLayout) else None  # None: units, scored at their own hook points
    device = device_of(model)
    method = cast(Method, settings.ablation)
    replacement = None if method == "corrupt" else unit_replacement(model, method, means, device)
    if layout is not None and replacement is not None:
        replacement.embeddings_mean()  # refused by name when missing: the edges out of the embeddings need it
    corruption = corruption_of(task) if method == "corrupt" else None
    total_rows = scored_rows(task)
    total: Tensor | None = None
    bar = progress_bar(task.batches, desc=f"{settings.label} of the {chosen.noun}s", unit="batch",
                       disable=not progress)
    with frozen_parameters(model), (reader_inputs(model) if layout is not None else nullcontext()), bar:
        for index, batch in enumerate(bar):
            batch = to_device(batch, device)
            corrupted = None if corruption is None else to_device(corruption.batches[index], device)
            view = task.batch_task(index) if hasattr(task, "batch_task") else task
            scores = batch_rows(batch) / total_rows * batch_scores(
                model, Pass(batch, corrupted, view, metric), replacement, layout, settings.ig_steps,
                settings.ig_points_per_pass)
            total = scores if total is None else total + scores
    assert total is not None
    return Ranking(settings.label, settings.level, -total.float(), signed=True)


def attribution_scores(model: ModelLike, task: TaskLike, metric: Metric, settings: AttributionSettings | None = None,
                       *, means: UnitMeans | None = None, method: Any = UNSET, ig_steps: Any = UNSET) -> pd.DataFrame:
    """``attribution_ranking`` of the units as a table.

    Args:
        model: as ``attribution_ranking``'s.
        task: as ``attribution_ranking``'s.
        metric: as ``attribution_ranking``'s.
        settings: EAP or EAP-IG and the ablation, at node level (default: EAP with mean ablation).
        means: the unit means mean ablation puts in place.
        method: deprecated: ``settings.ablation``.
        ig_steps: deprecated: ``settings.ig_steps``.

    Returns:
        One row per unit (layer order): ``unit`` and ``score``, delta_m, the estimated change of ``metric`` when the
        unit alone is ablated."""
    settings = from_keywords(settings, AttributionSettings(ablation="mean"), {"ablation": method, "ig_steps": ig_steps},
                             "attribution_scores")
    return _table(model, task, metric, settings, means, "node", "attribution_scores")


def edge_attribution_scores(model: ModelLike, task: TaskLike, metric: Metric,
                            settings: AttributionSettings | None = None, *, means: UnitMeans | None = None,
                            ig_steps: Any = UNSET, method: Any = UNSET) -> pd.DataFrame:
    """``attribution_ranking`` of the edges as a table.

    Args:
        model: as ``attribution_ranking``'s.
        task: as ``attribution_ranking``'s.
        metric: as ``attribution_ranking``'s.
        settings: EAP or EAP-IG and what the edge alone carries, at edge level (default: EAP, corrupt ablation).
        means: the means, with the embeddings' (``compute_means``), for mean ablation.
        ig_steps: deprecated: ``settings.ig_steps``.
        method: deprecated: ``settings.ablation``.

    Returns:
        One row per edge (``EdgeLayout``'s order): ``edge`` (``"L0.H1->L1.H0.v"``) and ``score`` (delta_m)."""
    settings = from_keywords(settings, AttributionSettings(level="edge"), {"ablation": method, "ig_steps": ig_steps},
                             "edge_attribution_scores")
    return _table(model, task, metric, settings, means, "edge", "edge_attribution_scores")


def _table(model: ModelLike, task: TaskLike, metric: Metric, settings: AttributionSettings, means: UnitMeans | None,
           level: Level, function: str) -> pd.DataFrame:
    """The scores (delta_m) of every item of ``level`` by name; ``settings`` of another level refused."""
    if settings.level != level:
        raise HeurlensError(f"{function}() scores {level}s and settings.level is {settings.level!r}: give "
                            f"AttributionSettings(level={level!r}, ...)")
    model = as_model(model)
    layout = layout_of(model, level)
    ranking = ranking_of_attribution(model, as_task(model, task), metric, settings, means)
    return pd.DataFrame({layout.noun: layout.item_names(), "score": (-ranking.scores).tolist()})


def attribution_circuits(scores: pd.DataFrame, fractions: list[float], n_layers: int, n_heads: int
                         ) -> dict[str, list[Unit]]:
    """The circuit of each fraction of units kept: the round(k n) units of highest |score| (ties: layer order).

    Args:
        scores: ``attribution_scores``' table.
        fractions: the fractions of units kept.
        n_layers: the model's layers.
        n_heads: its heads a layer.

    Returns:
        Each circuit's units, labelled ``attribution, k = 0.25``."""
    order = scores.assign(size=scores["score"].abs()).sort_values("size", ascending=False, kind="stable")["unit"]
    circuits = {}
    for fraction in fractions:
        count = round(fraction * len(order))
        circuits[f"attribution, k = {fraction:.3g}"] = as_units(list(order.iloc[:count]), n_layers, n_heads)
    return circuits
