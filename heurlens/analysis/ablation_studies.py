"""Ablation studies of the Heuristic Core paper, Section 5 (Table 3): every head ablated on its own, and groups
ablated together to measure super-additivity.

With acc(S) the accuracy after mean-ablating the set S of heads, every table's ``delta`` is the change ablating
makes, acc(S) - acc(∅) (as in ``heurlens.ablate``), and the paper's drop(S) = acc(∅) - acc(S) = -delta:

- the group is *super-additive* when drop(G) > sum over g in G of drop({g});
- the pairwise interaction of heads i and j is drop({i, j}) - drop({i}) - drop({j})
  (positive: ablating both hurts more than the two effects added).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations

import pandas as pd
import torch
from jaxtyping import Float
from torch import Tensor

from heurlens.errors import HeurlensError
from heurlens.interventions.ablation import ablated_tables, metric_names
from heurlens.interventions.activation_cache import full_model_logits
from heurlens.interventions.means import UnitMeans
from heurlens.interventions.scoring import Method, MethodName, as_method
from heurlens.interventions.units import Unit, UnitsLike, as_units, format_units
from heurlens.models.classifier import as_model
from heurlens.protocols import Metrics, ModelLike, PreparedModel, Task
from heurlens.runtime.argument_checks import checked
from heurlens.runtime.call_context import CallContext, call_context
from heurlens.runtime.distributed import Workers, run_each
from heurlens.runtime.precision import Precision
from heurlens.tasks import TaskLike, as_task

CHUNKS_PER_WORKER = 4  # Ray tasks per worker in a scan: enough to even out heads of different depths


@dataclass(frozen=True)
class _AblationJob:
    """What every ablation of one scan shares (sent once to Ray's object store with ``workers``)."""

    model: PreparedModel
    eval_sets: Sequence[Task]
    method: Method
    means: UnitMeans | None
    full_logits: dict[str, Tensor]
    context: CallContext  # device, precision, cache use and fingerprint: resolved once, also for Ray workers
    metrics: Metrics | None = None


def _job(model: ModelLike, eval_sets: Sequence[TaskLike], method: MethodName, means: UnitMeans | None,
         full_logits: dict[str, Tensor] | None, dtype: Precision, metrics: Metrics | None,
         cache: bool | None = None) -> _AblationJob:
    model = as_model(model)
    tasks = [as_task(model, data) for data in eval_sets]
    context = call_context(model, dtype, cache)  # resolved here: Ray workers do not see a surrounding disk_cache
    full = full_logits or {s.name: full_model_logits(model, s, context) for s in tasks}
    return _AblationJob(model, tasks, as_method(method), means, full, context, metrics)


def _deltas(job: _AblationJob, groups: list[list[Unit]], progress: bool, desc: str,
           workers: Workers | None = None) -> pd.DataFrame:
    """One row per (group, eval set), group by group: ablated group, accuracy, delta (ablated - full) and KL.
    In process all groups share each batch's lower layers (``ablate_groups``); on Ray ``workers`` the groups
    are dealt round-robin into a few chunks per worker, each chunk one task that shares them likewise."""
    if workers is None:
        return _delta_table(job, groups, progress, desc)
    chunks = [groups[start::CHUNKS_PER_WORKER * workers.count] for start in range(CHUNKS_PER_WORKER * workers.count)]
    chunks = [chunk for chunk in chunks if chunk]
    tables = run_each(_delta_table, job, chunks, workers, desc, progress)
    order = {format_units(group): index for index, group in enumerate(groups)}
    table = pd.concat(tables, ignore_index=True)
    return table.sort_values("ablated", key=lambda names: names.map(order), kind="stable", ignore_index=True)


def _delta_table(job: _AblationJob, groups: list[list[Unit]], progress: bool = False, desc: str = "") -> pd.DataFrame:
    """ablated, eval_set, then per metric ``full_{name}`` and ``{name}`` (the ablated model's), ``delta`` (ablated -
    full of the first metric, as ``ablate``'s), kl."""
    table = ablated_tables(job.model, groups, job.eval_sets, job.method, job.means, job.full_logits, job.context,
                           progress, desc, job.metrics)
    names = metric_names(job.metrics)
    for name in names:
        table[name] = table[f"ablated_{name}"]
    return table[["ablated", "eval_set", *(column for name in names for column in (f"full_{name}", name)),
                  "delta", "kl"]]


@checked
def single_unit_scan(model: ModelLike, units: UnitsLike, eval_sets: Sequence[TaskLike], *,
                     means: UnitMeans | None = None, method: MethodName = "mean",
                     full_logits: dict[str, Tensor] | None = None, progress: bool = True,
                     workers: Workers | None = None, dtype: Precision = "float32", metrics: Metrics | None = None,
                     cache: bool | None = None) -> pd.DataFrame:
    """Ablate each unit alone (one after another, or on Ray ``workers``; matrix products in ``dtype`` and
    ``cache`` as for ``ablate``); long table with columns ablated, eval_set, full_accuracy, accuracy, delta
    (ablated - full, as ``ablate``'s), kl (with ``metrics``, ``full_{name}`` and ``{name}`` per metric, ``delta`` of
    the first).

    Args:
        model: a ``HookedModel`` or a bare ``TransformerBridge``.
        units: the units scanned, ``"L4.H0,L2.*"``, a ``Unit``, or a list of either.
        eval_sets: tasks, lists of texts or token tensors.
        means: the unit means (``compute_means``) mean ablation puts in place.
        method: "mean" (by ``means``), "zero", or "corrupt" (each unit's activation on the example's corrupted input; the
            tasks carry their corruption); "interchange", its name before, until 0.3.0.
        full_logits: the full model's logits by set name, from an earlier run (None: from the activation cache).
        progress: a bar on stderr.
        workers: Ray workers (``heurlens.runtime.distributed``) to spread the ablations over (None: one after another
            here).
        dtype: the matrix products' precision, "float32", "bfloat16" or "float16" (``heurlens.runtime.precision``).
        metrics: column name -> ``metric(scores, task)`` (default: the task's accuracy; ``{}``: KL only).
        cache: False: nothing read from or written to heurlens' cache folder; None: as a surrounding ``disk_cache`` block
            says.

    Returns:
        The long table, one row per (unit, eval set)."""
    job = _job(model, eval_sets, method, means, full_logits, dtype, metrics, cache)
    units = as_units(units, job.model.n_layers, job.model.n_heads)
    if not units:
        raise HeurlensError("give at least one unit to scan: 'L4.*', a list of units, or heurlens.all_units(n_layers, "
                            "n_heads)")
    return _deltas(job, [[u] for u in units], progress, "single-unit ablation", workers)


def head_grid(scan: pd.DataFrame, n_layers: int, n_heads: int, value: str = "delta",
              eval_set: str | None = None) -> Float[Tensor, "layer head"]:
    """A scan's ``value`` (a column: ``delta``, ``accuracy``, ``kl``...) of each head as a ``[layer, head]`` tensor,
    as TransformerLens' activation patching returns its results; NaN for heads not scanned (MLP rows are left
    out). ``eval_set``: which set's rows, needed when the scan has several. ``pd.DataFrame(grid.numpy())`` is the
    pivot table (layers as rows, heads as columns).

    Args:
        scan: ``single_unit_scan``'s table.
        n_layers: the model's layers.
        n_heads: its heads a layer.
        value: the column to put in the grid.
        eval_set: the set whose rows to take (needed when the scan has several).

    Returns:
        A ``[layer, head]`` tensor, NaN where a head was not scanned."""
    sets = list(dict.fromkeys(scan["eval_set"]))
    if eval_set is None and len(sets) > 1:
        raise HeurlensError(f"the scan covers {len(sets)} evaluation sets ({', '.join(sets)}): name one, eval_set=...")
    if value not in scan:
        raise HeurlensError(f"the scan has no column {value!r}; its columns: {', '.join(scan.columns)}")
    rows = scan[scan["eval_set"] == (eval_set or sets[0])]
    grid = torch.full((n_layers, n_heads), float("nan"))
    for name, number in zip(rows["ablated"], rows[value]):
        [unit] = as_units(str(name), n_layers, n_heads)
        if not unit.is_mlp:
            grid[unit.layer, unit.head] = float(number)
    return grid


def scan_table(scan: pd.DataFrame, core: list[Unit] | None = None) -> pd.DataFrame:
    """Table 3's layout: accuracy (%) per eval set for no ablation, the average over the heads outside
    ``core`` (when given), and each scanned unit, with its delta (ablated - none) next to it."""
    wide = scan.pivot_table(index="ablated", columns="eval_set", values="accuracy", sort=False) * 100
    full = scan.drop_duplicates("eval_set").set_index("eval_set")["full_accuracy"] * 100
    sets = list(dict.fromkeys(scan["eval_set"]))
    rows = {"none": full[sets]}
    if core is not None:
        core_names = {str(u) for u in core}
        outside = wide.loc[[name for name in wide.index if name not in core_names]]
        if len(outside):
            rows["avg (non-core)"] = outside[sets].mean()
        wide = wide.loc[[name for name in wide.index if name in core_names]]
    rows |= {name: wide.loc[name, sets] for name in wide.index}
    table = pd.DataFrame(rows).T.round(1)
    for name in sets:
        table[f"{name} delta"] = (table[name] - table.loc["none", name]).round(1)
    return table.rename_axis("ablated").reset_index()


@checked
def group_superadditivity(model: ModelLike, group: UnitsLike, eval_sets: Sequence[TaskLike], *,
                          means: UnitMeans | None = None, method: MethodName = "mean", pairs: bool = True,
                          full_logits: dict[str, Tensor] | None = None,
                          progress: bool = True, workers: Workers | None = None,
                          dtype: Precision = "float32", metrics: Metrics | None = None,
                          cache: bool | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Ablate ``group`` together and each member alone (and each pair, with ``pairs``).

    Returns (summary, interactions), in the paper's drops (drop = full - ablated = -delta). summary: per eval
    set, the group's drop, the sum of single drops, their difference (excess) and whether the group is
    super-additive. interactions: per pair and eval set, drop(pair) - drop(i) - drop(j). The single and pair
    ablations may run on Ray ``workers``; ``dtype``, ``metrics`` and ``cache`` as for ``ablate`` (drops are of the
    first metric).

    Args:
        model: a ``HookedModel`` or a bare ``TransformerBridge``.
        group: the group, ``"L4.H0,L2.*"``, a ``Unit``, or a list of either.
        eval_sets: tasks, lists of texts or token tensors.
        means: the unit means (``compute_means``) mean ablation puts in place.
        method: "mean" (by ``means``), "zero", or "corrupt" (each unit's activation on the example's corrupted input; the
            tasks carry their corruption); "interchange", its name before, until 0.3.0.
        pairs: also ablate each pair of members.
        full_logits: the full model's logits by set name, from an earlier run (None: from the activation cache).
        progress: a bar on stderr.
        workers: Ray workers (``heurlens.runtime.distributed``) to spread the ablations over (None: one after another
            here).
        dtype: the matrix products' precision, "float32", "bfloat16" or "float16" (``heurlens.runtime.precision``).
        metrics: column name -> ``metric(scores, task)`` (default: the task's accuracy; ``{}``: KL only).
        cache: False: nothing read from or written to heurlens' cache folder; None: as a surrounding ``disk_cache`` block
            says.

    Returns:
        (summary, interactions): the two tables above.
    """
    job = _job(model, eval_sets, method, means, full_logits, dtype, metrics, cache)
    group = as_units(group, job.model.n_layers, job.model.n_heads)
    if len(group) < 2:
        raise HeurlensError(f"super-additivity compares a group with its members: give at least two units (got "
                            f"{len(group)})")
    singles = _deltas(job, [[u] for u in group], progress, "single ablations", workers)
    together = _deltas(job, [group], progress, "group ablation")
    singles["drop"] = 0.0 - singles["delta"]  # 0.0 - x, not -x: no -0.0 in the tables
    single_sum = singles.groupby("eval_set", sort=False)["drop"].sum()
    summary = together.assign(group_drop=0.0 - together["delta"]).set_index("eval_set")[[metric_names(metrics)[0],
                                                                                   "group_drop"]]
    summary["sum_of_single_drops"] = single_sum
    summary["excess"] = summary["group_drop"] - summary["sum_of_single_drops"]
    summary["superadditive"] = summary["excess"] > 0
    summary.insert(0, "group", format_units(group))
    interactions = pd.DataFrame(columns=["pair", "eval_set", "pair_drop", "interaction"])
    if pairs and len(group) > 2:
        single = singles.set_index(["ablated", "eval_set"])["drop"]
        pair_groups = [list(p) for p in combinations(group, 2)]
        paired = _deltas(job, pair_groups, progress, "pair ablations", workers)
        rows = []
        for (i, j), (_, row) in zip([(a, b) for a, b in pair_groups for _ in job.eval_sets], paired.iterrows()):
            drop_i, drop_j = single[(str(i), row["eval_set"])], single[(str(j), row["eval_set"])]
            rows.append({"pair": row["ablated"], "eval_set": row["eval_set"], "pair_drop": 0.0 - row["delta"],
                         "interaction": 0.0 - row["delta"] - drop_i - drop_j})
        interactions = pd.DataFrame(rows)
    return summary.reset_index(), interactions
