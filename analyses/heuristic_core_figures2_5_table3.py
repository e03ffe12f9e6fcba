"""Reproduce the heuristic-core analysis of the Heuristic Core paper (Sections 4 and 5) on a named NLI model.

Prunes the default model with 12 seeds at 50% and 70% sparsity, then: accuracy of every
subnetwork (Figure 2's data), head frequencies, the core and the random-choice null, Spearman rho
and the Figure 5 co-occurrence table, single-head ablation of the core heads beside the average
over randomly drawn non-core heads (Table 3), super-additivity of the three core heads with the
largest out-of-domain drops, and the attention-pattern labels of the core heads (Figure 9).
Writes a markdown summary and a self-contained HTML report. Resumable: finished subnetworks,
the evaluation and the pattern scores are kept in the run directory.

Run: .venv/bin/python analyses/heuristic_core_figures2_5_table3.py [--model default] [--seeds 12]
     [--sparsity 0.5 0.7] [--out runs/heuristic-core] [--docs docs/results/heuristic-core.md]
The paper-length model: --model snli-long --out runs/heuristic-core-long --docs docs/results/heuristic-core-long.md
With --on-target-only the subnetworks whose masks missed their target (``missed_target``; still in the run folder)
are left out of every pooled line: the overlap, core, Spearman, Table 3 and super-additivity.
"""

from __future__ import annotations

import argparse
import random
import time
from pathlib import Path

import heurlens
from heurlens.analysis import (
    analysed_core,
    group_superadditivity,
    overlap_report,
    scan_table,
    single_unit_scan,
)
from heurlens.analysis.run_report import build_run_report, cached_evaluation, cached_patterns
from heurlens.data.hans import FOCUS_SUBCASES
from heurlens.data.nli_setup import (
    PRUNING_BATCH,
    PRUNING_PAIRS,
    REFERENCE_PAIRS,
    nli_eval_sets,
    snli_pruning_data,
    snli_reference_means,
)
from heurlens.interventions.units import all_units, format_units
from heurlens.pruning import PruneSettings
from heurlens.pruning.run_folder import subnetworks_by_sparsity
from heurlens.runtime.results_page import write_results_page


def as_points(table, columns):
    """Fractions in ``columns`` as percentage points, one decimal."""
    return table.assign(**{c: (100 * table[c]).round(1) for c in columns})


def pruning_settings(config: PruneSettings, train_examples: int, batch_size: int) -> str:
    """The settings the subnetworks were pruned with, and whether they are heurlens prune's defaults."""
    defaults = config == PruneSettings() and (train_examples, batch_size) == (PRUNING_PAIRS, PRUNING_BATCH)
    return (f"Pruning settings ({'the current defaults of `heurlens prune`' if defaults else 'NOT the defaults'}): "
            f"{train_examples:,} SNLI training pairs, batch {batch_size}, "
            + ", ".join(f"{k}={v}" for k, v in config.to_dict().items())
            + f"; pruned units replaced by their means over the reference set ({REFERENCE_PAIRS:,} SNLI training "
              "pairs).\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="default",
                        help="A named NLI model: default (250 steps) or snli-long (the paper-length fine-tune).")
    parser.add_argument("--seeds", type=int, default=12)
    parser.add_argument("--sparsity", type=float, nargs="+", default=[0.5, 0.7])
    parser.add_argument("--out", type=Path, default=Path("runs/heuristic-core"))
    parser.add_argument("--train-examples", type=int, default=PRUNING_PAIRS)
    parser.add_argument("--batch-size", type=int, default=PRUNING_BATCH)
    parser.add_argument("--in-domain-examples", type=int, default=2000)
    parser.add_argument("--per-subcase", type=int, default=200)
    parser.add_argument("--control-heads", type=int, default=0,
                        help="Random non-core heads ablated for the average (0: every non-core head, the paper's row).")
    parser.add_argument("--pattern-examples", type=int, default=300)
    parser.add_argument("--docs", type=Path, default=Path("docs/results/heuristic-core.md"))
    parser.add_argument("--on-target-only", action="store_true",
                        help="Leave out the subnetworks whose masks missed their target (missed_target): the "
                             "overlap, core, Spearman, Table 3 and super-additivity from the others alone.")
    args = parser.parse_args()
    start = time.time()
    timings = {}

    model = heurlens.load_model(args.model)
    eager = heurlens.load_model(args.model, attn_implementation="eager")
    train = snli_pruning_data(model, args.train_examples, args.batch_size)
    means = snli_reference_means(model)  # the reference set every command uses
    config = PruneSettings()  # heurlens prune's defaults (docs/pruning.md)
    heurlens.prune(model, train, sparsity=args.sparsity, seeds=range(args.seeds), out=args.out, config=config, means=means)
    timings["pruning"] = time.time() - start

    wanted = [round(s, 2) for s in args.sparsity]  # the run folder may hold other sparsities and seeds too
    groups = {s: [sub for sub in group if sub.seed < args.seeds]
              for s, group in subnetworks_by_sparsity([args.out], pooled=args.on_target_only).items()
              if round(s, 2) in wanted}
    names = {s: f"{s:.0%}" for s in groups}
    everything = [s for group in groups.values() for s in group]
    core, what = analysed_core(groups)
    eval_sets = nli_eval_sets(model, "snli", args.in_domain_examples, args.per_subcase, list(FOCUS_SUBCASES))
    pattern_data = heurlens.tokenize_pairs("snli-test", heurlens.load_snli("test", limit=args.pattern_examples),
                                           model.tokenizer)
    mark = time.time()
    report = build_run_report(args.out, model, eager, eval_sets, pattern_data)  # caches evaluation + patterns
    report_path = report.write(args.out / "report.html")
    timings["evaluation, patterns, report"] = time.time() - mark

    mark = time.time()
    others = [u for u in all_units(model.n_layers, model.n_heads, include_mlps=False) if u not in core]
    controls = random.Random(0).sample(others, min(args.control_heads, len(others))) if args.control_heads else others
    scan = single_unit_scan(model, core + controls, eval_sets, means=means)
    table3 = scan_table(scan, core)
    ood = -scan[scan["eval_set"] != eval_sets[0].name].groupby("ablated", sort=False)["delta"].mean()  # the drop
    strongest = sorted(core, key=lambda u: -ood[str(u)])[:3]
    summary, interactions = (group_superadditivity(model, strongest, eval_sets, means=means) if len(strongest) >= 2
                             else (None, None))
    timings["ablations"] = time.time() - mark

    patterns = cached_patterns(args.out, eager, pattern_data)
    evaluation = cached_evaluation(args.out, model, eval_sets)
    evaluation = evaluation[(evaluation["subnetwork"] == "full model")
                            | evaluation["subnetwork"].isin([s.label for s in everything])]
    lines = [f"# Heuristic core of the {args.model} model\n",
             f"Produced by `analyses/heuristic_core_figures2_5_table3.py` on this project's 2-core CPU; "
             f"{len(everything)} subnetworks ({args.seeds} seeds at {', '.join(names.values())}"
             + (", only those whose masks are on target" if args.on_target_only else "") + "); "
             + "; ".join(f"{k} {v / 60:.1f} min" for k, v in timings.items())
             + f"; total {(time.time() - start) / 60:.1f} min (pruning time counts only subnetworks not already on disk).\n",
             pruning_settings(config, args.train_examples, args.batch_size),
             "## Accuracy (%) of the full model and each subnetwork\n",
             heurlens.accuracy_table(evaluation).to_markdown(index=False), "",
             overlap_report(groups).to_markdown(level=2),
             f"Heads analysed below ({len(core)}): {what}: **{format_units(core)}**.\n"]
    lines += ["## Single-head ablation (Table 3)\n",
              "Mean ablation from the full model; 'avg (non-core)' averages "
              + (f"all {len(controls)} non-core heads" if controls == others
                 else f"{len(controls)} randomly drawn non-core heads ({format_units(controls)})") + ".\n",
              table3.to_markdown(index=False), ""]
    if summary is not None:
        lines += [f"## Super-additivity of {format_units(strongest)}\n",
                  "Drops in accuracy (points); excess = group drop - sum of single drops.\n",
                  as_points(summary, ["accuracy", "group_drop", "sum_of_single_drops", "excess"]).to_markdown(index=False),
                  "", "Pairwise interactions drop(i,j) - drop(i) - drop(j) (points):\n",
                  as_points(interactions, ["pair_drop", "interaction"]).to_markdown(index=False), ""]
    core_patterns = patterns[patterns["unit"].isin([str(u) for u in core])]
    lines += ["## Attention patterns of the core heads (Figure 9)\n",
              f"Scores over {args.pattern_examples} SNLI test pairs; label = highest score (>= 0.3, else other). "
              "All heads' labels: " + ", ".join(f"{k} {v}" for k, v in patterns["label"].value_counts().items()) + ".\n",
              core_patterns.drop(columns=["layer", "head"]).round(3).to_markdown(index=False), "",
              f"The HTML report (figures, circuitsvis plots) is written to `{report_path}` (not committed).\n"]
    args.docs.parent.mkdir(parents=True, exist_ok=True)
    write_results_page(args.docs, "\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
