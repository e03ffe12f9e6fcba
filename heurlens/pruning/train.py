"""Training hard-concrete unit (or edge) masks against the full model (Heuristic Core paper, Section 2 and Appendix B).

Per optimizer step, with the model's weights frozen, over ``grad_accumulation`` micro-batches:

    z ~ HardConcrete(log_alpha)                      a fresh draw per micro-batch, heads and MLPs
    loss = KL(p_full || p_masked) + lambda1 (t - s) + lambda2 (t - s)^2

(``PruneSettings(penalty="quadratic")``: the last term alone, lambda1 held at 0. KL by default; any differentiable
``Loss`` of the masked and the full model's scores, such as a logit difference, can stand in for it.) Units that may
not be pruned (``PruneSettings.units``) keep z = 1 and are left out of the sparsity.

where pruned units are mean-ablated (``UnitMaskHooks``; with ``PruneSettings(ablation="corrupt")`` they take
their activations on each example's corrupted input, computed per micro-batch), s is the warmed-up target and t the
model's sparsity: the expected 1 - E[||z||_0] / n (``sparsity_estimate="expected"``) or that of the
draw, 1 - sum(z) / n (``"sampled"``, as the released code). log_alpha is trained by gradient
descent, lambda1 and lambda2 by gradient *ascent* (``maximize=True``), both with AdamW.
Every unit counts once in the sparsity: a head weighs as much as a whole MLP layer, following the
paper's definition (footnote 2: "the fraction of attention heads and MLPs that have been pruned").

The same loop (``heurlens.pruning.mask_loop``) trains edge masks (``train_edge_masks``, Edge Pruning's recipe: one
mask per edge of ``heurlens.interventions.graph``, applied by ``heurlens.interventions.edge_masks``, a pruned edge
carrying its writer's output on the corrupted input, or with ``ablation="mean"`` its mean output, t the fraction of
edges pruned); it asks of its hooks only
``set_masks`` and ``use_corrupted`` (``heurlens.protocols.MaskHooks``).

After the budget, with ``PruneSettings(extend_steps=N)``, each seed whose masks are still off target (its subnetwork
would be flagged: ``units_off_target``, ``edges_off_target``) trains on at the target, 25 steps at a time, up to N
steps more.

Its settings are ``PruneSettings`` (``heurlens.pruning.settings``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from functools import partial

import torch
from jaxtyping import Bool, Float
from torch import Tensor

from heurlens.errors import HeurlensError
from heurlens.interventions.circuits import mask_hooks
from heurlens.interventions.graph import edge_layout
from heurlens.interventions.joint_masks import EdgeEnds, NodeMasksBeside, edge_ends, joint_log_alpha
from heurlens.interventions.means import UnitMeans
from heurlens.interventions.rankings import Ranking
from heurlens.interventions.units import UnitLayout
from heurlens.protocols import Loss, PreparedModel, Task
from heurlens.pruning.hard_concrete import HardConcrete
from heurlens.pruning.mask_loop import MaskTrainingResult, train_masks
from heurlens.pruning.mask_loop import stacked_batches as stacked_batches  # where it was before
from heurlens.pruning.objective import prunable_units
from heurlens.pruning.settings import PruneSettings
from heurlens.pruning.subnetwork import SPARSITY_TOLERANCE, grid_threshold
from heurlens.runtime.call_context import CallContext, call_context


def train_unit_mask(model: PreparedModel, data: Task, full_logits: Float[Tensor, "example label"],
                    means: UnitMeans, sparsity: float, seed: int, config: PruneSettings = PruneSettings(),
                    progress: bool = True, loss: Loss | None = None, context: CallContext | None = None
                    ) -> MaskTrainingResult:
    """Learn log_alpha for every head and MLP of ``model`` so the masked model matches ``full_logits``.

    ``data`` is the pruning set in batches; ``full_logits`` the full model's logits on it, in the
    same order (computed once, in eval mode, and shared by every seed). Batches are drawn in a
    seeded random order, one pass over the data after another. ``loss(scores, full scores, example ids)``
    replaces the KL (``kl_loss``) when given; ``example ids`` are the indices of the batch's rows of scores among
    ``data``'s (its examples' indices, or with scoring positions its scored positions': ``heurlens.tasks``).
    ``context``: the call's device and precision (``heurlens.runtime.call_context``); None: the model's device, in
    ``config.dtype``.
    """
    return train_unit_masks(model, data, full_logits, means, sparsity, [seed], config, progress, loss, context)[0]


def train_unit_masks(model: PreparedModel, data: Task, full_logits: Float[Tensor, "example label"],
                     means: UnitMeans, sparsity: float, seeds: Sequence[int], config: PruneSettings = PruneSettings(),
                     progress: bool = True, loss: Loss | None = None, context: CallContext | None = None,
                     warm_start: Ranking | None = None) -> list[MaskTrainingResult]:
    """``train_unit_mask`` for several seeds at once: one forward pass per micro-batch over every seed's own
    batch (``stacked_batches``), each example masked by its seed's draw (``UnitMaskHooks``' per-example masks).

    Each seed keeps everything of its own (initial log_alpha, batch order, mask draws, multipliers, AdamW
    state, gradient clipping), and a seed's mask changes only its own examples' scores, so the summed
    objective gives each seed the gradient it gets alone: the same subnetworks as one seed after another, to
    float rounding (padding to the longest batch). What it saves is passes: worth it where one small batch
    leaves the hardware idle (a GPU); on a CPU the padding costs more than the stacking gains
    (docs/pruning.md), so ``prune`` stacks only on CUDA unless told otherwise. With ``config.dropout`` the
    dropout draws are shared, so the runs differ from the seeds alone. One seed takes the same path (one
    micro-batch is ``_micro_batch``), its batch stacked with nothing: the log_alphas are bit for bit those of
    the separate single-seed loop it replaced (checked on a 4-layer BERT).
    """
    context = context or call_context(model, config.dtype, cache=False)
    layout = UnitLayout(model.n_layers, model.n_heads)
    hooks = mask_hooks(model, "node", means.to(context.device), context.device)
    prunable = prunable_units(layout, config.units, context.device)
    return train_masks(model, data, full_logits, hooks, prunable, sparsity, seeds, config, progress, loss,
                       partial(units_off_target, prunable=prunable.cpu(), target=sparsity), context, warm_start)


def train_edge_masks(model: PreparedModel, data: Task, full_logits: Float[Tensor, "example label"], sparsity: float,
                     seeds: Sequence[int], config: PruneSettings = PruneSettings(), progress: bool = True,
                     loss: Loss | None = None, context: CallContext | None = None,
                     warm_start: Ranking | None = None, means: UnitMeans | None = None) -> list[MaskTrainingResult]:
    """``train_unit_masks`` on the model's edges (Edge Pruning, Bhaskar et al. 2024): one hard-concrete mask per edge
    (``heurlens.interventions.graph``), a pruned edge carrying its writer's output on the example's corrupted input
    (``config.ablation="corrupt"``) or its mean output (``"mean"``: ``means``, with the embeddings'), the sparsity the
    fraction of edges pruned; with ``config.node_sparsity``, node masks beside them (``interventions.joint_masks``),
    each result's log_alpha then the joint ranking's and its ``node_log_alpha`` the node masks'; every other part of
    the recipe (objective, Lagrangian, schedule, stacked seeds, ``context``) as for units.

    Args:
        model: a prepared model (``as_model``).
        data: the pruning task (with corrupted examples for corrupt ablation).
        full_logits: the full model's logits on ``data``.
        sparsity: the target fraction of edges pruned.
        seeds: the seeds, trained together (one forward pass over every seed's batch).
        config: the recipe (``PruneSettings``).
        progress: a bar on stderr.
        loss: in place of the KL to the full model.
        context: the call's context (``runtime.call_context``: device, precision, cache use).
        warm_start: a ranking of the edges whose scores set every seed's start.
        means: what a pruned edge carries under mean ablation (``compute_means``; needed then, unused otherwise).

    Returns:
        One result per seed."""
    context = context or call_context(model, config.dtype, cache=False)
    layout = edge_layout(model)
    replacement = None  # corrupt ablation: the writers' outputs on the corrupted batch, set per micro-batch
    if config.ablation == "mean":
        if means is None:
            raise HeurlensError("mean-ablated edge masks need the writers' means: pass means=heurlens.compute_means("
                                "model, data), or train with ablation='corrupt'")
        replacement = means.to(context.device)
    joint = config.node_sparsity is not None  # node masks beside the edge masks (interventions.joint_masks)
    hooks = mask_hooks(model, "edge", replacement, context.device)
    ends = edge_ends(layout) if joint else None  # once for every seed's draws and results
    beside = None if ends is None else NodeMasksBeside(UnitLayout(layout.n_layers, layout.n_heads).n_units,
                                                       ends.to(context.device))
    prunable = torch.ones(layout.n_edges, dtype=torch.bool, device=context.device)
    results = train_masks(model, data, full_logits, hooks, prunable, sparsity, seeds, config, progress, loss,
                          partial(edges_off_target, target=sparsity), context, warm_start, beside)
    if ends is None:
        return results
    return [_with_nodes(result, ends) for result in results]


def _with_nodes(result: MaskTrainingResult, ends: EdgeEnds) -> MaskTrainingResult:
    """A joint run's result with each edge's log_alpha its place in the joint ranking (``joint_log_alpha``: an edge
    ranks no higher than its nodes) and the expected sparsity of the edges that ranking keeps in effect."""
    assert result.node_log_alpha is not None
    log_alpha = joint_log_alpha(result.log_alpha, result.node_log_alpha, ends)
    return replace(result, log_alpha=log_alpha,
                   final_expected_sparsity=1 - float(HardConcrete.keep_probability(log_alpha).mean()))


def units_off_target(log_alpha: Float[Tensor, " unit"], prunable: Bool[Tensor, " unit"], target: float) -> bool:
    """Whether a unit subnetwork cut from these masks is flagged (``Subnetwork.missed_target`` with top-k): no
    threshold of the paper's grid on the keep-probabilities P(z > 0) comes within ``SPARSITY_TOLERANCE`` of the
    target, so a cut to the target's size must choose among units the masks have not told apart."""
    reached = grid_threshold(HardConcrete.keep_probability(log_alpha.cpu()), target, prunable)[1]
    return abs(reached - target) > SPARSITY_TOLERANCE


def edges_off_target(log_alpha: Float[Tensor, " edge"], target: float) -> bool:
    """Whether an edge circuit cut from these masks is flagged: their expected sparsity 1 - mean P(z > 0) further than
    ``SPARSITY_TOLERANCE`` from the target (the grid cannot say at edge sparsities such as 0.98, where its threshold
    1.0, dropping every edge, is always near)."""
    return abs(1 - float(HardConcrete.keep_probability(log_alpha).mean()) - target) > SPARSITY_TOLERANCE
