"""Subtask Induction on modular arithmetic (Subtask Induction paper, Section 4, Figure 3), one sweep per depth.

For each ``--depth LAYERS FOLDER``: train on T1 = a + ab (mod 7), find the ab subnetwork, transfer it into fresh
models trained on T2 = a^2 + ab from the ambiguous a = b set plus disambiguation samples, beside the controls
(``heurlens.subtask.sweep.run_sweep``, resumable). With ``--also-filling F``, the conditions whose models depend on
what fills the weights outside the subnetwork run a second time with filling F in ``FOLDER-F``, from the same T1
model and subnetwork (copied there). With ``--report-only`` nothing is trained: the page is written from the runs
finished so far (``finished_results``), each cell saying how many of its seeds have finished, so a sweep can be
reported while it runs in the background.

The page (``--docs``) holds, per depth, T1's accuracy, the subnetwork's size beside the paper's Table 3, the
candidates, the accuracy table, the data each condition needs to reach 99% beside the paper's statements, and one
plotly figure per depth. A reading written by hand at the end of the page, after a line starting with
``heurlens.runtime.results_page.HAND_WRITTEN``, is kept when the page is written again.

Run: .venv/bin/python analyses/subtask_induction_figure3_arithmetic.py [--depth 2 runs/transfer] [--seeds 3]
     .venv/bin/python analyses/subtask_induction_figure3_arithmetic.py --preset paper --l0-lambda 1e-7 --seeds 3 \\
         --depth 2 runs/transfer-gpt2-released --depth 4 runs/transfer-gpt2-4layers --also-filling fresh \\
         --docs docs/results/subtask-induction-figure3.md [--report-only]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shutil
import time
from pathlib import Path

import pandas as pd

from heurlens.runtime.distributed import Workers
from heurlens.runtime.figure_files import figure_markdown, write_figure_files
from heurlens.runtime.results_page import write_results_page
from heurlens.runtime.run_folders import RunFolder
from heurlens.subtask.settings import FIGURE3_CONDITIONS, FILLINGS, Filling
from heurlens.subtask.sweep import PER_RUN, SweepSettings, figure3, finished_results, run_sweep
from heurlens.subtask.weight_subnetwork import WeightSubnetwork

FILLING_DEPENDENT = ("subtask induction", "random subnetwork", "random complement")
SHARED_PARTS = ("t1-model.safetensors", "t1-training.json", "candidates", "subnetwork.json", "subnetwork.safetensors")
PAPER_TABLE3 = {2: 7.68, 4: 7.00, 6: 4.70, 8: 3.55, 10: 3.56, 12: 3.20}  # % of masked weights transferred
PERFECT = 0.99  # "perfect generalization accuracy", read as a mean test accuracy of at least 99%
PAPER_AT_1000 = {  # Section 4.2 on Figure 3, at 1,000 disambiguation samples
    "subtask induction": "near-perfect at every depth",
    "random subnetwork": "better than random init, below Subtask Induction (needs ~6x the data to reach 100%)",
    "random complement": "like the random subnetwork (Appendix B)",
    "full model": "comparable to Subtask Induction, often below it",
    "random init": "50.6% (mean over 2 to 12 layers); never perfect up to 10^4 samples",
}


def second_folder(out: Path, filling: str) -> Path:
    """``OUT-<filling>``: where the sweep with a second filling runs."""
    return Path(f"{out}-{filling}")


def second_filling_run(out: Path, filling: Filling, settings: SweepSettings) -> tuple[Path, SweepSettings]:
    """The folder and settings of the sweep with another filling, its T1 model and subnetwork copied from ``out``
    (so both fillings start from the very same T1 model and subnetwork)."""
    second = RunFolder(second_folder(out, filling), "sweep")
    changed = dataclasses.replace(settings, filling=filling,
                                  conditions=tuple(c for c in settings.conditions if c in FILLING_DEPENDENT))
    # first: a folder with parts but no settings is refused
    second.record_settings(changed.to_dict(), PER_RUN)
    for part in SHARED_PARTS:
        if not second.finished(part):
            copy = shutil.copytree if (out / part).is_dir() else shutil.copy2
            copy(out / part, second.path / part)
    return second.path, changed


def with_filling(results: pd.DataFrame, filling: str) -> pd.DataFrame:
    """The second sweep's results, their condition names saying its filling."""
    return results.assign(condition=results["condition"] + f" ({filling} filling)")


def cell(accuracies: pd.Series, seeds: int) -> str:
    """'mean ± std' in %, with how many seeds when fewer than asked have finished."""
    text = f"{100 * accuracies.mean():.1f}" + (f" ± {100 * accuracies.std(ddof=1):.1f}" if len(accuracies) > 1 else "")
    return text if len(accuracies) == seeds else f"{text} ({len(accuracies)} of {seeds} seeds)"


def cells(results: pd.DataFrame, seeds: int) -> dict[tuple[str, int], str]:
    """``cell`` of every (condition, sample count) with at least one finished seed."""
    return {key: cell(group["test_accuracy"], seeds)
            for key, group in results.groupby(["condition", "disambiguation"], sort=False)}


def accuracy_table(results: pd.DataFrame, counts: list[int], seeds: int) -> pd.DataFrame:
    """Rows: every planned sample count; columns: conditions; 'not run yet' where no seed has finished."""
    found = cells(results, seeds)
    return pd.DataFrame({condition: [found.get((condition, n), "not run yet") for n in counts]
                         for condition in dict.fromkeys(results["condition"])},
                        index=pd.Index(counts, name="disambiguation"))


def samples_to_perfect(results: pd.DataFrame, counts: list[int], seeds: int) -> dict[str, str]:
    """Per condition, the smallest count whose mean (all seeds finished) reaches ``PERFECT``, or the largest count
    finished when none does."""
    reached = {}
    for condition, group in results.groupby("condition", sort=False):
        complete = [n for n in counts if (group["disambiguation"] == n).sum() == seeds]
        hits = [n for n in complete if group[group["disambiguation"] == n]["test_accuracy"].mean() >= PERFECT]
        if hits:
            unrun_below = any(n < hits[0] and n not in complete for n in counts)
            reached[condition] = f"{hits[0]} or fewer (smaller counts not all run yet)" if unrun_below else str(hits[0])
        else:
            reached[condition] = f"not reached up to {max(complete)}" if complete else "not run yet"
    return reached


def beside_the_paper(results: pd.DataFrame, seeds: int, n: int = 1000) -> pd.DataFrame:
    """Each condition at ``n`` samples next to what the paper says of it there."""
    found = cells(results, seeds)
    return pd.DataFrame([{"condition": condition, f"heurlens at {n:,} (%)": found.get((condition, n), "not run yet"),
                          "the paper": PAPER_AT_1000.get(condition.split(" (")[0], "")}
                         for condition in dict.fromkeys(results["condition"])])


def depth_section(layers: int, out: Path, also_filling: str | None) -> tuple[list[str], pd.DataFrame]:
    """The page's section for one depth, and its results (both fillings)."""
    folder = RunFolder(out, "sweep")
    settings = folder.settings()
    counts, seeds = sorted(settings["disambiguation"]), settings["seeds"]
    results = finished_results(out)
    if also_filling and RunFolder(second_folder(out, also_filling), "sweep").has_settings():
        results = pd.concat([results, with_filling(finished_results(second_folder(out, also_filling)), also_filling)],
                            ignore_index=True)
    preset = SweepSettings.paper(n_layers=layers).to_dict()
    changed = [f"{name} {settings.get(name)} (the preset: {value})" for name, value in preset.items()
               if settings.get(name) != value and name not in ("conditions", "disambiguation")]
    lines = [f"## {layers} layers\n", f"Folder `{out}`; settings: `{json.dumps(settings)}`.\n",
             f"Differs from `--preset paper`: {'; '.join(changed)}.\n" if changed else "The `--preset paper` settings.\n"]
    if folder.finished("t1-training.json"):
        t1 = json.loads((out / "t1-training.json").read_text())
        lines.append(f"T1 ({settings['t1']} mod {settings['modulus']}) model: test accuracy "
                     f"{100 * t1['test_accuracy']:.1f}% after {t1['epochs']} epochs"
                     + (f" (early stopping, patience {settings['t1_patience']})." if settings["t1_patience"] else "."))
    if folder.finished("subnetwork.json"):
        subnetwork = WeightSubnetwork.load(out / "subnetwork")
        paper = f"; the paper's Table 3: {PAPER_TABLE3[layers]}%" if layers in PAPER_TABLE3 else ""
        lines.append(f"The {settings['subtask']} subnetwork keeps {subnetwork.kept} of {subnetwork.total} masked "
                     f"weights ({100 * subnetwork.fraction_kept:.2f}%{paper}); alone it scores "
                     f"{100 * subnetwork.settings['subtask_accuracy']:.1f}% on {settings['subtask']} and "
                     f"{100 * subnetwork.settings['t1_accuracy_of_subnetwork']:.1f}% on {settings['t1']}.\n")
        candidates = pd.DataFrame(subnetwork.settings.get("candidates", []))
        if len(candidates) > 1:
            lines += ["Candidates (one per L0 lambda; the most accurate is transferred):\n",
                      candidates.to_markdown(index=False), ""]
    if results.empty:
        return lines + ["No transfer run has finished yet.\n"], results
    lines += [f"Test accuracy (%) on T2 = {settings['t2']} after training on the ambiguous set plus n disambiguation "
              f"samples, mean ± standard deviation over {seeds} seeds ({settings['filling']} filling unless the "
              f"column says otherwise):\n", accuracy_table(results, counts, seeds).to_markdown(), "",
              "At 1,000 samples, beside the paper (Section 4.2):\n",
              beside_the_paper(results, seeds).to_markdown(index=False), "",
              f"Fewest disambiguation samples whose mean test accuracy reaches {100 * PERFECT:.0f}% (the paper: "
              "Subtask Induction near-perfect with 1,000 at every depth, a random subnetwork needs about 6 times as "
              "much data, training from scratch never reaches perfect accuracy up to 10^4):\n",
              pd.Series(samples_to_perfect(results, counts, seeds), name="samples").to_markdown(), ""]
    return lines, results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", choices=["small", "paper"], default="small")
    parser.add_argument("--depth", nargs=2, action="append", metavar=("LAYERS", "FOLDER"),
                        help="a depth and its run folder; repeat for several (default: 2 runs/transfer)")
    parser.add_argument("--also-filling", choices=FILLINGS, default=None)
    parser.add_argument("--architecture", choices=["native", "released"], default=None)
    parser.add_argument("--filling", choices=FILLINGS, default=None)
    parser.add_argument("--l0-lambda", type=float, nargs="+", default=None)
    parser.add_argument("--conditions", nargs="+", default=list(FIGURE3_CONDITIONS))
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--disambiguation", type=int, nargs="+", default=None)
    parser.add_argument("--workers", type=int, default=None, help="Ray workers (heurlens.runtime.distributed)")
    parser.add_argument("--report-only", action="store_true", help="train nothing; report the finished runs")
    parser.add_argument("--docs", type=Path, default=Path("docs/results/subtask-induction-arithmetic.md"))
    args = parser.parse_args()
    start = time.time()
    depths = [(int(layers), Path(folder)) for layers, folder in (args.depth or [("2", "runs/transfer")])]
    changes: dict = {"seeds": args.seeds, "conditions": tuple(args.conditions)}
    for name, value in (("disambiguation", args.disambiguation), ("l0_lambdas", args.l0_lambda),
                        ("architecture", args.architecture), ("filling", args.filling)):
        if value is not None:
            changes[name] = tuple(value) if isinstance(value, list) else value
    workers = Workers(args.workers) if args.workers else None
    args.docs.parent.mkdir(parents=True, exist_ok=True)
    sections: list[str] = []
    for layers, out in depths:
        if not args.report_only:
            preset = SweepSettings.paper if args.preset == "paper" else SweepSettings
            settings = preset(**changes, n_layers=layers)
            run_sweep(out, settings, workers=workers)
            if args.also_filling:
                run_sweep(*second_filling_run(out, args.also_filling, settings), workers=workers)
        section, results = depth_section(layers, out, args.also_filling)
        if not results.empty:
            figure = figure3(results).update_layout(title=f"Figure 3, {layers} layers")
            figure.write_html(out / "figure3.html")  # plotly.js embedded: works offline
            figure_doc = args.docs.with_name(f"{args.docs.stem}-{layers}-layers.html")
            write_figure_files(figure, figure_doc)  # small enough to commit; plotly.js from the folder's one copy
            section += [f"Figure: [{figure_doc.name}]({figure_doc.name}) (offline copy `{out}/figure3.html`).\n",
                        figure_markdown(figure_doc, f"Figure 3, {layers} layers")]
        sections += section
    scale = "paper-scale" if args.preset == "paper" else "small CPU version"
    lines = [f"# Subtask Induction on modular arithmetic, Figure 3 ({scale})\n",
             f"Produced by `analyses/subtask_induction_figure3_arithmetic.py --preset {args.preset}"
             f"{' --report-only' if args.report_only else ''}` on this project's 2-core CPU "
             f"({(time.time() - start) / 60:.1f} min for this call; parts already on disk are not recomputed).\n",
             *sections]
    write_results_page(args.docs, "\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
