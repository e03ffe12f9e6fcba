"""Step counts and the sparsity warm-up of the Heuristic Core paper, Appendix B, scaled to the data size.

The paper prunes BERT on MNLI (392,702 pairs) at batch 128 for
    warmup_steps = 6500 + 50 * sparsity_pct,   total_steps = warmup_steps + 6 * sparsity_pct,
i.e. about 3 epochs at 50%. heurlens keeps the number of *epochs* and the warm-up *fraction* and
converts them to steps for its own data size and batch size, with a floor of ``MIN_SCALED_STEPS``
for small data sets such as a few hundred prompts.
"""

from __future__ import annotations

import math

PAPER_TRAIN_EXAMPLES = 392_702  # MNLI training pairs
PAPER_BATCH_SIZE = 128
# Adam moves log_alpha by about the learning rate (0.1) per step, so a unit starting at log_alpha = 10 needs
# about 100 steps just to reach 0; 3 epochs of 200 prompts at batch 16 (38 steps) prune nothing.
MIN_SCALED_STEPS = 300  # below the 379 steps of `effective-size` (2,000 pairs), which stay as they were


def paper_steps(sparsity: float) -> tuple[int, int]:
    """(warm-up steps, total steps) of Appendix B for a target sparsity in [0, 1]."""
    pct = 100 * sparsity
    warmup = 6500 + 50 * pct
    return round(warmup), round(warmup + 6 * pct)


def scaled_steps(sparsity: float, n_examples: int, batch_size: int) -> tuple[int, int]:
    """(warm-up steps, total steps) giving the paper's epochs and warm-up fraction on ``n_examples``,
    at least ``MIN_SCALED_STEPS`` steps in all."""
    warmup, total = paper_steps(sparsity)
    epochs = total * PAPER_BATCH_SIZE / PAPER_TRAIN_EXAMPLES
    scaled_total = max(MIN_SCALED_STEPS, math.ceil(epochs * n_examples / batch_size))
    return max(1, round(scaled_total * warmup / total)), scaled_total


def steps_before_pruning(log_alpha_init: float, lr_log_alpha: float) -> int:
    """About how many optimizer steps pass before a unit can be pruned at all: Adam moves log_alpha by at most about
    its learning rate a step, and a mask starting at ``log_alpha_init`` > 0 keeps its unit until log_alpha falls
    below 0 (10 at lr 0.1, the defaults: 100 steps)."""
    return math.ceil(max(0.0, log_alpha_init) / lr_log_alpha)


def target_at(step: int, warmup_steps: int, target: float) -> float:
    """Target sparsity at ``step`` (0-based): linear from 0 to ``target`` over the warm-up, then flat."""
    return target * min(1.0, (step + 1) / warmup_steps)
