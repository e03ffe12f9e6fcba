"""One batch's attribution patching (``attribution``'s formula): the activations at the writers' hook points on the
clean and the corrupted (or mean- or zero-ablated) input, the gradient of the metric at the sites (EAP's clean run, or
EAP-IG's points along the inputs), and the products (r - a) . g of every unit or edge."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any

import torch
from jaxtyping import Float
from torch import Tensor

from heurlens.errors import HeurlensError
from heurlens.interventions.corruption import captured
from heurlens.interventions.graph import EdgeLayout
from heurlens.interventions.means import EMBED_HOOK, UnitMeans
from heurlens.interventions.units import UnitLayout, heads_hook_name, mlp_hook_name
from heurlens.interventions.writers import replacement_activations, writer_blocks, writer_hook_names
from heurlens.metrics import metric_output
from heurlens.protocols import Batch, HookList, Metric, PreparedModel, Task

EXAMPLES_A_PRODUCT = 8  # edge scores: readers' gradients times writers' differences, this many examples at a time


@dataclass(frozen=True)
class Pass:
    """One batch's inputs: the clean ``batch``, its ``corrupted`` batch (or None), the task ``view`` the metric reads
    and the metric."""

    batch: Batch
    corrupted: Batch | None
    view: Task
    metric: Metric


def batch_scores(model: PreparedModel, inputs: Pass, replacement: UnitMeans | None, layout: EdgeLayout | None,
                 ig_steps: int | None, points_a_pass: int | None = 1) -> Float[Tensor, " item"]:
    """sum (r - a) . g on one batch, g averaged over the gradient's points, for every unit or edge; EAP-IG's points
    ``points_a_pass`` at a time (None: all), each such pass over as many copies of the batch stacked."""
    writers = writer_hook_names(model.n_layers)
    clean = captured(model, inputs.batch, writers)
    other = (captured(model, inputs.corrupted, writers) if inputs.corrupted is not None
             else _replacement_of(model, replacement, clean))
    sites = ([group.hook_name for group in layout.groups] if layout is not None
             else [name for name in writers if name != EMBED_HOOK])
    if layout is not None:
        difference = _writer_outputs(model, {name: other[name] - clean[name] for name in writers})  # linear in them
    points = [None] if ig_steps is None else [k / ig_steps for k in range(ig_steps)]
    per_pass = len(points) if points_a_pass is None else points_a_pass
    mean_gradient: dict[str, Tensor] = {}
    for first in range(0, len(points), per_pass):
        alphas = points[first:first + per_pass]
        embeddings = None if alphas[0] is None else torch.cat([
            other[EMBED_HOOK] + alpha * (clean[EMBED_HOOK] - other[EMBED_HOOK]) for alpha in alphas])
        for name, gradient in zip(sites, _gradients(model, inputs, sites, embeddings, len(alphas))):
            share = gradient.float().unflatten(0, (len(alphas), -1)).sum(0) / len(points)
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


def _gradients(model: PreparedModel, inputs: Pass, sites: list[str], embeddings: Tensor | None, copies: int = 1
               ) -> tuple[Tensor, ...]:
    """dm/dx at every site of one pass over ``copies`` copies of the clean batch stacked, their input embeddings
    replaced by ``embeddings`` when given (EAP-IG's points, one per copy): the gradient of the sum of each copy's
    metric, so each copy's rows hold its own point's gradient."""
    zeros: dict[str, Tensor] = {}

    def through_a_zero(name: str, activation: Tensor, hook: Any) -> Tensor:
        zeros[name] = torch.zeros_like(activation, requires_grad=True)
        return activation + zeros[name]

    def interpolated(resid: Tensor, hook: Any) -> Tensor:
        assert embeddings is not None
        return embeddings.to(resid.dtype)

    hooks: HookList = [(EMBED_HOOK, interpolated)] if embeddings is not None else []
    hooks += [(name, partial(through_a_zero, name)) for name in sites]
    batch = inputs.batch if copies == 1 else {key: value.repeat(copies, *[1] * (value.dim() - 1))
                                              for key, value in inputs.batch.items()}
    with torch.enable_grad(), model.hooks(hooks):
        values = [metric_output(inputs.metric, scores, inputs.view)
                  for scores in model(**batch).float().chunk(copies)]
        if not all(isinstance(value, Tensor) and value.requires_grad for value in values):
            raise HeurlensError("attribution needs a metric with a gradient: return a tensor computed from the scores "
                                "in torch (e.g. a logit difference), not a float")
        value = torch.stack([value.reshape(()) for value in values]).sum()
        missing = [name for name in sites if name not in zeros]
        if missing:
            raise HeurlensError(f"attribution: {missing[0]} did not fire in the forward pass, so its gradient is "
                                "unknown: this bridge does not run the hook points TransformerLens was asked to turn on")
        return torch.autograd.grad(value, [zeros[name] for name in sites])


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
    products = sum(torch.einsum("bprd,bpwd->rw", readers[start:start + EXAMPLES_A_PRODUCT],
                                difference[start:start + EXAMPLES_A_PRODUCT])
                   for start in range(0, len(readers), EXAMPLES_A_PRODUCT))
    assert isinstance(products, Tensor)
    scores, row = torch.zeros(layout.n_edges), 0
    for group in layout.groups:
        scores[group.start:group.end] = products[row:row + len(group.readers), :group.n_writers].flatten().cpu()
        row += len(group.readers)
    return scores
