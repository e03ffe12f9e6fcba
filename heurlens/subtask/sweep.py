"""The arithmetic Subtask Induction experiment (Subtask Induction paper, Section 4, Figure 3), resumable.

1. Train a decoder on T1 (default a + ab mod 7) from 20% of all pairs.
2. Discover the subnetwork for the subtask (default ab) on its own data (Algorithm 1), once per L0
   lambda, and keep the most accurate.
3. For each number of disambiguation samples, condition and seed: prepare a fresh model
   (``transfer_condition``), train it on T2 (default a^2 + ab) from the ambiguous set plus those
   samples, and record the test accuracy at the epoch with the best evaluation accuracy (over the
   learning rates searched, if several). The runs at one sample count train together
   (``train_together_with_lr_search``), each as it would alone.

Files in OUT: ``t1-model.safetensors``, ``candidates/lambda-*.{json,safetensors}`` (one per L0 lambda),
``subnetwork.{json,safetensors}`` (the one transferred) and one
``results/<condition>-n<samples>-s<seed>.json`` per run, each written atomically once finished;
a repeated call skips whatever is on disk. While a count trains, ``training-progress/n<samples>/lr<lr>.pt``
holds its progress (saved once a minute), so a killed count goes on from there; it is deleted once the count's
results are written. ``settings.json`` guards against mixing settings.
``finished_results(out)`` reads the runs finished so far, while a sweep runs or after it was cut short.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import pandas as pd
import plotly.graph_objects as go
import torch
from safetensors.torch import load_file
from torch import Tensor, nn

from heurlens.cache import atomic_save_tensors, atomic_write_json, stored
from heurlens.devices import device_of, resolve_device
from heurlens.distributed import Workers, run_each
from heurlens.errors import HeurlensError
from heurlens.run_folders import LOCK_FILE, RunFolder, exclusive
from heurlens.subtask.arithmetic import ArithmeticTask, ambiguous_set, evaluation_set, training_set
from heurlens.subtask.batched_training import checkpoint_path, train_together_with_lr_search
from heurlens.subtask.masks import DiscoverySettings, discover_subnetwork, masked_forward
from heurlens.subtask.settings import Filling, SweepSettings
from heurlens.subtask.training import (
    TrainingResult,
    answer_accuracy,
    batches_of,
    last_token_loss,
    next_token_loss,
    train_next_token,
)
from heurlens.subtask.transfer import transfer_condition
from heurlens.subtask.weight_subnetwork import WeightSubnetwork
from heurlens.training_helpers import FrozenWeights

PER_RUN = ("disambiguation", "conditions", "seeds")  # name the result files: may grow between calls


def most_accurate(candidates: Sequence[WeightSubnetwork]) -> WeightSubnetwork:
    """The candidate with the highest ``settings["subtask_accuracy"]``; ties go to the sparser one
    (the paper keeps the most accurate, and prefers sparser subnetworks among equals)."""
    if not candidates:
        raise HeurlensError("no candidate subnetworks to choose from")
    return max(candidates, key=lambda sub: (sub.settings["subtask_accuracy"], -sub.kept))


def run_sweep(out: Path, settings: SweepSettings = SweepSettings(), progress: bool = True,
              workers: Workers | None = None, device: str | torch.device | None = None) -> pd.DataFrame:
    """Run (or resume) the experiment in ``out``; return one row per finished transfer run. With Ray
    ``workers`` the sample counts train at once, each count's runs together in one task. The models train on
    ``device`` (``heurlens.devices.resolve_device``: default a GPU when there is one); data, subnetworks and
    every file of the run folder stay on the CPU, so a folder started on one device is resumed on another."""
    out = Path(out)
    t1 = ArithmeticTask(settings.t1, settings.max_value, settings.modulus)  # each refuses a bad expression
    subtask = ArithmeticTask(settings.subtask, settings.max_value, settings.modulus)
    t2 = ArithmeticTask(settings.t2, settings.max_value, settings.modulus)
    RunFolder(out, "sweep").record_settings(settings.to_dict(), PER_RUN)  # only once everything is known valid

    trained = settings.model_factory(t1)(seed=0, device=resolve_device(device))
    t1_path = out / "t1-model.safetensors"

    def train_t1() -> dict[str, torch.Tensor]:
        result = train_next_token(trained, training_set(t1, settings.t1_fraction, 0), evaluation_set(t1, 1000, 1),
                                  evaluation_set(t1, settings.t1_test_examples, 2), settings.t1_epochs,
                                  settings.t1_lr, settings.batch_size, progress=progress,
                                  desc=f"training on T1 = {settings.t1}", patience=settings.t1_patience)
        atomic_write_json(out / "t1-training.json", {"best_eval_accuracy": result.best_eval_accuracy,
                                                     "test_accuracy": result.test_accuracy,
                                                     "epochs": len(result.history)})
        return state_without_ties(trained)

    def chosen_subnetwork() -> WeightSubnetwork:
        discovery = _DiscoveryJob(trained, t1, subtask, settings, out, progress and workers is None)
        candidates = run_each(_discovered, discovery, list(settings.l0_lambdas), workers, "L0 lambdas",
                              progress and workers is not None)
        subnetwork = most_accurate(candidates)
        subnetwork.settings["candidates"] = [{"l0_lambda": c.settings["l0_lambda"], "kept": c.kept,
                                              "subtask_accuracy": c.settings["subtask_accuracy"]}
                                             for c in candidates]
        return subnetwork

    stem = out / "subnetwork"
    # T1 and discovery are the folder's, shared by every count: a second process (another --disambiguation) waits
    # for the first to store them and reads them, instead of training them a second time beside it
    with exclusive(out, "the sweep's T1 model and subnetwork in", wait=True):
        load_tied_state(trained, stored(t1_path, train_t1, partial(atomic_save_tensors, t1_path),
                                        lambda: load_file(str(t1_path))))
        subnetwork = stored(stem.with_suffix(".json"), chosen_subnetwork, lambda sub: sub.save(stem),
                            lambda: WeightSubnetwork.load(stem))

    job = _TransferJob(out, settings, subnetwork, trained, t1, t2, progress and workers is None)
    counts = [n for n in settings.disambiguation if _pending(job, n)]
    run_each(_train_at_count, job, counts, workers, "disambiguation counts", progress)
    return finished_results(out)


def recorded_settings(out: Path) -> SweepSettings:
    """The settings the sweep in ``out`` recorded (its ``settings.json``), refused by name when there are none or
    they are not a sweep's."""
    record = RunFolder(Path(out), "transfer sweep").settings(missing=f"start one with heurlens transfer --out {out}")
    try:
        return SweepSettings.from_dict(record)
    except TypeError as error:
        raise HeurlensError(f"{Path(out) / 'settings.json'} does not hold a sweep's settings ({error}): restore it, "
                            "or run the sweep again with the same options") from error


def finished_results(out: Path) -> pd.DataFrame:
    """One row per finished transfer run of the sweep in ``out`` (the runs its ``settings.json`` asks for, in its
    order of sample counts, conditions and seeds), reading files only: a sweep still running or cut short can be
    tabled and plotted (``summary_table``, ``figure3``) without training anything or waiting for it."""
    settings = recorded_settings(out)
    planned = [(n, condition, seed) for n in settings.disambiguation for condition in settings.conditions
               for seed in range(settings.seeds)]
    paths = [result_path(Path(out), condition, n, seed) for n, condition, seed in planned]
    rows = [_read_result(path) for path in paths if path.exists()]
    return pd.DataFrame(rows, columns=[*RESULT_FIELDS, "lr"])


def state_without_ties(model: nn.Module) -> dict[str, Tensor]:
    """The model's state with each shared tensor once (safetensors stores no shared memory: GPT-2's tied input and
    output embeddings are one tensor under two names)."""
    seen: set[int] = set()
    state = {}
    for name, tensor in model.state_dict().items():
        if tensor.data_ptr() not in seen:
            seen.add(tensor.data_ptr())
            state[name] = tensor
    return state


def load_tied_state(model: nn.Module, state: dict[str, Tensor]) -> None:
    """Load ``state_without_ties``' output: a name left out must be one that shares its tensor with another."""
    own = model.state_dict()
    missing, unexpected = model.load_state_dict(state, strict=False)
    shared = {name for name in own if sum(t.data_ptr() == own[name].data_ptr() for t in own.values()) > 1}
    if unexpected or set(missing) - shared:
        raise HeurlensError(f"the stored T1 model does not fit this architecture (missing {sorted(set(missing) - shared)}"
                            f", unexpected {sorted(unexpected)}); use another out= or the settings it was made with")


RESULT_FIELDS = ("condition", "disambiguation", "seed", "best_eval_accuracy", "test_accuracy")


def _read_result(path: Path) -> dict:
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
class _TransferJob:
    """What the transfer runs of one sweep share (sent once to Ray's object store with ``workers``)."""

    out: Path
    settings: SweepSettings
    subnetwork: WeightSubnetwork
    trained: nn.Module  # the T1 model
    t1: ArithmeticTask
    t2: ArithmeticTask
    progress: bool


def _pending(job: _TransferJob, n: int) -> list[tuple[str, int]]:
    """(condition, seed) of the runs at ``n`` disambiguation samples with no result file yet."""
    return [(condition, seed) for condition in job.settings.conditions for seed in range(job.settings.seeds)
            if not _finished(result_path(job.out, condition, n, seed))]


def _finished(path: Path) -> bool:
    """Whether a run's result file is there and reads back whole (a damaged one is trained again)."""
    try:
        _read_result(path)
        return True
    except HeurlensError:
        return False


def _train_at_count(job: _TransferJob, n: int) -> None:
    """Train every pending run at ``n`` disambiguation samples (all on 1000 + n rows: one stacked training)
    and write each run's result file atomically. The count's progress folder is locked meanwhile: a second
    process asked for the same count is refused instead of training it twice."""
    settings, checkpoints = job.settings, job.out / "training-progress" / f"n{n}"
    checkpoints.mkdir(parents=True, exist_ok=True)
    with exclusive(checkpoints, f"the progress folder of the runs at {n} samples,"):
        pending = _pending(job, n)  # read under the lock: another process may have just finished them
        if pending:
            results = train_transfer_runs(pending, n, job.subnetwork, job.trained,
                                          partial(settings.model_factory(job.t1), device=device_of(job.trained)),
                                          job.t2, settings.filling, settings.transfer_lrs, settings.transfer_epochs,
                                          settings.batch_size, job.progress, checkpoints=checkpoints)
            for (condition, seed), result in zip(pending, results):
                atomic_write_json(result_path(job.out, condition, n, seed),
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


@dataclass(frozen=True)
class DiscoveryRecipe:
    """What ``SweepSettings.discovery`` names: the batch size, the mask scores' AdamW weight decay and the loss."""

    batch_size: int
    weight_decay: float
    loss: Callable[[Callable, Tensor], Tensor]


DISCOVERY_RECIPES = {
    "native": DiscoveryRecipe(128, 0.0, last_token_loss),  # heurlens' first reading of Appendix B.1
    "released": DiscoveryRecipe(500, 0.01, next_token_loss),  # ablate.py and subnet_1e-7/configs.yaml
}


@dataclass(frozen=True)
class _DiscoveryJob:
    """What the discoveries of one sweep (one per L0 lambda) share."""

    trained: nn.Module  # the T1 model
    t1: ArithmeticTask
    subtask: ArithmeticTask
    settings: SweepSettings
    out: Path
    progress: bool


def _discovered(job: _DiscoveryJob, l0_lambda: float) -> WeightSubnetwork:
    """The subtask's subnetwork found with one L0 lambda (kept in ``out/candidates``)."""
    stem = job.out / "candidates" / f"lambda-{l0_lambda:g}"
    recipe = DISCOVERY_RECIPES[job.settings.discovery]
    return stored(stem.with_suffix(".json"),
                  lambda: discover_for_sweep(job.trained, job.t1, job.subtask, job.settings, recipe, l0_lambda,
                                             job.progress),
                  lambda sub: sub.save(stem), lambda: WeightSubnetwork.load(stem))


def discover_for_sweep(trained: nn.Module, t1: ArithmeticTask, subtask: ArithmeticTask, settings: SweepSettings,
                       recipe: DiscoveryRecipe, l0_lambda: float, progress: bool = True) -> WeightSubnetwork:
    """The subtask's subnetwork of the T1 model ``trained`` as a sweep finds it (``settings``' share of the
    subtask's pairs, epochs and lr; the batch size, weight decay and loss of ``recipe``), scored on 1,000
    rows of the subtask and of T1 (``settings["subtask_accuracy"]``, ``["t1_accuracy_of_subnetwork"]``)."""
    device = device_of(trained)
    batches = [batch.to(device) for batch in batches_of(training_set(subtask, settings.subtask_fraction, 3),
                                                         recipe.batch_size, torch.Generator().manual_seed(0))]
    config = DiscoverySettings(epochs=settings.discovery_epochs, l0_lambda=l0_lambda, lr=settings.discovery_lr,
                               weight_decay=recipe.weight_decay)
    subnetwork = discover_subnetwork(trained, recipe.loss, batches, config,
                                     description=f"{settings.subtask} subnetwork of a {settings.t1} model",
                                     progress=progress)
    binary = masked_forward(trained, {name: mask.float() for name, mask in subnetwork.masks.items()})
    subnetwork.settings["subtask_accuracy"] = answer_accuracy(binary, evaluation_set(subtask, 1000, 1), device=device)
    subnetwork.settings["t1_accuracy_of_subnetwork"] = answer_accuracy(binary, evaluation_set(t1, 1000, 1),
                                                                       device=device)
    return subnetwork


def summary_table(results: pd.DataFrame) -> pd.DataFrame:
    """Mean (and standard deviation over seeds) of test accuracy per condition and sample count."""
    grouped = results.groupby(["condition", "disambiguation"], sort=False)["test_accuracy"]
    table = grouped.agg(["mean", "std", "count"]).reset_index()
    return table.pivot(index="disambiguation", columns="condition", values="mean")[list(dict.fromkeys(results["condition"]))]


def figure3(results: pd.DataFrame) -> go.Figure:
    """Test accuracy against disambiguation samples per condition, error bars = std over seeds."""
    figure = go.Figure()
    for condition, group in results.groupby("condition", sort=False):
        stats = group.groupby("disambiguation")["test_accuracy"].agg(["mean", "std"]).fillna(0)
        figure.add_trace(go.Scatter(x=stats.index.to_numpy() + 1, y=100 * stats["mean"], name=condition,
                                    mode="lines+markers", error_y={"array": 100 * stats["std"]}))
    figure.update_layout(xaxis_type="log", xaxis_title="disambiguation samples + 1", yaxis_title="test accuracy (%)",
                         title="Subtask Induction vs controls (Subtask Induction paper, Figure 3)")
    return figure
