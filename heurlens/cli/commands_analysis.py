"""Analysis commands of the Heuristic Core paper: core, patterns, effective-size, report."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import click

from heurlens.cli.group import cli
from heurlens.cli.options import (
    FOCUS,
    device_option,
    eval_options,
    model_option,
    nli_data,
    print_table,
    pruning_settings,
    pruning_settings_options,
    run_data,
    table_output_options,
    task_options,
    weights_dtype_option,
    workers_options,
)
from heurlens.cli.settings_options import FiniteFloatRange
from heurlens.errors import HeurlensError
from heurlens.runtime.run_folders import check_writable_dir, check_writable_file

if TYPE_CHECKING:
    from heurlens.runtime.distributed import Workers


@cli.command()
@click.argument("run_dirs", nargs=-1, type=click.Path(exists=True, file_okay=False))
@click.option("--out", type=click.Path(file_okay=False), default=None,
              help="Also write frequencies.csv, intersection.csv and the figures (HTML) here.")
@table_output_options
def core(run_dirs: tuple[str, ...], out: str | None, as_json: bool, as_csv: bool) -> None:
    """Overlap of the subnetworks in RUN_DIRS: head frequencies, the core, Spearman rho, random null."""
    from heurlens.analysis.overlap import frequencies_by_sparsity, overlap_report, write_overlap_files
    from heurlens.pruning.run_folder import subnetworks_by_sparsity

    if not run_dirs:
        raise HeurlensError("give at least one run directory written by heurlens prune, e.g. heurlens core runs/prune")
    if out:
        check_writable_dir(Path(out), "--out")
    groups = subnetworks_by_sparsity(run_dirs, pooled=True)
    if out:
        write_overlap_files(groups, Path(out))
    print_table(frequencies_by_sparsity(groups), as_json, as_csv, lambda _: overlap_report(groups).to_text())


@cli.command()
@click.option("--heads", default=None, help="Heads to score (L4.H0,L2.*); default every head.")
@model_option
@click.option("--examples", type=click.IntRange(min=1), default=500, show_default=True,
              help="SNLI test pairs to average over (with --task: the task's prompts, --task-examples).")
@click.option("--min-score", type=FiniteFloatRange(0, 1), default=0.3, show_default=True,
              help="Below this, a head's label is 'other' (heurlens' own threshold: the paper gives none).")
@click.option("--html", "html_out", type=click.Path(dir_okay=False), default=None,
              help="Write a circuitsvis plot of the heads on --premise/--hypothesis, or on the task's first prompt "
                   "(standalone HTML).")
@click.option("--premise", default="The doctor advised the president.", show_default=True)
@click.option("--hypothesis", default="The president advised the doctor.", show_default=True)
@click.option("--exclude-bos/--include-bos", default=True, show_default=True,
              help="With --task: leave the attention on the first position out of the head-detector scores "
                   "(TransformerLens' exclude_bos; decoders park attention there).")
@task_options
@table_output_options
def patterns(heads: str | None, model: str, device: str | None, weights_dtype: str | None, examples: int,
             min_score: float, html_out: str | None, premise: str, hypothesis: str, exclude_bos: bool,
             task: str | None, task_examples: int, as_json: bool,
             as_csv: bool) -> None:
    """Score heads for attending to repeated tokens across the pair, previous/next token, separators, self;
    with --task (decoder LMs), TransformerLens' previous-token, duplicate-token and induction scores."""
    import heurlens
    from heurlens.analysis.patterns import attention_plot, pattern_scores
    from heurlens.runtime.cache import atomic_write_bytes

    if html_out:
        check_writable_file(Path(html_out), "--html")
    hooked = heurlens.load_model(model, attn_implementation="eager", device=device, dtype=weights_dtype)
    units = heurlens.parse_units(heads, hooked.n_layers, hooked.n_heads) if heads is not None else None
    if units and any(u.is_mlp for u in units):
        raise HeurlensError("--heads lists an MLP; attention patterns exist only for heads")
    if task:
        from heurlens.analysis.head_detector import head_detector_scores

        data = run_data(task, task_examples).pattern_data(hooked)
        table = head_detector_scores(hooked, data, heads=units, min_score=min_score, exclude_bos=exclude_bos)
        what = f"{len(data)} prompts of {task}" + (", attention on the first position left out" if exclude_bos else "")
        shown_text, shown_pair = data.prompts[0], None
    else:
        data = nli_data().pattern_data(hooked, examples)
        table, what = pattern_scores(hooked, data, units, min_score), f"{len(data)} SNLI test pairs"
        shown_text, shown_pair = premise, hypothesis
    if html_out:
        shown = units or heurlens.all_units(hooked.n_layers, hooked.n_heads, include_mlps=False)
        rendered = attention_plot(hooked, shown_text, shown_pair, shown)
        atomic_write_bytes(Path(html_out), rendered.local_src.encode())
        click.echo(f"wrote {html_out}", err=True)

    def pretty(table):
        return (f"attention-pattern scores of model {hooked.model_id} over {what}\n"
                + table.drop(columns=["layer", "head"]).round(3).to_string(index=False))

    print_table(table, as_json, as_csv, pretty)


@cli.command(name="effective-size")
@click.argument("checkpoints", nargs=-1, type=click.Path(exists=True, file_okay=False))
@click.option("--sparsity", type=FiniteFloatRange(0, 1, max_open=True), multiple=True, default=None,
              help="Sparsities to prune at (default 0.05, 0.10, ..., 0.95).")
@click.option("--seeds", type=click.IntRange(min=1), default=3, show_default=True)
@click.option("--search", type=click.Choice(["grid", "bisect"]), default="grid", show_default=True,
              help="grid prunes at every sparsity (the paper); bisect assumes faithfulness is lost monotonically.")
@click.option("--tolerance", type=FiniteFloatRange(min=0), default=0.03, show_default=True,
              help="Faithful: accuracy above the full model's minus this margin (one-sided, per seed).")
@click.option("--out", type=click.Path(file_okay=False), default="runs/effective-size", show_default=True)
@click.option("--train-examples", type=click.IntRange(min=1), default=2000, show_default=True)
@click.option("--batch-size", type=click.IntRange(min=1), default=16, show_default=True)
@pruning_settings_options
@workers_options
@device_option
@eval_options(default_subcases=FOCUS)
def effective_size(checkpoints: tuple[str, ...], sparsity: tuple[float, ...], seeds: int, search: Literal["grid", "bisect"],
                   tolerance: float, out: str, train_examples: int, batch_size: int, recipe: str, workers: Workers | None,
                   device: str | None, data: str, in_domain_examples: int, per_subcase: int, subcases: str | None,
                   seed: int, as_json: bool, as_csv: bool, **settings: Any) -> None:
    """Effective size (smallest faithful subnetwork, per seed, averaged) of each fine-tuning checkpoint: Figure 6.

    Make checkpoints of the default model with: heurlens finetune --checkpoint-every 50 --out runs/ft

    Later calls into the same --out add their checkpoints to its table (same settings only).
    """

    from heurlens.analysis.effective_size import SPARSITY_GRID, effective_size_over_checkpoints

    table = effective_size_over_checkpoints(
        checkpoints, Path(out), nli_data(data, in_domain_examples, per_subcase, subcases, seed).eval_sets,
        list(sparsity or SPARSITY_GRID), range(seeds), pruning_settings(recipe, settings), tolerance, search,
        train_examples, batch_size, workers=workers, device=device)
    print_table(table, as_json, as_csv, lambda t: t.round(3).to_string(index=False))


@cli.command()
@click.argument("run_dir", type=click.Path(exists=True, file_okay=False))
@click.option("--out", type=click.Path(dir_okay=False), default=None,
              help="HTML file to write (default RUN_DIR/report.html).")
@click.option("--model", default=None, help="Model (default: the one the subnetworks were pruned from).")
@weights_dtype_option
@device_option
@click.option("--pattern-examples", type=click.IntRange(min=1), default=300, show_default=True,
              help="SNLI test pairs (with --task: the task's prompts) the core heads' attention patterns are scored on.")
@task_options
@eval_options(default_subcases=FOCUS, table_output=False)
def report(run_dir: str, out: str | None, model: str | None, device: str | None, weights_dtype: str | None,
           pattern_examples: int, task: str | None,
           task_examples: int, data: str, in_domain_examples: int, per_subcase: int, subcases: str | None,
           seed: int) -> None:
    """One self-contained HTML page with the tables and figures of a pruning run (works offline); a run pruned
    with --task needs the same --task (its prompts drawn with --seed + 1 are evaluated)."""
    import heurlens
    from heurlens.analysis.run_report import build_run_report
    from heurlens.pruning.run_folder import subnetworks_by_sparsity

    target = check_writable_file(Path(out) if out else Path(run_dir) / "report.html", "the report file")
    first = next(iter(subnetworks_by_sparsity([run_dir]).values()))[0]
    hooked = heurlens.load_model(model or first.model_id, device=device, dtype=weights_dtype)
    first.check_model(hooked)
    eager = heurlens.load_model(model or first.model_id, attn_implementation="eager", device=device,
                                dtype=weights_dtype)
    chosen = run_data(task, task_examples, data, in_domain_examples, per_subcase, subcases, seed)
    eval_sets, pattern_data = chosen.eval_sets(hooked), chosen.pattern_data(hooked, pattern_examples)
    path = build_run_report(Path(run_dir), hooked, eager, eval_sets, pattern_data).write(target)
    click.echo(path)


@cli.command(name="core-over-training")
@click.argument("checkpoint_runs", type=click.Path(exists=True, file_okay=False))
@click.option("--core", "core_spec", required=True,
              help="The core to follow: a run directory of heurlens prune (its heads kept by every subnetwork, "
                   "e.g. of the final model) or heads such as L2.H5,L4.H1.")
@click.option("--sparsity", type=FiniteFloatRange(0, 1, max_open=True), default=0.5, show_default=True,
              help="Target sparsity of the checkpoint subnetworks to look in.")
@click.option("--html", "html_out", type=click.Path(dir_okay=False), default=None,
              help="Also write the heatmap (core heads against checkpoint step) as a standalone HTML page.")
@table_output_options
def core_over_training(checkpoint_runs: str, core_spec: str, sparsity: float, html_out: str | None, as_json: bool,
                       as_csv: bool) -> None:
    """How often the subnetworks of each earlier checkpoint keep the core heads (CHECKPOINT_RUNS: the --out of
    heurlens effective-size, one folder per checkpoint)."""
    from heurlens.analysis.core_over_training import checkpoint_subnetworks, core_presence, core_presence_figure
    from heurlens.analysis.overlap import core_from
    from heurlens.runtime.cache import atomic_write_bytes

    if html_out:
        check_writable_file(Path(html_out), "--html")
    runs = checkpoint_subnetworks(Path(checkpoint_runs), sparsity)
    first = next(iter(runs.values()))[0]
    core, _ = core_from(core_spec, first.n_layers, first.n_heads)
    table = core_presence(core, runs)
    if html_out:
        atomic_write_bytes(Path(html_out), core_presence_figure(table).to_html(include_plotlyjs=True).encode())

    def pretty(table):
        wide = table.pivot_table(index="unit", columns="step", values="kept", sort=False)
        counts = table.groupby("step")["subnetworks"].first()
        wide.columns = [f"step {step} (of {counts[step]})" for step in wide.columns]
        return (f"core heads kept by the {sparsity:.0%} subnetworks of each checkpoint\n"
                + wide.astype(int).to_string())

    print_table(table, as_json, as_csv, pretty)
