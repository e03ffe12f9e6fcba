"""Figure 2 of the Heuristic Core paper on the default model: accuracy against sparsity.

Prunes the default model with `heurlens prune`'s defaults at sparsities 0.1 to 0.7 (3 seeds each;
finished subnetworks in --out are reused, so this resumes and shares the folder with `heurlens
prune --out runs/prune-default-topk`), evaluates every subnetwork on 2,000 SNLI test pairs and the four
focus HANS-style subcases (200 pairs each), and writes the table and the highest sparsity at which
every seed stays within 3 points in-domain to --docs (markdown) and the plotly figure next to it.

Run: .venv/bin/python analyses/heuristic_core_figure2_accuracy_sparsity.py [--out runs/prune-default-topk] [--seeds 3]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import heurlens
from heurlens.analysis.accuracy_curve import accuracy_by_sparsity, accuracy_curve_figure, highest_faithful_sparsity
from heurlens.analysis.effective_size import accuracy_by_kind
from heurlens.data.hans import FOCUS_SUBCASES
from heurlens.data.nli_setup import nli_eval_sets, snli_pruning_data, snli_reference_means
from heurlens.pruning import PruneSettings, evaluate_subnetworks
from heurlens.pruning.run_folder import prune_folder, subnetworks_by_sparsity
from heurlens.runtime.figure_files import figure_markdown, write_figure_files

SPARSITIES = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    # today's defaults (top-k); runs/prune-default holds the grid-cut runs of before 2026-11-26, refused with them
    parser.add_argument("--out", type=Path, default=Path("runs/prune-default-topk"))
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--margin", type=float, default=0.03)
    parser.add_argument("--docs", type=Path, default=Path("docs/results/pruning-accuracy-sparsity.md"))
    args = parser.parse_args()
    start = time.time()

    model = heurlens.load_model("default")
    means = snli_reference_means(model)
    heurlens.prune(model, snli_pruning_data(model), sparsity=SPARSITIES, seeds=range(args.seeds), out=args.out,
                   config=PruneSettings(), means=means)
    wanted = [round(s, 2) for s in SPARSITIES]
    subnetworks = [sub for sparsity, group in subnetworks_by_sparsity([args.out]).items()
                   if round(sparsity, 2) in wanted for sub in group if sub.seed < args.seeds]
    eval_sets = nli_eval_sets(model, "snli", 2000, 200, list(FOCUS_SUBCASES), seed=0)
    evaluation = evaluate_subnetworks(model, subnetworks, eval_sets, means=means)

    summary = accuracy_by_sparsity(evaluation)
    percent = [c for c in summary.columns if c.endswith(("mean", "min", "max"))]
    points = summary.assign(**{c: (100 * summary[c]).round(1) for c in percent})
    per_seed = accuracy_by_kind(evaluation)
    full = per_seed.loc[per_seed["subnetwork"] == "full model", "in_domain"].iloc[0]
    per_seed = per_seed[per_seed["subnetwork"] != "full model"]
    drops = (per_seed.assign(drop=(100 * (full - per_seed["in_domain"])).round(1))
             .pivot_table(index="target_sparsity", columns="seed", values="drop"))
    drops.columns = [f"seed {int(c)} drop" for c in drops.columns]
    highest = highest_faithful_sparsity(evaluation, args.margin)

    figure_path = args.docs.with_suffix(".html")
    write_figure_files(accuracy_curve_figure(evaluation), figure_path)
    lines = ["# Accuracy against sparsity on the default model (Figure 2)\n",
             f"Produced by `analyses/heuristic_core_figure2_accuracy_sparsity.py` "
             f"in {(time.time() - start) / 60:.1f} min on this project's "
             f"2-core CPU (pruning time counts only subnetworks not already in `{args.out}`). Pruning settings: "
             "the defaults of `heurlens prune` (8,000 SNLI training pairs, batch 16, log_alpha ~ N(10, 0.01), "
             f"docs/pruning.md); {args.seeds} seeds per sparsity. In-domain: 2,000 SNLI test pairs; out-of-domain: "
             "the mean over the four focus HANS-style subcases (SO-Swap, Prep, Embed-If, Embed-Verb; 200 pairs "
             f"each). Figure: [{figure_path.name}]({figure_path.name}) (plotly, with plotly.js from the folder).\n",
             figure_markdown(figure_path, "accuracy against target sparsity"),
             "## Accuracy (%) by target sparsity (0 = the full model): mean, min and max over seeds\n",
             points.to_markdown(index=False), "",
             "## In-domain drop (points) of each seed against the full model\n",
             drops.reset_index().to_markdown(index=False), "",
             f"**Highest sparsity at which every seed stays within {100 * args.margin:.0f} points in-domain: "
             f"{highest:.0%}.**\n"]
    prune_folder(args.out).write_results_page(args.docs, "\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
