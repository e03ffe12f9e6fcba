"""Subtask Induction on modular arithmetic (Subtask Induction paper, Section 4, Figure 3).

Trains on T1 = a + ab (mod 7), finds the ab subnetwork, transfers it into fresh models trained on
T2 = a^2 + ab from the ambiguous a = b set plus disambiguation samples, beside the controls, and
writes the table and the subnetwork's size to docs/. Resumable (the run directory keeps every
finished part). With --inherited-out, the conditions whose models depend on what fills the weights
outside the subnetwork run a second time with the inherited filling (the released transfer script's),
from the same T1 model and subnetwork (copied there), and appear as extra columns.

Run: .venv/bin/python analyses/subtask_induction_figure3_arithmetic.py [--out runs/transfer] [--seeds 3]
     .venv/bin/python analyses/subtask_induction_figure3_arithmetic.py --preset paper --seeds 3 \\
         --disambiguation 10 100 1000 --out runs/transfer-paper --inherited-out runs/transfer-paper-inherited \\
         --docs docs/results/subtask-induction-arithmetic-paper.md
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shutil
import time
from pathlib import Path

import pandas as pd

from heurlens.distributed import Workers
from heurlens.subtask.sweep import SweepSettings, figure3, run_sweep
from heurlens.subtask.weight_subnetwork import WeightSubnetwork

CONDITIONS = ("subtask induction", "random subnetwork", "random complement", "full model", "random init")
FILLING_DEPENDENT = ("subtask induction", "random subnetwork", "random complement")
SHARED_PARTS = ("t1-model.safetensors", "t1-training.json", "candidates", "subnetwork.json", "subnetwork.safetensors")


def inherited_run(out: Path, inherited_out: Path, settings: SweepSettings) -> tuple[Path, SweepSettings]:
    """The inherited-filling sweep's folder and settings, its T1 model and subnetwork copied from ``out``."""
    inherited = dataclasses.replace(settings, filling="inherited",
                                    conditions=tuple(c for c in settings.conditions if c in FILLING_DEPENDENT))
    inherited_out.mkdir(parents=True, exist_ok=True)
    for part in SHARED_PARTS:
        if not (inherited_out / part).exists():
            copy = shutil.copytree if (out / part).is_dir() else shutil.copy2
            copy(out / part, inherited_out / part)
    return inherited_out, inherited


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", choices=["small", "paper"], default="small")
    parser.add_argument("--out", type=Path, default=Path("runs/transfer"))
    parser.add_argument("--inherited-out", type=Path, default=None)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--disambiguation", type=int, nargs="+", default=None)
    parser.add_argument("--workers", type=int, default=None, help="Ray workers (heurlens.distributed)")
    parser.add_argument("--docs", type=Path, default=Path("docs/results/subtask-induction-arithmetic.md"))
    args = parser.parse_args()
    start = time.time()
    changes: dict = {"seeds": args.seeds}
    if args.disambiguation:
        changes["disambiguation"] = tuple(args.disambiguation)
    if args.preset == "paper":
        settings = SweepSettings.paper(conditions=CONDITIONS, **changes)
    else:
        settings = SweepSettings(**changes)
    workers = Workers(args.workers) if args.workers else None
    results = run_sweep(args.out, settings, workers=workers)
    if args.inherited_out is not None:
        inherited = run_sweep(*inherited_run(args.out, args.inherited_out, settings), workers=workers)
        inherited["condition"] = inherited["condition"] + " (inherited)"
        results = pd.concat([results, inherited], ignore_index=True)
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
    candidates = pd.DataFrame(subnetwork.settings.get("candidates", []))
    scale = "paper-scale" if args.preset == "paper" else "small CPU version"
    lines = [f"# Subtask Induction on modular arithmetic ({scale})\n",
             f"Produced by `analyses/subtask_induction_figure3_arithmetic.py --preset {args.preset}` on this project's "
             f"2-core CPU; this call took {(time.time() - start) / 60:.1f} min (parts already on disk are not "
             f"recomputed). Settings: `{json.dumps(settings.to_dict())}`.\n",
             f"T1 ({settings.t1} mod {settings.modulus}) model: test accuracy "
             f"{100 * t1.get('test_accuracy', float('nan')):.1f}% after {t1.get('epochs', '?')} epochs.",
             f"The {settings.subtask} subnetwork keeps {subnetwork.kept} of {subnetwork.total} masked weights "
             f"({100 * subnetwork.fraction_kept:.2f}%); alone it scores "
             f"{100 * subnetwork.settings['subtask_accuracy']:.1f}% on {settings.subtask} and "
             f"{100 * subnetwork.settings['t1_accuracy_of_subnetwork']:.1f}% on {settings.t1}.\n"]
    if len(candidates) > 1:
        lines += ["Candidates (one per L0 lambda; the most accurate is transferred):\n",
                  candidates.to_markdown(index=False), ""]
    lines += [f"Test accuracy (%) on T2 = {settings.t2} after training on the ambiguous set plus n "
              f"disambiguation samples, mean ± standard deviation over {args.seeds} seed(s); conditions marked "
              f"(inherited) keep T1's weights outside the masked matrices, the others the prose's fresh filling "
              f"(figure: [{figure_doc.name}]({figure_doc.name}), offline copy `{args.out}/figure3.html`):\n",
              table.to_markdown(), "",
              "Kept fraction per masked tensor:\n", per_layer.round(4).to_markdown(index=False), ""]
    args.docs.parent.mkdir(parents=True, exist_ok=True)
    args.docs.write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
