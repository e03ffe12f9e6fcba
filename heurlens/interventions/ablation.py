"""Mean (or zero) ablation of attention heads and MLP layers through TransformerLens hook points.

Ablating a unit replaces its output by a constant: for head h of layer L, its slice
``z[:, :, h, :]`` of ``blocks.L.attn.hook_z`` (the head's output before W_O, so its whole
contribution W_O^h z_h becomes W_O^h mean(z_h)); for an MLP layer, ``blocks.L.hook_mlp_out``.
Mean ablation uses the unit's mean over a reference set (``heurlens.interventions.means``), zero ablation 0, corrupt
ablation (TransformerLens' ``ablation="corrupt"``; "interchange" in heurlens 0.1.0) the unit's own activation on
each example's corrupted input (``heurlens.interventions.corruption``).
It is a binary unit mask (``heurlens.interventions.unit_masks``): 0 on the ablated units, 1 elsewhere.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
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
from heurlens.interventions.corruption import corrupted_activations, corruption_of
from heurlens.interventions.means import UnitMeans, zero_means
from heurlens.interventions.resumed_passes import ablated_logits
from heurlens.interventions.unit_masks import UnitMaskHooks
from heurlens.interventions.units import Unit, UnitLayout, UnitsLike, as_units, format_units
from heurlens.metrics import metric_value
from heurlens.models.classifier import as_model
from heurlens.protocols import HookList, Metrics, ModelLike, PreparedModel, Task
from heurlens.runtime.argument_checks import checked
from heurlens.runtime.call_context import CallContext, call_context
from heurlens.runtime.deprecations import ablation_name
from heurlens.runtime.devices import device_of, to_device
from heurlens.runtime.precision import Precision
from heurlens.tasks import TaskLike, as_task

Method = Literal["mean", "zero", "corrupt"]  # what an ablated unit takes: its mean, zero, its value on the corrupted input
MethodName = Literal["mean", "zero", "corrupt", "interchange"]  # accepted: "interchange" is "corrupt", deprecated
T = TypeVar("T")


@checked
def ablation_hooks(model: ModelLike, units: UnitsLike, *, method: MethodName = "mean",
                   means: UnitMeans | None = None) -> HookList:
    """Hooks that replace each unit's output by its mean (or zero) and leave every other unit as is (only the
    layers with an ablated unit are hooked), for
    TransformerLens' ``model.hooks(fwd_hooks=...)`` / ``run_with_hooks`` (a bridge of one's own is taken as it
    is). ``units``: ``"L4.H0,L2.*"``, ``Unit``s, or a list of either."""
    model = as_model(model)
    device = device_of(model)
    return _unit_mask(model, units, unit_replacement(model, as_method(method), means, device), device).changing_hooks


@contextmanager
@checked
def ablated(model: ModelLike, units: UnitsLike, *, method: MethodName = "mean",
            means: UnitMeans | None = None) -> Iterator[PreparedModel]:
    """Inside the block ``model`` runs with ``units`` mean- (or zero-) ablated; the model is restored on
    leaving, by an error too: ``with heurlens.ablated(model, "L4.H0", means=means) as m: m(**batch)``."""
    model = as_model(model)
    device = device_of(model)
    with _unit_mask(model, units, unit_replacement(model, as_method(method), means, device), device).attached(model):
        yield model


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


def _unit_mask(model: PreparedModel, units: UnitsLike, replacement: UnitMeans, device: torch.device) -> UnitMaskHooks:
    """Masks (on ``device``) that are 0 on ``units`` and 1 elsewhere, replacing the masked units by ``replacement``."""
    units_off = as_units(units, model.n_layers, model.n_heads)
    layout = UnitLayout(model.n_layers, model.n_heads)
    return UnitMaskHooks(replacement, *layout.mask(units_off, device))


@checked
def ablate(model: ModelLike, units: UnitsLike, eval_sets: Sequence[TaskLike], *, method: MethodName = "mean",
           means: UnitMeans | None = None, full_logits: dict[str, Tensor] | None = None,
           dtype: Precision = "float32", metrics: Metrics | None = None, cache: bool | None = None) -> pd.DataFrame:
    """Each metric of the full and the ablated model on each evaluation set, the change, and KL.

    Returns one row per evaluation set: eval_set, examples, then per metric ``full_{name}`` and
    ``ablated_{name}``, ``delta`` (ablated - full of the first metric; ``delta_{name}`` for the others) and kl
    (mean KL(full || ablated) of the output distributions, nats). ``metrics`` maps a column name to a function
    (scores, task) -> float, as TransformerLens' ``patching_metric`` (default: the task's accuracy; ``{}``: KL
    only).
    ``units``: ``"L4.H0,L2.*"``, ``Unit``s or a list of either; ``eval_sets``: tasks, lists of texts or token
    tensors. ``method``: "mean" (``means``), "zero", or "corrupt": each unit takes its activation on the
    example's corrupted input, position by position (the tasks must carry their corruption:
    ``heurlens.interventions.corruption``;
    ``means`` is then not used). ``full_logits`` (by set name) reuses an earlier run of the full model; otherwise
    they come from the activation cache (``heurlens.interventions.activation_cache``). ``dtype``: both models' matrix
    products in
    bfloat16 or float16 (``heurlens.runtime.precision``; bfloat16 about 2x faster on a CPU with AVX-512 BF16); the full
    logits passed in must then be ones in that precision too. ``cache=False``: the full model's logits and residual
    streams are computed here and nothing is read from or written to heurlens' cache folder; None (default): as a
    surrounding ``heurlens.runtime.cache.disk_cache(...)`` block says, else the cache is used.
    """
    model = as_model(model)
    if not as_units(units, model.n_layers, model.n_heads):
        raise HeurlensError("units= names no unit, so nothing would be ablated: give 'L4.H0', 'L4.*', 'L4.MLP' or a "
                            "list of them")
    return ablate_groups(model, [units], eval_sets, method=method, means=means, full_logits=full_logits, dtype=dtype,
                         metrics=metrics, cache=cache).drop(columns="ablated")


def ablate_groups(model: ModelLike, groups: Sequence[UnitsLike], eval_sets: Sequence[TaskLike], *,
                  method: MethodName = "mean", means: UnitMeans | None = None,
                  full_logits: dict[str, Tensor] | None = None, dtype: Precision = "float32",
                  progress: bool = False, desc: str = "ablations", metrics: Metrics | None = None,
                  cache: bool | None = None) -> pd.DataFrame:
    """``ablate`` for each group of units, the group named in a first column ``ablated``; rows group by group.

    Every ablated pass starts at the group's lowest layer from the full model's residual stream there, kept in
    the activation cache (``heurlens.interventions.resumed_passes``): the same logits as whole passes, with less computed the
    higher the ablated units sit. ``progress``: a bar named
    ``desc`` counting ablated passes over a batch. ``cache``: as for ``ablate``.
    """
    model = as_model(model)
    return ablated_tables(model, groups, [as_task(model, data) for data in eval_sets], as_method(method), means, full_logits,
                          call_context(model, dtype, cache), progress, desc, metrics)


def ablated_tables(model: PreparedModel, groups: Sequence[UnitsLike], tasks: Sequence[Task], method: Method,
                   means: UnitMeans | None, full_logits: dict[str, Tensor] | None, context: CallContext,
                   progress: bool = False, desc: str = "ablations", metrics: Metrics | None = None) -> pd.DataFrame:
    """``ablate_groups`` below the public door: the model and tasks as heurlens holds them, and the call's
    ``context`` (device, precision, cache use, fingerprint) decided once by the caller."""
    if not tasks:
        raise HeurlensError("give at least one evaluation set (eval_sets)")
    unit_groups = [as_units(group, model.n_layers, model.n_heads) for group in groups]
    metrics = {"accuracy": accuracy_metric(model)} if metrics is None else dict(metrics)
    rows: list[list[dict]] = [[] for _ in unit_groups]
    bar = tqdm(total=len(unit_groups) * sum(len(s.batches) for s in tasks), desc=desc, unit="pass",
               disable=not progress)
    starts = {min(unit.layer for unit in group) for group in unit_groups if group}  # where the passes resume
    for task in tasks:
        full = (full_logits or {}).get(task.name)
        if full is None:  # and, from the same pass, the residual streams the ablated passes start from
            full = full_model_logits(model, task, context, streams_for=starts)
        full_values = {name: metric_value(metric, full, task, name) for name, metric in metrics.items()}
        score = partial(ablated_scores, model, task=task, method=method, means=means, context=context, bar=bar)
        for index, ablated in one_chunk_at_a_time(unit_groups, full.numel() * 4, score):
            rows[index].append({"ablated": format_units(unit_groups[index]), "eval_set": task.name,
                                "examples": len(task),
                                **_metric_columns(full_values, {name: metric_value(metric, ablated, task, name)
                                                                for name, metric in metrics.items()}),
                                "kl": mean_kl(full, ablated)})
    bar.close()
    return pd.DataFrame([row for group_rows in rows for row in group_rows])


SCORES_IN_MEMORY_BYTES = 2**30  # ablated scores held at once by one_chunk_at_a_time (float32), about this at most


def group_chunks(count: int, scores_bytes: int) -> list[slice]:
    """``count`` ablated models in consecutive chunks whose scores (``scores_bytes`` each: rows x outputs x 4) fit
    in ``SCORES_IN_MEMORY_BYTES`` together, one model at least."""
    per_chunk = max(1, SCORES_IN_MEMORY_BYTES // max(1, scores_bytes))
    return [slice(start, start + per_chunk) for start in range(0, count, per_chunk)]


def one_chunk_at_a_time(models: Sequence[T], scores_bytes: int, score: Callable[[Sequence[T]], list[Tensor]]
                        ) -> Iterator[tuple[int, Float[Tensor, "row output"]]]:
    """(index, scores) of each of ``models`` (unit groups, edge masks) in turn, ``score(chunk)`` giving the scores of
    a chunk of them (``group_chunks``), so that a caller that reduces each to numbers holds one chunk's scores, not
    every model's: a scan of a next-token model's 270 heads on 256 prompts and 49,152 tokens would otherwise hold
    13.6 GB. The passes of a chunk share each batch (and its residual stream or corrupted run); each further chunk
    runs them again."""
    for chunk in group_chunks(len(models), scores_bytes):
        scores = score(models[chunk])
        for index in range(chunk.start, chunk.start + len(scores)):
            yield index, scores.pop(0)  # not kept here: freed once the caller is done with it


def ablated_scores(model: PreparedModel, groups: Sequence[list[Unit]], task: Task, method: Method,
                   means: UnitMeans | None, context: CallContext, bar: tqdm | None = None
                   ) -> list[Float[Tensor, "row output"]]:
    """The scores on ``task`` of the model with each group of units ablated by ``method`` (CPU, float32), every
    pass resumed at the group's lowest layer (``resumed_passes.ablated_logits``). Corrupt ablation sets the
    masks' replacement batch by batch from the task's corrupted batch (``_corrupted_replacement``)."""
    corrupt = method == "corrupt"
    # checked and moved once for every group (the corrupt ablation's placeholder is replaced before every batch)
    replacement = zero_means(model, context.device) if corrupt else unit_replacement(model, method, means,
                                                                                      context.device)
    masks = [_unit_mask(model, group, replacement, context.device) for group in groups]
    ablations = [(min((unit.layer for unit in group), default=0), mask.changing_hooks)
                 for group, mask in zip(groups, masks)]
    before_batch = partial(_corrupted_replacement, model, corruption_of(task), masks, context) if corrupt else None
    return ablated_logits(model, ablations, task, context, bar, before_batch)


def _corrupted_replacement(model: PreparedModel, corruption: Task, masks: list[UnitMaskHooks], context: CallContext,
                  index: int) -> None:
    """Corrupt ablation's replacement for batch ``index``: every unit's activation on its corrupted batch."""
    activations = corrupted_activations(model, to_device(corruption.batches[index], context.device))
    for mask in masks:
        mask.replacement = activations


def _metric_columns(full: dict[str, float], ablated: dict[str, float]) -> dict[str, float]:
    """full_X and ablated_X per metric, then the changes: ``delta`` for the first metric, ``delta_X`` for others."""
    columns: dict[str, float] = {}
    for name in full:
        columns |= {f"full_{name}": full[name], f"ablated_{name}": ablated[name]}
    for index, name in enumerate(full):
        columns["delta" if index == 0 else f"delta_{name}"] = ablated[name] - full[name]
    return columns


def metric_names(metrics: Metrics | None) -> list[str]:
    """The names of the metrics (``accuracy`` by default); refused when empty, for the analyses that compare
    units by their first metric."""
    names = ["accuracy"] if metrics is None else list(metrics)
    if not names:
        raise HeurlensError("this analysis compares units by a metric: give at least one in metrics=")
    return names

