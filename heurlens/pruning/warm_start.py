"""Masks warm-started from attribution scores (the MIB shared task's sequential ensemble, BlackboxNLP 2025: Edge
Pruning's log_alpha set from EAP-IG's scores instead of one constant): each mask starts at

    log_alpha_i = log_alpha_init * |s_i| / max_j |s_j|,

so the item of largest |score| starts where every mask starts by default (``PruneSettings.log_alpha_init``, 10:
fully on), an item of no effect at 0 (the hard-concrete's midpoint), and the masks' order is the scores' order. The
start is the same for every seed (no ``log_alpha_init_std`` spread): seeds differ by their draws and batch orders.
The shared task's own mapping (per-layer grouping of the scores) is not reproduced here.
"""

from __future__ import annotations

from pathlib import Path

import torch
from jaxtyping import Float
from torch import Tensor

from heurlens.errors import HeurlensError
from heurlens.interventions.ranking_files import check_scored_model, read_ranking
from heurlens.protocols import PreparedModel


def warm_start_log_alpha(scores: Float[Tensor, " item"], log_alpha_init: float) -> Float[Tensor, " item"]:
    """The initial log_alpha of each item, from its score (the module's formula); all 0 when every score is."""
    size = scores.detach().float().abs()
    top = size.max()
    return size * (log_alpha_init / top) if top > 0 else torch.zeros_like(size)


def initial_log_alpha(run_dir: str | Path, model: PreparedModel, n_masks: int, log_alpha_init: float
                      ) -> Float[Tensor, " item"]:
    """The warm start from the attribution run in ``run_dir`` (``heurlens attribute``), refused by name when it
    scored another model (by fingerprint) or other items than the ``n_masks`` masks (another level or graph)."""
    ranking, settings, _ = read_ranking(run_dir)
    check_scored_model(settings, model, run_dir)
    if ranking.n_items != n_masks:
        raise HeurlensError(f"--init-from {run_dir}: its {ranking.label} scores {ranking.n_items} {ranking.level}s of "
                            f"{settings.get('model_id')} ({settings.get('graph')} graph) and this prune trains {n_masks} "
                            "masks: attribute the model pruned, at the level pruned (--level), on heurlens' graph "
                            "(--graph heurlens)")
    return warm_start_log_alpha(ranking.scores, log_alpha_init)
