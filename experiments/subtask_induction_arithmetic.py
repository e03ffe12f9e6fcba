"""Subtask Induction on modular arithmetic (Subtask Induction paper, Section 4, Figure 3), small CPU version.

Trains on T1 = a + ab (mod 7), finds the ab subnetwork, transfers it into fresh models trained on
T2 = a^2 + ab from the ambiguous a = b set plus disambiguation samples, beside the controls, and
writes the table and the subnetwork's size to docs/. Resumable (the run directory keeps every
finished part).

Run: .venv/bin/python experiments/subtask_induction_arithmetic.py [--out runs/transfer] [--seeds 3]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from heurlens.subtask.sweep import SweepSettings, figure3, run_sweep
from heurlens.subtask.weight_subnetwork import WeightSubnetwork


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("runs/transfer"))
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--docs", type=Path, default=Path("docs/results/subtask-induction-arithmetic.md"))
    args = parser.parse_args()
    start = time.time()
    settings = SweepSettings(seeds=args.seeds)
    results = run_sweep(args.out, settings)
    figure = figure3(results)
    figure.write_html(args.out / "figure3.html")  # plotly.js embedded: works offline
    figure_doc = args.docs.with_name(args.docs.stem + "-figure3.html")
    figure.write_html(figure_doc, include_plotlyjs="cdn")  # small enough to commit; loads plotly.js online
    subnetwork = WeightSubnetwork.load(args.out / "subnetwork")
    t1 = json.loads((args.out / "t1-training.json").read_text()) if (args.out / "t1-training.json").exists() else {}
    per_layer = subnetwork.sizes()
    stats = results.groupby(["disambiguation", "condition"], sort=False)["test_accuracy"].agg(["mean", "std"])
    spread = (100 * stats["mean"]).round(1).astype(str) + " ± " + (100 * stats["std"].fillna(0)).round(1).astype(str)
    table = spread.unstack("condition")[list(dict.fromkeys(results["condition"]))]
    lines = ["# Subtask Induction on modular arithmetic (small CPU version)\n",
             f"Produced by `experiments/subtask_induction_arithmetic.py` on this project's 2-core CPU in "
             f"{(time.time() - start) / 60:.1f} min (parts already on disk are not recomputed). Settings: "
             f"`{json.dumps(settings.to_dict())}`.\n",
             f"T1 ({settings.t1} mod {settings.modulus}) model: test accuracy "
             f"{100 * t1.get('test_accuracy', float('nan')):.1f}%.",
             f"The {settings.subtask} subnetwork keeps {subnetwork.kept} of {subnetwork.total} masked weights "
             f"({100 * subnetwork.fraction_kept:.2f}%); alone it scores "
             f"{100 * subnetwork.settings['subtask_accuracy']:.1f}% on {settings.subtask} and "
             f"{100 * subnetwork.settings['t1_accuracy_of_subnetwork']:.1f}% on {settings.t1}.\n",
             f"Test accuracy (%) on T2 = {settings.t2} after training on the ambiguous set plus n "
             f"disambiguation samples, mean ± standard deviation over {args.seeds} seed(s) (figure: "
             f"[{figure_doc.name}]({figure_doc.name}), offline copy `{args.out}/figure3.html`):\n",
             table.to_markdown(), "",
             "Kept fraction per masked tensor:\n", per_layer.round(4).to_markdown(index=False), ""]
    args.docs.parent.mkdir(parents=True, exist_ok=True)
    args.docs.write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
