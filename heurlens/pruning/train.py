"""Training a hard-concrete unit mask against the full model (Heuristic Core paper, Section 2 and Appendix B).

Per optimizer step, with the model's weights frozen, over ``grad_accumulation`` micro-batches:

    z ~ HardConcrete(log_alpha)                      a fresh draw per micro-batch, heads and MLPs
    loss = KL(p_full || p_masked) + lambda1 (t - s) + lambda2 (t - s)^2

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
from jaxtyping import Float
from torch import Tensor
from tqdm.auto import tqdm

from heurlens.evaluate import EvalSet
from heurlens.masking import UnitMaskHooks
from heurlens.means import UnitMeans
from heurlens.models.classifier import HookedClassifier
from heurlens.pruning.hard_concrete import HardConcrete
from heurlens.pruning.schedule import target_at
from heurlens.pruning.settings import PruneSettings
from heurlens.training_helpers import frozen_parameters
from heurlens.units import UnitLayout


@dataclass
class MaskTrainingResult:
    log_alpha_heads: Float[Tensor, "layer head"]
    log_alpha_mlps: Float[Tensor, " layer"]
    final_kl: float
    final_expected_sparsity: float
    steps: int


def expected_sparsity(mask: HardConcrete) -> Float[Tensor, ""]:
    """1 - E[||z||_0] / n: the expected fraction of units pruned."""
    return 1 - mask.expected_l0() / mask.log_alpha.numel()


def sampled_sparsity(z: Float[Tensor, " ..."]) -> Float[Tensor, ""]:
    """1 - sum(z) / n for one mask draw (differentiable in log_alpha through the draw)."""
    return 1 - z.sum() / z.numel()


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


def train_unit_mask(model: HookedClassifier, data: EvalSet, full_logits: Float[Tensor, "example label"],
                    means: UnitMeans, sparsity: float, seed: int, config: PruneSettings = PruneSettings(),
                    progress: bool = True) -> MaskTrainingResult:
    """Learn log_alpha for every head and MLP of ``model`` so the masked model matches ``full_logits``.

    ``data`` is the pruning set in batches; ``full_logits`` the full model's logits on it, in the
    same order (computed once, in eval mode, and shared by every seed). Batches are drawn in a
    seeded random order, one pass over the data after another.
    """
    layout = UnitLayout(model.n_layers, model.n_heads)
    torch.manual_seed(seed)
    mask = HardConcrete(layout.n_units, config.log_alpha_init, config.log_alpha_init_std)
    lambdas = torch.zeros(2, requires_grad=True)
    batch_size = data.batches[0]["input_ids"].shape[0]
    warmup, total = config.steps_for(sparsity, len(data), batch_size)
    optimizer, schedule = mask_optimizer(mask, lambdas, config, total)
    generator = torch.Generator().manual_seed(seed)
    offsets = torch.tensor([0] + [b["input_ids"].shape[0] for b in data.batches]).cumsum(0)

    hooks = UnitMaskHooks(means, *layout.mask([]))
    bar = tqdm(total=total, desc=f"pruning seed {seed} to {sparsity:.0%}", unit="step", disable=not progress)
    order: list[int] = []
    kl = model_sparsity = torch.zeros(())
    try:
        model.train(config.dropout)
        with frozen_parameters(model), model.hooks(hooks.hooks):  # only the mask and the multipliers train
            for step in range(total):
                target = target_at(step, warmup, sparsity)
                optimizer.zero_grad()
                for _ in range(config.grad_accumulation):
                    if not order:
                        order = torch.randperm(len(data.batches), generator=generator).tolist()
                    index = order.pop()
                    z = mask.sample(generator)
                    hooks.heads, hooks.mlps = layout.split(z)
                    logits = model(**data.batches[index])
                    reference = full_logits[offsets[index]:offsets[index + 1]]
                    kl = F.kl_div(F.log_softmax(logits, -1), F.log_softmax(reference, -1), log_target=True,
                                  reduction="batchmean")
                    model_sparsity = (sampled_sparsity(z) if config.sparsity_estimate == "sampled"
                                      else expected_sparsity(mask))
                    gap = model_sparsity - target
                    loss = kl + lambdas[0] * gap + lambdas[1] * gap ** 2
                    (loss / config.grad_accumulation).backward()
                if config.max_grad_norm is not None:
                    torch.nn.utils.clip_grad_norm_([mask.log_alpha, lambdas], config.max_grad_norm)
                optimizer.step()
                schedule.step()
                bar.update(1)
                bar.set_postfix(sparsity=f"{model_sparsity.item():.3f}", target=f"{target:.3f}", kl=f"{kl.item():.4f}")
    finally:
        bar.close()
        model.eval()
    log_alpha_heads, log_alpha_mlps = layout.split(mask.log_alpha.detach())
    return MaskTrainingResult(log_alpha_heads.clone(), log_alpha_mlps.clone(), kl.item(),
                              expected_sparsity(mask).item(), total)
