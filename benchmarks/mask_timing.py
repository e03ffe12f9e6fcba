"""Timing shared by the pruning benchmarks: seconds per step of heurlens' mask training."""

from __future__ import annotations

import time

from jaxtyping import Float
from torch import Tensor

from heurlens.evaluate import EvalSet
from heurlens.interventions.means import UnitMeans
from heurlens.models.classifier import HookedClassifier
from heurlens.pruning import PruneSettings, train_unit_mask


def mask_step_seconds(model: HookedClassifier, data: EvalSet, full_logits: Float[Tensor, "example label"],
                      means: UnitMeans, steps: int) -> float:
    """Wall time per step of ``train_unit_mask`` (50% target, seed 0) run for ``steps`` steps on ``data``."""
    start = time.perf_counter()
    train_unit_mask(model, data, full_logits, means, 0.5, seed=0, config=PruneSettings(total_steps=steps),
                    progress=False)
    return (time.perf_counter() - start) / steps
