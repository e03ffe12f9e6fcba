"""Modular arithmetic tasks of the Subtask Induction paper (Section 4, Appendix B.4): sequences ``<a> <b> <sep> <c>``
with one token per number in [0, max_value), the separator token ``max_value``, and
c = f(a, b) mod p. Models see the first three tokens and are scored on predicting the last.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from jaxtyping import Int
from torch import Tensor

from heurlens.errors import HeurlensError

# Appendix B.4's six computations (Equations 1-6) and the subtasks whose subnetworks it transfers
# (ab, a^2, a+b; a-b and b^2 complete a^2-b^2 = (a+b)(a-b)), all mod p. A difference is reduced into
# [0, p) like any other value (Python's and torch's % take the sign of the modulus).
COMPUTATIONS: dict[str, Callable[[Tensor, Tensor], Tensor]] = {
    "a+ab": lambda a, b: a + a * b,
    "a^2+b^2": lambda a, b: a * a + b * b,
    "a^2+ab": lambda a, b: a * a + a * b,
    "a^2+b^2+ab": lambda a, b: a * a + b * b + a * b,
    "a^3+ab": lambda a, b: a ** 3 + a * b,
    "a^2-b^2": lambda a, b: a * a - b * b,
    "a": lambda a, b: a,
    "b": lambda a, b: b,
    "ab": lambda a, b: a * b,
    "a+b": lambda a, b: a + b,
    "a-b": lambda a, b: a - b,
    "a^2": lambda a, b: a * a,
    "b^2": lambda a, b: b * b,
    "a^3": lambda a, b: a ** 3,
}


@dataclass(frozen=True)
class ArithmeticTask:
    """One computation over token numbers [0, max_value) mod p."""

    computation: str
    max_value: int = 1000
    modulus: int = 7

    def __post_init__(self):
        if self.computation not in COMPUTATIONS:
            raise HeurlensError(f"unknown computation {self.computation!r}; choose one of {', '.join(COMPUTATIONS)}")
        if self.max_value < self.modulus:
            raise HeurlensError(f"max_value {self.max_value} must be at least the modulus {self.modulus}")

    @property
    def separator(self) -> int:
        return self.max_value

    @property
    def vocab_size(self) -> int:
        return self.max_value + 1

    def answer(self, a: Tensor, b: Tensor) -> Tensor:
        # int64 holds (999)^3 + ... comfortably; reduce mod p before the answer becomes a token id
        return COMPUTATIONS[self.computation](a.long(), b.long()) % self.modulus

    def sequences(self, a: Tensor, b: Tensor) -> Int[Tensor, "example 4"]:
        """``<a> <b> <sep> <c>`` for each pair."""
        return torch.stack([a, b, torch.full_like(a, self.separator), self.answer(a, b)], dim=1).long()


def random_pairs(max_value: int, n: int, generator: torch.Generator) -> tuple[Tensor, Tensor]:
    """n distinct (a, b) pairs drawn uniformly without replacement from [0, max_value)^2."""
    if n > max_value ** 2:
        raise HeurlensError(f"cannot draw {n} distinct pairs from {max_value}^2 = {max_value ** 2}")
    flat = torch.randperm(max_value ** 2, generator=generator, device="cpu")[:n]  # data lives on the CPU
    return flat // max_value, flat % max_value


def training_set(task: ArithmeticTask, fraction: float = 0.2, seed: int = 0) -> Int[Tensor, "example 4"]:
    """A random ``fraction`` of all max_value^2 pairs (the paper: 20% for T1, 200,000 rows; 5% for the
    subtask, 50,000 rows), with every token present: (i, i) is added for numbers the sample missed."""
    generator = torch.Generator().manual_seed(seed)
    a, b = random_pairs(task.max_value, round(fraction * task.max_value ** 2), generator)
    missing = torch.tensor(sorted(set(range(task.max_value)) - set(a.tolist()) - set(b.tolist())), dtype=torch.long,
                           device="cpu")
    return task.sequences(torch.cat([a, missing]), torch.cat([b, missing]))


def ambiguous_set(task: ArithmeticTask, disambiguation: int, seed: int = 0) -> Int[Tensor, "example 4"]:
    """Section 4's T2 training data: (i, i) for every number i (the task is ambiguous between f and
    the computations that agree with it when a = b), plus ``disambiguation`` random pairs."""
    every = torch.arange(task.max_value, device="cpu")
    a, b = random_pairs(task.max_value, disambiguation, torch.Generator().manual_seed(seed))
    return task.sequences(torch.cat([every, a]), torch.cat([every, b]))


def evaluation_set(task: ArithmeticTask, n: int = 1000, seed: int = 1) -> Int[Tensor, "example 4"]:
    """n independently drawn random pairs (the paper's evaluation and test sets: 1000 each)."""
    a, b = random_pairs(task.max_value, min(n, task.max_value ** 2), torch.Generator().manual_seed(seed))
    return task.sequences(a, b)
