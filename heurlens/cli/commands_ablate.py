"""The ablate command: units ablated together, one at a time (--scan) or in groups (--superadditivity)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from heurlens.cli.group import cli
from heurlens.cli.options import (
    dtype_option,
    eval_options,
    model_label,
    model_option,
    print_table,
    replacement_label,
    run_data,
    task_options,
    workers_options,
)
from heurlens.data.nli_setup import REFERENCE_PAIRS
from heurlens.errors import HeurlensError

if TYPE_CHECKING:
    from heurlens.interventions.scoring import MethodName
    from heurlens.runtime.distributed import Workers
    from heurlens.runtime.precision import Precision


@cli.command()
@click.option("--heads", "heads", default=None,
              help="Units to ablate: L4.H0, L4.H0,L2.H5, L4.* (all heads of layer 4), L4.MLP.")
@click.option("--scan", is_flag=True,
              help="Ablate every head (or every unit of --heads) one at a time: the paper's Table 3.")
@click.option("--core", default=None,
              help="With --scan: the core heads (L2.H5,...) or a run directory of heurlens prune to take them "
                   "from; adds the average over the other heads.")
@click.option("--superadditivity", is_flag=True,
              help="Ablate --heads together, alone and in pairs: group drop vs sum of single drops.")
@model_option
@click.option("--method", type=click.Choice(["mean", "zero", "corrupt", "interchange"]), default="mean",
              show_default=True,
              help="What an ablated unit is replaced by: its mean, zero, or (corrupt) its activation on each "
                   "example's corrupted prompt, position by position (--task ioi or greater-than, or a prompt file "
                   "with a corrupted_prompt field). interchange: corrupt's name before, deprecated.")
@dtype_option
@click.option("--reference-examples", type=click.IntRange(min=1), default=REFERENCE_PAIRS, show_default=True,
              help="SNLI training pairs (sample seed 0) the unit means are taken over (mean ablation); the default "
                   "is the reference set prune and the analyses use too.")
@task_options
@workers_options
@eval_options(default_subcases=None)
def ablate(heads: str | None, scan: bool, core: str | None, superadditivity: bool, model: str, device: str | None,
           weights_dtype: str | None, method: MethodName, dtype: Precision, reference_examples: int, task: str | None,
           task_examples: int, workers: Workers | None, data: str, in_domain_examples: int, per_subcase: int,
           subcases: str | None, seed: int, as_json: bool, as_csv: bool) -> None:
    """Ablate heads/MLPs; print accuracy of full vs ablated model per evaluation set, and the KL."""
    import heurlens
    from heurlens.interventions.means import zero_means
    from heurlens.interventions.scoring import as_method

    method = as_method(method)  # "interchange" is "corrupt", with a warning
    if scan and superadditivity:
        raise HeurlensError("choose one of --scan and --superadditivity")
    if heads is None and not scan:
        raise HeurlensError("say what to ablate: --heads L4.H0 (or --scan to ablate every head in turn)")
    if core is not None and not scan:
        raise HeurlensError("--core only applies to --scan")
    if workers is not None and not (scan or superadditivity):
        raise HeurlensError("--workers applies to --scan and --superadditivity (one ablation is one run)")
    hooked = heurlens.load_model(model, device=device, dtype=weights_dtype)
    units = heurlens.parse_units(heads, hooked.n_layers, hooked.n_heads) if heads is not None else None
    if superadditivity and (units is None or len(units) < 2):
        raise HeurlensError("--superadditivity needs at least two units in --heads, e.g. L2.H5,L3.H7,L4.H0")
    core_units = _core_units(core, hooked) if core else None
    # a task's means over its own prompts (another draw than the evaluated ones); NLI's over SNLI training pairs
    chosen = run_data(task, task_examples, data, in_domain_examples, per_subcase, subcases, seed,
                      reference_examples=reference_examples)
    eval_sets = chosen.eval_sets(hooked)
    means = chosen.means(hooked) if method == "mean" else zero_means(hooked) if method == "zero" else None
    if scan:
        _print_scan(hooked, units, core_units, eval_sets, method, means, workers, dtype, as_json, as_csv)
    elif superadditivity:
        _print_superadditivity(hooked, units, eval_sets, method, means, workers, dtype, as_json, as_csv)
    else:
        _print_ablation(hooked, units, eval_sets, method, means, dtype, as_json, as_csv)


def _core_units(core: str, hooked):
    """--core as a run directory of heurlens prune (pruned from this model) or a list of heads."""
    from heurlens.analysis.overlap import core_from

    units, subnetworks = core_from(core, hooked.n_layers, hooked.n_heads)
    if subnetworks:
        subnetworks[0].check_model(hooked)
    return units


def _print_ablation(hooked, units, eval_sets, method, means, dtype, as_json, as_csv) -> None:
    import heurlens

    table = heurlens.ablate(hooked, units, eval_sets, method=method, means=means, dtype=dtype,
                            metrics=_metrics_of(eval_sets))
    table.insert(0, "ablated", heurlens.format_units(units, hooked.n_heads))

    def pretty(table):
        shown = table.drop(columns="ablated")
        for column in ("full_accuracy", "ablated_accuracy", "delta"):
            shown[column] = (100 * shown[column]).map("{:.1f}".format)
        for column in ("kl", *[c for c in shown if c.endswith("logit_diff")]):
            shown[column] = shown[column].map("{:.4f}".format)
        return (f"model {model_label(hooked, dtype)}, {method}-ablated {table['ablated'][0]} (accuracy in %; "
                f"replaced by {replacement_label(means)})\n" + shown.to_string(index=False))

    print_table(table, as_json, as_csv, pretty)


def _metrics_of(eval_sets) -> dict | None:
    """Accuracy, and for prompt tasks with distractors their logit difference too (MIB's m: a head can move it
    by 1.8 while every answer stays right); None (accuracy alone) for the others."""
    from heurlens.data.prompt_tasks import PromptSet, logit_difference

    if not all(isinstance(task, PromptSet) and task.distractors.shape[1] for task in eval_sets):
        return None
    return {"accuracy": lambda scores, task: task.accuracy(scores, None),
            "logit_diff": lambda scores, task: float(logit_difference(scores, task))}


def _print_scan(hooked, units, core_units, eval_sets, method, means, workers, dtype, as_json, as_csv) -> None:
    import heurlens
    from heurlens.analysis.ablation_studies import scan_table, single_unit_scan

    units = units or heurlens.all_units(hooked.n_layers, hooked.n_heads, include_mlps=False)
    scan = single_unit_scan(hooked, units, eval_sets, means=means, method=method, workers=workers, dtype=dtype)

    def pretty(scan):
        return (f"model {model_label(hooked, dtype)}, each unit {method}-ablated alone (accuracy in %; replaced by "
                f"{replacement_label(means)})\n"
                + scan_table(scan, core_units).to_string(index=False))

    print_table(scan, as_json, as_csv, pretty)


def _print_superadditivity(hooked, units, eval_sets, method, means, workers, dtype, as_json, as_csv) -> None:
    import pandas as pd

    from heurlens.analysis.ablation_studies import group_superadditivity

    summary, interactions = group_superadditivity(hooked, units, eval_sets, means=means, method=method,
                                                  workers=workers, dtype=dtype)
    if as_json or as_csv:  # both tables in one, told apart by the "table" column
        both = pd.concat([summary.assign(table="group"), interactions.assign(table="pairwise")], ignore_index=True)
        print_table(both[["table", *both.columns.drop("table")]], as_json, as_csv, str)
        return
    shown = summary.copy()
    for column in ("accuracy", "group_drop", "sum_of_single_drops", "excess"):
        shown[column] = (100 * shown[column]).map("{:.1f}".format)
    click.echo(f"model {hooked.model_id}: drops (points) of {method}-ablating the group vs the sum of single drops "
               f"(replaced by {replacement_label(means)})\n"
               + shown.to_string(index=False))
    if len(interactions):
        pairs = interactions.pivot_table(index="pair", columns="eval_set", values="interaction", sort=False) * 100
        click.echo("\npairwise interaction drop(i,j) - drop(i) - drop(j) (points)\n" + pairs.round(1).to_string())
