"""Effective size over training (the Heuristic Core paper, Section 4, Figure 6) and the core over training,
written to docs/results from the run folders of the commands that compute them.

Make the inputs first (resumable; about an hour on this 2-core CPU):

    .venv/bin/heurlens finetune --checkpoint-every 50 --out runs/ft
    .venv/bin/heurlens effective-size runs/ft/checkpoints/* --seeds 2 --search bisect \
        --sparsity 0.1 0.2 0.3 0.4 0.5 0.6 0.7 0.8 0.9 --out runs/effective-size
    .venv/bin/heurlens prune --sparsity 0.1 0.2 0.3 0.4 0.5 0.6 0.7 --seeds 3 --out runs/prune-default

then: .venv/bin/python analyses/heuristic_core_figure6_effective_size.py

A reading written by hand at the end of the page, after a line starting with
``heurlens.runtime.results_page.HAND_WRITTEN``, is kept when the page is written again.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

from heurlens.analysis.core_over_training import checkpoint_subnetworks, core_presence, core_presence_figure
from heurlens.analysis.effective_size import (
    DATA_KINDS,
    EFFECTIVE_SIZE_FILE,
    effective_size_figure,
    effective_size_folder,
    read_effective_size_table,
)
from heurlens.analysis.overlap import heuristic_core
from heurlens.interventions.units import format_units, parse_units
from heurlens.pruning.run_folder import subnetworks_by_sparsity
from heurlens.pruning.settings import PruneSettings
from heurlens.runtime.figure_files import figure_markdown, write_figure_files


def settings_line(settings: dict | None) -> str:
    """What the run's settings.json says about the search (folders written before it existed: nothing)."""
    if settings is None:
        return ""
    grid = ", ".join(f"{s:.0%}" for s in settings["sparsities"])
    return (f"Sparsities searched ({settings['search']}): {grid}; seeds {len(settings['seeds'])}; tolerance "
            f"{settings['tolerance']:g}; pruned on {settings['train']}; evaluated on "
            f"{', '.join(settings['eval_sets'])}.\n")


def missing_line(folder: Path, settings: dict | None, table: pd.DataFrame, planned: list[int], checkpoints: str
                 ) -> str:
    """Which planned checkpoints have no row yet, and the command (from settings.json) that adds them."""
    missing = sorted(set(planned) - set(table["step"]))
    if not missing:
        return ""
    line = f"**Not measured yet: steps {', '.join(map(str, missing))}** (of {', '.join(map(str, sorted(planned)))})."
    if settings is None:
        return line + "\n"
    grid = " ".join(f"{s:g}" for s in settings["sparsities"])
    return (f"{line} Each is added to this table, without redoing the others, by `heurlens effective-size "
            f"{checkpoints}/step-N --seeds {len(settings['seeds'])} --search {settings['search']} --sparsity {grid} "
            f"--out {folder}`"
            f"{'' if settings['pruning'] == PruneSettings().to_dict() else ' plus the pruning options in settings.json'}"
            " (finished prune runs are reused).\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--effective-size", type=Path, default=Path("runs/effective-size"))
    parser.add_argument("--core", default="runs/prune-default",
                        help="Run folder of the final model whose core (heads kept by every 50%% subnetwork) is "
                             "followed, or those heads themselves (L3.H9,L2.H7,...).")
    parser.add_argument("--core-source", default=None,
                        help="Where heads given to --core come from, for the page (e.g. a results page).")
    parser.add_argument("--sparsity", type=float, default=0.5)
    parser.add_argument("--title", default="Effective size and the core over fine-tuning (Figure 6)")
    parser.add_argument("--planned", type=int, nargs="*", default=[],
                        help="Checkpoint steps the run is meant to cover: the page says which are not measured yet "
                             "and how to add them.")
    parser.add_argument("--checkpoints-dir", default="CHECKPOINTS",
                        help="Where the checkpoints are, for the command that adds the missing ones.")
    parser.add_argument("--docs", type=Path, default=Path("docs/results/effective-size-over-training.md"))
    args = parser.parse_args()

    folder = effective_size_folder(args.effective_size)
    table = read_effective_size_table(folder.path / EFFECTIVE_SIZE_FILE)
    settings = folder.settings() if folder.has_settings() else None  # folders written before it: none
    args.docs.parent.mkdir(parents=True, exist_ok=True)
    figure_path = args.docs.with_suffix(".html")
    write_figure_files(effective_size_figure(table), figure_path)
    shown = table[["step"] + [f"acc_{k}" for k in DATA_KINDS]
                  + [c for k in DATA_KINDS for c in (f"size_{k}", f"size_{k}_std")]]
    shown = shown.assign(**{f"acc_{k}": (100 * shown[f"acc_{k}"]).round(1) for k in DATA_KINDS}).round(1)

    runs = checkpoint_subnetworks(args.effective_size, args.sparsity)
    if Path(args.core).is_dir():
        final = {round(s, 2): group for s, group in subnetworks_by_sparsity([Path(args.core)]).items()}[
            round(args.sparsity, 2)]
        core = heuristic_core(final)
        core_text = f"the heads kept by every {args.sparsity:.0%} subnetwork of `{args.core}` ({len(final)} seeds)"
    else:
        first = next(iter(runs.values()))[0]
        core = parse_units(args.core, first.n_layers, first.n_heads)
        core_text = f"heads given{f' ({args.core_source})' if args.core_source else ''}"
    presence = core_presence(core, runs)
    core_path = args.docs.with_name(args.docs.stem + "-core.html")
    write_figure_files(core_presence_figure(presence), core_path)
    wide = presence.pivot_table(index="unit", columns="step", values="frequency", sort=False).round(2)
    any_head = {step: sum(len(s.kept_heads) for s in subs) / (len(subs) * subs[0].n_layers * subs[0].n_heads)
                for step, subs in runs.items()}
    wide.loc["(any head)"] = pd.Series(any_head).round(2)

    lines = [f"# {args.title}\n",
             f"From `{args.effective_size}` (`heurlens effective-size`, settings in its per-checkpoint run folders) by "
             "`analyses/heuristic_core_figure6_effective_size.py`. Accuracy of the full model at each checkpoint (%), "
             "and its "
             f"effective size: {int(table['n_units'].iloc[0])} units x (1 - the highest target sparsity at which a seed's "
             "subnetwork is faithful, i.e. above the full model's accuracy minus 3 points), mean and standard deviation "
             f"over seeds. Figure: [{figure_path.name}]({figure_path.name}).\n",
             figure_markdown(figure_path, "accuracy and effective size over training"),
             settings_line(settings),
             missing_line(args.effective_size, settings, table, args.planned, args.checkpoints_dir),
             shown.to_markdown(index=False), "",
             "## The final model's core in earlier checkpoints\n",
             f"Core: {core_text}: **{format_units(core)}**. Fraction of each checkpoint's {args.sparsity:.0%} "
             f"subnetworks keeping each head (figure: [{args.docs.stem}-core.html]({args.docs.stem}-core.html)); the "
             "last row, the fraction of all heads they keep, is what a head kept at random would show:\n",
             wide.reset_index().to_markdown(index=False), "",
             figure_markdown(core_path, "core heads in each checkpoint's subnetworks")]
    folder.write_results_page(args.docs, "\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
