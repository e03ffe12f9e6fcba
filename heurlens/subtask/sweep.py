"""The arithmetic Subtask Induction experiment (Subtask Induction paper, Section 4, Figure 3), resumable.

1. Train a decoder on T1 (default a + ab mod 7) from 20% of all pairs.
2. Discover the subnetwork for the subtask (default ab) on its own data (Algorithm 1), once per L0
   lambda, and keep the most accurate (``heurlens.subtask.sweep_discovery``).
3. (``heurlens.subtask.sweep_transfer``) For each number of disambiguation samples, condition and seed: prepare a fresh model
   (``transfer_condition``), train it on T2 (default a^2 + ab) from the ambiguous set plus those
   samples, and record the test accuracy at the epoch with the best evaluation accuracy (over the
   learning rates searched, if several). The runs at one sample count train together
   (``train_together_with_lr_search``), each as it would alone.

Files in OUT: ``t1-model.safetensors``, ``candidates/lambda-*.{json,safetensors}`` (one per L0 lambda),
``subnetwork.{json,safetensors}`` (the one transferred) and one
``results/<condition>-n<samples>-s<seed>.json`` per run, each written atomically once finished;
a repeated call skips whatever is on disk. While a count trains, ``training-progress/n<samples>/lr<lr>.pt``
holds its progress (saved once a minute), so a killed count goes on from there; it is deleted once the count's
results are written. ``settings.json`` guards against mixing settings (the folder is a ``RunFolder``).
``finished_results(out)`` reads the runs finished so far, while a sweep runs or after it was cut short.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path

import pandas as pd
import plotly.graph_objects as go
import torch
from safetensors.torch import load_file

from heurlens.errors import HeurlensError
from heurlens.runtime.cache import atomic_save_tensors, atomic_write_json
from heurlens.runtime.devices import resolve_device
from heurlens.runtime.distributed import Workers, run_each
from heurlens.runtime.run_folders import RunFolder
from heurlens.subtask.arithmetic import ArithmeticTask, evaluation_set, training_set
from heurlens.subtask.settings import SweepSettings
from heurlens.subtask.sweep_discovery import chosen_subnetwork
from heurlens.subtask.sweep_transfer import (
    RESULT_FIELDS,
    TransferJob,
    pending_runs,
    read_result,
    result_path,
    train_at_count,
)
from heurlens.subtask.tied_state import load_tied_state, state_without_ties
from heurlens.subtask.training import train_next_token

PER_RUN = ("disambiguation", "conditions", "seeds")  # name the result files: may grow between calls
T1_MODEL = "t1-model.safetensors"


def run_sweep(out: Path, settings: SweepSettings = SweepSettings(), progress: bool = True,
              workers: Workers | None = None, device: str | torch.device | None = None) -> pd.DataFrame:
    """Run (or resume) the experiment in ``out``; return one row per finished transfer run. With Ray
    ``workers`` the sample counts train at once, each count's runs together in one task. The models train on
    ``device`` (``heurlens.runtime.devices.resolve_device``: default a GPU when there is one); data, subnetworks and
    every file of the run folder stay on the CPU, so a folder started on one device is resumed on another.

    Args:
        out: the run folder (resumed when it holds the same sweep).
        settings: the sweep (``SweepSettings``).
        progress: bars on stderr.
        workers: Ray workers.
        device: where the models train (None: ``resolve_device``'s choice).

    Returns:
        One row per finished transfer run."""
    out = Path(out)
    t1 = ArithmeticTask(settings.t1, settings.max_value, settings.modulus)  # each refuses a bad expression
    subtask = ArithmeticTask(settings.subtask, settings.max_value, settings.modulus)
    t2 = ArithmeticTask(settings.t2, settings.max_value, settings.modulus)
    folder = RunFolder(out, "sweep")
    folder.record_settings(settings.to_dict(), PER_RUN)  # only once everything is known valid

    trained = settings.model_factory(t1)(seed=0, device=resolve_device(device))
    t1_path = out / T1_MODEL

    def train_t1() -> dict[str, torch.Tensor]:
        result = train_next_token(trained, training_set(t1, settings.t1_fraction, 0), evaluation_set(t1, 1000, 1),
                                  evaluation_set(t1, settings.t1_test_examples, 2), settings.t1_epochs,
                                  settings.t1_lr, settings.batch_size, progress=progress,
                                  desc=f"training on T1 = {settings.t1}", patience=settings.t1_patience)
        atomic_write_json(out / "t1-training.json", {"best_eval_accuracy": result.best_eval_accuracy,
                                                     "test_accuracy": result.test_accuracy,
                                                     "epochs": len(result.history)})
        return state_without_ties(trained)

    # T1 and discovery are the folder's, shared by every count: a second process (another --disambiguation) waits
    # for the first to store them and reads them, instead of training them a second time beside it
    with folder.writing(wait=True):
        load_tied_state(trained, folder.stored(T1_MODEL, train_t1, partial(atomic_save_tensors, t1_path),
                                               lambda: load_file(str(t1_path))))
        subnetwork = chosen_subnetwork(folder, trained, t1, subtask, settings, progress, workers)

    job = TransferJob(folder, settings, subnetwork, trained, t1, t2, progress and workers is None)
    counts = [n for n in settings.disambiguation if pending_runs(job, n)]
    run_each(train_at_count, job, counts, workers, "disambiguation counts", progress)
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
    rows = [read_result(path) for path in paths if path.exists()]
    return pd.DataFrame(rows, columns=[*RESULT_FIELDS, "lr"])


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
