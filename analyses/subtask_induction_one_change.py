"""Subtask Induction at 1,000 disambiguation samples, one change of the transfer at a time, all three conditions.

From a paper-preset sweep folder on the release's GPT-2 (``--from``: its T1 model and its ab subnetwork), each row
changes one thing of the transfer training from the row "as the sweep" (the release's GPT-2 with dropout 0.1 and
tied embeddings, inherited filling, batch 64, AdamW with decay 0.01, lr 2e-4, 100 epochs) and trains subtask
induction, a random subnetwork and random initialisation on T2 = a^2 + ab as the sweep trains its runs
(``heurlens.subtask.sweep.train_transfer_runs``: the same data, seeds and choice of epoch). T1 and the subnetwork
are the same in every row, so only the transfer differs. Each row's runs train together and their results are
written to ``--out`` as the row finishes (resumable); the table goes to stdout and ``--table``.

Run: OMP_NUM_THREADS=1 .venv/bin/python analyses/subtask_induction_one_change.py --from runs/transfer-gpt2 \\
         --out runs/one-change [--seeds 3]
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import pandas as pd
from safetensors.torch import load_file

from heurlens.analysis.results_page import write_results_page
from heurlens.cache import atomic_write_json
from heurlens.subtask.arithmetic import ArithmeticTask
from heurlens.subtask.released_model import released_arithmetic_model
from heurlens.subtask.sweep import load_tied_state, recorded_settings, train_transfer_runs
from heurlens.subtask.weight_subnetwork import WeightSubnetwork

CONDITIONS = ("subtask induction", "random subnetwork", "random init")


@dataclass(frozen=True)
class Row:
    name: str
    dropout: float = 0.1
    tied: bool = True
    batch_size: int = 64
    weight_decay: float = 0.01


ROWS = (
    Row("as the sweep (GPT-2, dropout 0.1, tied, batch 64, AdamW)"),
    Row("dropout 0 in the transfer", dropout=0.0),
    Row("untied embeddings in the transfer", tied=False),
    Row("batch 32", batch_size=32),
    Row("batch 16", batch_size=16),
    Row("Adam (no weight decay)", weight_decay=0.0),
)


def result_file(out: Path, row: Row, condition: str, seed: int) -> Path:
    slug = "".join(c if c.isalnum() else "-" for c in row.name).strip("-")
    return out / slug / f"{condition.replace(' ', '-')}-s{seed}.json"


def run_row(row: Row, source: Path, out: Path, seeds: int, disambiguation: int) -> None:
    """Train the row's pending runs together and write each one's result."""
    pending = [(condition, seed) for condition in CONDITIONS for seed in range(seeds)
               if not result_file(out, row, condition, seed).exists()]
    if not pending:
        return
    settings = recorded_settings(source)
    t1 = ArithmeticTask(settings.t1, settings.max_value, settings.modulus)
    t2 = ArithmeticTask(settings.t2, settings.max_value, settings.modulus)
    trained = released_arithmetic_model(t1, settings.n_layers)
    load_tied_state(trained, load_file(str(source / "t1-model.safetensors")))
    subnetwork = WeightSubnetwork.load(source / "subnetwork")
    make = partial(released_arithmetic_model, t1, settings.n_layers, dropout=row.dropout, tie_embeddings=row.tied)
    results = train_transfer_runs(pending, disambiguation, subnetwork, trained, make, t2, "inherited", [2e-4], 100,
                                  row.batch_size, weight_decay=row.weight_decay)
    for (condition, seed), result in zip(pending, results):
        atomic_write_json(result_file(out, row, condition, seed),
                          {"row": row.name, "condition": condition, "seed": seed,
                           "best_eval_accuracy": result.best_eval_accuracy, "test_accuracy": result.test_accuracy})


def table(out: Path, seeds: int) -> pd.DataFrame:
    """Mean ± std (and each seed) of test accuracy in %, per row and condition, from the files written."""
    cells: dict[str, dict[str, str]] = {}
    for row in ROWS:
        for condition in CONDITIONS:
            found = [json.loads(path.read_text())["test_accuracy"] for seed in range(seeds)
                     if (path := result_file(out, row, condition, seed)).exists()]
            series = 100 * pd.Series(found, dtype=float)
            cells.setdefault(row.name, {})[condition] = (
                f"{series.mean():.1f} ± {series.std():.1f} ({', '.join(f'{x:.1f}' for x in series)})"
                if len(found) > 1 else "not run")
    return pd.DataFrame(cells).T


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--from", dest="source", type=Path, required=True,
                        help="a paper-preset sweep folder on the released architecture (T1 model, subnetwork)")
    parser.add_argument("--out", type=Path, default=Path("runs/one-change"))
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--disambiguation", type=int, default=1000)
    parser.add_argument("--rows", nargs="+", type=int, default=None, help="row numbers to run (default: all)")
    parser.add_argument("--table", type=Path, default=None, help="also write the markdown table here")
    args = parser.parse_args()
    for index, row in enumerate(ROWS):
        if args.rows is None or index in args.rows:
            run_row(row, args.source, args.out, args.seeds, args.disambiguation)
    markdown = table(args.out, args.seeds).to_markdown()
    print(markdown)
    if args.table:
        write_results_page(args.table, markdown + "\n")


if __name__ == "__main__":
    main()
