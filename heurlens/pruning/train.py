"""Training a hard-concrete unit mask against the full model (seed 001, Section 2 and Appendix B).

Per step, with the model's weights frozen:

    z ~ HardConcrete(log_alpha)                      one draw per batch, heads and MLPs
    loss = KL(p_full || p_masked) + lambda1 (t - s) + lambda2 (t - s)^2

where pruned units are mean-ablated (``UnitMaskHooks``), t is the expected sparsity
1 - E[||z||_0] / n_units and s the warmed-up target. log_alpha is trained by gradient descent
(Adam, lr 0.1), lambda1 and lambda2 by gradient *ascent* (Adam with maximize=True, lr 1).
Every unit counts once in the sparsity: a head weighs as much as a whole MLP layer, following the
paper's definition (footnote 2: "the fraction of attention heads and MLPs that have been pruned").
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

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
from heurlens.pruning.schedule import paper_steps, scaled_steps, target_at


@dataclass(frozen=True)
class PruneConfig:
    """Hyper-parameters of one pruning run; None steps mean Appendix B's, scaled to the data."""

    lr_log_alpha: float = 0.1
    lr_lambda: float = 1.0
    total_steps: int | None = None
    warmup_steps: int | None = None
    log_alpha_init: float = 0.0
    log_alpha_init_std: float = 0.01

    def steps_for(self, sparsity: float, n_examples: int, batch_size: int) -> tuple[int, int]:
        """(warm-up, total) steps; a given total without a warm-up keeps Appendix B's warm-up fraction."""
        if self.total_steps:
            paper_warmup, paper_total = paper_steps(sparsity)
            warmup, total = max(1, round(self.total_steps * paper_warmup / paper_total)), self.total_steps
        else:
            warmup, total = scaled_steps(sparsity, n_examples, batch_size)
        return min(self.warmup_steps or warmup, total), total

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class MaskTrainingResult:
    log_alpha_heads: Float[Tensor, "layer head"]
    log_alpha_mlps: Float[Tensor, "layer"]
    final_kl: float
    final_expected_sparsity: float
    steps: int


def expected_sparsity(mask: HardConcrete) -> Float[Tensor, ""]:
    """1 - E[||z||_0] / n: the expected fraction of units pruned."""
    return 1 - mask.expected_l0() / mask.log_alpha.numel()


def train_unit_mask(model: HookedClassifier, data: EvalSet, full_logits: Float[Tensor, "example label"],
                    means: UnitMeans, sparsity: float, seed: int, config: PruneConfig = PruneConfig(),
                    progress: bool = True) -> MaskTrainingResult:
    """Learn log_alpha for every head and MLP of ``model`` so the masked model matches ``full_logits``.

    ``data`` is the pruning set in batches; ``full_logits`` the full model's logits on it, in the
    same order (computed once and shared by every seed).
    """
    n_layers, n_heads = model.n_layers, model.n_heads
    torch.manual_seed(seed)
    mask = HardConcrete(n_layers * (n_heads + 1), config.log_alpha_init, config.log_alpha_init_std)
    lambdas = torch.zeros(2, requires_grad=True)
    mask_optimizer = torch.optim.Adam(mask.parameters(), lr=config.lr_log_alpha)
    lambda_optimizer = torch.optim.Adam([lambdas], lr=config.lr_lambda, maximize=True)
    generator = torch.Generator().manual_seed(seed)
    batch_size = data.batches[0]["input_ids"].shape[0]
    warmup, total = config.steps_for(sparsity, len(data), batch_size)
    offsets = torch.tensor([0] + [b["input_ids"].shape[0] for b in data.batches]).cumsum(0)

    frozen = [p for p in model.parameters() if p.requires_grad]
    for parameter in frozen:  # only the mask and the multipliers train; restored below
        parameter.requires_grad_(False)
    hooks = UnitMaskHooks(means, torch.ones(n_layers, n_heads), torch.ones(n_layers))
    bar = tqdm(total=total, desc=f"pruning seed {seed} to {sparsity:.0%}", unit="step", disable=not progress)
    order: list[int] = []
    kl = torch.zeros(())
    with model.hooks(hooks.hooks):
        for step in range(total):
            if not order:
                order = torch.randperm(len(data.batches), generator=generator).tolist()
            index = order.pop()
            batch = data.batches[index]
            z = mask.sample(generator).view(n_layers, n_heads + 1)
            hooks.heads, hooks.mlps = z[:, :n_heads], z[:, n_heads]
            logits = model(**batch)
            reference = full_logits[offsets[index]:offsets[index + 1]]
            kl = F.kl_div(F.log_softmax(logits, -1), F.log_softmax(reference, -1), log_target=True,
                          reduction="batchmean")
            gap = expected_sparsity(mask) - target_at(step, warmup, sparsity)
            loss = kl + lambdas[0] * gap + lambdas[1] * gap ** 2
            mask_optimizer.zero_grad()
            lambda_optimizer.zero_grad()
            loss.backward()
            mask_optimizer.step()
            lambda_optimizer.step()
            bar.update(1)
            bar.set_postfix(sparsity=f"{expected_sparsity(mask).item():.3f}", target=f"{target_at(step, warmup, sparsity):.3f}",
                            kl=f"{kl.item():.4f}")
    bar.close()
    for parameter in frozen:
        parameter.requires_grad_(True)
    log_alpha = mask.log_alpha.detach().view(n_layers, n_heads + 1)
    return MaskTrainingResult(log_alpha[:, :n_heads].clone(), log_alpha[:, n_heads].clone(), kl.item(),
                              expected_sparsity(mask).item(), total)
