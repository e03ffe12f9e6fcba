"""A prune run's folder: its layout, what its subnetworks record of how they were found, and the checks that a
run resumes only its own folder.

Layout: ``OUT/sparsity-0.50/seed-03.json`` (+ ``.safetensors``), and ``OUT/unit-means.safetensors``, the means
pruned units are replaced by. A folder that holds subnetworks (at any sparsity) or means of another model, data
set or settings is refused rather than mixed, and so is a folder heurlens did not make.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable
from pathlib import Path

import torch

from heurlens.errors import HeurlensError
from heurlens.interventions.activation_cache import data_fingerprint
from heurlens.interventions.corruption import corruption_of
from heurlens.interventions.means import UnitMeans
from heurlens.protocols import Loss, ModelLike, PreparedModel, Task
from heurlens.pruning.settings import PruneSettings
from heurlens.pruning.subnetwork import SPARSITY_TOLERANCE as SPARSITY_TOLERANCE  # where it was before
from heurlens.pruning.subnetwork import Subnetwork, shortest_decimals
from heurlens.pruning.targets import SparsityTargetMissed as SparsityTargetMissed  # where it was
from heurlens.runtime.run_folders import RunFolder

MEANS_FILE = "unit-means.safetensors"


def subnetwork_stem(out: Path, sparsity: float, seed: int) -> Path:
    """``OUT/sparsity-0.50/seed-03``: the target with two decimals, or as many more as it needs (0.995 ->
    ``sparsity-0.995``), so that two targets never share a folder (edge sparsities differ in the third)."""
    return out / f"sparsity-{shortest_decimals(sparsity, 2, 6)}" / f"seed-{seed:02d}"


def record_name(folder: RunFolder, target: float, seed: int) -> str:
    """The subnetwork's JSON record in the folder, relative to it (``sparsity-0.50/seed-00.json``)."""
    return str(subnetwork_stem(folder.path, target, seed).with_suffix(".json").relative_to(folder.path))


def seed_finished(folder: RunFolder, target: float, seed: int) -> bool:
    """Whether the folder holds that seed's finished subnetwork."""
    return folder.finished(record_name(folder, target, seed))


def load_run_means(run_dir: Path, model: ModelLike | None = None) -> UnitMeans:
    """The means a run directory's pruned units are replaced by, checked (see ``UnitMeans.load``; with
    ``model``, also that they fit it)."""
    path = Path(run_dir) / MEANS_FILE
    repair = (f"delete it and run heurlens prune --out {run_dir} again with the same options: it writes the means "
              "again and keeps the finished subnetworks")
    if not path.exists():
        raise HeurlensError(f"{path} is missing; {repair}")
    means = UnitMeans.load(path, repair)
    if model is not None:
        try:
            means.check_fits(model)
        except HeurlensError as error:
            raise HeurlensError(f"{path}: {error}. Or {repair}") from error
    return means


def find_subnetworks(run_dir: Path) -> list[Path]:
    """Every finished subnetwork JSON under ``run_dir``, in sparsity then seed order."""
    return sorted(Path(run_dir).glob("sparsity-*/seed-*.json"))


def subnetworks_by_sparsity(run_dirs: Iterable[str | Path], pooled: bool = False) -> dict[float, list[Subnetwork]]:
    """Every finished subnetwork under the run directories, grouped by target sparsity (ascending). ``pooled``
    (analyses that pool subnetworks by their target, such as the core): subnetworks that missed their target are
    left out, each named in a ``SparsityTargetMissed`` warning; refused when that leaves none."""
    groups: dict[float, list[Subnetwork]] = {}
    for run_dir in run_dirs:
        paths = find_subnetworks(Path(run_dir))
        if not paths:
            raise HeurlensError(f"{run_dir} holds no subnetworks (sparsity-*/seed-*.json); "
                                f"make them with heurlens prune --out {run_dir}")
        for path in paths:
            subnetwork = Subnetwork.load(path)
            if pooled and subnetwork.missed_target:
                warnings.warn(f"{path} is left out: {subnetwork.missed_target_message()}", SparsityTargetMissed,
                              stacklevel=2)
                continue
            groups.setdefault(subnetwork.target_sparsity, []).append(subnetwork)
    if not groups:
        raise HeurlensError(f"every subnetwork in {', '.join(map(str, run_dirs))} missed its target sparsity; prune "
                            "again with more steps (PruneSettings(total_steps=...)) or masks that start lower "
                            "(PruneSettings(log_alpha_init=2))")
    return dict(sorted(groups.items()))


def prune_folder(out: str | Path) -> RunFolder:
    """The run folder of ``prune``, checked before any work: refused when it cannot be written or holds files
    heurlens prune did not make (its markers: the means and the subnetworks' records)."""
    return RunFolder(Path(out), "prune run", (MEANS_FILE, "sparsity-*/seed-*.json")).opened()


def hyperparameters_of(config: PruneSettings, target: float, data: Task, means: UnitMeans,
                       loss: Loss | None = None) -> dict:
    """What a subnetwork records of how it was found (steps resolved for its sparsity and data; the loss by
    its function's name when it is not the default KL)."""
    batch = data.batches[0]["input_ids"].shape[0]
    warmup, total = config.steps_for(target, len(data), batch)
    loss_name = {} if loss is None else {"loss": getattr(loss, "__qualname__", type(loss).__name__)}
    corruption = {"corrupted_data": data_id_of(corruption_of(data))} if config.ablation == "corrupt" else {}
    return {**config.to_dict(), "warmup_steps": warmup, "total_steps": total, "batch_size": batch,
            "means": means.source, **loss_name, **corruption}


def data_id_of(data: Task) -> str:
    """A task's name, size and token fingerprint: what says two runs pruned or evaluated on the same data."""
    return f"{data.name}:{len(data)}:{data_fingerprint(data)}"


def check_run_folder(folder: RunFolder, model: PreparedModel, data: Task, config: PruneSettings,
                     means: UnitMeans, loss: Loss | None = None) -> None:
    """Refuse a prune run folder whose subnetworks (any sparsity) or means come from another model, data set or
    settings (a prune folder's settings are in each subnetwork's record); record the means of a new run (what
    ``heurlens evaluate`` replaces pruned units by)."""
    out, known, data_id = folder.path, model.known_fingerprints(), data_id_of(data)
    for path in find_subnetworks(out):
        done = Subnetwork.load(path)
        if (done.model_fingerprint not in known or done.data_id != data_id
                or _folders_resolved(done.hyperparameters)
                != _folders_resolved(hyperparameters_of(config, done.target_sparsity, data, means, loss))):
            raise HeurlensError(
                f"{path} was found with another model, data set or settings than this run; nothing was "
                f"overwritten. Use another out= folder, or the same settings to resume")
    means_path = out / MEANS_FILE
    if not folder.finished(MEANS_FILE):
        means.save(means_path)
        return
    saved = load_run_means(out)
    same = saved.heads.keys() == means.heads.keys() and all(
        saved.heads[layer].shape == means.heads[layer].shape and saved.mlps[layer].shape == means.mlps[layer].shape
        for layer in means.heads) and all(
        _equal_to_rounding(saved.heads[layer], means.heads[layer])
        and _equal_to_rounding(saved.mlps[layer], means.mlps[layer]) for layer in means.heads)
    if not same:
        raise HeurlensError(f"{means_path} holds the means of another model or data set than this run; nothing was "
                            "overwritten. Use another out= folder, or the same model and data to resume")


def _folders_resolved(hyperparameters: dict) -> dict:
    """``hyperparameters`` with the warm start's folder as an absolute path (``./runs/a1`` and ``/home/me/runs/a1``
    are one run's; relative to the current folder, as the run read it)."""
    if not hyperparameters.get("init_from") or not Path(hyperparameters["init_from"]).is_dir():
        return hyperparameters  # none, or a ranking given by its label (prune(warm_start=))
    return {**hyperparameters, "init_from": str(Path(hyperparameters["init_from"]).resolve())}


def _equal_to_rounding(saved: torch.Tensor, recomputed: torch.Tensor) -> bool:
    """The same means recomputed with another thread count or on another device (a GPU after a CPU) differ by
    float32 rounding of sums over thousands of tokens: |saved - recomputed| <= 1e-4 max|saved| + 1e-6, at the
    scale of the whole tensor, since an element near zero beside large ones keeps their absolute error
    (SmolLM2's last MLP: 6e-5 apart on a GPU where its largest mean is 392)."""
    recomputed = recomputed.to(saved.device)
    return bool(((saved - recomputed).abs() <= 1e-4 * saved.abs().max() + 1e-6).all())
