"""The circuit commands: attribute (EAP and EAP-IG scores of every unit or edge), faithfulness (runs' rankings and
circuits scored MIB's way: f(k), CPR, CMD) and export-mib (a run's ranking in MIB's file format)."""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, cast

import click

from heurlens.cli.group import cli
from heurlens.cli.options import (
    device_option,
    model_label,
    print_table,
    table_output_options,
    weights_dtype_option,
)

if TYPE_CHECKING:

    from heurlens.circuits.attribution import AttributionMethod
    from heurlens.circuits.attribution_runs import GraphName
    from heurlens.circuits.comparison import Source
    from heurlens.circuits.faithfulness_areas import FaithfulnessCurve
    from heurlens.interventions.circuits import Level
    from heurlens.interventions.scoring import MethodName


@cli.command()
@click.option("--task", required=True,
              help="The prompt task: 'ioi', 'greater-than' or a .jsonl/.csv file with distractors and corrupted prompts "
                   "(m: the logit difference of the answers and the distractors, MIB's metric).")
@click.option("--task-examples", type=click.IntRange(min=1), default=200, show_default=True,
              help="Prompts attributed over (drawn with --seed, as prune trains).")
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True, help="Seed of the prompts.")
@click.option("--level", type=click.Choice(["edge", "node"]), default="edge", show_default=True,
              help="edge: every edge between the embeddings, heads, MLPs and logits; node: every head and MLP.")
@click.option("--method", type=click.Choice(["eap-ig", "eap"]), default="eap-ig", show_default=True,
              help="eap: the gradient on the clean run (Syed et al. 2023); eap-ig: integrated gradients along the "
                   "input embeddings from the corrupted prompt to the clean one (MIB's EAP-IG-inputs).")
@click.option("--ig-steps", type=click.IntRange(min=1), default=5, show_default=True,
              help="EAP-IG's points on the path (MIB's 5).")
@click.option("--ig-points-per-pass", type=click.IntRange(min=1), default=1, show_default=True,
              help="EAP-IG's points one forward and backward pass runs, over as many copies of the batch (1: one pass "
                   "per point, MIB's way; --ig-steps: all in one pass, that many times the memory; on a 2-core CPU "
                   "0.84x as fast). The scores are the same up to float rounding.")
@click.option("--ablation", type=click.Choice(["corrupt", "mean", "zero"]), default="corrupt", show_default=True,
              help="What an ablated item carries: its output on the corrupted prompt (MIB's patching; the only one for "
                   "eap-ig), or its mean over the training prompts or zero (eap; MIB's mean and zero ablations).")
@click.option("--graph", type=click.Choice(["heurlens", "mib"]), default="heurlens", show_default=True,
              help="The edges scored: heurlens' graph (a grouped-query model's key and value inputs once per key-value "
                   "head), or MIB's (grouped-query attention ungrouped: each query head's own; through an ungrouped "
                   "copy of the model). The same on models without grouped heads.")
@click.option("--out", required=True, type=click.Path(file_okay=False),
              help="Run folder for the scores (kept: the same command again reads them back); heurlens faithfulness "
                   "and export-mib take it as RUN_DIR.")
@click.option("--top", type=click.IntRange(min=0), default=20, show_default=True, help="Items printed, by |score|.")
@click.option("--model", required=True, help="A decoder LM: smollm2, a local model directory, or a hub name.")
@weights_dtype_option
@device_option
@table_output_options
def attribute(task: str, task_examples: int, seed: int, level: str, method: str, ig_steps: int,
              ig_points_per_pass: int, ablation: str, graph: str, out: str, top: int, model: str,
              device: str | None, weights_dtype: str | None,
              as_json: bool, as_csv: bool) -> None:
    """Score every edge (or unit) by attribution patching: the first-order change of the task's logit difference m
    (its mean over the prompts) when the item alone is ablated, the sum over prompts and positions of (r - a) . dm/dx
    (EAP: each prompt's estimate, averaged), with dm/dx averaged over --ig-steps points from the corrupted input to
    the clean one for EAP-IG; write the scores into --out and print the items of largest |score|."""
    import pandas as pd

    import heurlens
    from heurlens.circuits.attribution_runs import attribute as attribute_run
    from heurlens.circuits.attribution_runs import attribution_folder, item_names
    from heurlens.circuits.settings import AttributionSettings
    from heurlens.data.run_data import PromptTaskData

    AttributionSettings(cast("Level", level), ig_steps if method == "eap-ig" else None, cast("MethodName", ablation))
    attribution_folder(out)  # both refused before the model loads
    hooked = heurlens.load_model(model, device=device, dtype=weights_dtype)
    run = attribute_run(hooked, PromptTaskData(task, task_examples, seed), out, level=cast("Level", level),
                        method=cast("AttributionMethod", method), ig_steps=ig_steps,
                        ablation=cast("MethodName", ablation), graph=cast("GraphName", graph),
                        ig_points_per_pass=ig_points_per_pass)
    names = item_names(hooked, run.level, run.graph)
    order = run.ranking.order("|score|")[:top].tolist()
    table = pd.DataFrame({"rank": range(1, len(order) + 1), level: [names[i] for i in order],
                          "score": [-float(run.ranking.scores[i]) for i in order]})  # delta_m, as kept
    print_table(table, as_json, as_csv, lambda shown: (
        f"{run.ranking.label}, {len(names)} {level}s of {model_label(hooked, 'float32')} on {task} "
        f"({task_examples} prompts, {run.seconds:.1f} s); score: the estimated change of the logit difference "
        f"when the {level} alone is ablated; in {out}\n{shown.to_string(index=False)}"))


@cli.command()
@click.argument("run_dirs", nargs=-1, type=click.Path(exists=True, file_okay=False))
@click.option("--mib-file", "mib_files", multiple=True, type=click.Path(exists=True, dir_okay=False),
              help="A circuit file in MIB's format (EAP-IG's Graph.to_json: edge or node importance scores, or a binary "
                   "circuit), written by any tool, scored beside the runs (repeatable; --model names the model when no "
                   "run is given).")
@click.option("--file-graph", type=click.Choice(["mib", "heurlens"]), default="mib", show_default=True,
              help="The graph --mib-file edges are scored on: mib (the file's own edges, on the model's copy with "
                   "grouped-query heads ungrouped: MIB's scoring) or heurlens (the model's grouped graph: a key-value "
                   "edge's query-head scores summed, kept when one is kept). The same for models without "
                   "grouped-query attention.")
@click.option("--absolute", is_flag=True,
              help="Take both areas of a --mib-file's scores from their ranking by absolute value (MIB's --absolute "
                   "evaluation alone). Default, as MIB's print_results.py reports: CPR from the ranking by score "
                   "(highest first) and CMD from the ranking by |score|.")
@click.option("--task", required=True,
              help="The prompt task the run was pruned on: 'ioi', 'greater-than' or a .jsonl/.csv file with "
                   "distractors (m is the logit difference of the answers and the distractors).")
@click.option("--task-examples", type=click.IntRange(min=1), default=200, show_default=True,
              help="Prompts of --task the circuits are scored on (drawn with --seed + 1, as prune evaluates).")
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True,
              help="The --seed the run was pruned with (its means come from its prompts).")
@click.option("--ablation", type=click.Choice(["mean", "zero", "corrupt", "interchange"]), default=None,
              help="What the units or edges outside a circuit carry: their mean, zero, or their output on the corrupted "
                   "prompt (default: units as the run pruned them, edges corrupt, MIB's patching; interchange: "
                   "corrupt's name before, deprecated).")
@click.option("--circuits", "source", type=click.Choice(["ranking", "targets"]), default="ranking", show_default=True,
              help="ranking: each record's trained log_alpha cut at every size of --grid (one run, every size, as MIB "
                   "cuts scores); targets: the circuits the runs kept at their own sparsities (a point only where a "
                   "sparsity lands on a size of the grid).")
@click.option("--grid", default=None,
              help="The sizes f is measured at, fractions kept, comma-separated (default MIB's ten: 0.001, 0.002, "
                   "0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1).")
@click.option("--random-seeds", type=click.IntRange(min=0), default=0, show_default=True,
              help="Also score random rankings (this many seeds) at every size, on each level and graph the other curves "
                   "are on: the baseline MIB reports.")
@click.option("--figure", type=click.Path(dir_okay=False), default=None,
              help="Also write the curves (faithfulness against the fraction of units or edges kept) as a plotly HTML "
                   "page.")
@click.option("--model", default=None, help="Model (default: the one the subnetworks were pruned from).")
@weights_dtype_option
@device_option
@table_output_options
def faithfulness(run_dirs: tuple[str, ...], mib_files: tuple[str, ...], file_graph: str, absolute: bool, task: str,
                 task_examples: int, seed: int, ablation: str | None, source: str, grid: str | None, random_seeds: int,
                 figure: str | None, model: str | None, weights_dtype: str | None, device: str | None, as_json: bool,
                 as_csv: bool) -> None:
    """Score the circuits of each RUN_DIR as the MIB benchmark does: f = (m(circuit) - m(empty)) / (m(full) -
    m(empty)) at each size of the grid (MIB's ten, 0.1% to 100% of the units or edges, nothing assumed), and the areas
    CPR (under f, higher is better) and CMD (under |1 - f|, lower is better) by MIB's trapezoid; a curve missing a size
    has none. A RUN_DIR is a prune run or an attribution run (heurlens attribute: its scores' ranking, its edges on the
    graph it scored). Node runs are scored over the fraction of units (heads and MLPs) kept, beside attribution patching's
    ranking (on the first run's training prompts); edge runs over the fraction of edges of heurlens' graph kept
    (every other edge carrying its writer's output on the corrupted prompt, or with --ablation its mean or zero).
    With --circuits targets and an edge run among the runs, every circuit is scored on the edge axis (a node circuit:
    the edges between its units). A --mib-file's edges are scored on MIB's graph (--file-graph)."""
    from dataclasses import replace

    import heurlens
    from heurlens.circuits.comparison import compare_runs, comparison_ablation, comparison_table, runs_in_folders
    from heurlens.circuits.faithfulness import faithfulness_figure
    from heurlens.circuits.mib_files import read_mib_file
    from heurlens.data.run_data import PromptTaskData
    from heurlens.runtime.cache import atomic_write_bytes
    from heurlens.runtime.run_folders import check_writable_file

    if figure:
        check_writable_file(Path(figure), "--figure")
    sizes = parse_grid(grid)
    if not run_dirs and not (mib_files and model):
        raise click.UsageError("give RUN_DIRS (heurlens prune or attribute runs), or --mib-file FILE with --model")
    runs, attributions = runs_in_folders(run_dirs)
    missed = [f"{run_dir}: {sub.label}" for run_dir, subs in runs.items() for sub in subs if sub.missed_target]
    if missed:  # scored as trained, never silently: the rule report follows too
        click.echo(f"note: {len(missed)} of {sum(map(len, runs.values()))} records missed their target sparsity "
                   f"({'; '.join(missed[:4])}{'; ...' if len(missed) > 4 else ''}): their rankings are scored as "
                   "trained", err=True)
    comparison_ablation([sub for subs in runs.values() for sub in subs], cast("MethodName | None", ablation))
    model_id = model or (next(iter(runs.values()))[0].model_id if runs else attributions[0].model_id)
    hooked = heurlens.load_model(model_id, device=device, dtype=weights_dtype)
    files = [read_mib_file(Path(path), hooked, cast("GraphName", file_graph)) for path in mib_files]
    # --absolute ranks signed scores by |score|; heurlens' own mask files hold log_alpha + c >= 1, whose |score| order
    # is their order, so MIB's --absolute ranks them as without it, and so does heurlens
    files = [replace(file, ranking=replace(file.ranking, absolute=absolute)) if file.ranking and file.ranking.signed
             else file for file in files]
    data = PromptTaskData(task, task_examples, seed)
    curves = compare_runs(hooked, runs, data, cast("MethodName | None", ablation), cast("Source", source), sizes,
                          random_seeds, files, attributions)
    if figure:
        atomic_write_bytes(Path(figure), faithfulness_figure(curves, task).to_html(include_plotlyjs=True).encode())
    print_table(comparison_table(curves), as_json, as_csv, partial(_pretty, curves, task, run_dirs))


def parse_grid(grid: str | None) -> tuple[float, ...]:
    """--grid as sizes (fractions in (0, 1], ascending), MIB's ten when not given; refused by name otherwise."""
    from heurlens.circuits.faithfulness_areas import MIB_GRID, check_grid
    from heurlens.errors import HeurlensError

    if grid is None:
        return MIB_GRID
    try:  # the library's rule (check_grid), on the sizes sorted and once each
        return check_grid(sorted({float(item) for item in grid.split(",") if item.strip()}))
    except (ValueError, HeurlensError):
        raise click.BadParameter(f"{grid!r}: give two or more fractions kept in (0, 1], comma-separated, e.g. "
                                 "0.01,0.1,0.5,1", param_hint="--grid") from None


def _pretty(curves: dict[str, FaithfulnessCurve], task_name: str, run_dirs: tuple[str, ...], table) -> str:
    """The table as text: each method's circuits at each size, then the methods' CPR and CMD (n/a where missing)."""
    from heurlens.circuits.faithfulness_areas import areas_text

    axes = "; ".join(dict.fromkeys(
        f"{'edges' if 'edges_kept' in curve.circuits else 'units'}: k of {curve.n_items} "
        + ("heads and MLPs" if "edges_kept" not in curve.circuits else
           "edges of MIB's graph" if "MIB's graph" in name else "edges of heurlens graph")
        for name, curve in curves.items()))
    first = next(iter(curves.values()))
    shown = table.drop(columns=["cpr", "cmd", "areas_ranked_by"]).round(3)
    areas = "\n".join(f"{name:>26}: {areas_text(curve)}" for name, curve in curves.items())
    ablations = ", ".join(dict.fromkeys(f"{'edges' if 'edges_kept' in curve.circuits else 'units'} {curve.ablation}"
                                        for curve in curves.values()))
    return (f"faithfulness on {task_name} of the circuits of {', '.join(run_dirs) or 'the files'} (m: logit "
            "difference; full "
            f"{first.full:.3f}, empty {first.empty:.3f}; {axes}; outside a circuit: {ablations} ablation)\n"
            f"{shown.to_string(index=False)}\n"
            "CPR: area under f (higher is better); CMD: area under |1 - f| (lower is better); MIB's trapezoid over "
            f"the sizes {', '.join(f'{size:g}' for size in first.grid)}; signed scores (attribution, files) as MIB's "
            f"print_results.py reports them: CPR by score, CMD by |score|\n{areas}")


@cli.command("export-mib")
@click.argument("run_dir", type=click.Path(exists=True, file_okay=False))
@click.option("--out", required=True, type=click.Path(file_okay=False),
              help="Folder to write into: <record>/importances.json per record of RUN_DIR (e.g. "
                   "sparsity-0.95/seed-00/importances.json), a new or empty folder or one this command wrote.")
@click.option("--circuits", "with_circuits", is_flag=True,
              help="Also write each record's binary circuit at every size of MIB's grid (circuit-<percent>.json, its "
                   "top items by score, each edge with its score beside in_graph), the other format MIB's "
                   "leaderboard takes.")
@click.option("--model", default=None, help="Model (default: the one the run pruned).")
@weights_dtype_option
@device_option
def export_mib(run_dir: str, out: str, with_circuits: bool, model: str | None, weights_dtype: str | None,
               device: str | None) -> None:
    """Write the ranking of each record of RUN_DIR (its trained log_alpha; of an attribution run, its scores, into
    --out itself) as a circuit file in MIB's format (EAP-IG's Graph.to_json: scores per edge on MIB's graph,
    grouped-query attention ungrouped, or per head and MLP for a node run), which MIB's circuit track and heurlens
    faithfulness --mib-file read. Attribution scores are written in EAP-IG's sign (the mean over prompts of the
    metric's estimated drop when the item alone is ablated: higher is kept first), a mask run's log_alpha shifted to
    1 and above, so MIB ranks both as heurlens does with and without --absolute. A grouped-query model's edges scored
    on heurlens' graph are written once per query head (copies); attribute with --graph mib for each query head's
    own score."""
    import heurlens
    from heurlens.circuits.mib_export import export_run

    files, rankings = export_run(Path(run_dir), Path(out), with_circuits, lambda model_id: heurlens.load_model(
        model or model_id, device=device, dtype=weights_dtype))
    click.echo(f"wrote {files} MIB circuit files for {rankings} rankings under {out}")

