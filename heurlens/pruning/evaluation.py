"""Subnetworks (and edge circuits) evaluated beside the full model: each metric and the KL to the full model on
each evaluation set, pruned units replaced as they were while the subnetworks were found."""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

import pandas as pd

from heurlens.errors import HeurlensError
from heurlens.evaluate import accuracy_metric
from heurlens.interventions.activation_cache import full_model_logits
from heurlens.interventions.circuits import level_of
from heurlens.interventions.means import UnitMeans
from heurlens.interventions.scoring import Method, MethodName, as_method, masked_table
from heurlens.metrics import metric_value
from heurlens.models.classifier import as_model
from heurlens.protocols import Metrics, ModelLike, PreparedModel, Task
from heurlens.pruning.subnetwork import Subnetwork
from heurlens.runtime.argument_checks import checked
from heurlens.runtime.call_context import CallContext, call_context
from heurlens.runtime.precision import Precision
from heurlens.tasks import TaskLike, as_task


@checked
def evaluate_subnetworks(model: ModelLike, subnetworks: list[Subnetwork], eval_sets: Sequence[TaskLike], *,
                         means: UnitMeans, metrics: Metrics | None = None, dtype: Precision = "float32",
                         cache: bool | None = None, method: MethodName | None = None, progress: bool = True
                         ) -> pd.DataFrame:
    """Each metric (default: accuracy) and the KL to the full model of the full model and each subnetwork on
    each set.

    Long format: one row per (subnetwork, eval set) with columns subnetwork, target_sparsity,
    achieved_sparsity, seed, eval_set, examples, one column per metric (``accuracy``), kl. The full model's
    rows come first. ``dtype``: the matrix products' precision (``heurlens.runtime.precision``), the full model's too.
    ``cache=False``: nothing read from or written to heurlens' cache folder (``heurlens.runtime.cache.disk_cache``).
    ``method``: how pruned units are replaced ("mean" by ``means``, "zero", "corrupt"); None: as the subnetworks
    were pruned (``PruneSettings.ablation``, the same for all).

    Args:
        model: a ``HookedModel`` or a bare ``TransformerBridge``.
        subnetworks: the records to evaluate (``prune``'s, or ``Subnetwork.load``).
        eval_sets: tasks, lists of texts or token tensors.
        means: what pruned units are replaced by (the run's means).
        metrics: column name -> ``metric(scores, task)`` (default: accuracy).
        dtype: the matrix products' precision (``heurlens.runtime.precision``).
        cache: False: nothing read from or written to heurlens' cache folder.
        method: "mean", "zero" or "corrupt"; None: as the subnetworks were pruned.
        progress: a bar on stderr (a subnetwork's pass over a batch a step), once it has taken a couple of seconds.

    Returns:
        The long table, the full model's rows first.
    """
    model = as_model(model)
    return _evaluate_subnetworks(model, subnetworks, [as_task(model, data) for data in eval_sets], means, metrics,
                                 call_context(model, dtype, cache),
                                 as_method(method) if method else ablation_of(subnetworks), progress)


def ablation_of(subnetworks: Sequence[Subnetwork]) -> Method:
    """How these subnetworks' pruned units were replaced while they were found (``PruneSettings.ablation``): one
    method for all, or refused naming the ones found."""
    own = {sub.hyperparameters.get("ablation", "mean") for sub in subnetworks} or {"mean"}
    if len(own) > 1:
        raise HeurlensError(f"these subnetworks were pruned with different ablations ({', '.join(sorted(own))}): "
                            "evaluate them with one, method='mean' or method='corrupt' (heurlens faithfulness: "
                            "--ablation)")
    return cast(Method, own.pop())


def _evaluate_subnetworks(model: PreparedModel, subnetworks: list[Subnetwork], tasks: list[Task],
                          means: UnitMeans, metrics: Metrics | None, context: CallContext, method: Method = "mean",
                          progress: bool = False) -> pd.DataFrame:
    full_logits = {s.name: full_model_logits(model, s, context) for s in tasks}
    chosen = {"accuracy": accuracy_metric(model)} if metrics is None else dict(metrics)
    rows = [{"subnetwork": "full model", "target_sparsity": 0.0, "achieved_sparsity": 0.0, "seed": None,
             "eval_set": s.name, "examples": len(s),
             **{name: metric_value(metric, full_logits[s.name], s, name) for name, metric in chosen.items()},
             "kl": 0.0} for s in tasks]
    known = model.known_fingerprints()
    for sub in subnetworks:
        sub.check_model(model, known)
    table = masked_table(model, level_of(subnetworks), [sub.keep_mask() for sub in subnetworks],
                         [sub.label for sub in subnetworks], tasks, method, means, full_logits, context, metrics=chosen,
                         progress=progress, desc=f"evaluating {len(subnetworks)} subnetworks")
    for sub, (_, row) in zip([sub for sub in subnetworks for _ in tasks], table.iterrows()):
        rows.append({"subnetwork": sub.label + (" (missed its target)" if sub.missed_target else ""),
                     "target_sparsity": sub.target_sparsity,
                     "achieved_sparsity": sub.achieved_sparsity, "seed": sub.seed, "eval_set": row["eval_set"],
                     "examples": row["examples"], **{name: row[f"ablated_{name}"] for name in chosen},
                     "kl": row["kl"]})
    return pd.DataFrame(rows)


def accuracy_table(evaluation: pd.DataFrame) -> pd.DataFrame:
    """Wide view of ``evaluate_subnetworks``: one row per subnetwork, accuracy (%) per eval set.

    Args:
        evaluation: ``evaluate_subnetworks``' table.

    Returns:
        One row per subnetwork, accuracy (%) per eval set."""
    wide = evaluation.pivot_table(index=["subnetwork", "achieved_sparsity"], columns="eval_set", values="accuracy",
                                  sort=False)
    return (100 * wide[list(dict.fromkeys(evaluation["eval_set"]))]).round(1).reset_index()
