"""The Heuristic Core paper's pruning objective (Section 2 and Appendix B), piece by piece:

    loss = KL(p_full || p_masked) + lambda1 (t - s) + lambda2 (t - s)^2

``kl_loss`` is the first term; t, the model's sparsity over the prunable units (``prunable_units``), is the
expected 1 - E[||z||_0] / n (``expected_sparsity``) or that of one draw (``sampled_sparsity``); the mask's
log_alpha descends it and the Lagrange multipliers ascend it (``mask_optimizer``; with ``PruneSettings(penalty=
"quadratic")`` lambda1 stays 0). The loop that trains them
is ``heurlens.pruning.train``; ``subnetwork_loss`` measures the first term again on the binary subnetwork cut from
the trained masks.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from jaxtyping import Bool, Float
from torch import Tensor

from heurlens.data.prompt_tasks import PromptSet, logit_difference
from heurlens.errors import HeurlensError
from heurlens.interventions.units import UnitLayout
from heurlens.metrics import metric_loss
from heurlens.protocols import Loss, Metric, Task
from heurlens.pruning.hard_concrete import HardConcrete
from heurlens.pruning.settings import PruneSettings
from heurlens.tasks import batch_rows


def prunable_units(layout: UnitLayout, units: str, device: torch.device | str = "cpu") -> Bool[Tensor, " unit"]:
    """Which entries of the flat unit vector pruning may drop: ``units`` is "all", "heads" or "mlps"."""
    heads, mlps = layout.split(torch.ones(layout.n_units, dtype=torch.bool, device=device))
    return layout.join(heads & (units != "mlps"), mlps & (units != "heads"))


def expected_sparsity(mask: HardConcrete, prunable: Bool[Tensor, " unit"] | None = None) -> Float[Tensor, ""]:
    """1 - E[||z||_0] / n over the prunable units: the expected fraction of them pruned."""
    keep = mask.prob_nonzero()
    if prunable is not None:
        keep = keep[prunable]
    return 1 - keep.sum() / keep.numel()


def sampled_sparsity(z: Float[Tensor, " ..."], prunable: Bool[Tensor, " unit"] | None = None) -> Float[Tensor, ""]:
    """1 - sum(z) / n over the prunable units of one mask draw (differentiable in log_alpha through the draw)."""
    if prunable is not None:
        z = z[prunable]
    return 1 - z.sum() / z.numel()


def kl_loss(scores: Float[Tensor, "batch output"], reference: Float[Tensor, "batch output"],
            example_ids: Tensor) -> Tensor:
    """The Heuristic Core paper's objective: KL(p_full || p_masked), averaged over the batch."""
    return F.kl_div(F.log_softmax(scores, -1), F.log_softmax(reference, -1), log_target=True, reduction="batchmean")


def pruning_loss(config: PruneSettings, data: Task, loss: Loss | None, metric: Metric | None) -> Loss | None:
    """The loss the masks train on: ``loss`` when given; else ``metric`` kept at the full model's value
    (``metric_loss``); else ``config.objective``'s: None for "kl" (``kl_loss``), for "logit-diff" the task's
    logit difference kept at the full model's, (LD(masked) - LD(full))^2 over each batch (MIB's metric), and for
    "logit-diff-max" LD(full) - LD(masked), the logit difference raised (MIB's CPR's aim)."""
    given = [name for name, value in (("loss", loss), ("metric", metric)) if value is not None]
    if config.objective != "kl" and given:
        raise HeurlensError(f"objective={config.objective!r} and {given[0]}= both say what to prune for: give one")
    if len(given) == 2:
        raise HeurlensError("give a loss or a metric to prune for, not both")
    if config.objective in ("logit-diff", "logit-diff-max"):
        if not isinstance(data, PromptSet) or not data.distractors.shape[1]:
            raise HeurlensError(f"objective={config.objective!r} (--objective {config.objective}) trains on the logit "
                                f"difference of answer and distractors, and the task {data.name!r} has no distractors: "
                                "prune a prompt task with distractors (ioi, greater-than, a .jsonl file), or use "
                                "objective='kl'")
        return metric_loss(logit_difference, data, "raise" if config.objective == "logit-diff-max" else "keep")
    return loss if metric is None else metric_loss(metric, data)


def subnetwork_loss(scores: Float[Tensor, "row output"], data: Task, full_logits: Float[Tensor, "row output"],
                    objective: Loss) -> float:
    """The objective (``kl_loss`` by default) of a binary subnetwork or circuit over the whole pruning data, from its
    ``scores`` there (pruned units or edges ablated as in training, no mask draw, the model in eval mode). The loss
    is taken batch by batch as in training (a metric's loss sees one batch's task) and averaged weighted by the
    batches' rows of scores (for the KL: its mean over every row). Beside the last training step's value (one
    batch, one draw of the soft masks) it says how far cutting the masks to 0/1 moved the loss."""
    full_logits, total, start = full_logits.cpu(), 0.0, 0
    for batch in data.batches:
        end = start + batch_rows(batch)
        rows = scores[start:end].detach().requires_grad_()  # a loss may check that its scores carry a gradient
        with torch.enable_grad():
            total += float(objective(rows, full_logits[start:end], torch.arange(start, end)).detach()) * (end - start)
        start = end
    return total / start


def mask_optimizer(mask: HardConcrete, lambdas: Tensor, config: PruneSettings, total_steps: int,
                   nodes: HardConcrete | None = None, node_lambdas: Tensor | None = None):
    """One AdamW over two groups, log_alpha (descent) and the Lagrange multipliers (ascent), and its
    learning-rate schedule (transformers' linear warm-up and decay, or constant); node masks beside edge masks
    (``nodes``, ``node_lambdas``) join the two groups."""
    from transformers import get_constant_schedule, get_linear_schedule_with_warmup

    masks, multipliers = [mask.log_alpha], [lambdas]
    if nodes is not None and node_lambdas is not None:
        masks, multipliers = [*masks, nodes.log_alpha], [*multipliers, node_lambdas]
    optimizer = torch.optim.AdamW([{"params": masks, "lr": config.lr_log_alpha},
                                   {"params": multipliers, "lr": config.lr_lambda, "maximize": True}],
                                  weight_decay=config.weight_decay)
    if config.lr_schedule == "linear":
        return optimizer, get_linear_schedule_with_warmup(optimizer, config.lr_warmup_steps, total_steps)
    return optimizer, get_constant_schedule(optimizer)
