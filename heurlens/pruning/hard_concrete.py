"""Hard-concrete masks (Louizos, Welling & Kingma 2018; as in CoFi and the Heuristic Core paper, Appendix B).

For every maskable unit i with learnable log_alpha_i:

    u ~ U(eps, 1 - eps)
    s = sigmoid((log u - log(1 - u) + log_alpha) / beta)      (beta = 2/3)
    s_bar = s * (r - l) + l                                   ([l, r] = [-0.1, 1.1])
    z = min(1, max(0, s_bar))

The stretch puts real probability mass on exactly 0 and exactly 1. The expected L0 norm, the
expected number of non-zero entries, has a closed form:

    E[||z||_0] = sum_i P(z_i > 0) = sum_i sigmoid(log_alpha_i - beta * log(-l / r))

Subnetworks are evaluated with binary masks made from the trained log_alphas
(``pruning.subnetwork.discretize``).
"""

from __future__ import annotations

import math

import torch
from jaxtyping import Float
from torch import Tensor, nn

BETA = 2 / 3
LIMIT_LEFT = -0.1
LIMIT_RIGHT = 1.1
EPS = 1e-6


def logistic_noise(shape: torch.Size, generator: torch.Generator | None = None,
                   device: torch.device | str = "cpu") -> Tensor:
    """log u - log(1 - u), u ~ U(eps, 1 - eps): the noise a hard-concrete draw adds to log_alpha."""
    u = torch.rand(shape, generator=generator, device=device).clamp(EPS, 1 - EPS)
    return torch.log(u) - torch.log(1 - u)


def stretched(s: Tensor, left: float = LIMIT_LEFT, right: float = LIMIT_RIGHT) -> Tensor:
    """z = min(1, max(0, s (r - l) + l)): a sigmoid's output stretched to [l, r] and clamped, so 0 and 1 get mass."""
    return (s * (right - left) + left).clamp(0, 1)


class HardConcrete(nn.Module):
    """A vector of hard-concrete mask entries, one per unit, parameterised by ``log_alpha``."""

    def __init__(self, n: int, init_mean: float = 0.0, init_std: float = 0.01,
                 beta: float = BETA, left: float = LIMIT_LEFT, right: float = LIMIT_RIGHT,
                 device: torch.device | str = "cpu"):
        super().__init__()
        self.log_alpha = nn.Parameter(torch.empty(n, device=device).normal_(init_mean, init_std))
        self.beta, self.left, self.right = beta, left, right

    def sample(self, generator: torch.Generator | None = None) -> Float[Tensor, " unit"]:
        """A training-time mask draw (differentiable in log_alpha through the reparameterisation), on
        log_alpha's device (``generator``, when given, must be on it too: draws are reproducible per device)."""
        noise = logistic_noise(self.log_alpha.shape, generator, self.log_alpha.device)
        return stretched(torch.sigmoid((noise + self.log_alpha) / self.beta), self.left, self.right)

    def prob_nonzero(self) -> Float[Tensor, " unit"]:
        """P(z_i > 0) for each entry; its sum is the expected L0 norm."""
        return self.keep_probability(self.log_alpha, self.beta, self.left, self.right)

    @staticmethod
    def keep_probability(log_alpha: Tensor, beta: float = BETA, left: float = LIMIT_LEFT,
                         right: float = LIMIT_RIGHT) -> Tensor:
        """P(z > 0) = sigmoid(log_alpha - beta log(-l / r)), elementwise, for any tensor of log_alphas."""
        return torch.sigmoid(log_alpha - beta * math.log(-left / right))

    def expected_l0(self) -> Float[Tensor, ""]:
        return self.prob_nonzero().sum()
