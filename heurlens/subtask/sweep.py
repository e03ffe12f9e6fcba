"""The arithmetic Subtask Induction experiment (seed 002, Section 4, Figure 3), resumable.

1. Train a decoder on T1 (default a + ab mod 7) from 20% of all pairs.
2. Discover the subnetwork for the subtask (default ab) on its own data (Algorithm 1).
3. For each number of disambiguation samples, condition and seed: prepare a fresh model
   (``transfer_condition``), train it on T2 (default a^2 + ab) from the ambiguous set plus those
   samples, and record the test accuracy at the epoch with the best evaluation accuracy.

Files in OUT: ``t1-model.safetensors``, ``subnetwork.{json,safetensors}`` and one
``results/<condition>-n<samples>-s<seed>.json`` per run, each written atomically once finished;
a repeated call skips whatever is on disk. ``settings.json`` guards against mixing settings.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

import pandas as pd
import plotly.graph_objects as go
import torch
from safetensors.torch import load_file
from tqdm.auto import tqdm

from heurlens.cache import atomic_save_tensors, atomic_write_json, guard_run_settings
from heurlens.subtask.arithmetic import ArithmeticTask, ambiguous_set, evaluation_set, training_set
from heurlens.subtask.masks import DiscoveryConfig, discover_subnetwork, masked_forward
from heurlens.subtask.training import (answer_accuracy, arithmetic_model, batches_of, last_token_loss,
                                       train_next_token)
from heurlens.subtask.transfer import transfer_condition
from heurlens.subtask.weight_subnetwork import WeightSubnetwork

FIGURE3_CONDITIONS = ("subtask induction", "random subnetwork", "full model", "random init")


@dataclass(frozen=True)
class SweepSettings:
    """Defaults: the small CPU version (numbers 0..99); the paper's full size is max_value=1000,
    disambiguation 10..10^4 in 16 steps, 100 transfer epochs, 50 discovery epochs, layers 2..12."""

    t1: str = "a+ab"
    subtask: str = "ab"
    t2: str = "a^2+ab"
    max_value: int = 100
    modulus: int = 7
    n_layers: int = 2
    t1_fraction: float = 0.2
    t1_epochs: int = 40
    subtask_fraction: float = 0.2
    discovery_epochs: int = 20
    discovery_lr: float = 1e-2
    l0_lambda: float = 1e-5
    disambiguation: tuple[int, ...] = (0, 30, 100, 300, 1000)
    conditions: tuple[str, ...] = FIGURE3_CONDITIONS
    seeds: int = 1
    transfer_epochs: int = 40
    transfer_lr: float = 1e-3
    batch_size: int = 64

    def to_dict(self) -> dict:
        record = asdict(self)
        return record | {"disambiguation": list(self.disambiguation), "conditions": list(self.conditions)}


PER_RUN = ("disambiguation", "conditions", "seeds")  # name the result files: may grow between calls


def run_sweep(out: Path, settings: SweepSettings = SweepSettings(), progress: bool = True) -> pd.DataFrame:
    """Run (or resume) the experiment in ``out``; return one row per finished transfer run."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    guard_run_settings(out, settings.to_dict(), PER_RUN, "sweep")
    t1 = ArithmeticTask(settings.t1, settings.max_value, settings.modulus)
    subtask = ArithmeticTask(settings.subtask, settings.max_value, settings.modulus)
    t2 = ArithmeticTask(settings.t2, settings.max_value, settings.modulus)

    def make_model(seed: int):
        return arithmetic_model(t1, settings.n_layers, seed)

    trained = make_model(0)
    t1_path = out / "t1-model.safetensors"
    if t1_path.exists():
        trained.load_state_dict(load_file(str(t1_path)))
    else:
        result = train_next_token(trained, training_set(t1, settings.t1_fraction, 0), evaluation_set(t1, 1000, 1),
                                  evaluation_set(t1, 1000, 2), settings.t1_epochs, settings.transfer_lr,
                                  settings.batch_size, progress=progress, desc=f"training on T1 = {settings.t1}")
        atomic_write_json(out / "t1-training.json", {"best_eval_accuracy": result.best_eval_accuracy,
                                                     "test_accuracy": result.test_accuracy})
        atomic_save_tensors(t1_path, trained.state_dict())

    stem = out / "subnetwork"
    if stem.with_suffix(".json").exists():
        subnetwork = WeightSubnetwork.load(stem)
    else:
        batches = batches_of(training_set(subtask, settings.subtask_fraction, 3), 128, torch.Generator().manual_seed(0))
        config = DiscoveryConfig(epochs=settings.discovery_epochs, l0_lambda=settings.l0_lambda, lr=settings.discovery_lr)
        subnetwork = discover_subnetwork(trained, last_token_loss, batches, config,
                                         description=f"{settings.subtask} subnetwork of a {settings.t1} model",
                                         progress=progress)
        binary = masked_forward(trained, {name: mask.float() for name, mask in subnetwork.masks.items()})
        subnetwork.settings["subtask_accuracy"] = answer_accuracy(binary, evaluation_set(subtask, 1000, 1))
        subnetwork.settings["t1_accuracy_of_subnetwork"] = answer_accuracy(binary, evaluation_set(t1, 1000, 1))
        subnetwork.save(stem)

    evaluation, test = evaluation_set(t2, 1000, 11), evaluation_set(t2, 1000, 12)
    runs = [(n, condition, seed) for n in settings.disambiguation for condition in settings.conditions
            for seed in range(settings.seeds)]
    rows = []
    for n, condition, seed in tqdm(runs, desc="transfer runs", unit="run", disable=not progress):
        path = out / "results" / f"{condition.replace(' ', '-').replace('(', '').replace(')', '')}-n{n}-s{seed}.json"
        if not path.exists():
            model, frozen = transfer_condition(condition, subnetwork, trained, make_model, seed + 100)
            result = train_next_token(model, ambiguous_set(t2, n, seed), evaluation, test, settings.transfer_epochs,
                                      settings.transfer_lr, settings.batch_size, frozen, seed, progress, condition)
            atomic_write_json(path, {"condition": condition, "disambiguation": n, "seed": seed,
                                     "best_eval_accuracy": result.best_eval_accuracy,
                                     "test_accuracy": result.test_accuracy})
        rows.append(json.loads(path.read_text()))
    return pd.DataFrame(rows)


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
                         title="Subtask Induction vs controls (seed 002, Figure 3)")
    return figure
