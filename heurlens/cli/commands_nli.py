"""Commands that prune, evaluate and fine-tune models: prune, evaluate, finetune."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from heurlens.cli.group import cli
from heurlens.cli.options import (
    FOCUS,
    device_option,
    dtype_option,
    eval_options,
    model_label,
    model_option,
    print_table,
    pruning_settings,
    pruning_settings_options,
    replacement_label,
    run_data,
    task_options,
    weights_dtype_option,
    workers_options,
)
from heurlens.cli.settings_options import FiniteFloatRange, settings_from_options, settings_options
from heurlens.data.nli_setup import PRUNING_BATCH, PRUNING_PAIRS, REFERENCE_PAIRS
from heurlens.errors import HeurlensError
from heurlens.models.settings import CHECKPOINT_EVERY_PAPER, FinetuneSettings
from heurlens.models.settings import PRESETS as FINETUNE_PRESETS

if TYPE_CHECKING:
    from heurlens.runtime.distributed import Workers
    from heurlens.runtime.precision import Precision


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
    """Prune heads and MLPs (or, with --level edge, the edges between them) with hard-concrete masks, for several
    seeds; print the evaluation table."""
    import heurlens
    from heurlens.circuits.attribution_runs import load_attribution
    from heurlens.pruning import prune as prune_model
    from heurlens.pruning.run_folder import prune_folder

    config = pruning_settings(recipe, settings)
    warm = load_attribution(config.init_from) if config.init_from else None  # refused before the model loads
    with prune_folder(out).writing():  # a second prune on --out is refused before loading
        hooked = heurlens.load_model(model, device=device, dtype=weights_dtype)
        if warm is not None:
            warm.check_model(hooked)
        # a task: pruned on --task-examples prompts drawn with --seed, means over them, evaluated on another draw
        chosen = run_data(task, task_examples, data, in_domain_examples, per_subcase, subcases, seed, batch_size,
                          train_examples=train_examples)
        train, means, eval_sets = chosen.train(hooked), chosen.means(hooked), chosen.eval_sets(hooked)
        subnetworks = prune_model(hooked, train, sparsity=sorted(set(sparsity)), seeds=range(seeds), out=Path(out),
                                  config=config, means=means, workers=workers, stack_seeds=stack_seeds,
                                  warm_start=None if warm is None else warm.ranking)
    _report(hooked, subnetworks, means, eval_sets, as_json, as_csv, config.dtype)


@cli.command()
@click.argument("run_dir", type=click.Path(exists=True, file_okay=False))
@click.option("--model", default=None, help="Model to evaluate on (default: the one the subnetworks were pruned from).")
@weights_dtype_option
@device_option
@dtype_option
@task_options
@eval_options(default_subcases=FOCUS)
def evaluate(run_dir: str, model: str | None, device: str | None, weights_dtype: str | None, dtype: Precision,
             task: str | None, task_examples: int, data: str, in_domain_examples: int, per_subcase: int,
             subcases: str | None, seed: int, as_json: bool, as_csv: bool) -> None:
    """Evaluate the subnetworks of a run directory next to the full model (a run pruned with --task: give the same
    --task and --seed)."""
    import heurlens
    from heurlens.pruning import Subnetwork
    from heurlens.pruning.run_folder import find_subnetworks, load_run_means

    paths = find_subnetworks(Path(run_dir))
    if not paths:
        raise HeurlensError(f"{run_dir} holds no subnetworks (sparsity-*/seed-*.json); run heurlens prune --out {run_dir}")
    subnetworks = [Subnetwork.load(p) for p in paths]
    hooked = heurlens.load_model(model or subnetworks[0].model_id, device=device, dtype=weights_dtype)
    means = load_run_means(Path(run_dir), hooked)
    eval_sets = run_data(task, task_examples, data, in_domain_examples, per_subcase, subcases, seed).eval_sets(hooked)
    _report(hooked, subnetworks, means, eval_sets, as_json, as_csv, dtype)


def _report(hooked, subnetworks, means, eval_sets, as_json, as_csv, dtype: Precision = "float32"):
    from heurlens.interventions.circuits import level_of
    from heurlens.pruning import accuracy_table, evaluate_subnetworks
    from heurlens.pruning.evaluation import ablation_of

    evaluation = evaluate_subnetworks(hooked, subnetworks, eval_sets, means=means, dtype=dtype)
    corrupt = ablation_of(subnetworks) == "corrupt"
    pruned = {"edge": "its edge circuits (pruned edges carrying their writers' outputs on each example's corrupted "
                      "prompt)",
              "node": f"its subnetworks (pruned units replaced by {replacement_label(None if corrupt else means)})"
              }[level_of(subnetworks)]

    def pretty(evaluation):
        wide = accuracy_table(evaluation)
        wide["achieved_sparsity"] = wide["achieved_sparsity"].map("{:.2f}".format)
        return f"accuracy (%) of model {model_label(hooked, dtype)} and {pruned}\n" + wide.to_string(index=False)

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
