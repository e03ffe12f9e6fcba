"""Scoring masked models, node and edge circuits alike: what a pruned component is replaced by (``Method``), the
scores of a list of keep masks (``scores_with_masks``, through the one loop ``resumed_passes.masked_scores``), and
the one results table (``masked_table``: the same columns for unit groups, subnetworks and edge circuits).

Methods: "mean" (a unit's mean over a reference set, ``heurlens.interventions.means``), "zero", and "corrupt" (its
activation on the example's corrupted input, ``heurlens.interventions.corruption``; TransformerLens'
``ablation="corrupt"``, "interchange" in heurlens 0.1.0). An edge circuit's pruned edges carry their writers'
corrupted outputs, means or zeros alike (``interventions.edge_masks``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from functools import partial
from typing import Literal, TypeVar, cast

import pandas as pd
import torch
from jaxtyping import Float
from torch import Tensor
from tqdm.auto import tqdm

from heurlens.errors import HeurlensError
from heurlens.evaluate import accuracy_metric, mean_kl
from heurlens.interventions.activation_cache import full_model_logits
from heurlens.interventions.circuits import Level, mask_hooks
from heurlens.interventions.corruption import corruption_of
from heurlens.interventions.graph import EdgeLayout
from heurlens.interventions.layouts import layout_of
from heurlens.interventions.means import UnitMeans, zero_means
from heurlens.interventions.resumed_passes import masked_scores
from heurlens.metrics import metric_value
from heurlens.protocols import MaskHooks, Metrics, PreparedModel, Task
from heurlens.runtime.call_context import CallContext
from heurlens.runtime.deprecations import DeprecatedMethod, ablation_name
from heurlens.runtime.progress import progress_bar

Method = Literal["mean", "zero", "corrupt"]  # what an ablated unit takes: its mean, zero, its value on the corrupted input
DEFAULT_ABLATION: dict[Level, Method] = {"node": "mean", "edge": "corrupt"}  # units: the Heuristic Core's; edges: MIB's
MethodName = Method | DeprecatedMethod  # what the public doors take: a Method, or "interchange" with a warning
T = TypeVar("T")


def as_method(method: MethodName) -> Method:
    """``method`` with "interchange" read as "corrupt" and a DeprecationWarning (``heurlens.runtime.deprecations``)."""
    return cast(Method, ablation_name(method))


def unit_replacement(model: PreparedModel, method: Method, means: UnitMeans | None, device: torch.device
                     ) -> UnitMeans:
    """What ablated units are replaced by: ``means`` (checked to fit the model) or zeros, on the model's device."""
    if method not in ("mean", "zero", "corrupt"):
        raise HeurlensError(f"unknown ablation method {method!r}; use mean, zero or corrupt")
    if method == "corrupt":
        raise HeurlensError("corrupt ablation replaces a unit by its activation on each example's corrupted "
                            "input, which a fixed set of hooks cannot know: use heurlens.ablate or ablate_groups with a "
                            "task that carries its corruption")
    if method == "zero":
        replacement = zero_means(model, device)
    elif means is None:
        raise HeurlensError("mean ablation needs the units' means: pass means=compute_means(model, reference)")
    else:
        replacement = means
    replacement.check_fits(model)
    return replacement.to(device)


def masking(model: PreparedModel, level: Level, method: Method, means: UnitMeans | None, device: torch.device
            ) -> MaskHooks:
    """The hooks that apply keep masks of ``level`` with ``method`` (checked and moved once for every mask; corrupt
    ablation's replacements, units' and edges' alike, are set before every batch)."""
    if method == "corrupt" and isinstance(layout_of(model, level), EdgeLayout):
        return mask_hooks(model, level, device=device)  # edges: the writers' corrupted outputs, set per batch
    replacement = zero_means(model, device) if method == "corrupt" else unit_replacement(model, method, means, device)
    return mask_hooks(model, level, replacement, device)


def scores_with_masks(model: PreparedModel, level: Level, masks: Sequence[Float[Tensor, " mask"]], task: Task,
                      method: Method, means: UnitMeans | None, context: CallContext, bar: tqdm | None = None
                      ) -> list[Float[Tensor, "row output"]]:
    """The scores on ``task`` (CPU, float32) of the model with each keep mask of ``level`` (flat, 1: kept), the
    pruned components replaced by ``method``: one ``masked_scores`` loop for units and edges.

    Args:
        model: a prepared model (``as_model``).
        level: "node" or "edge".
        masks: keep masks (flat, 1: kept).
        task: the task scored.
        method: "mean", "zero" or "corrupt".
        means: the means (mean ablation).
        context: the call's context (``runtime.call_context``: device, precision, cache use).
        bar: a progress bar to advance (a pass a step).

    Returns:
        The scores of each masked model ``[row, output]``."""
    hooks = masking(model, level, method, means, context.device)
    corruption = corruption_of(task) if method == "corrupt" else None
    return masked_scores(model, hooks, masks, task, context, bar, corruption)


def masked_table(model: PreparedModel, level: Level, masks: Sequence[Float[Tensor, " mask"]], labels: Sequence[str],
                 tasks: Sequence[Task], method: Method, means: UnitMeans | None,
                 full_logits: dict[str, Tensor] | None, context: CallContext, progress: bool = False,
                 desc: str = "ablations", metrics: Metrics | None = None) -> pd.DataFrame:
    """Each metric of the full and each masked model on each task, the change and the KL, for unit groups,
    subnetworks and edge circuits alike: columns ``ablated`` (the mask's label), eval_set, examples, per metric
    ``full_{name}`` and ``ablated_{name}``, ``delta`` (``delta_{name}`` for the metrics after the first), kl (mean
    KL(full || masked), nats); rows mask by mask. Metrics default to the task's accuracy.

    Args:
        model: a prepared model (``as_model``).
        level: "node" or "edge".
        masks: keep masks (flat, 1: kept).
        labels: each mask's label (the ``ablated`` column).
        tasks: the evaluation sets.
        method: "mean", "zero" or "corrupt".
        means: the means (mean ablation).
        full_logits: the full model's logits by set name (None: computed).
        context: the call's context (``runtime.call_context``: device, precision, cache use).
        progress: a bar on stderr.
        desc: the bar's label.
        metrics: column name -> ``metric(scores, task)``.

    Returns:
        The table, rows mask by mask."""
    if not tasks:
        raise HeurlensError("give at least one evaluation set (eval_sets)")
    metrics = {"accuracy": accuracy_metric(model)} if metrics is None else dict(metrics)
    rows: list[list[dict]] = [[] for _ in masks]
    bar = progress_bar(total=len(masks) * sum(len(s.batches) for s in tasks), desc=desc, unit="pass", disable=not progress,
                       short=True)
    hooks = masking(model, level, method, means, context.device)
    starts = set()
    for mask in masks:
        hooks.set_masks(mask.to(context.device))
        starts.add(hooks.start_layer())
    for task in tasks:
        full = (full_logits or {}).get(task.name)
        if full is None:  # and, from the same pass, the residual streams the masked passes start from
            full = full_model_logits(model, task, context, streams_for=starts)
        full_values = {name: metric_value(metric, full, task, name) for name, metric in metrics.items()}
        corruption = corruption_of(task) if method == "corrupt" else None
        score = partial(masked_scores, model, hooks, task=task, context=context, bar=bar, corruption=corruption)
        for index, scores in one_chunk_at_a_time(masks, full.numel() * 4, score):
            rows[index].append({"ablated": labels[index], "eval_set": task.name, "examples": len(task),
                                **_metric_columns(full_values, {name: metric_value(metric, scores, task, name)
                                                                for name, metric in metrics.items()}),
                                "kl": mean_kl(full, scores)})
    bar.close()
    return pd.DataFrame([row for mask_rows in rows for row in mask_rows])


SCORES_IN_MEMORY_BYTES = 2**30  # masked scores held at once by one_chunk_at_a_time (float32), about this at most


def group_chunks(count: int, scores_bytes: int) -> list[slice]:
    """``count`` masked models in consecutive chunks whose scores (``scores_bytes`` each: rows x outputs x 4) fit
    in ``SCORES_IN_MEMORY_BYTES`` together, one model at least."""
    per_chunk = max(1, SCORES_IN_MEMORY_BYTES // max(1, scores_bytes))
    return [slice(start, start + per_chunk) for start in range(0, count, per_chunk)]


def one_chunk_at_a_time(models: Sequence[T], scores_bytes: int, score: Callable[[Sequence[T]], list[Tensor]]
                        ) -> Iterator[tuple[int, Float[Tensor, "row output"]]]:
    """(index, scores) of each of ``models`` (keep masks) in turn, ``score(chunk)`` giving the scores of a chunk of
    them (``group_chunks``), so that a caller that reduces each to numbers holds one chunk's scores, not every
    model's: a scan of a next-token model's 270 heads on 256 prompts and 49,152 tokens would otherwise hold 13.6 GB.
    The passes of a chunk share each batch (and its residual stream or corrupted run); each further chunk runs them
    again."""
    for chunk in group_chunks(len(models), scores_bytes):
        scores = score(models[chunk])
        for index in range(chunk.start, chunk.start + len(scores)):
            yield index, scores.pop(0)  # not kept here: freed once the caller is done with it


def _metric_columns(full: dict[str, float], ablated: dict[str, float]) -> dict[str, float]:
    """full_X and ablated_X per metric, then the changes: ``delta`` for the first metric, ``delta_X`` for others."""
    columns: dict[str, float] = {}
    for name in full:
        columns |= {f"full_{name}": full[name], f"ablated_{name}": ablated[name]}
    for index, name in enumerate(full):
        columns["delta" if index == 0 else f"delta_{name}"] = ablated[name] - full[name]
    return columns
