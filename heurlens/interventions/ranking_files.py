"""A ranking kept in a run folder (``heurlens attribute``'s): ``settings.json`` says what was scored (the model, the
level, the method...) and ``scores.safetensors`` holds one score per unit or edge, with the ranking's label and the
seconds the scoring took. Written by the analysis (``analysis.attribution_runs``), read by it and by pruning's warm
start (``pruning.warm_start``).

The file keeps delta_m, the estimated change of the metric when the item alone is ablated (the mean over prompts,
as heurlens has always written it); the ranking read back holds -delta_m, EAP-IG's sign, as a ``signed`` ranking."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import torch
from safetensors import safe_open
from safetensors.torch import save

from heurlens.errors import HeurlensError
from heurlens.interventions.circuits import Level
from heurlens.interventions.rankings import Ranking
from heurlens.protocols import PreparedModel
from heurlens.runtime.cache import atomic_write_bytes
from heurlens.runtime.run_folders import RunFolder

SCORES_FILE = "scores.safetensors"


def holds_scores(run_dir: str | Path) -> bool:
    """Whether ``run_dir`` holds a ranking's scores (an attribution run, not a prune run's records)."""
    return (Path(run_dir) / SCORES_FILE).exists()


def write_scores(run_dir: str | Path, ranking: Ranking, seconds: float) -> None:
    """Keep ``ranking``'s scores (one per item, in the layout's order) in ``run_dir`` as delta_m, atomically."""
    metadata = {"label": ranking.label, "seconds": f"{seconds:.3f}"}
    delta_m = (-ranking.scores).detach().float().cpu().contiguous()
    atomic_write_bytes(Path(run_dir) / SCORES_FILE, save({"scores": delta_m}, metadata=metadata))


def read_ranking(run_dir: str | Path) -> tuple[Ranking, dict[str, Any], float]:
    """The ranking kept in ``run_dir`` (``signed``: -delta_m, EAP-IG's sign), its folder's settings and the seconds
    it took; refused by name when the folder holds none, or a damaged or non-finite one."""
    settings = RunFolder(Path(run_dir), "attribution run", (SCORES_FILE,)).settings(
        f"make one with heurlens attribute --out {run_dir}")
    if not holds_scores(run_dir):
        raise HeurlensError(f"{run_dir} holds no attribution scores ({SCORES_FILE}); make them with heurlens "
                            f"attribute --out {run_dir}")
    path = Path(run_dir) / SCORES_FILE
    try:
        with safe_open(path, framework="pt") as handle:
            scores = handle.get_tensor("scores")
            metadata = handle.metadata() or {}
    except Exception as error:  # safetensors raises its own error types for a cut or overwritten file
        raise HeurlensError(f"{path} cannot be read ({type(error).__name__}: {error}); it is damaged: remove it and "
                            f"run the same heurlens attribute --out {run_dir} again to compute the scores anew") from None
    if scores.dim() != 1 or not torch.isfinite(scores).all():
        raise HeurlensError(f"{path} holds scores that are not one finite number per item (shape "
                            f"{tuple(scores.shape)}); it is damaged: remove it and run heurlens attribute --out "
                            f"{run_dir} again")
    ranking = Ranking(metadata.get("label", Path(run_dir).name), cast(Level, settings["level"]),
                      -scores.to(torch.float32), signed=True)
    return ranking, settings, float(metadata.get("seconds", "nan"))


def check_scored_model(settings: dict[str, Any], model: PreparedModel, run_dir: str | Path) -> None:
    """Refuse ``model`` unless it is the one the ranking in ``run_dir`` (its ``settings``) scored: by fingerprint,
    as ``heurlens evaluate`` checks a prune run (a folder written before fingerprints were recorded: by name)."""
    fingerprint, model_id = settings.get("model_fingerprint"), settings.get("model_id")
    if fingerprint is None and model_id == model.model_id:
        return
    if fingerprint is None or fingerprint not in model.known_fingerprints():
        raise HeurlensError(f"the attribution run {run_dir} scored model {model_id!r}"
                            + (f" (fingerprint {fingerprint})" if fingerprint else "")
                            + f", not {model.model_id!r} (fingerprint {model.fingerprint()}): use it with its own "
                            f"model (--model {model_id}), or attribute this model into another folder")
