"""Discovery methods side by side on MIB's yardstick (``heurlens faithfulness``): each pruning run's circuits (one
run's ranking cut at every size, or the circuits its targets kept), attribution patching's ranking of the units, and
random rankings (MIB's baseline), each scored as ``faithfulness.ranking_curve`` / ``faithfulness_curve`` score them,
one table row per circuit and one CPR/CMD per method."""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import replace
from functools import cache, partial
from pathlib import Path
from typing import Any, Literal, cast

import pandas as pd
import torch
from torch import Tensor

from heurlens.circuits.attribution import attribution_circuits, attribution_scores
from heurlens.circuits.attribution_runs import AttributionRun, describe_task, holds_scores, load_attribution, scored_model
from heurlens.circuits.faithfulness import faithfulness_curve, items_on, keep_mask_curve, ranking_curve
from heurlens.circuits.faithfulness_areas import MIB_GRID, FaithfulnessCurve, grid_count
from heurlens.circuits.mib_files import MibFile
from heurlens.circuits.mib_graph import GraphName
from heurlens.circuits.settings import AttributionSettings, FaithfulnessSettings
from heurlens.data.prompt_tasks import logit_difference
from heurlens.data.run_data import PromptTaskData
from heurlens.errors import HeurlensError
from heurlens.interventions.circuits import Level, axis_of
from heurlens.interventions.graph import EdgeLayout
from heurlens.interventions.layouts import layout_of
from heurlens.interventions.rankings import Ranking, random_ranking, ranking_of
from heurlens.interventions.scoring import Method, MethodName, as_method
from heurlens.protocols import PreparedModel
from heurlens.pruning.evaluation import ablation_of
from heurlens.pruning.run_folder import data_id_of, load_run_means, subnetworks_by_sparsity
from heurlens.pruning.subnetwork import Subnetwork
from heurlens.runtime.deprecations import STILL_WORKS

Source = Literal["ranking", "targets"]
_METHOD = {"edge": "edge pruning", "node": "mask optimisation"}


def runs_in_folders(run_dirs: Sequence[str]) -> tuple[dict[str, list[Subnetwork]], list[AttributionRun]]:
    """What ``compare_runs`` scores of these folders: each prune run's records (by folder) and each attribution
    run; a folder holding neither is refused by name."""
    attributions = [load_attribution(run_dir) for run_dir in run_dirs if holds_scores(run_dir)]
    runs = {run_dir: [sub for group in subnetworks_by_sparsity([run_dir]).values() for sub in group]
            for run_dir in run_dirs if not holds_scores(run_dir)}
    empty = next((run_dir for run_dir, subs in runs.items() if not subs), None)
    if empty is not None:
        raise HeurlensError(f"{empty} holds no prune records (sparsity-*/seed-*.json) and no attribution scores: "
                            "give the folder of a finished heurlens prune or attribute run")
    return runs, attributions


def compare_runs(model: PreparedModel, runs: Mapping[str, Sequence[Subnetwork]], data: PromptTaskData,
                 ablation: MethodName | None = None, source: Source = "ranking", grid: Sequence[float] = MIB_GRID,
                 random_seeds: int = 0, files: Sequence[MibFile] = (), attributions: Sequence[AttributionRun] = (),
                 rankings: Sequence[Ranking] = ()) -> dict[str, FaithfulnessCurve]:
    """Discovery methods side by side, on ``data``'s scoring prompts: every run, file and ranking given, attribution
    patching's unit ranking (on ``data``'s training prompts) and random rankings.

    Args:
        model: the model every run and ranking is of (refused by name otherwise: ``check_runs_belong``).
        runs: each prune run's records, by run folder.
        data: the prompt task and its draws the runs were made on.
        ablation: every curve's ablation; by default on units the node runs' (attribution's ranking of units too;
            "corrupt" without node runs), and on edges, every edge curve alike, the edge attribution runs' when they
            share one, else "corrupt" (MIB's patching).
        source: "ranking": each record's log_alpha cut at every size, each run on its own level; "targets": the
            circuits the records kept, every curve on the edge axis when a run is an edge run.
        grid: the sizes, fractions kept (MIB's ten).
        random_seeds: random rankings (this many seeds) per level and graph the other curves are on (edges of MIB's
            graph: the model's ungrouped copy's).
        files: MIB-format files (``read_mib_file``): their rankings or circuits.
        attributions: attribution runs (``load_attribution``): their rankings, on the graph each scored.
        rankings: any method's rankings of the model's units or edges (on the graph each names).

    Returns:
        One ``FaithfulnessCurve`` per method, by name (a ranking's: its label)."""
    everything = [sub for subnetworks in runs.values() for sub in subnetworks]
    check_runs_belong(model, data, everything, attributions)
    method = comparison_ablation(everything, ablation)
    [prompts] = data.eval_sets(model)
    means = load_run_means(Path(next(iter(runs))), model) if runs else data.means(model)
    on_edges = source == "targets" and isinstance(layout_of(model, axis_of(everything)), EdgeLayout)
    levels = ({sub.level for sub in everything} | {file.level for file in files} | {run.level for run in attributions}
              | {ranking.level for ranking in rankings})
    edges = on_edges or "edge" in levels
    if edges and means.embeddings is None:  # a run's means saved before 2026-11-29: edges need the embeddings' too
        means = replace(means, embeddings=data.means(model).embeddings)
    score: dict[str, Any] = {"settings": FaithfulnessSettings(ablation=method, grid=tuple(grid)), "means": means}
    attributed = {run.settings["ablation"] for run in attributions
                  if isinstance(layout_of(model, run.level), EdgeLayout)}
    edge_ablation = as_method(ablation or (attributed.pop() if len(attributed) == 1 else "corrupt"))
    on: dict[Level, dict[str, Any]] = {"node": score, "edge": {  # every edge curve alike (MIB's patching by default)
        **score, "settings": replace(score["settings"], ablation=edge_ablation)}}
    if on_edges:  # every curve on the edge axis
        score = on["edge"]
    curves: dict[str, FaithfulnessCurve] = {}
    axes: list[tuple[Level, GraphName]] = []  # the level and graph of each curve, for random's
    scored = cache(partial(scored_model, model))  # (level, graph) -> the model scored: one ungrouped copy at most
    for run_dir, subnetworks in runs.items():
        level = subnetworks[0].level
        name = f"{_METHOD[level]} ({run_dir})" if len(runs) > 1 else _METHOD[level]
        if source == "ranking":
            curves[name] = ranking_curve(model, [ranking_of(sub) for sub in subnetworks], prompts, **on[level])
        else:
            curves[name] = faithfulness_curve(model, list(subnetworks), prompts, edges=on_edges, **score)
        axes.append(("edge" if on_edges else level, "heurlens"))
    for file in files:
        target = scored(file.level, file.graph)  # an edge file on MIB's graph: the ungrouped copy
        name = f"file {file.path.name}" + (" on MIB's graph" if target is not model else "")
        curves[name] = (ranking_curve(target, file.ranking, prompts, **on[file.level]) if file.ranking else
                        keep_mask_curve(target, file.level, {file.path.stem: cast(Tensor, file.keep)}, prompts,
                                        **on[file.level]))
        axes.append((file.level, "mib" if target is not model else "heurlens"))
    named = {f"{run.ranking.label} ({run.path})" if len(attributions) > 1 else run.ranking.label: run.ranking
             for run in attributions} | {ranking.label: ranking for ranking in rankings}
    twice = [ranking.label for ranking in rankings if ranking.label in curves or
             sum(other.label == ranking.label for other in rankings) > 1]
    if twice or len(named) < len(attributions) + len(rankings):
        raise HeurlensError(f"two curves would be named {(twice or [''])[0]!r}: give each ranking a label of its own "
                            "(dataclasses.replace(ranking, label=...))")
    for name, ranking in named.items():  # each on the graph it ranks (MIB's: the ungrouped copy)
        target = scored(ranking.level, ranking.graph)
        curves[name] = ranking_curve(target, ranking, prompts, **on[ranking.level])
        axes.append((ranking.level, "mib" if target is not model else "heurlens"))
    scores = attribution_scores(model, data.train(model), logit_difference, AttributionSettings(ablation=method),
                                means=means)
    if not on_edges:
        ranking = Ranking("attribution", "node", -torch.tensor(scores["score"].tolist()), signed=True)
        curves["attribution"] = ranking_curve(model, ranking, prompts, **score)
    else:  # attribution's circuits of the grid's unit counts, as the edges between their units
        n_units = items_on(model, "node")
        fractions = sorted({grid_count(size, n_units) / n_units for size in grid} - {0.0})
        circuits = attribution_circuits(scores, fractions, model.n_layers, model.n_heads)
        curves["attribution"] = faithfulness_curve(model, circuits, prompts, edges=True, **score)
    for level, graph in dict.fromkeys(axes) if random_seeds else ():
        target = scored(level, graph)
        rankings = [random_ranking(level, items_on(target, level), seed) for seed in range(random_seeds)]
        name = f"random ({level}s of MIB's graph)" if graph == "mib" else f"random ({level}s)"
        curves[name] = ranking_curve(target, rankings, prompts, **on[level])
    return curves


def check_runs_belong(model: PreparedModel, data: PromptTaskData, records: Sequence[Subnetwork],
                      attributions: Sequence[AttributionRun] = ()) -> None:
    """Refuse, by name, a prune record or attribution run of another model (by fingerprint) or made on other prompts
    than ``data``'s training prompts (another task, number of prompts or seed): scored here, its circuits would be
    another model's or task's, and its numbers would read as this one's."""
    known = model.known_fingerprints()
    for record in records:
        record.check_model(model, known)
    ids: dict[int, str] = {}  # the training prompts' identity per batch size (padding is per batch)
    for record in records:
        batch = int(record.hyperparameters.get("batch_size", data.batch_size))
        if batch not in ids:
            ids[batch] = data_id_of(replace(data, batch_size=batch).train(model))
        train_id = ids[batch]
        if record.data_id != train_id:
            task = str(record.data_id).split(":")[0]
            raise HeurlensError(f"{record.label} was pruned on {task!r} ({record.data_id}), not on the training "
                                f"prompts of {describe_task(data.task, data.examples, data.seed)} ({train_id}): give "
                                "the --task, --task-examples and --seed it was pruned with")
    for run in attributions:
        run.check_model(model)
        run.check_task(data)


def comparison_ablation(records: Sequence[Subnetwork], ablation: MethodName | None, edge_files: bool | None = None
                        ) -> Method:
    """What the node circuits' other units are replaced by: ``ablation``, else what the node runs pruned with
    ("corrupt" without node runs). ``edge_files``: deprecated and ignored (edges take every ablation since
    2026-11-29, so nothing is refused for them)."""
    if edge_files is not None:
        warnings.warn(f"comparison_ablation(edge_files=...) is ignored since edges take every ablation: leave it out "
                      f"(it {STILL_WORKS})", DeprecationWarning, stacklevel=2)
    nodes = [record for record in records if record.level == "node"]
    return as_method(ablation) if ablation else (ablation_of(nodes) if nodes else "corrupt")


def comparison_table(curves: Mapping[str, FaithfulnessCurve]) -> pd.DataFrame:
    """One row per circuit: the method, its curve (ranking or seed), the circuit, its size, metric and f, the ablation
    of the items outside it, and the method's CPR and CMD (NaN where a size is missing) with the order each was taken
    from (``areas_ranked_by``: "score", or "CPR by score, CMD by |score|" for signed scores, MIB's way)."""
    return pd.concat([curve.circuits.assign(method=name, ablation=curve.ablation, cpr=curve.cpr, cmd=curve.cmd,
                                            areas_ranked_by=curve.area_rankings)
                      for name, curve in curves.items()], ignore_index=True)
