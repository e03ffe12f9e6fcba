"""The faithfulness command: a pruning run's subnetworks scored as circuits, MIB's way (f(k), CPR, CMD)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, cast

import click

from heurlens.cli.group import cli
from heurlens.cli.options import device_option, print_table, table_output_options, weights_dtype_option
from heurlens.errors import HeurlensError

if TYPE_CHECKING:
    from heurlens.ablation import Method


@cli.command()
@click.argument("run_dir", type=click.Path(exists=True, file_okay=False))
@click.option("--task", required=True,
              help="The prompt task the run was pruned on: 'ioi', 'greater-than' or a .jsonl/.csv file with "
                   "distractors (m is the logit difference of the answers and the distractors).")
@click.option("--task-examples", type=click.IntRange(min=1), default=200, show_default=True,
              help="Prompts of --task the circuits are scored on (drawn with --seed + 1, as prune evaluates).")
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True,
              help="The --seed the run was pruned with (its means come from its prompts).")
@click.option("--ablation", type=click.Choice(["mean", "zero", "interchange"]), default=None,
              help="What the units outside a circuit are replaced by (default: as the run pruned them).")
@click.option("--figure", type=click.Path(dir_okay=False), default=None,
              help="Also write the curve (faithfulness against the fraction of units kept) as a plotly HTML page.")
@click.option("--model", default=None, help="Model (default: the one the subnetworks were pruned from).")
@weights_dtype_option
@device_option
@table_output_options
def faithfulness(run_dir: str, task: str, task_examples: int, seed: int, ablation: str | None, figure: str | None,
                 model: str | None, weights_dtype: str | None, device: str | None, as_json: bool,
                 as_csv: bool) -> None:
    """Score each subnetwork of RUN_DIR as a circuit: f = (m(circuit) - m(empty)) / (m(full) - m(empty)) with the
    other units ablated, and the areas CPR (under f, higher is better) and CMD (under |1 - f|, lower is better)
    over the fraction of units kept, as the MIB benchmark scores circuits."""
    import heurlens
    from heurlens.analysis.faithfulness import faithfulness_curve, faithfulness_figure
    from heurlens.cache import atomic_write_bytes
    from heurlens.pruning.run_folder import load_run_means, subnetworks_by_sparsity
    from heurlens.run_data import PromptTaskData
    from heurlens.run_folders import check_writable_file

    if figure:
        check_writable_file(Path(figure), "--figure")
    subnetworks = [sub for group in subnetworks_by_sparsity([run_dir]).values() for sub in group]
    hooked = heurlens.load_model(model or subnetworks[0].model_id, device=device, dtype=weights_dtype)
    method = ablation or subnetworks[0].hyperparameters.get("ablation", "mean")
    if ablation is None and any(sub.hyperparameters.get("ablation", "mean") != method for sub in subnetworks):
        raise HeurlensError(f"{run_dir} holds subnetworks pruned with different ablations: choose one with --ablation")
    [prompts] = PromptTaskData(task, task_examples, seed).eval_sets(hooked)
    curve = faithfulness_curve(hooked, subnetworks, prompts, method=cast("Method", method),
                               means=load_run_means(Path(run_dir), hooked))
    if figure:
        atomic_write_bytes(Path(figure), faithfulness_figure(curve, prompts.name).to_html(include_plotlyjs="cdn")
                           .encode())
    table = curve.circuits.assign(cpr=curve.cpr, cmd=curve.cmd)

    def pretty(table):
        shown = table.drop(columns=["cpr", "cmd"]).round(3)
        return (f"faithfulness of the subnetworks of {run_dir} on {prompts.name} (m: logit difference; full "
                f"{curve.full:.3f}, empty {curve.empty:.3f}; units outside a circuit {method}-ablated)\n"
                f"{shown.to_string(index=False)}\n"
                f"CPR {curve.cpr:.3f} (area under f, higher is better)   CMD {curve.cmd:.3f} (area under |1 - f|, "
                "lower is better)")

    print_table(table, as_json, as_csv, pretty)
