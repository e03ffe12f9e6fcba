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
from dataclasses import dataclass
from functools import partial
from typing import Any, Literal

import pandas as pd
import torch
from jaxtyping import Float
from torch import Tensor

from heurlens.errors import HeurlensError
from heurlens.interventions.circuits import Level
from heurlens.interventions.corruption import captured, corruption_of
from heurlens.interventions.graph import EdgeLayout, edge_layout, reader_inputs
from heurlens.interventions.layouts import layout_of
from heurlens.interventions.means import EMBED_HOOK, UnitMeans
from heurlens.interventions.rankings import Ranking
from heurlens.interventions.scoring import MethodName, as_method, unit_replacement
from heurlens.interventions.units import Unit, UnitLayout, as_units, heads_hook_name, mlp_hook_name
from heurlens.interventions.writers import replacement_activations, writer_blocks, writer_hook_names
from heurlens.metrics import metric_output
from heurlens.models.classifier import as_model
from heurlens.protocols import Batch, HookList, Metric, ModelLike, PreparedModel, Task
from heurlens.runtime.devices import device_of, to_device
from heurlens.runtime.progress import progress_bar
from heurlens.tasks import TaskLike, as_task, batch_rows, scored_rows
from heurlens.training_helpers import frozen_parameters

AttributionMethod = Literal["eap", "eap-ig"]
IG_STEPS = 5  # MIB's EAP-IG-inputs
_EXAMPLES_A_PRODUCT = 8  # edge scores: readers' gradients times writers' differences, this many examples at a time


def attribution_ranking(model: ModelLike, task: TaskLike, metric: Metric, *, level: Level = "node",
                        ig_steps: int | None = None, method: MethodName = "corrupt",
                        means: UnitMeans | None = None, progress: bool = True) -> Ranking:
    """Every unit's or edge's estimated drop of ``metric`` when it alone is ablated (-delta_m, the module's formula:
    EAP-IG's sign).

    Args:
        model: a ``HookedModel`` or a bare ``TransformerBridge``.
        task: the prompts attributed over (a task, texts or tokens).
        metric: ``metric(scores, task)`` or ``metric(scores)`` to a one-element tensor with a gradient (e.g.
            ``prompt_tasks.logit_difference``).
        level: "node" (heads and MLPs, ``UnitLayout``'s order) or "edge" (``EdgeLayout``'s order).
        ig_steps: None for EAP; n for EAP-IG on the inputs, n points from the corrupted prompt to the clean one
            (needs ``method`` "corrupt").
        method: what an ablated item carries: "corrupt" (its output on the corrupted prompt), "mean" or "zero".
        means: mean ablation's means (edges: with the embeddings' mean, as ``compute_means`` takes it).
        progress: a bar on stderr, a batch a step.

    Returns:
        A ``signed`` ``Ranking`` labelled "EAP" or "EAP-IG (n steps)", higher kept first."""
    model = as_model(model)
    task = as_task(model, task)
    method = as_method(method)
    check_attribution(level, ig_steps, method)
    chosen = layout_of(model, level)
    layout = chosen if isinstance(chosen, EdgeLayout) else None  # None: units, scored at their own hook points
    device = device_of(model)
    replacement = None if method == "corrupt" else unit_replacement(model, method, means, device)
    if layout is not None and replacement is not None:
        replacement.embeddings_mean()  # refused by name when missing: the edges out of the embeddings need it
    corruption = corruption_of(task) if method == "corrupt" else None
    total_rows = scored_rows(task)
    total: Tensor | None = None
    label = "EAP" if ig_steps is None else f"EAP-IG ({ig_steps} steps)"
    bar = progress_bar(task.batches, desc=f"{label} of the {level}s", unit="batch", disable=not progress)
    with frozen_parameters(model), (reader_inputs(model) if layout is not None else nullcontext()), bar:
        for index, batch in enumerate(bar):
            batch = to_device(batch, device)
            corrupted = None if corruption is None else to_device(corruption.batches[index], device)
            view = task.batch_task(index) if hasattr(task, "batch_task") else task
            scores = batch_rows(batch) / total_rows * _batch_scores(
                model, _Pass(batch, corrupted, view, metric), replacement, layout, ig_steps)
            total = scores if total is None else total + scores
    assert total is not None
    return Ranking(label, level, -total.float(), signed=True)


def attribution_scores(model: ModelLike, task: TaskLike, metric: Metric, *, method: MethodName = "mean",
                       means: UnitMeans | None = None, ig_steps: int | None = None) -> pd.DataFrame:
    """``attribution_ranking`` at node level as a table.

    Args:
        model: as ``attribution_ranking``'s.
        task: as ``attribution_ranking``'s.
        metric: as ``attribution_ranking``'s.
        method: "mean" (with ``means``), "zero" or "corrupt".
        means: the unit means mean ablation puts in place.
        ig_steps: None for EAP, n for EAP-IG (corrupt ablation).

    Returns:
        One row per unit (layer order): ``unit`` and ``score``, delta_m, the estimated change of ``metric`` when the
        unit alone is ablated."""
    model = as_model(model)
    ranking = attribution_ranking(model, task, metric, level="node", ig_steps=ig_steps, method=method, means=means)
    layout = UnitLayout(model.n_layers, model.n_heads)
    return pd.DataFrame({"unit": [str(unit) for unit in layout.units()], "score": (-ranking.scores).tolist()})


def edge_attribution_scores(model: ModelLike, task: TaskLike, metric: Metric, *, ig_steps: int | None = None,
                            method: MethodName = "corrupt", means: UnitMeans | None = None) -> pd.DataFrame:
    """``attribution_ranking`` at edge level as a table.

    Args:
        model: as ``attribution_ranking``'s.
        task: as ``attribution_ranking``'s.
        metric: as ``attribution_ranking``'s.
        ig_steps: None for EAP, n for EAP-IG (corrupt ablation).
        method: what the edge alone carries: its writer's output on the corrupted input ("corrupt"), its mean
            ("mean", with ``means``) or zero.
        means: the means, with the embeddings' (``compute_means``).

    Returns:
        One row per edge (``EdgeLayout``'s order): ``edge`` (``"L0.H1->L1.H0.v"``) and ``score`` (delta_m)."""
    model = as_model(model)
    ranking = attribution_ranking(model, task, metric, level="edge", ig_steps=ig_steps, method=method, means=means)
    return pd.DataFrame({"edge": [str(edge) for edge in edge_layout(model).edges()],
                         "score": (-ranking.scores).tolist()})


def check_attribution(level: Level, ig_steps: int | None, method: MethodName) -> None:
    """Refuse by name what attribution cannot do (checked before any work, by the CLI before the model loads)."""
    method = as_method(method)
    if level not in ("node", "edge"):
        raise HeurlensError(f"level {level!r}: attribute 'node' (heads and MLPs) or 'edge' (edges between them)")
    if ig_steps is not None and (isinstance(ig_steps, bool) or not isinstance(ig_steps, int)):
        raise HeurlensError(f"ig_steps={ig_steps!r}: give EAP-IG's number of steps as a whole number (MIB's "
                            f"{IG_STEPS}), or None for EAP")
    if ig_steps is not None and ig_steps < 1:
        raise HeurlensError(f"ig_steps={ig_steps}: EAP-IG needs one step or more (MIB's {IG_STEPS}); None is EAP")
    if ig_steps is not None and method != "corrupt":
        raise HeurlensError(f"EAP-IG integrates along the inputs from each corrupted prompt to its clean one, and the "
                            f"ablation is {method!r}: use corrupt ablation, or EAP (no ig_steps) with {method} ablation")


@dataclass(frozen=True)
class _Pass:
    """One batch's inputs: the clean ``batch``, its ``corrupted`` batch (or None), the task ``view`` the metric reads
    and the metric."""

    batch: Batch
    corrupted: Batch | None
    view: Task
    metric: Metric


def _batch_scores(model: PreparedModel, inputs: _Pass, replacement: UnitMeans | None, layout: EdgeLayout | None,
                  ig_steps: int | None) -> Float[Tensor, " item"]:
    """sum (r - a) . g on one batch, g averaged over the gradient's points, for every unit or edge."""
    writers = writer_hook_names(model.n_layers)
    clean = captured(model, inputs.batch, writers)
    other = (captured(model, inputs.corrupted, writers) if inputs.corrupted is not None
             else _replacement_of(model, replacement, clean))
    sites = ([group.hook_name for group in layout.groups] if layout is not None
             else [name for name in writers if name != EMBED_HOOK])
    if layout is not None:
        difference = _writer_outputs(model, {name: other[name] - clean[name] for name in writers})  # linear in them
    points: list[float | None] = [None] if ig_steps is None else [k / ig_steps for k in range(ig_steps)]
    mean_gradient: dict[str, Tensor] = {}
    for alpha in points:
        embeddings = None if alpha is None else other[EMBED_HOOK] + alpha * (clean[EMBED_HOOK] - other[EMBED_HOOK])
        for name, gradient in zip(sites, _gradients(model, inputs, sites, embeddings)):
            share = gradient.float() / len(points)
            mean_gradient[name] = mean_gradient[name] + share if name in mean_gradient else share
    if layout is not None:
        return _edge_products(layout, mean_gradient, difference)
    return _unit_products(model, mean_gradient, clean, other)


def _replacement_of(model: PreparedModel, replacement: UnitMeans | None, clean: dict[str, Tensor]
                    ) -> dict[str, Tensor]:
    """Mean or zero ablation's r at every writer's hook point (broadcast to the clean activation's shape): every
    unit's, and the embeddings' (edges' first writer) where the means have one."""
    assert replacement is not None
    other = {}
    for name, value in replacement_activations(replacement, model.n_layers).items():
        a = clean[name]
        other[name] = (value if value.dim() == a.dim() else value[None, None]).to(a.dtype).expand_as(a)
    return other


def _gradients(model: PreparedModel, inputs: _Pass, sites: list[str], embeddings: Tensor | None) -> tuple[Tensor, ...]:
    """dm/dx at every site of one pass over the clean batch, its input embeddings replaced by ``embeddings`` when
    given (EAP-IG's points)."""
    zeros: dict[str, Tensor] = {}

    def through_a_zero(name: str, activation: Tensor, hook: Any) -> Tensor:
        zeros[name] = torch.zeros_like(activation, requires_grad=True)
        return activation + zeros[name]

    def interpolated(resid: Tensor, hook: Any) -> Tensor:
        assert embeddings is not None
        return embeddings.to(resid.dtype)

    hooks: HookList = [(EMBED_HOOK, interpolated)] if embeddings is not None else []
    hooks += [(name, partial(through_a_zero, name)) for name in sites]
    with torch.enable_grad(), model.hooks(hooks):
        value = metric_output(inputs.metric, model(**inputs.batch).float(), inputs.view)
        if not isinstance(value, Tensor) or not value.requires_grad:
            raise HeurlensError("attribution needs a metric with a gradient: return a tensor computed from the scores "
                                "in torch (e.g. a logit difference), not a float")
        missing = [name for name in sites if name not in zeros]
        if missing:
            raise HeurlensError(f"attribution: {missing[0]} did not fire in the forward pass, so its gradient is "
                                "unknown: this bridge does not run the hook points TransformerLens was asked to turn on")
        return torch.autograd.grad(value.reshape(()), [zeros[name] for name in sites])


def _unit_products(model: PreparedModel, gradients: dict[str, Tensor], clean: dict[str, Tensor],
                   other: dict[str, Tensor]) -> Float[Tensor, " unit"]:
    """Each unit's (r - a) . g, summed over examples and positions, in ``UnitLayout``'s order."""
    heads, mlps = torch.zeros(model.n_layers, model.n_heads), torch.zeros(model.n_layers)
    for layer in range(model.n_layers):
        name = heads_hook_name(layer)
        heads[layer] = ((other[name] - clean[name]) * gradients[name]).sum(dim=(0, 1, 3)).float().cpu()
        name = mlp_hook_name(layer)
        mlps[layer] = float(((other[name] - clean[name]) * gradients[name]).sum())
    return UnitLayout(model.n_layers, model.n_heads).join(heads, mlps)


def _writer_outputs(model: PreparedModel, seen: dict[str, Tensor]) -> Float[Tensor, "batch pos writer d_model"]:
    """Every writer's output in the residual stream (``EdgeLayout.writers``' order) from the activations ``seen`` at
    the writers' hook points: the embeddings, then per layer each head's W_O^h z_h and the MLP's output (linear in
    ``seen``: given differences of activations, the differences of the outputs)."""
    bridge = model.bridge  # type: ignore[attr-defined]  # edge level: edge_layout checked it is a bridge
    w_o = [bridge.blocks[layer].attn.W_O.detach() for layer in range(model.n_layers)]
    return torch.cat([block.float().transpose(1, 2) for block in writer_blocks(seen, w_o)], dim=2)


def _edge_products(layout: EdgeLayout, gradients: dict[str, Tensor],
                   difference: Float[Tensor, "batch pos writer d_model"]) -> Float[Tensor, " edge"]:
    """Each edge's (r - a) . g, summed over examples and positions, in ``EdgeLayout``'s order: one product of every
    reader's gradient with every writer's difference (a few examples at a time), of which each reader group keeps
    the writers before it."""
    readers = torch.cat([gradient if gradient.dim() == 4 else gradient[:, :, None]  # [batch, pos, reader, d_model]
                         for gradient in (gradients[group.hook_name] for group in layout.groups)], dim=2)
    products = sum(torch.einsum("bprd,bpwd->rw", readers[start:start + _EXAMPLES_A_PRODUCT],
                                difference[start:start + _EXAMPLES_A_PRODUCT])
                   for start in range(0, len(readers), _EXAMPLES_A_PRODUCT))
    assert isinstance(products, Tensor)
    scores, row = torch.zeros(layout.n_edges), 0
    for group in layout.groups:
        scores[group.start:group.end] = products[row:row + len(group.readers), :group.n_writers].flatten().cpu()
        row += len(group.readers)
    return scores


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
