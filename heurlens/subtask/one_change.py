"""Subtask Induction's transfer one change at a time: an analysis of a finished sweep on the release's GPT-2.

From a sweep folder (``heurlens transfer --architecture released``: its T1 model and its subnetwork), each row
changes one thing of the transfer training from the row "as the sweep" (the sweep's own transfer: the release's
GPT-2 with dropout 0.1 and tied embeddings, the sweep's filling, learning rates, epochs and batch size, AdamW with
decay 0.01) and trains every condition on T2 at ``disambiguation`` samples as the sweep trains its runs
(``heurlens.subtask.sweep_transfer.train_transfer_runs``: the same data, seeds and choice of epoch). T1 and the
subnetwork are the same in every row, so only the transfer differs, and the first row gives the sweep's own
numbers to the last digit. Each row's runs train together; each run's result is a stage of the ``RunFolder``
``out`` (``<row>/<condition>-s<seed>.json``), so a call cut short goes on with the runs not written yet.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import pandas as pd
import torch
from safetensors.torch import load_file

from heurlens.errors import HeurlensError
from heurlens.runtime.devices import resolve_device
from heurlens.runtime.run_folders import SETTINGS_FILE, RunFolder
from heurlens.subtask.arithmetic import ArithmeticTask
from heurlens.subtask.released_model import released_arithmetic_model
from heurlens.subtask.settings import SweepSettings
from heurlens.subtask.sweep import PER_RUN, T1_MODEL, recorded_settings
from heurlens.subtask.sweep_transfer import train_transfer_runs
from heurlens.subtask.tied_state import load_tied_state
from heurlens.subtask.weight_subnetwork import WeightSubnetwork

CONDITIONS = ("subtask induction", "random subnetwork", "random init")


@dataclass(frozen=True)
class Change:
    """One row: the transfer's model and optimiser settings (``None``: the sweep's batch size)."""

    name: str
    dropout: float = 0.1
    tied: bool = True
    batch_size: int | None = None
    weight_decay: float = 0.01

    @property
    def slug(self) -> str:
        return "".join(c if c.isalnum() else "-" for c in self.name).strip("-")


CHANGES = (
    Change("as the sweep (GPT-2, dropout 0.1, tied, batch 64, AdamW)"),
    Change("dropout 0 in the transfer", dropout=0.0),
    Change("untied embeddings in the transfer", tied=False),
    Change("batch 32", batch_size=32),
    Change("batch 16", batch_size=16),
    Change("Adam (no weight decay)", weight_decay=0.0),
)


def one_change_folder(out: str | Path) -> RunFolder:
    """The analysis' folder: its settings and one result file per row, condition and seed."""
    return RunFolder(Path(out), "one-change analysis", (SETTINGS_FILE, "*/*-s*.json"))


def result_name(change: Change, condition: str, seed: int) -> str:
    return f"{change.slug}/{condition.replace(' ', '-')}-s{seed}.json"


def run_one_change(source: str | Path, out: str | Path, *, seeds: int = 3, disambiguation: int = 1000,
                   rows: Sequence[int] | None = None, progress: bool = True,
                   device: str | torch.device | None = None) -> pd.DataFrame:
    """Train the pending runs of the chosen ``rows`` of ``CHANGES`` (default all), ``seeds`` seeds of each
    condition, on ``device`` (``heurlens.runtime.devices.resolve_device``), and return ``one_change_table``. A folder keeps
    the sweep and sample count it was started with (refused otherwise); more seeds or rows may be added later.

    Args:
        source: the sweep's run folder the changes start from.
        out: this study's folder.
        seeds: seeds of each condition.
        disambiguation: the T2 samples every condition trains on (one of the sweep's counts).
        rows: which rows of ``CHANGES`` (None: all).
        progress: bars on stderr.
        device: where the models train (None: ``resolve_device``'s choice).

    Returns:
        ``one_change_table``'s table."""
    source, target = Path(source), resolve_device(device)
    sweep = recorded_settings(source)
    if sweep.architecture != "released":
        raise HeurlensError(f"the sweep in {source} trained heurlens' native decoder; the changes are of the release's "
                            "GPT-2 (dropout, tied embeddings): give a sweep run with architecture='released' "
                            "(heurlens transfer --architecture released)")
    chosen = range(len(CHANGES)) if rows is None else rows
    unknown = [row for row in chosen if not 0 <= row < len(CHANGES)]
    if unknown:
        raise HeurlensError(f"rows= names row {unknown[0]}, but the rows are 0 to {len(CHANGES) - 1}: "
                            + "; ".join(f"{i} {c.name}" for i, c in enumerate(CHANGES)))
    if seeds < 1:
        raise HeurlensError(f"seeds= {seeds}: give at least one seed")
    folder = one_change_folder(out)
    sweep_record = {k: v for k, v in sweep.to_dict().items() if k not in PER_RUN}
    folder.record_settings({"sweep": sweep_record, "disambiguation": disambiguation, "seeds": seeds}, ("seeds",))
    with folder.writing():
        for row in chosen:
            _run_change(CHANGES[row], folder, source, sweep, seeds, disambiguation, progress, target)
    return one_change_table(out, seeds)


def _run_change(change: Change, folder: RunFolder, source: Path, sweep: SweepSettings, seeds: int, n: int,
                progress: bool, device: torch.device) -> None:
    """Train the change's runs that have no result yet, together, and write each one's result."""
    pending = [(condition, seed) for condition in CONDITIONS for seed in range(seeds)
               if not folder.finished(result_name(change, condition, seed))]
    if not pending:
        return
    t1 = ArithmeticTask(sweep.t1, sweep.max_value, sweep.modulus)
    t2 = ArithmeticTask(sweep.t2, sweep.max_value, sweep.modulus)
    trained = released_arithmetic_model(t1, sweep.n_layers, device=device)
    load_tied_state(trained, load_file(str(source / T1_MODEL)))
    subnetwork = WeightSubnetwork.load(source / "subnetwork")
    make = partial(released_arithmetic_model, t1, sweep.n_layers, device=device, dropout=change.dropout,
                   tie_embeddings=change.tied)
    results = train_transfer_runs(pending, n, subnetwork, trained, make, t2, sweep.filling, sweep.transfer_lrs,
                                  sweep.transfer_epochs, change.batch_size or sweep.batch_size, progress,
                                  weight_decay=change.weight_decay)
    for (condition, seed), result in zip(pending, results):
        folder.result(result_name(change, condition, seed), partial(
            dict, row=change.name, condition=condition, seed=seed, best_eval_accuracy=result.best_eval_accuracy,
            test_accuracy=result.test_accuracy))


def one_change_table(out: str | Path, seeds: int) -> pd.DataFrame:
    """Test accuracy in % per row (``change``) and condition from the result files written: mean ± std over the
    seeds found (and each seed's), a single seed's value alone, ``not run`` for none."""
    folder = one_change_folder(out)
    cells: dict[str, dict[str, str]] = {}
    for change in CHANGES:
        for condition in CONDITIONS:
            names = [result_name(change, condition, seed) for seed in range(seeds)]
            found = 100 * pd.Series([json.loads((folder.path / name).read_text())["test_accuracy"]
                                     for name in names if folder.finished(name)], dtype=float)
            cells.setdefault(change.name, {})[condition] = (
                "not run" if found.empty else f"{found.iloc[0]:.1f}" if len(found) == 1
                else f"{found.mean():.1f} ± {found.std():.1f} ({', '.join(f'{x:.1f}' for x in found)})")
    return pd.DataFrame(cells).T.rename_axis("change").reset_index()
