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

``PruneSettings.released()`` is the recipe of the authors' released code (princeton-nlp/Heuristic-Core,
``src/pruning/prune-glue.py`` and ``modeling_pert.py``) setting by setting; docs/pruning.md
compares it with heurlens' default.
"""

from __future__ import annotations

import typing
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Literal

import torch
import torch.nn.functional as F
from jaxtyping import Float
from torch import Tensor
from tqdm.auto import tqdm

from heurlens.errors import HeurlensError
from heurlens.evaluate import EvalSet
from heurlens.masking import UnitMaskHooks
from heurlens.means import UnitMeans
from heurlens.models.classifier import HookedClassifier
from heurlens.pruning.hard_concrete import HardConcrete
from heurlens.pruning.schedule import paper_steps, scaled_steps, target_at
from heurlens.training_helpers import frozen_parameters
from heurlens.units import UnitLayout


@dataclass(frozen=True)
class PruneSettings:
    """Hyper-parameters of one pruning run.

    Steps: ``total_steps`` / ``warmup_steps`` when given; otherwise ``step_budget`` decides:
    "paper-epochs" keeps Appendix B's ~3 epochs and warm-up fraction on the data at hand,
    "paper-steps" runs Appendix B's step counts as they are (9,300 at 50%), whatever the data size.
    """

    lr_log_alpha: float = field(default=0.1, metadata={"help": "Learning rate of log_alpha.",
                                                        "min_open": True})
    lr_lambda: float = field(default=1.0, metadata={
        "help": "Learning rate of the Lagrange multipliers (ascent).", "min_open": True})
    total_steps: int | None = field(default=None, metadata={
        "help": "Optimizer steps (default: from --step-budget).", "option": "--steps", "min": 1})
    warmup_steps: int | None = field(default=None, metadata={
        "help": "Steps over which the target sparsity rises from 0 (default: Appendix B's fraction).", "min": 1})
    log_alpha_init: float = field(default=10.0, metadata={
        "help": "Mean of log_alpha at the start: 10 (the released code's) starts every unit fully on, 0 half on.",
        "min": None})
    log_alpha_init_std: float = field(default=0.01, metadata={"help": "Spread of log_alpha at the start."})
    weight_decay: float = field(default=0.0, metadata={
        "help": "AdamW's decoupled weight decay on log_alpha and the multipliers (0: plain Adam)."})
    lr_schedule: Literal["constant", "linear"] = field(default="constant", metadata={
        "help": "linear: the learning rate rises over --lr-warmup-steps, then falls to 0 at the last step."})
    lr_warmup_steps: int = field(default=0, metadata={"help": "Learning-rate warm-up of --lr-schedule linear."})
    max_grad_norm: float | None = field(default=None, metadata={
        "help": "Clip the gradient norm of log_alpha and the multipliers together (default: no clipping).",
        "min_open": True})
    grad_accumulation: int = field(default=1, metadata={
        "help": "Micro-batches per optimizer step, each with its own mask draw.", "min": 1})
    sparsity_estimate: Literal["expected", "sampled"] = field(default="expected", metadata={
        "help": "Model sparsity in the Lagrangian: expected (1 - E[L0]/n) or sampled (1 - sum(z)/n of the draw)."})
    dropout: bool = field(default=False, metadata={
        "help": "Train the masks with the model in train mode (dropout on); the reference stays in eval mode."})
    step_budget: Literal["paper-epochs", "paper-steps"] = field(default="paper-epochs", metadata={
        "help": "Without --steps: Appendix B's ~3 epochs on this data, or its step counts (9,300 at 50%)."})
    discretization: Literal["global-threshold", "per-layer"] = field(default="global-threshold", metadata={
        "help": "Binary mask: threshold P(z > 0) over all units, or the released per-layer soft mask."})

    def __post_init__(self) -> None:
        """Refuse values outside each field's range (``metadata["min"]``, ``"min_open"``) up front."""
        hints = typing.get_type_hints(type(self))
        for setting in fields(self):
            value, low = getattr(self, setting.name), setting.metadata.get("min", 0)
            if low is None:
                continue
            choices = typing.get_args(hints[setting.name]) if typing.get_origin(hints[setting.name]) is Literal else None
            if choices and value not in choices:
                raise HeurlensError(f"pruning setting {setting.name} = {value!r} is not one of {', '.join(choices)}")
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                if value < low or (setting.metadata.get("min_open") and value == low):
                    bound = "above" if setting.metadata.get("min_open") else "at least"
                    raise HeurlensError(f"pruning setting {setting.name} = {value} must be {bound} {low}")

    @classmethod
    def released(cls, **changes) -> PruneSettings:
        """The released code's recipe: log_alpha from N(10, 0.01), AdamW (weight decay 0.01) with lr 0.1 /
        1, 200 warm-up steps then linear decay to 0, gradient clipping at 1.0, 4 micro-batches per step,
        the sampled sparsity, dropout on, Appendix B's step counts, per-layer discretisation. Meant for
        batches of 32 (32 x 4 = 128, as released)."""
        return replace(cls(log_alpha_init=10.0, weight_decay=0.01, lr_schedule="linear", lr_warmup_steps=200,
                           max_grad_norm=1.0, grad_accumulation=4, sparsity_estimate="sampled", dropout=True,
                           step_budget="paper-steps", discretization="per-layer"), **changes)

    def steps_for(self, sparsity: float, n_examples: int, batch_size: int) -> tuple[int, int]:
        """(warm-up, total) optimizer steps; a given total without a warm-up keeps Appendix B's warm-up fraction."""
        paper_warmup, paper_total = paper_steps(sparsity)
        if self.total_steps:
            warmup, total = max(1, round(self.total_steps * paper_warmup / paper_total)), self.total_steps
        elif self.step_budget == "paper-steps":
            warmup, total = paper_warmup, paper_total
        else:
            warmup, total = scaled_steps(sparsity, n_examples, batch_size * self.grad_accumulation)
        return min(self.warmup_steps or warmup, total), total

    def to_dict(self) -> dict:
        return asdict(self)


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
