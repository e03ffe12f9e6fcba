"""Commands on NLI models: ablate, prune, evaluate, finetune."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import click

from heurlens.cli.group import cli
from heurlens.cli.options import (
    FOCUS,
    device_option,
    dtype_option,
    eval_options,
    model_label,
    model_option,
    nli_data,
    print_table,
    pruning_settings,
    pruning_settings_options,
    run_data,
    task_options,
    weights_dtype_option,
    workers_options,
)
from heurlens.cli.settings_options import FiniteFloatRange, settings_from_options, settings_options
from heurlens.errors import HeurlensError
from heurlens.models.settings import CHECKPOINT_EVERY_PAPER, FinetuneSettings
from heurlens.models.settings import PRESETS as FINETUNE_PRESETS
from heurlens.nli import PRUNING_BATCH, PRUNING_PAIRS, REFERENCE_PAIRS

if TYPE_CHECKING:
    from heurlens.distributed import Workers
    from heurlens.precision import Precision


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
@click.option("--method", type=click.Choice(["mean", "zero"]), default="mean", show_default=True)
@dtype_option
@click.option("--reference-examples", type=click.IntRange(min=1), default=REFERENCE_PAIRS, show_default=True,
              help="SNLI training pairs (sample seed 0) the unit means are taken over (mean ablation); the default "
                   "is the reference set prune and the analyses use too.")
@task_options
@workers_options
@eval_options(default_subcases=None)
def ablate(heads: str | None, scan: bool, core: str | None, superadditivity: bool, model: str, device: str | None,
           weights_dtype: str | None, method: Literal["mean", "zero"], dtype: Precision, reference_examples: int,
           task: str | None, task_examples: int, workers: Workers | None, data: str, in_domain_examples: int,
           per_subcase: int, subcases: str | None, seed: int,
           as_json: bool, as_csv: bool) -> None:
    """Ablate heads/MLPs; print accuracy of full vs ablated model per evaluation set, and the KL."""
    import heurlens
    from heurlens.means import zero_means

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
    means = chosen.means(hooked) if method == "mean" else zero_means(hooked)
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

    table = heurlens.ablate(hooked, units, eval_sets, method=method, means=means, dtype=dtype)
    table.insert(0, "ablated", heurlens.format_units(units, hooked.n_heads))

    def pretty(table):
        shown = table.drop(columns="ablated")
        for column in ("full_accuracy", "ablated_accuracy", "delta"):
            shown[column] = (100 * shown[column]).map("{:.1f}".format)
        shown["kl"] = shown["kl"].map("{:.4f}".format)
        return (f"model {model_label(hooked, dtype)}, {method}-ablated {table['ablated'][0]} (accuracy in %; "
                f"replaced by {_replacement(means)})\n" + shown.to_string(index=False))

    print_table(table, as_json, as_csv, pretty)


def _replacement(means) -> str:
    return "zero" if means.source == "zeros" else f"the unit means over {means.source}"


def _print_scan(hooked, units, core_units, eval_sets, method, means, workers, dtype, as_json, as_csv) -> None:
    import heurlens
    from heurlens.analysis.ablation_studies import scan_table, single_unit_scan

    units = units or heurlens.all_units(hooked.n_layers, hooked.n_heads, include_mlps=False)
    scan = single_unit_scan(hooked, units, eval_sets, means=means, method=method, workers=workers, dtype=dtype)

    def pretty(scan):
        return (f"model {model_label(hooked, dtype)}, each unit {method}-ablated alone (accuracy in %; replaced by "
                f"{_replacement(means)})\n"
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
               f"(replaced by {_replacement(means)})\n"
               + shown.to_string(index=False))
    if len(interactions):
        pairs = interactions.pivot_table(index="pair", columns="eval_set", values="interaction", sort=False) * 100
        click.echo("\npairwise interaction drop(i,j) - drop(i) - drop(j) (points)\n" + pairs.round(1).to_string())


@cli.command()
@click.option("--sparsity", type=FiniteFloatRange(0, 1, max_open=True), multiple=True, default=[0.5],
              show_default=True, help="Target sparsities (fraction of heads and MLPs pruned); several: --sparsity 0.5 0.7.")
@click.option("--seeds", type=click.IntRange(min=1), default=3, show_default=True, help="Seeds 0..N-1 per sparsity.")
@click.option("--out", type=click.Path(file_okay=False), default="runs/prune", show_default=True,
              help="Run directory; finished subnetworks there are kept and skipped (resume).")
@model_option
@click.option("--train-examples", type=click.IntRange(min=1), default=PRUNING_PAIRS, show_default=True,
              help="SNLI training pairs (sample seed 0) to prune on; pruned units are replaced by their means over "
                   f"the reference set ({REFERENCE_PAIRS:,} SNLI training pairs, sample seed 0).")
@click.option("--batch-size", type=click.IntRange(min=1), default=PRUNING_BATCH, show_default=True)
@click.option("--stack-seeds/--no-stack-seeds", default=None,
              help="Train a sparsity's seeds together, one forward pass over every seed's batch (the same "
                   "subnetworks to float rounding). Default: on a CUDA GPU yes, on a CPU no (it does not pay there).")
@pruning_settings_options
@task_options
@workers_options
@eval_options(default_subcases=FOCUS)
def prune(sparsity: tuple[float, ...], seeds: int, out: str, model: str, device: str | None,
          weights_dtype: str | None, train_examples: int,
          batch_size: int, stack_seeds: bool | None, recipe: str, task: str | None, task_examples: int, data: str,
          in_domain_examples: int, per_subcase: int, subcases: str | None, seed: int, workers: Workers | None,
          as_json: bool, as_csv: bool, **settings: Any) -> None:
    """Prune heads and MLPs with hard-concrete masks, for several seeds; print the evaluation table."""
    import heurlens
    from heurlens.pruning import prune as prune_model
    from heurlens.pruning.run_folder import check_run_dir
    from heurlens.run_folders import exclusive

    config = pruning_settings(recipe, settings)
    with exclusive(check_run_dir(out), "run directory"):  # a second prune on --out is refused before loading
        hooked = heurlens.load_model(model, device=device, dtype=weights_dtype)
        # a task: pruned on --task-examples prompts drawn with --seed, means over them, evaluated on another draw
        chosen = run_data(task, task_examples, data, in_domain_examples, per_subcase, subcases, seed, batch_size,
                          train_examples=train_examples)
        train, means, eval_sets = chosen.train(hooked), chosen.means(hooked), chosen.eval_sets(hooked)
        subnetworks = prune_model(hooked, train, sparsity=sorted(set(sparsity)), seeds=range(seeds), out=Path(out),
                                  config=config, means=means, workers=workers, stack_seeds=stack_seeds)
    _report(hooked, subnetworks, means, eval_sets, as_json, as_csv, config.dtype)


@cli.command()
@click.argument("run_dir", type=click.Path(exists=True, file_okay=False))
@click.option("--model", default=None, help="Model to evaluate on (default: the one the subnetworks were pruned from).")
@weights_dtype_option
@device_option
@dtype_option
@eval_options(default_subcases=FOCUS)
def evaluate(run_dir: str, model: str | None, device: str | None, weights_dtype: str | None, dtype: Precision, data: str,
             in_domain_examples: int, per_subcase: int, subcases: str | None, seed: int, as_json: bool,
             as_csv: bool) -> None:
    """Evaluate the subnetworks of a run directory next to the full model."""
    import heurlens
    from heurlens.pruning import Subnetwork
    from heurlens.pruning.run_folder import find_subnetworks, load_run_means

    paths = find_subnetworks(Path(run_dir))
    if not paths:
        raise HeurlensError(f"{run_dir} holds no subnetworks (sparsity-*/seed-*.json); run heurlens prune --out {run_dir}")
    subnetworks = [Subnetwork.load(p) for p in paths]
    hooked = heurlens.load_model(model or subnetworks[0].model_id, device=device, dtype=weights_dtype)
    means = load_run_means(Path(run_dir), hooked)
    eval_sets = nli_data(data, in_domain_examples, per_subcase, subcases, seed).eval_sets(hooked)
    _report(hooked, subnetworks, means, eval_sets, as_json, as_csv, dtype)


def _report(hooked, subnetworks, means, eval_sets, as_json, as_csv, dtype: Precision = "float32"):
    from heurlens.pruning import accuracy_table, evaluate_subnetworks

    evaluation = evaluate_subnetworks(hooked, subnetworks, eval_sets, means=means, dtype=dtype)

    def pretty(evaluation):
        wide = accuracy_table(evaluation)
        wide["achieved_sparsity"] = wide["achieved_sparsity"].map("{:.2f}".format)
        return (f"accuracy (%) of model {model_label(hooked, dtype)} and its subnetworks (pruned units replaced by "
                f"{_replacement(means)})\n" + wide.to_string(index=False))

    print_table(evaluation, as_json, as_csv, pretty)


@cli.command()
@click.option("--preset", type=click.Choice(sorted(FINETUNE_PRESETS)), default="default", show_default=True,
              help="default: the quick default model (250 steps). paper-length: the Heuristic Core paper's schedule "
                   "scaled to all ~100k SNLI pairs (3 epochs, lr 2e-5, ~9,400 steps; hours on a CPU, resumable), "
                   "checkpointed and evaluated every 500 steps: the model --model snli-long.")
@settings_options(FinetuneSettings)
@click.option("--full", is_flag=True, help="Fine-tune on all ~100k SNLI training pairs instead of --examples.")
@click.option("--checkpoint-every", type=click.IntRange(min=1), default=None,
              help="Also save a checkpoint every N steps (paper-length: 500).")
@click.option("--evaluate/--no-evaluate", default=None,
              help="Score every checkpoint on SNLI test and each HANS-style subcase into curve.csv "
                   "(default: on with --preset paper-length).")
@click.option("--out", type=click.Path(), default=None,
              help="Directory to write: new, empty, or this same fine-tuning's (default: the cache).")
@device_option
def finetune(preset: str, full: bool, checkpoint_every: int | None, evaluate: bool | None, out: str | None,
             device: str | None, **given: Any) -> None:
    """Fine-tune the default model (MiniLM + NLI head) on SNLI and print where it was written. A killed run
    resumes from its last checkpoint when the same command is run again."""
    from heurlens.models.default import finetuned_model_dir
    from heurlens.models.nli_finetune import finetune_nli

    paper = preset == "paper-length"
    settings = settings_from_options(FINETUNE_PRESETS[preset](), given)
    if full:
        settings = dataclasses.replace(settings, train_examples=None)
    checkpoint_every = checkpoint_every or (CHECKPOINT_EVERY_PAPER if paper else None)
    evaluate = paper if evaluate is None else evaluate
    if evaluate and not checkpoint_every:
        raise HeurlensError("--evaluate scores checkpoints: give --checkpoint-every N too")
    target = Path(out) if out else finetuned_model_dir(settings)
    click.echo(finetune_nli(target, settings, checkpoint_every, evaluate, device=device))
