"""The faithfulness command: pruning runs' subnetworks and edge circuits scored as circuits, MIB's way (f(k), CPR,
CMD)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, cast

import click

from heurlens.cli.group import cli
from heurlens.cli.options import device_option, print_table, table_output_options, weights_dtype_option

if TYPE_CHECKING:
    from heurlens.interventions.scoring import MethodName


@cli.command()
@click.argument("run_dirs", nargs=-1, required=True, type=click.Path(exists=True, file_okay=False))
@click.option("--task", required=True,
              help="The prompt task the run was pruned on: 'ioi', 'greater-than' or a .jsonl/.csv file with "
                   "distractors (m is the logit difference of the answers and the distractors).")
@click.option("--task-examples", type=click.IntRange(min=1), default=200, show_default=True,
              help="Prompts of --task the circuits are scored on (drawn with --seed + 1, as prune evaluates).")
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True,
              help="The --seed the run was pruned with (its means come from its prompts).")
@click.option("--ablation", type=click.Choice(["mean", "zero", "corrupt", "interchange"]), default=None,
              help="What the units outside a circuit are replaced by (default: as the run pruned them; interchange: "
                   "corrupt's name before, deprecated).")
@click.option("--figure", type=click.Path(dir_okay=False), default=None,
              help="Also write the curves (faithfulness against the fraction of units or edges kept) as a plotly HTML "
                   "page.")
@click.option("--model", default=None, help="Model (default: the one the subnetworks were pruned from).")
@weights_dtype_option
@device_option
@table_output_options
def faithfulness(run_dirs: tuple[str, ...], task: str, task_examples: int, seed: int, ablation: str | None,
                 figure: str | None, model: str | None, weights_dtype: str | None, device: str | None, as_json: bool,
                 as_csv: bool) -> None:
    """Score each subnetwork of each RUN_DIR as a circuit: f = (m(circuit) - m(empty)) / (m(full) - m(empty)) with the
    other units ablated, and the areas CPR (under f, higher is better) and CMD (under |1 - f|, lower is better)
    over the fraction of units kept, as the MIB benchmark scores circuits; beside them, attribution patching's
    circuits of the same sizes (its units ranked on the first run's training prompts). With an edge run (prune
    --level edge) among them, every curve is over the fraction of edges kept (a node circuit: the edges between its
    units), every other edge carrying its writer's output on the corrupted prompt."""
    import pandas as pd

    import heurlens
    from heurlens.analysis.attribution import attribution_circuits, attribution_scores
    from heurlens.analysis.faithfulness import faithfulness_curve, faithfulness_figure
    from heurlens.data.prompt_tasks import logit_difference
    from heurlens.data.run_data import PromptTaskData
    from heurlens.errors import HeurlensError
    from heurlens.interventions.circuits import axis_of
    from heurlens.interventions.scoring import as_method
    from heurlens.pruning.evaluation import ablation_of
    from heurlens.pruning.run_folder import load_run_means, subnetworks_by_sparsity
    from heurlens.runtime.cache import atomic_write_bytes
    from heurlens.runtime.run_folders import check_writable_file

    if figure:
        check_writable_file(Path(figure), "--figure")
    runs = {run_dir: [sub for group in subnetworks_by_sparsity([run_dir]).values() for sub in group]
            for run_dir in run_dirs}
    everything = [sub for subnetworks in runs.values() for sub in subnetworks]
    edges = axis_of(everything) == "edge"
    method = as_method(cast("MethodName", ablation)) if ablation else ablation_of(everything)
    if edges and method != "corrupt":
        raise HeurlensError(f"--ablation {method}: an edge run's circuits prune edges to the corrupted prompt's outputs, "
                            "the only ablation heurlens defines for edges, and every curve beside it is on the edge "
                            "axis; give --ablation corrupt (or leave it out)")
    hooked = heurlens.load_model(model or everything[0].model_id, device=device, dtype=weights_dtype)
    data = PromptTaskData(task, task_examples, seed)
    [prompts] = data.eval_sets(hooked)
    means = load_run_means(Path(run_dirs[0]), hooked)
    curves = {}
    for run_dir, subnetworks in runs.items():
        name = {"edge": "edge pruning", "node": "mask optimisation"}[subnetworks[0].level]
        curves[f"{name} ({run_dir})" if len(runs) > 1 else name] = faithfulness_curve(
            hooked, subnetworks, prompts, method=method, means=means, edges=edges)
    ranking = attribution_scores(hooked, data.train(hooked), logit_difference, method=method, means=means)
    n_units = hooked.n_layers * (hooked.n_heads + 1)
    sizes = sorted({len(sub.kept) / n_units for sub in everything})
    curves["attribution"] = faithfulness_curve(hooked, attribution_circuits(ranking, sizes, hooked.n_layers,
                                                                            hooked.n_heads), prompts,
                                               method=method, means=means, edges=edges)
    if figure:
        atomic_write_bytes(Path(figure), faithfulness_figure(curves, prompts.name).to_html(include_plotlyjs=True)
                           .encode())
    table = pd.concat([curve.circuits.assign(method=name, cpr=curve.cpr, cmd=curve.cmd)
                       for name, curve in curves.items()], ignore_index=True)
    first = next(iter(curves.values()))
    outside = ("edges outside a circuit carry the corrupted prompt's outputs" if edges
               else f"units outside a circuit {method}-ablated")

    def pretty(table):
        shown = table.drop(columns=["cpr", "cmd"]).round(3)
        areas = "\n".join(f"{name:>17}: CPR {curve.cpr:.3f}  CMD {curve.cmd:.3f}" for name, curve in curves.items())
        return (f"faithfulness on {prompts.name} of the circuits of {', '.join(run_dirs)} and of attribution's circuits "
                f"of the same sizes in units (m: logit difference; full {first.full:.3f}, empty {first.empty:.3f}; "
                f"{outside})\n{shown.to_string(index=False)}\n"
                f"CPR: area under f (higher is better); CMD: area under |1 - f| (lower is better)\n{areas}")

    print_table(table, as_json, as_csv, pretty)
