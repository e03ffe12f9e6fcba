"""Training a hard-concrete unit mask against the full model (Heuristic Core paper, Section 2 and Appendix B).

Per optimizer step, with the model's weights frozen, over ``grad_accumulation`` micro-batches:

    z ~ HardConcrete(log_alpha)                      a fresh draw per micro-batch, heads and MLPs
    loss = KL(p_full || p_masked) + lambda1 (t - s) + lambda2 (t - s)^2

(KL by default; any differentiable ``Loss`` of the masked and the full model's scores, such as a logit
difference, can stand in for it.) Units that may not be pruned (``PruneSettings.units``) keep z = 1 and are
left out of the sparsity.

where pruned units are mean-ablated (``UnitMaskHooks``), s is the warmed-up target and t the
model's sparsity: the expected 1 - E[||z||_0] / n (``sparsity_estimate="expected"``) or that of the
draw, 1 - sum(z) / n (``"sampled"``, as the released code). log_alpha is trained by gradient
descent, lambda1 and lambda2 by gradient *ascent* (``maximize=True``), both with AdamW.
Every unit counts once in the sparsity: a head weighs as much as a whole MLP layer, following the
paper's definition (footnote 2: "the fraction of attention heads and MLPs that have been pruned").

Its settings are ``PruneSettings`` (``heurlens.pruning.settings``).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from jaxtyping import Bool, Float
from torch import Tensor
from tqdm.auto import tqdm

from heurlens.devices import device_of
from heurlens.masking import UnitMaskHooks
from heurlens.means import UnitMeans
from heurlens.protocols import HookedModel, Loss, Task
from heurlens.pruning.hard_concrete import HardConcrete
from heurlens.pruning.schedule import target_at
from heurlens.pruning.settings import PruneSettings
from heurlens.training_helpers import frozen_parameters
from heurlens.units import UnitLayout


@dataclass
class MaskTrainingResult:
    log_alpha_heads: Float[Tensor, "layer head"]
    log_alpha_mlps: Float[Tensor, " layer"]
    final_loss: float  # the objective's last value (KL by default) without the Lagrangian terms
    final_expected_sparsity: float
    steps: int


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


def mask_optimizer(mask: HardConcrete, lambdas: Tensor, config: PruneSettings, total_steps: int):
    """One AdamW over two groups, log_alpha (descent) and the Lagrange multipliers (ascent), and its
    learning-rate schedule (transformers' linear warm-up and decay, or constant)."""
    from transformers import get_constant_schedule, get_linear_schedule_with_warmup

    optimizer = torch.optim.AdamW([{"params": [mask.log_alpha], "lr": config.lr_log_alpha},
                                   {"params": [lambdas], "lr": config.lr_lambda, "maximize": True}],
                                  weight_decay=config.weight_decay)
    if config.lr_schedule == "linear":
        return optimizer, get_linear_schedule_with_warmup(optimizer, config.lr_warmup_steps, total_steps)
    return optimizer, get_constant_schedule(optimizer)


def train_unit_mask(model: HookedModel, data: Task, full_logits: Float[Tensor, "example label"],
                    means: UnitMeans, sparsity: float, seed: int, config: PruneSettings = PruneSettings(),
                    progress: bool = True, loss: Loss | None = None) -> MaskTrainingResult:
    """Learn log_alpha for every head and MLP of ``model`` so the masked model matches ``full_logits``.

    ``data`` is the pruning set in batches; ``full_logits`` the full model's logits on it, in the
    same order (computed once, in eval mode, and shared by every seed). Batches are drawn in a
    seeded random order, one pass over the data after another. ``loss(scores, full scores, example ids)``
    replaces the KL (``kl_loss``) when given; ``example ids`` are the batch's indices in ``data``.
    """
    objective = loss or kl_loss
    device = device_of(model)
    means = means.to(device)
    layout = UnitLayout(model.n_layers, model.n_heads)
    prunable = prunable_units(layout, config.units, device)
    torch.manual_seed(seed)
    mask = HardConcrete(layout.n_units, config.log_alpha_init, config.log_alpha_init_std, device=device)
    lambdas = torch.zeros(2, requires_grad=True, device=device)
    batch_size = data.batches[0]["input_ids"].shape[0]
    warmup, total = config.steps_for(sparsity, len(data), batch_size)
    optimizer, schedule = mask_optimizer(mask, lambdas, config, total)
    generator = torch.Generator(device="cpu").manual_seed(seed)  # the batches' order
    # the masks' draws: the same generator on the CPU (as always), one of the model's device elsewhere
    draws = generator if device.type == "cpu" else torch.Generator(device=device).manual_seed(seed)
    offsets = torch.tensor([0] + [b["input_ids"].shape[0] for b in data.batches], device="cpu").cumsum(0)

    hooks = UnitMaskHooks(means, *layout.mask([], device))
    bar = tqdm(total=total, desc=f"pruning seed {seed} to {sparsity:.0%}", unit="step", disable=not progress)
    order: list[int] = []
    fit = model_sparsity = torch.zeros((), device=device)
    try:
        model.train(config.dropout)
        with frozen_parameters(model), hooks.attached(model):  # only the mask and the multipliers train
            for step in range(total):
                target = target_at(step, warmup, sparsity)
                optimizer.zero_grad()
                for _ in range(config.grad_accumulation):
                    if not order:
                        order = torch.randperm(len(data.batches), generator=generator, device="cpu").tolist()
                    index = order.pop()
                    z = mask.sample(draws).where(prunable, 1.0)
                    hooks.heads, hooks.mlps = layout.split(z)
                    logits = model(**data.batches[index])
                    reference = full_logits[offsets[index]:offsets[index + 1]].to(device)
                    fit = objective(logits, reference,
                                    torch.arange(int(offsets[index]), int(offsets[index + 1]), device="cpu"))
                    model_sparsity = (sampled_sparsity(z, prunable) if config.sparsity_estimate == "sampled"
                                      else expected_sparsity(mask, prunable))
                    gap = model_sparsity - target
                    lagrangian = fit + lambdas[0] * gap + lambdas[1] * gap ** 2
                    (lagrangian / config.grad_accumulation).backward()
                if config.max_grad_norm is not None:
                    torch.nn.utils.clip_grad_norm_([mask.log_alpha, lambdas], config.max_grad_norm)
                optimizer.step()
                schedule.step()
                bar.update(1)
                bar.set_postfix(sparsity=f"{model_sparsity.item():.3f}", target=f"{target:.3f}", loss=f"{fit.item():.4f}")
    finally:
        bar.close()
        model.eval()
    log_alpha_heads, log_alpha_mlps = layout.split(mask.log_alpha.detach().cpu())
    return MaskTrainingResult(log_alpha_heads.clone(), log_alpha_mlps.clone(), fit.item(),
                              expected_sparsity(mask, prunable).item(), total)
