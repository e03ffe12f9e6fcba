"""Metrics: one signature for reporting and for pruning.

A metric is a function of the model's scores (``[row, output]``: one row per example, or per scored position,
``heurlens.tasks``) to a float or a one-element tensor, written in one of two forms:

- ``metric(scores, task)``: the task gives per-example data (``task.answers``, ``task.labels``...);
- ``metric(scores)``: TransformerLens' form (``patching_metric(logits)``), whatever it needs closed over.

Tables report ``metric_value`` (a float). Pruning can keep a metric instead of the KL: ``metric_loss`` makes of
it the loss (m(masked scores) - m(full scores))^2 on each batch, the task seen as that batch alone
(``batch_task``), so a logit difference is written once, differentiable in torch, and used for both.
"""

from __future__ import annotations

import inspect
from typing import Any, Literal, cast

from jaxtyping import Float
from torch import Tensor

from heurlens.errors import HeurlensError
from heurlens.protocols import Loss, Metric, Task
from heurlens.tasks import batch_rows


def takes_task(metric: Metric) -> bool:
    """Whether ``metric`` is the two-argument form (scores, task): it has a second positional parameter."""
    try:
        parameters = inspect.signature(metric).parameters.values()
    except (TypeError, ValueError):  # a builtin or C callable: assume the documented two-argument form
        return True
    positional = [p for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL)]
    return len(positional) != 1 or positional[0].kind == positional[0].VAR_POSITIONAL


def metric_output(metric: Metric, scores: Float[Tensor, "row output"], task: Task) -> Any:
    """``metric`` called in its own form: with the task or without."""
    return metric(scores, task) if takes_task(metric) else metric(scores)


def metric_value(metric: Metric, scores: Float[Tensor, "row output"], task: Task, name: str = "metric") -> float:
    """The metric as a table reports it: a float (a one-element tensor converted; anything else refused).

    Args:
        metric: ``metric(scores, task)`` or ``metric(scores)``.
        scores: the model's scores ``[row, output]``.
        task: the task scored.
        name: the metric's name in the refusal of a value that is not a number.

    Returns:
        The metric as a float."""
    value = metric_output(metric, scores, task)
    if isinstance(value, Tensor):
        if value.numel() != 1:
            raise HeurlensError(f"the metric {name!r} returned a tensor of shape {tuple(value.shape)}: return one "
                                "number (e.g. .mean() over the examples)")
        return float(value.detach())
    try:
        return float(value)
    except (TypeError, ValueError) as error:
        raise HeurlensError(f"the metric {name!r} returned a {type(value).__name__}: return a float or a "
                            "one-element tensor") from error


def metric_loss(metric: Metric, data: Task, aim: Literal["keep", "raise"] = "keep") -> Loss:
    """Pruning's loss that keeps ``metric`` at the full model's value: on each batch,
    (metric(masked scores) - metric(full scores))^2, the task seen as that batch alone (``batch_task``); with
    ``aim="raise"``, metric(full scores) - metric(masked scores), lowest where the circuit's metric is highest.

    Args:
        metric: a differentiable ``Metric``.
        data: the pruning data.
        aim: "keep" the full model's value, or "raise" the metric as far as the masks can.

    Returns:
        A ``Loss`` for ``prune(loss=...)``."""
    first_row = {}
    start = 0
    for index, batch in enumerate(data.batches):
        first_row[start] = index
        start += batch_rows(batch)
    name = getattr(metric, "__qualname__", type(metric).__name__)
    with_task = takes_task(metric)
    if with_task and not hasattr(data, "batch_task"):
        raise HeurlensError(f"pruning to the metric {name!r} sees one batch at a time, and the task {data.name!r} "
                            "cannot be split into its batches (no batch_task): use EvalSet, PromptSet or TokenSet, or "
                            "a metric of the scores alone, metric(scores)")

    def loss(scores: Tensor, full_scores: Tensor, example_ids: Tensor) -> Tensor:
        view = cast(Any, data).batch_task(first_row[int(example_ids[0])]) if with_task else data
        masked, full = metric_output(metric, scores, view), metric_output(metric, full_scores, view)
        if not isinstance(masked, Tensor) or not masked.requires_grad:
            raise HeurlensError(f"the metric {name!r} has no gradient to prune with (it returned a "
                                f"{type(masked).__name__} that does not depend on the scores in torch; accuracy and "
                                ".item() have none): prune to a metric computed from the scores in torch, such as a "
                                "logit difference")
        gap = masked - full.detach()
        return (-gap if aim == "raise" else gap.pow(2)).reshape(())

    loss.__qualname__ = f"metric {name}"  # how the run folder records what was pruned for
    return loss
