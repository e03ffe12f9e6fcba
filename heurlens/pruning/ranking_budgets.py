"""Masks trained for a ranking (``PruneSettings(train_for="ranking")``): at every draw a budget, the fraction of the
prunable masks kept, is drawn from MIB's range of circuit sizes, and the draw keeps that many in sum, relaxed:

    a_i = (log_alpha_i + log u_i - log(1 - u_i)) / beta        u_i ~ U(0, 1): the hard-concrete's logistic noise
    tau such that sum_i z_i = k                                (k = the budget in masks; found by bisection)
    z_i = min(1, max(0, sigmoid(a_i - tau) (r - l) + l))

that is, a hard-concrete draw (``pruning.hard_concrete``) with every log_alpha shifted by -beta tau. Entries far above
the k-th place draw z = 1 and far below z = 0 exactly (the stretch to [l, r]); the loss at budget k moves only the
masks near the k-th place (sigmoid's slope), and through tau's implicit gradient (raising one mask raises tau by its
share of the slopes) they compete: one rises only as others fall, by how much each helps the loss. Over the budgets
every place of the order is trained, at 0.1% as at 50%. There is no Lagrangian: the budget is the constraint, and
log_alpha's level is free, only its order counts (the subnetwork, and the ranking the faithfulness curve cuts, are
top-k cuts of it).

The budgets are log-uniform between a floor and 50% (each decade of sizes as many draws: MIB's 1-2-5 grid evenly
among them, not weighted by CPR's trapezoids, which give the sizes of 0.1-5% almost no weight while a circuit of that
size is what is drawn and read); the floor falls from 50% to 0.1% over the warm-up, so the order is set from the whole
model down while the paths an edge needs are still whole. Why this and not a target swept across the grid: a swept
target trains the order at one size at a time and leaves it to drift at the others. MAttr (soft top-k scores over
sampled budgets) reports the same choice; here it keeps the hard-concrete's own noise and parameters, so a ranking run
warm-starts, stacks seeds and records its masks as every other prune does (docs/pruning.md measures the variants).
"""

from __future__ import annotations

import math

import torch
from jaxtyping import Bool, Float
from torch import Tensor

from heurlens.pruning.hard_concrete import BETA, logistic_noise, stretched

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
    scaled = ((logistic_noise(log_alpha.shape, generator, log_alpha.device) + log_alpha) / BETA)[prunable]
    k = min(len(scaled), max(1, round(keep * len(scaled))))
    if k == len(scaled):
        return torch.ones_like(log_alpha)
    tau = _threshold(scaled.detach(), k)
    inside = torch.sigmoid(scaled.detach() - tau)
    z = stretched(inside)
    slope = inside * (1 - inside) * ((z > 0) & (z < 1))  # z's slope, 0 on the clamps
    if slope.sum() > 0:  # tau's gradient (implicit): raising one mask raises tau by its share of the slopes
        tau = tau + (slope / slope.sum() * (scaled - scaled.detach())).sum()
    z = stretched(torch.sigmoid(scaled - tau))
    return torch.ones_like(log_alpha).masked_scatter(prunable, z)


def _threshold(scaled: Float[Tensor, " mask"], k: int, iterations: int = 40) -> Tensor:
    """The tau at which the draw's z sum to k (bisection: the sum falls as tau rises)."""
    low, high = scaled.min() - 3, scaled.max() + 3  # z is all 1 at low - 2.4 and all 0 at high + 2.4: k in between
    for _ in range(iterations):
        tau = (low + high) / 2
        total = stretched(torch.sigmoid(scaled - tau)).sum()
        low, high = (tau, high) if total > k else (low, tau)
    return (low + high) / 2
