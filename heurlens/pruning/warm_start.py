"""Masks warm-started from a ranking (the MIB shared task's sequential ensemble, BlackboxNLP 2025: Edge Pruning's
log_alpha set from EAP-IG's scores instead of one constant): each mask starts at

    log_alpha_i = log_alpha_init * |s_i| / max_j |s_j|,

so the item of largest |score| starts where every mask starts by default (``PruneSettings.log_alpha_init``, 10:
fully on), an item of no effect at 0 (the hard-concrete's midpoint), and the masks' order is the scores' order. The
start is the same for every seed (no ``log_alpha_init_std`` spread): seeds differ by their draws and batch orders.
The shared task's own mapping (per-layer grouping of the scores) is not reproduced here.

The ranking comes from the caller (``prune(warm_start=)``: an attribution run's, ``heurlens.circuits
.load_attribution(dir).ranking``, or any other); pruning reads no attribution folder, but for
``PruneSettings(init_from=)`` given alone, deprecated (``ranking_of_folder``).
"""

from __future__ import annotations

from pathlib import Path

import torch
from jaxtyping import Float
from torch import Tensor

from heurlens.errors import HeurlensError
from heurlens.interventions.rankings import Ranking
from heurlens.protocols import PreparedModel
from heurlens.runtime.caller_warnings import warn_at_caller
from heurlens.runtime.deprecations import STILL_WORKS


def warm_start_log_alpha(scores: Float[Tensor, " item"], log_alpha_init: float) -> Float[Tensor, " item"]:
    """The initial log_alpha of each item, from its score (the module's formula); all 0 when every score is.

    Args:
        scores: one score per item.
        log_alpha_init: where the item of largest |score| starts (``PruneSettings.log_alpha_init``).

    Returns:
        Each item's initial log_alpha."""
    size = scores.detach().float().abs()
    top = size.max()
    return size * (log_alpha_init / top) if top > 0 else torch.zeros_like(size)


def initial_log_alpha(ranking: Ranking, n_masks: int, log_alpha_init: float) -> Float[Tensor, " item"]:
    """The warm start from ``ranking``, refused by name when it ranks other items than the ``n_masks`` masks
    (another level or graph)."""
    if ranking.n_items != n_masks:
        raise HeurlensError(f"the warm start {ranking.label} ranks {ranking.n_items} {ranking.level}s and this prune "
                            f"trains {n_masks} masks: attribute the model pruned, at the level pruned (--level), on "
                            "heurlens' graph (--graph heurlens)")
    return warm_start_log_alpha(ranking.scores, log_alpha_init)


def ranking_of_folder(run_dir: str | Path, model: PreparedModel) -> Ranking:
    """The ranking of the attribution run in ``run_dir``, for ``PruneSettings(init_from=)`` given without
    ``prune(warm_start=)`` (deprecated: read it with ``heurlens.circuits.load_attribution``), refused when the run
    scored another model."""
    from heurlens.circuits.attribution_runs import load_attribution  # the deprecated path: one release more

    warn_at_caller(f"PruneSettings(init_from={str(run_dir)!r}) alone: pass the ranking, prune(..., warm_start="
                   f"heurlens.circuits.load_attribution({str(run_dir)!r}).ranking), and keep init_from as its name "
                   f"(init_from alone {STILL_WORKS})", DeprecationWarning)
    run = load_attribution(run_dir)
    run.check_model(model)
    return run.ranking
