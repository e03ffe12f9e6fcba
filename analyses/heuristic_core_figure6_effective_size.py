"""Effective size over training (the Heuristic Core paper, Section 4, Figure 6) and the core over training,
written to docs/results from the run folders of the commands that compute them.

Make the inputs first (resumable; about an hour on this 2-core CPU):

    .venv/bin/heurlens finetune --checkpoint-every 50 --out runs/ft
    .venv/bin/heurlens effective-size runs/ft/checkpoints/* --seeds 2 --search bisect \
        --sparsity 0.1 0.2 0.3 0.4 0.5 0.6 0.7 0.8 0.9 --out runs/effective-size
    .venv/bin/heurlens prune --sparsity 0.1 0.2 0.3 0.4 0.5 0.6 0.7 --seeds 3 --out runs/prune-default

then: .venv/bin/python analyses/heuristic_core_figure6_effective_size.py
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

from heurlens.analysis.core_over_training import checkpoint_subnetworks, core_presence, core_presence_figure
from heurlens.analysis.effective_size import DATA_KINDS, EFFECTIVE_SIZE_FILE, effective_size_figure
from heurlens.analysis.overlap import heuristic_core
from heurlens.pruning.runs import subnetworks_by_sparsity
from heurlens.units import format_units


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--effective-size", type=Path, default=Path("runs/effective-size"))
    parser.add_argument("--core", type=Path, default=Path("runs/prune-default"),
                        help="Run folder of the final model whose core (heads kept by every 50%% subnetwork) is followed.")
    parser.add_argument("--sparsity", type=float, default=0.5)
    parser.add_argument("--docs", type=Path, default=Path("docs/results/effective-size-over-training.md"))
    args = parser.parse_args()

    table = pd.read_csv(args.effective_size / EFFECTIVE_SIZE_FILE)
    args.docs.parent.mkdir(parents=True, exist_ok=True)
    figure_path = args.docs.with_suffix(".html")
    effective_size_figure(table).write_html(figure_path, include_plotlyjs="cdn")
    shown = table[["step"] + [f"acc_{k}" for k in DATA_KINDS]
                  + [c for k in DATA_KINDS for c in (f"size_{k}", f"size_{k}_std")]]
    shown = shown.assign(**{f"acc_{k}": (100 * shown[f"acc_{k}"]).round(1) for k in DATA_KINDS}).round(1)

    final = {round(s, 2): group for s, group in subnetworks_by_sparsity([args.core]).items()}[round(args.sparsity, 2)]
    core = heuristic_core(final)
    presence = core_presence(core, checkpoint_subnetworks(args.effective_size, args.sparsity))
    core_presence_figure(presence).write_html(args.docs.with_name(args.docs.stem + "-core.html"), include_plotlyjs="cdn")
    wide = presence.pivot_table(index="unit", columns="step", values="frequency", sort=False).round(2)

    lines = ["# Effective size and the core over fine-tuning (Figure 6)\n",
             f"From `{args.effective_size}` (`heurlens effective-size`, settings in its per-checkpoint run folders) by "
             "`analyses/heuristic_core_figure6_effective_size.py`. Accuracy of the full model at each checkpoint (%), "
             "and its "
             f"effective size: {int(table['n_units'].iloc[0])} units x (1 - the highest target sparsity at which a seed's "
             "subnetwork is faithful, i.e. above the full model's accuracy minus 3 points), mean and standard deviation "
             f"over seeds. Figure: [{figure_path.name}]({figure_path.name}).\n",
             shown.to_markdown(index=False), "",
             "## The final model's core in earlier checkpoints\n",
             f"Core: the heads kept by every {args.sparsity:.0%} subnetwork of `{args.core}` ({len(final)} seeds): "
             f"**{format_units(core)}**. Fraction of each checkpoint's {args.sparsity:.0%} subnetworks keeping each "
             f"head (figure: [{args.docs.stem}-core.html]({args.docs.stem}-core.html)):\n",
             wide.reset_index().to_markdown(index=False), ""]
    args.docs.write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
