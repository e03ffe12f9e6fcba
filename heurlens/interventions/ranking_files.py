"""A ranking kept in a run folder (``heurlens attribute``'s): ``settings.json`` says what was scored (the model, the
level, the method...) and ``scores.safetensors`` holds one score per unit or edge, with the ranking's label and the
seconds the scoring took. Written by the analysis (``analysis.attribution_runs``), read by it and by pruning's warm
start (``pruning.warm_start``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import torch
from safetensors import safe_open
from safetensors.torch import save
from torch import Tensor

from heurlens.errors import HeurlensError
from heurlens.interventions.circuits import Level
from heurlens.interventions.rankings import Ranking
from heurlens.runtime.cache import atomic_write_bytes
from heurlens.runtime.run_folders import RunFolder

SCORES_FILE = "scores.safetensors"


def holds_scores(run_dir: str | Path) -> bool:
    """Whether ``run_dir`` holds a ranking's scores (an attribution run, not a prune run's records)."""
    return (Path(run_dir) / SCORES_FILE).exists()


def write_scores(run_dir: str | Path, scores: Tensor, label: str, seconds: float) -> None:
    """Keep ``scores`` (one per item, in the layout's order) in ``run_dir``, atomically."""
    metadata = {"label": label, "seconds": f"{seconds:.3f}"}
    atomic_write_bytes(Path(run_dir) / SCORES_FILE, save({"scores": scores.detach().float().cpu().contiguous()},
                                                         metadata=metadata))


def read_ranking(run_dir: str | Path) -> tuple[Ranking, dict[str, Any], float]:
    """The ranking kept in ``run_dir`` (by |score|), its folder's settings and the seconds it took; refused by name
    when the folder holds none."""
    settings = RunFolder(Path(run_dir), "attribution run", (SCORES_FILE,)).settings(
        f"make one with heurlens attribute --out {run_dir}")
    if not holds_scores(run_dir):
        raise HeurlensError(f"{run_dir} holds no attribution scores ({SCORES_FILE}); make them with heurlens "
                            f"attribute --out {run_dir}")
    with safe_open(Path(run_dir) / SCORES_FILE, framework="pt") as handle:
        scores = handle.get_tensor("scores")
        metadata = handle.metadata() or {}
    ranking = Ranking(metadata.get("label", Path(run_dir).name), cast(Level, settings["level"]),
                      scores.to(torch.float32), absolute=True)
    return ranking, settings, float(metadata.get("seconds", "nan"))
