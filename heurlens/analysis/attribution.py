"""Attribution patching of units (Nanda 2023; node-level EAP, Syed et al. 2023): the first-order estimate of what
ablating a unit does to a metric m, from one forward and one backward pass per batch,

    delta_m(u) ~ sum over examples and positions of (r_u - a_u) . dm/da_u,

a_u the unit's activation on the clean input (a head's ``hook_z`` slice, an MLP's ``hook_mlp_out``), r_u what an
ablation puts in its place (its mean, zero, or its activation on the example's corrupted input), and dm/da_u the
total derivative on the clean run (taken through a zero added at every site, so the gradient flows through every
later unit). m over the task is the batches' values weighted by their rows (a mean over examples, such as the
logit difference). Ranked by |delta_m|, the units give a circuit of every size: the cheap screen mask
optimisation is compared against (``attribution_circuits``, ``heurlens.analysis.faithfulness``).
"""

from __future__ import annotations

from functools import partial

import pandas as pd
import torch
from jaxtyping import Float
from torch import Tensor

from heurlens.errors import HeurlensError
from heurlens.interventions.corruption import corrupted_activations, corruption_of
from heurlens.interventions.mask_sites import head_site, mlp_site
from heurlens.interventions.means import UnitMeans
from heurlens.interventions.scoring import MethodName, as_method, unit_replacement
from heurlens.interventions.units import Unit, UnitLayout, as_units
from heurlens.metrics import metric_output
from heurlens.models.classifier import as_model
from heurlens.protocols import Batch, Metric, ModelLike, PreparedModel, Task
from heurlens.runtime.devices import device_of, to_device
from heurlens.tasks import TaskLike, as_task, batch_rows, scored_rows
from heurlens.training_helpers import frozen_parameters


def attribution_scores(model: ModelLike, task: TaskLike, metric: Metric, *, method: MethodName = "mean",
                       means: UnitMeans | None = None) -> pd.DataFrame:
    """One row per unit (layer order): ``unit`` and ``score``, the estimated change of ``metric`` when the unit alone
    is ablated by ``method`` ("mean" with ``means``, "zero", or "corrupt"). ``metric(scores, task)`` or
    ``metric(scores)`` must return a one-element tensor with a gradient (e.g. ``prompt_tasks.logit_difference``)."""
    model = as_model(model)
    task = as_task(model, task)
    device = device_of(model)
    method = as_method(method)
    # corrupt: set batch by batch from the corrupted batch
    replacement = None if method == "corrupt" else unit_replacement(model, method, means, device)
    corruption = corruption_of(task) if method == "corrupt" else None
    layout = UnitLayout(model.n_layers, model.n_heads)
    heads, mlps = torch.zeros(model.n_layers, model.n_heads), torch.zeros(model.n_layers)
    total_rows = scored_rows(task)
    with frozen_parameters(model):
        for index, batch in enumerate(task.batches):
            batch = to_device(batch, device)
            if corruption is not None:
                replacement = corrupted_activations(model, to_device(corruption.batches[index], device))
            assert replacement is not None
            weight = batch_rows(batch) / total_rows
            batch_heads, batch_mlps = _batch_scores(model, batch, task, index, metric, replacement)
            heads += weight * batch_heads
            mlps += weight * batch_mlps
    scores = layout.join(heads, mlps)
    return pd.DataFrame({"unit": [str(unit) for unit in layout.units()], "score": scores.tolist()})


def _batch_scores(model: PreparedModel, batch: Batch, task: Task, index: int, metric: Metric,
                  replacement: UnitMeans) -> tuple[Float[Tensor, "layer head"], Float[Tensor, " layer"]]:
    """(heads [layer, head], MLPs [layer]) of sum (r - a) . dm/da on one batch."""
    sites = [site for layer in range(model.n_layers) for site in (head_site(layer, model.n_heads), mlp_site(layer))]
    clean: dict[str, Tensor] = {}
    zeros: dict[str, Tensor] = {}

    def through_a_zero(name: str, activation: Tensor) -> Tensor:
        clean[name] = activation.detach()
        zeros[name] = torch.zeros_like(activation, requires_grad=True)
        return activation + zeros[name]

    view = task.batch_task(index) if hasattr(task, "batch_task") else task
    with torch.enable_grad(), model.hooks([site.hook(partial(through_a_zero, site.name)) for site in sites]):
        value = metric_output(metric, model(**batch).float(), view)
        if not isinstance(value, Tensor) or not value.requires_grad:
            raise HeurlensError("attribution needs a metric with a gradient: return a tensor computed from the scores "
                                "in torch (e.g. a logit difference), not a float")
        gradients = torch.autograd.grad(value.reshape(()), [zeros[site.name] for site in sites])
    heads, mlps = torch.zeros(model.n_layers, model.n_heads), torch.zeros(model.n_layers)
    for site, gradient in zip(sites, gradients):
        layer = int(site.name.split(".")[1])
        a = clean[site.name]
        if site.kind == "heads":
            r = replacement.heads[layer]
            r = r if r.dim() == a.dim() else r[None, None]
            heads[layer] = ((r - a) * gradient).sum(dim=(0, 1, 3)).float().cpu()
        else:
            r = replacement.mlps[layer]
            r = r if r.dim() == a.dim() else r[None, None]
            mlps[layer] = float(((r - a) * gradient).sum())
    return heads, mlps


def attribution_circuits(scores: pd.DataFrame, fractions: list[float], n_layers: int, n_heads: int
                         ) -> dict[str, list[Unit]]:
    """The circuit of each fraction of units kept: the round(k n) units of highest |score| (ties: layer order),
    labelled ``attribution, k = 0.25``."""
    order = scores.assign(size=scores["score"].abs()).sort_values("size", ascending=False, kind="stable")["unit"]
    circuits = {}
    for fraction in fractions:
        count = round(fraction * len(order))
        circuits[f"attribution, k = {fraction:.3g}"] = as_units(list(order.iloc[:count]), n_layers, n_heads)
    return circuits
