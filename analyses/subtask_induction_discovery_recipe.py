"""Subtask Induction: which part of the release's discovery recipe makes its ab subnetwork larger, one at a time.

From a paper-preset sweep folder (``--from``: its settings and T1 model), the ab subnetwork is found as the sweep
finds it (``heurlens.subtask.sweep_discovery.discover_for_sweep``: the sweep's share of ab pairs, epochs, lr and first L0
lambda) with heurlens' recipe (Adam, batch 128, the loss of the answer token) changed one part at a time toward the
release's (AdamW with weight decay 0.01 on the mask scores, batch 500, the LM loss of every position), and with the
two whole recipes. No transfer is trained: the table gives each subnetwork's size (the paper's Table 3 for 2 layers:
7.68% of the masked weights) and its accuracy on ab and on T1. Each subnetwork is kept in ``--out/<row>``
(resumable); the table goes to stdout and ``--table``.

Run: OMP_NUM_THREADS=1 .venv/bin/python analyses/subtask_induction_discovery_recipe.py \\
         --from runs/transfer-gpt2-released --out runs/discovery-recipe [--rows 1 2 3]
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

import pandas as pd
from safetensors.torch import load_file

from heurlens.runtime.run_folders import RunFolder
from heurlens.subtask.arithmetic import ArithmeticTask
from heurlens.subtask.sweep import recorded_settings
from heurlens.subtask.sweep_discovery import DISCOVERY_RECIPES, DiscoveryRecipe, discover_for_sweep
from heurlens.subtask.tied_state import load_tied_state
from heurlens.subtask.training import next_token_loss
from heurlens.subtask.weight_subnetwork import WeightSubnetwork

NATIVE = DISCOVERY_RECIPES["native"]
ROWS: dict[str, DiscoveryRecipe] = {
    "heurlens' (Adam, batch 128, answer loss)": NATIVE,
    "the LM loss of every position": dataclasses.replace(NATIVE, loss=next_token_loss),
    "AdamW, weight decay 0.01": dataclasses.replace(NATIVE, weight_decay=0.01),
    "batch 500": dataclasses.replace(NATIVE, batch_size=500),
    "the release's (all three)": DISCOVERY_RECIPES["released"],
}


def row_name(name: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in name).strip("-")


def recipe_folder(out: Path) -> RunFolder:
    return RunFolder(out, "discovery-recipe run", ("*.json",))


def run_row(name: str, source: Path, folder: RunFolder) -> WeightSubnetwork:
    """The row's subnetwork: read from the folder when there, else found on the source sweep's T1 model and kept."""
    stem = folder.path / row_name(name)

    def discover() -> WeightSubnetwork:
        settings = recorded_settings(source)
        t1 = ArithmeticTask(settings.t1, settings.max_value, settings.modulus)
        subtask = ArithmeticTask(settings.subtask, settings.max_value, settings.modulus)
        trained = settings.model_factory(t1)(seed=0)
        load_tied_state(trained, load_file(str(source / "t1-model.safetensors")))
        return discover_for_sweep(trained, t1, subtask, settings, ROWS[name], settings.l0_lambdas[0])

    return folder.stored(f"{row_name(name)}.json", discover, lambda sub: sub.save(stem),
                         lambda: WeightSubnetwork.load(stem))


def table(folder: RunFolder) -> pd.DataFrame:
    """Size (% and count of the masked weights) and accuracies on ab and on T1 (%) of every row found so far."""
    rows = []
    for name in ROWS:
        stem = folder.path / row_name(name)
        if not folder.finished(f"{row_name(name)}.json"):
            rows.append({"discovery": name, "kept": "not run yet"})
            continue
        sub = WeightSubnetwork.load(stem)
        rows.append({"discovery": name, "kept": f"{100 * sub.fraction_kept:.2f}% ({sub.kept:,})",
                     "ab": f"{100 * sub.settings['subtask_accuracy']:.1f}%",
                     "a+ab": f"{100 * sub.settings['t1_accuracy_of_subnetwork']:.1f}%"})
    return pd.DataFrame(rows).set_index("discovery").fillna("")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--from", dest="source", type=Path, required=True,
                        help="a sweep folder (settings.json, t1-model.safetensors), e.g. runs/transfer-gpt2-released")
    parser.add_argument("--out", type=Path, default=Path("runs/discovery-recipe"))
    parser.add_argument("--rows", nargs="+", type=int, default=None, help="row numbers to run (default: all)")
    parser.add_argument("--table", type=Path, default=None, help="also write the markdown table here")
    args = parser.parse_args()
    folder = recipe_folder(args.out).opened()
    with folder.writing():
        for index, name in enumerate(ROWS):
            if args.rows is None or index in args.rows:
                run_row(name, args.source, folder)
    markdown = table(folder).to_markdown()
    print(markdown)
    if args.table:
        folder.write_results_page(args.table, markdown + "\n")


if __name__ == "__main__":
    main()
