"""Masks trained for a ranking (``PruneSettings(train_for="ranking")``): at every draw a budget, the fraction of the
prunable masks kept, is drawn from MIB's grid of circuit sizes, and the draw keeps about that many, relaxed:

    a_i = (log_alpha_i + log u_i - log(1 - u_i)) / beta        u_i ~ U(0, 1): the hard-concrete's logistic noise
    tau = midway between the k-th and the (k+1)-th largest a   (k = the budget in masks; no gradient through tau)
    z_i = min(1, max(0, sigmoid(a_i - tau) (r - l) + l))

that is, a hard-concrete draw (``pruning.hard_concrete``) with every log_alpha shifted by -beta tau, so that k of them
lie above its midpoint. Entries far above the k-th place draw z = 1 and far below z = 0 exactly (the stretch to
[l, r]); the loss at budget k moves only the masks near the k-th place (sigmoid's slope), so over the grid's budgets
every place of the order is trained, at 0.1% as at 50%. There is no Lagrangian: the budget is the constraint, and
log_alpha's level is free, only its order counts (the subnetwork, and the ranking the faithfulness curve cuts, are
top-k cuts of it).

Why this and not a target swept across the grid: a swept target trains the order at one size at a time and leaves it
to drift at the others; sampling the budget at every draw trains all of them at once. MAttr (soft top-k scores over
sampled budgets k) reports the same choice; here it keeps the hard-concrete's own noise and parameters, so a ranking
run warm-starts, stacks seeds and records its masks as every other prune does. The budgets are drawn uniformly from
the grid's sizes below the whole model (each size as many draws), not weighted by CPR's trapezoids, which give the
sizes of 0.1-5% almost no weight while a circuit of that size is what is drawn and read.
"""

from __future__ import annotations

import math

import torch
from jaxtyping import Bool, Float
from torch import Tensor

from heurlens.pruning.hard_concrete import BETA, EPS, LIMIT_LEFT, LIMIT_RIGHT

RANKING_BUDGETS = (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5)  # MIB's grid below the whole model (1.0)


def drawn_budget(generator: torch.Generator, warmed: float = 1.0) -> float:
    """A fraction of the masks to keep, log-uniform between a floor and the largest of ``RANKING_BUDGETS`` (each
    decade of sizes as many draws, MIB's 1-2-5 grid evenly among them and every size between trained too). The floor
    falls log-linearly from the largest budget to the smallest as ``warmed`` goes from 0 to 1 (the budget warm-up).

    Args:
        generator: the random stream it is drawn from (a CPU generator: the seed's batch order's).
        warmed: the fraction of the budget warm-up done, in [0, 1].

    Returns:
        The fraction of the prunable masks kept in this draw."""
    high = math.log(RANKING_BUDGETS[-1])
    low = high + (math.log(RANKING_BUDGETS[0]) - high) * min(1.0, warmed)
    return math.exp(low + (high - low) * float(torch.rand((), generator=generator)))


def budget_draw(log_alpha: Float[Tensor, " mask"], prunable: Bool[Tensor, " mask"], keep: float,
                generator: torch.Generator | None = None) -> Float[Tensor, " mask"]:
    """A mask draw keeping ``keep`` of the prunable masks in sum (the module's formula), differentiable in log_alpha
    through the draw and through tau; the entries not prunable are 1.

    Args:
        log_alpha: the masks' parameters.
        prunable: which masks the budget counts (the others are kept).
        keep: the fraction of the prunable masks kept, at least one of them.
        generator: the draw's random stream, on log_alpha's device.

    Returns:
        z in [0, 1], one per mask."""
    u = torch.rand(log_alpha.shape, generator=generator, device=log_alpha.device).clamp(EPS, 1 - EPS)
    scaled = ((log_alpha + torch.log(u) - torch.log(1 - u)) / BETA)[prunable]
    k = min(len(scaled), max(1, round(keep * len(scaled))))
    if k == len(scaled):
        return torch.ones_like(log_alpha)
    tau = _threshold(scaled.detach(), k)
    inside = torch.sigmoid(scaled.detach() - tau)
    stretched = inside * (LIMIT_RIGHT - LIMIT_LEFT) + LIMIT_LEFT
    slope = inside * (1 - inside) * ((stretched > 0) & (stretched < 1))  # z's slope, 0 on the clamps
    if slope.sum() > 0:  # tau's gradient (implicit): raising one mask raises tau by its share of the slopes
        tau = tau + (slope / slope.sum() * (scaled - scaled.detach())).sum()
    z = (torch.sigmoid(scaled - tau) * (LIMIT_RIGHT - LIMIT_LEFT) + LIMIT_LEFT).clamp(0, 1)
    return torch.ones_like(log_alpha).masked_scatter(prunable, z)


def _threshold(scaled: Float[Tensor, " mask"], k: int, iterations: int = 40) -> Tensor:
    """The tau at which the draw's z sum to k (bisection: the sum falls as tau rises)."""
    low, high = scaled.min() - 3, scaled.max() + 3  # z is all 1 at low - 2.4 and all 0 at high + 2.4: k in between
    for _ in range(iterations):
        tau = (low + high) / 2
        total = (torch.sigmoid(scaled - tau) * (LIMIT_RIGHT - LIMIT_LEFT) + LIMIT_LEFT).clamp(0, 1).sum()
        low, high = (tau, high) if total > k else (low, tau)
    return (low + high) / 2
