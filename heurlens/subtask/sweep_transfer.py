"""Step 3 of the arithmetic sweep (Subtask Induction paper, Section 4.2): the transfer runs at one number of
disambiguation samples, trained together, each one's result written to ``results/`` as a file of its own.

A run's result file is written atomically once the run is finished, so a sweep cut short is read back by
``finished_results`` and goes on with the runs that have none (``pending_runs``). While a count trains, its
progress folder ``training-progress/n<samples>`` is locked and holds the stacked training's checkpoints.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from torch import nn

from heurlens.errors import HeurlensError
from heurlens.runtime.cache import atomic_write_json
from heurlens.runtime.devices import device_of
from heurlens.runtime.run_folders import LOCK_FILE, RunFolder
from heurlens.subtask.arithmetic import ArithmeticTask, ambiguous_set, evaluation_set
from heurlens.subtask.batched_training import checkpoint_path, train_together_with_lr_search
from heurlens.subtask.settings import Filling, SweepSettings
from heurlens.subtask.training import TrainingResult
from heurlens.subtask.transfer import transfer_condition
from heurlens.subtask.weight_subnetwork import WeightSubnetwork
from heurlens.training_helpers import FrozenWeights

RESULT_FIELDS = ("condition", "disambiguation", "seed", "best_eval_accuracy", "test_accuracy")


def read_result(path: Path) -> dict:
    """One run's result file, read whole; one that is not (cut short, edited) is named with the fix."""
    try:
        result = json.loads(path.read_text())
        if not isinstance(result, dict) or any(field not in result for field in RESULT_FIELDS):
            raise ValueError("fields missing")
        return result
    except (OSError, ValueError) as error:
        raise HeurlensError(f"the result file {path} cannot be read whole ({type(error).__name__}); delete it and run "
                            "the same command again: that run is trained afresh, the others are kept") from error


@dataclass(frozen=True)
class TransferJob:
    """What the transfer runs of one sweep share (sent once to Ray's object store with ``workers``)."""

    folder: RunFolder
    settings: SweepSettings
    subnetwork: WeightSubnetwork
    trained: nn.Module  # the T1 model
    t1: ArithmeticTask
    t2: ArithmeticTask
    progress: bool


def pending_runs(job: TransferJob, n: int) -> list[tuple[str, int]]:
    """(condition, seed) of the runs at ``n`` disambiguation samples with no result file yet."""
    return [(condition, seed) for condition in job.settings.conditions for seed in range(job.settings.seeds)
            if not finished_run(result_path(job.folder.path, condition, n, seed))]


def finished_run(path: Path) -> bool:
    """Whether a run's result file is there and reads back whole (a damaged one is trained again)."""
    try:
        read_result(path)
        return True
    except HeurlensError:
        return False


def train_at_count(job: TransferJob, n: int) -> None:
    """Train every pending run at ``n`` disambiguation samples (all on 1000 + n rows: one stacked training)
    and write each run's result file atomically. The count's progress folder is locked meanwhile: a second
    process asked for the same count is refused instead of training it twice."""
    settings, checkpoints = job.settings, job.folder.path / "training-progress" / f"n{n}"
    checkpoints.mkdir(parents=True, exist_ok=True)
    with RunFolder(checkpoints, "training progress").writing():
        pending = pending_runs(job, n)  # read under the lock: another process may have just finished them
        if pending:
            results = train_transfer_runs(pending, n, job.subnetwork, job.trained,
                                          partial(settings.model_factory(job.t1), device=device_of(job.trained)),
                                          job.t2, settings.filling, settings.transfer_lrs, settings.transfer_epochs,
                                          settings.batch_size, job.progress, checkpoints=checkpoints)
            for (condition, seed), result in zip(pending, results):
                atomic_write_json(result_path(job.folder.path, condition, n, seed),
                                  {"condition": condition, "disambiguation": n, "seed": seed,
                                   "best_eval_accuracy": result.best_eval_accuracy,
                                   "test_accuracy": result.test_accuracy, "lr": result.lr})
        for path in [checkpoint_path(checkpoints, lr) for lr in settings.transfer_lrs] + [checkpoints / LOCK_FILE]:
            path.unlink(missing_ok=True)  # every result is on disk: the progress saved on the way is not needed
        checkpoints.rmdir()


def train_transfer_runs(runs: Sequence[tuple[str, int]], n: int, subnetwork: WeightSubnetwork, trained: nn.Module,
                        make_model: Callable[[int], nn.Module], t2: ArithmeticTask, filling: Filling,
                        lrs: Sequence[float], epochs: int, batch_size: int, progress: bool = True,
                        weight_decay: float = 0.01, checkpoints: Path | None = None) -> list[TrainingResult]:
    """The sweep's transfer runs ``(condition, seed)`` at ``n`` disambiguation samples, trained together: the model
    ``make_model(seed + 100)`` prepared for its condition (``transfer_condition``), trained on T2's ambiguous set plus
    ``n`` samples drawn from ``seed``, its epoch chosen on 1,000 evaluation rows (seed 11) and tested on 1,000 more
    (seed 12), over the learning rates ``lrs``; resumable from the folder ``checkpoints`` when given."""
    def prepared() -> list[tuple[nn.Module, FrozenWeights | None]]:
        return [transfer_condition(condition, subnetwork, trained, make_model, seed + 100, filling)
                for condition, seed in runs]

    return train_together_with_lr_search(
        prepared, lrs, [ambiguous_set(t2, n, seed) for _, seed in runs], evaluation_set(t2, 1000, 11),
        evaluation_set(t2, 1000, 12), epochs, batch_size, [seed for _, seed in runs], progress,
        f"{len(runs)} runs at {n} samples", weight_decay, checkpoints)


def result_path(out: Path, condition: str, disambiguation: int, seed: int) -> Path:
    """``results/<condition>-n<samples>-s<seed>.json`` (the condition's spaces and brackets dropped)."""
    stem = condition.replace(" ", "-").replace("(", "").replace(")", "")
    return out / "results" / f"{stem}-n{disambiguation}-s{seed}.json"
