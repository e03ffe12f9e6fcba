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

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import pandas as pd
import torch
from jaxtyping import Float
from torch import Tensor

from heurlens.errors import HeurlensError
from heurlens.interventions.circuits import mask_hooks
from heurlens.interventions.means import UnitMeans
from heurlens.interventions.scoring import Method, MethodName, as_method, masked_table, unit_replacement
from heurlens.interventions.units import Unit, UnitLayout, UnitsLike, as_units, format_units
from heurlens.models.classifier import as_model
from heurlens.protocols import HookList, MaskHooks, Metrics, ModelLike, PreparedModel, Task
from heurlens.runtime.argument_checks import checked
from heurlens.runtime.call_context import CallContext, call_context
from heurlens.runtime.devices import device_of
from heurlens.runtime.precision import Precision
from heurlens.tasks import TaskLike, as_task


@checked
def ablation_hooks(model: ModelLike, units: UnitsLike, *, method: MethodName = "mean",
                   means: UnitMeans | None = None) -> HookList:
    """Hooks that replace each unit's output by its mean (or zero) and leave every other unit as is (only the
    layers with an ablated unit are hooked), for
    TransformerLens' ``model.hooks(fwd_hooks=...)`` / ``run_with_hooks`` (a bridge of one's own is taken as it
    is). ``units``: ``"L4.H0,L2.*"``, ``Unit``s, or a list of either.

    Args:
        model: a ``HookedModel`` or a bare ``TransformerBridge``.
        units: ``"L4.H0,L2.*"``, a ``Unit``, or a list of either.
        method: "mean" (by ``means``) or "zero".
        means: the unit means (``compute_means``) mean ablation puts in place.

    Returns:
        ``(hook point, function)`` pairs for ``model.hooks(fwd_hooks=...)``."""
    model = as_model(model)
    device = device_of(model)
    return _unit_mask(model, units, unit_replacement(model, as_method(method), means, device), device).pass_hooks


@contextmanager
@checked
def ablated(model: ModelLike, units: UnitsLike, *, method: MethodName = "mean",
            means: UnitMeans | None = None) -> Iterator[PreparedModel]:
    """Inside the block ``model`` runs with ``units`` mean- (or zero-) ablated; the model is restored on
    leaving, by an error too: ``with heurlens.ablated(model, "L4.H0", means=means) as m: m(**batch)``.

    Args:
        model: a ``HookedModel`` or a bare ``TransformerBridge``.
        units: ``"L4.H0,L2.*"``, a ``Unit``, or a list of either.
        method: "mean" (by ``means``) or "zero".
        means: the unit means (``compute_means``) mean ablation puts in place.

    Returns:
        A context manager giving the prepared model with the units ablated."""
    model = as_model(model)
    device = device_of(model)
    with _unit_mask(model, units, unit_replacement(model, as_method(method), means, device), device).attached(model):
        yield model


def _unit_mask(model: PreparedModel, units: UnitsLike, replacement: UnitMeans, device: torch.device) -> MaskHooks:
    """Unit masks (on ``device``) that are 0 on ``units`` and 1 elsewhere, replacing the masked units by
    ``replacement`` (their hooks for one pass: only the layers with an ablated unit)."""
    hooks = mask_hooks(model, "node", replacement, device)
    hooks.set_masks(unit_groups_off(model, [as_units(units, model.n_layers, model.n_heads)])[0].to(device))
    return hooks


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
    ``heurlens.interventions.corruption``; ``means`` is then not used; "interchange", its name before, still works).
    ``full_logits`` (by set name) reuses an earlier run of the full model; otherwise they come from the activation
    cache (``heurlens.interventions.activation_cache``). ``dtype``: both models' matrix products in bfloat16 or
    float16 (``heurlens.runtime.precision``; bfloat16 about 2x faster on a CPU with AVX-512 BF16); the full logits
    passed in must then be ones in that precision too. ``cache=False``: the full model's logits and residual
    streams are computed here and nothing is read from or written to heurlens' cache folder; None (default): as a
    surrounding ``heurlens.runtime.cache.disk_cache(...)`` block says, else the cache is used.

    Args:
        model: a ``HookedModel`` or a bare ``TransformerBridge``.
        units: ``"L4.H0,L2.*"``, a ``Unit``, or a list of either.
        eval_sets: tasks, lists of texts or token tensors.
        method: "mean" (by ``means``), "zero", or "corrupt" (each unit's activation on the example's corrupted input; the
            tasks carry their corruption); "interchange", its name before, until 0.3.0.
        means: the unit means (``compute_means``) mean ablation puts in place.
        full_logits: the full model's logits by set name, from an earlier run (None: from the activation cache).
        dtype: the matrix products' precision, "float32", "bfloat16" or "float16" (``heurlens.runtime.precision``).
        metrics: column name -> ``metric(scores, task)`` (default: the task's accuracy; ``{}``: KL only).
        cache: False: nothing read from or written to heurlens' cache folder; None: as a surrounding ``disk_cache`` block
            says.

    Returns:
        One row per evaluation set (the columns above).
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
    the activation cache (``heurlens.interventions.resumed_passes``): the same logits as whole passes, with less
    computed the higher the ablated units sit. ``progress``: a bar named ``desc`` counting ablated passes over a
    batch. ``cache``: as for ``ablate``.
    """
    model = as_model(model)
    return ablated_tables(model, groups, [as_task(model, data) for data in eval_sets], as_method(method), means, full_logits,
                          call_context(model, dtype, cache), progress, desc, metrics)


def ablated_tables(model: PreparedModel, groups: Sequence[UnitsLike], tasks: Sequence[Task], method: Method,
                   means: UnitMeans | None, full_logits: dict[str, Tensor] | None, context: CallContext,
                   progress: bool = False, desc: str = "ablations", metrics: Metrics | None = None) -> pd.DataFrame:
    """``ablate_groups`` below the public door: the model and tasks as heurlens holds them, and the call's
    ``context`` (device, precision, cache use, fingerprint) decided once by the caller; each group a keep mask of
    the units (``masked_table``)."""
    unit_groups = [as_units(group, model.n_layers, model.n_heads) for group in groups]
    return masked_table(model, "node", unit_groups_off(model, unit_groups), [format_units(group) for group in unit_groups],
                        tasks, method, means, full_logits, context, progress, desc, metrics)


def unit_groups_off(model: PreparedModel, groups: Sequence[Sequence[Unit]]) -> list[Float[Tensor, " unit"]]:
    """Each group of units ablated as a keep mask over the model's units (0 at the group's units)."""
    layout = UnitLayout(model.n_layers, model.n_heads)
    return [layout.keep_mask([unit for unit in layout.units() if unit not in set(group)]) for group in groups]


def metric_names(metrics: Metrics | None) -> list[str]:
    """The names of the metrics (``accuracy`` by default); refused when empty, for the analyses that compare
    units by their first metric."""
    names = ["accuracy"] if metrics is None else list(metrics)
    if not names:
        raise HeurlensError("this analysis compares units by a metric: give at least one in metrics=")
    return names

