"""SmolLM2-135M's circuits for IOI and greater-than on MIB's yardstick: f at MIB's ten sizes (0.1%-100% of the units
or edges), CPR and CMD by MIB's trapezoid, nothing assumed; node and edge masks (corrupt ablation, MIB's patching)
trained on the KL or on the logit difference, attribution patching of units, and random rankings.

Each mask run trains 3 seeds at one target (node 0.8, edge 0.95) and is scored by its ranking (the trained
log_alpha cut at every size, as MIB cuts attribution scores); on IOI the node masks (KL) are also trained at one
target per size of the grid (the per-target sweep), with the empty and the whole circuit (the only circuits of 0 and
of every unit) measured beside them. Prune and score prompts: 200 each (seeds 0 and 1).

Run (one job a process, resumable run folders; a GPU's work, about 5 min on an H200 with every job side by side):
    python analyses/circuits_ioi_smollm2.py run ioi/edge-kl --out runs/mib      # prune, then score
    python analyses/circuits_ioi_smollm2.py run ioi/baselines --out runs/mib    # attribution and random
    OMP_NUM_THREADS=1 python analyses/circuits_ioi_smollm2.py cpu-cost --out runs/mib   # a step's time on this CPU
    python analyses/circuits_ioi_smollm2.py keep --out runs/mib                 # the scores into the page's record
    python analyses/circuits_ioi_smollm2.py page --out runs/mib                 # keep, then the page from the record
    python analyses/circuits_ioi_smollm2.py table --out runs/mib                # keep, then the edge rows kept, as markdown
    OMP_NUM_THREADS=1 python analyses/circuits_ioi_smollm2.py draw --out runs/mib      # EAP-IG's circuit drawn, per task
Jobs: ``jobs()``.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from dataclasses import replace
from pathlib import Path
from typing import Literal, cast

import pandas as pd
import torch

import heurlens
from heurlens.circuits.attribution import AttributionMethod, attribution_scores
from heurlens.circuits.attribution_runs import GraphName, attribute, scored_model
from heurlens.circuits.circuit_files import circuit_drawing, write_drawing
from heurlens.circuits.drawn_edges import circuit_to_draw
from heurlens.circuits.faithfulness import faithfulness_curve, faithfulness_figure, ranking_curve
from heurlens.circuits.faithfulness_areas import MIB_GRID, FaithfulnessCurve, grid_count
from heurlens.circuits.mib_graph import MibGraph
from heurlens.circuits.settings import AttributionSettings, FaithfulnessSettings
from heurlens.data.prompt_tasks import logit_difference
from heurlens.data.run_data import PromptTaskData
from heurlens.interventions.circuits import Level
from heurlens.interventions.graph import EdgeLayout, edge_layout
from heurlens.interventions.rankings import Ranking, random_ranking, ranking_of
from heurlens.interventions.units import UnitLayout
from heurlens.runtime.cache import atomic_write_bytes, atomic_write_json
from heurlens.runtime.devices import describe_device, device_of
from heurlens.runtime.figure_files import figure_markdown, write_figure_files
from heurlens.runtime.run_folders import RunFolder

TASKS = {"ioi": "IOI", "greater-than": "greater-than"}
CORRUPT = FaithfulnessSettings(ablation="corrupt")  # every curve: MIB's patching
EXAMPLES, SEEDS = 200, 3
TARGETS = {"node": 0.8, "edge": 0.95}  # the ranking runs' targets
NODES_BESIDE = 0.72  # a joint job's node masks' target (Edge Pruning's default for its layer masks)
N_UNITS = 30 * 10  # SmolLM2: 30 layers of 9 heads and an MLP
SWEEP = [round(1 - grid_count(size, N_UNITS) / N_UNITS, 6) for size in MIB_GRID if 0 < grid_count(size, N_UNITS) < N_UNITS]
RANDOM_SEEDS = 3
DRAWN = 50  # edges in the page's drawing of EAP-IG's circuit
ATTRIBUTIONS = {"eap-ig-edge": ("edge", "eap-ig", "heurlens"), "eap-edge": ("edge", "eap", "heurlens"),
                "eap-ig-node": ("node", "eap-ig", "heurlens"), "eap-ig-edge-mib": ("edge", "eap-ig", "mib")}


def jobs() -> list[str]:
    """Every job: per task the four mask runs (level x objective), the baselines, the attribution runs (EAP-IG and
    EAP of the edges, EAP-IG of the units), edge masks (KL) warm-started from EAP-IG, masks trained for a ranking
    (``--train-for ranking``; level x objective, the logit difference raised too, ``logit-diff-max``, cold or
    warm-started from EAP-IG; edges, KL or the logit difference raised, with node masks beside them: ``-joint``, node
    target ``NODES_BESIDE``) and random rankings of the edges
    of MIB's graph (beside EAP-IG's there); on IOI one node (KL) run per target of the sweep."""
    return ([f"{task}/{level}-{objective}" for task in TASKS for level in ("node", "edge")
             for objective in ("kl", "logit-diff")] + [f"{task}/baselines" for task in TASKS]
            + [f"{task}/{name}" for task in TASKS for name in ATTRIBUTIONS]
            + [f"{task}/edge-kl-warm" for task in TASKS] + [f"{task}/random-edge-mib" for task in TASKS]
            + [f"{task}/{level}-{objective}-ranking{start}" for task in TASKS for level in ("node", "edge")
               for objective in ("kl", "logit-diff", "logit-diff-max") for start in ("", "-warm")]
            + [f"{task}/edge-{objective}-joint-ranking{start}" for task in TASKS
               for objective in ("kl", "logit-diff-max") for start in ("", "-warm")]
            + [f"ioi/node-kl-target-{target:g}" for target in SWEEP] + [f"{task}/attribution" for task in TASKS])


def run(job: str, out: Path, examples: int = EXAMPLES, steps: int | None = None, seeds: int = SEEDS,
        dtype: str = "float32") -> None:
    """Prune (a mask job) and score the job's circuits on the scoring prompts; writes ``out/scores/JOB.json``
    (``examples``, ``steps``, ``seeds``: fewer for a trial or a CPU run; a mask job's ``dtype`` bfloat16: the masks
    trained in bfloat16, scored in float32 as every curve, written as ``JOB-bf16.json``)."""
    task, name = job.split("/")
    model = heurlens.load_model("smollm2")
    data = PromptTaskData(task, examples, seed=0)
    train, [scoring] = data.train(model), data.eval_sets(model)
    where = describe_device(device_of(model))
    if name in ("baselines", "attribution"):  # attribution patching of the units (and, baselines, random rankings)
        start = time.time()
        scores = attribution_scores(model, train, logit_difference, AttributionSettings(ablation="corrupt"))
        seconds = time.time() - start
        ranking = Ranking("attribution", "node", -torch.tensor(scores["score"].tolist()), signed=True)
        results = {"attribution": (ranking_curve(model, ranking, scoring, CORRUPT), seconds)}
        for level, n_items in ((cast(Level, "node"), N_UNITS), (cast(Level, "edge"), edge_layout(model).n_edges)):
            if name == "attribution":
                break
            randoms = [random_ranking(level, n_items, seed) for seed in range(RANDOM_SEEDS)]
            results[f"random-{level}"] = (ranking_curve(model, randoms, scoring, CORRUPT), 0.0)
        for method, (curve, seconds) in results.items():
            _save(out / "scores" / task / f"{method}.json", curve, seconds, where)
        return
    if name == "random-edge-mib":  # random rankings of the edges of MIB's graph (the ungrouped copy's)
        ungrouped = scored_model(model, "edge", "mib")
        randoms = [random_ranking("edge", edge_layout(ungrouped).n_edges, seed) for seed in range(RANDOM_SEEDS)]
        _save(out / "scores" / task / f"{name}.json", ranking_curve(ungrouped, randoms, scoring, CORRUPT),
              0.0, where)
        return
    if name in ATTRIBUTIONS:  # heurlens attribute's run folder, its ranking cut at every size
        attributed_level, method, graph = ATTRIBUTIONS[name]
        attributed = attribute(model, data, out / "runs" / task / name, level=cast(Level, attributed_level),
                               method=cast(AttributionMethod, method), graph=cast(GraphName, graph))
        curve = ranking_curve(scored_model(model, attributed.level, attributed.graph), attributed.ranking, scoring,
                              CORRUPT)
        _save(out / "scores" / task / f"{name}.json", curve, attributed.seconds, where)
        return
    part, _, rest = name.partition("-")
    level = cast(Level, part)
    objective: Literal["kl", "logit-diff", "logit-diff-max"] = (
        "logit-diff-max" if rest.startswith("logit-diff-max") else "logit-diff" if rest.startswith("logit-diff")
        else "kl")
    target = float(rest.rpartition("target-")[2]) if "target-" in rest else TARGETS[level]
    warm = None  # the warm-started job's own EAP-IG run (jobs run side by side: none writes another's folder)
    if rest.endswith("-warm"):
        warm = attribute(model, data, out / "runs" / task / f"{name}-eap-ig", level=level, method="eap-ig")
    config = heurlens.PruneSettings(level=level, ablation="corrupt", objective=objective, total_steps=steps,
                                    init_from=None if warm is None else str(warm.path),
                                    train_for="ranking" if "-ranking" in rest else "target",
                                    dtype=cast(Literal["float32", "bfloat16"], dtype),
                                    node_sparsity=NODES_BESIDE if "-joint" in rest else None)
    stored = name + ("-bf16" if dtype == "bfloat16" else "")
    records = heurlens.prune(model, train, sparsity=target, seeds=range(seeds), out=out / "runs" / task / stored,
                             config=config, progress=False, warm_start=None if warm is None else warm.ranking)
    seconds = sum(record.metrics["train_seconds"] for record in records)
    trained_on = records[0].metrics["trained_on"]
    if "target-" in rest:  # one target of the sweep: its circuits, scored with the rest in the page
        curve = faithfulness_curve(model, records, scoring, CORRUPT)
    else:
        curve = ranking_curve(model, [ranking_of(record) for record in records], scoring, CORRUPT)
    _save(out / "scores" / task / f"{stored}.json", curve, seconds, trained_on,
          steps=config.steps_for(target, len(train), train.batches[0]["input_ids"].shape[0])[1])
    if "target-" in rest and target == max(SWEEP):  # the empty and the whole circuit, measured once per seed
        ends = [replace(records[0], kept=kept, target_sparsity=sparsity, seed=seed) for seed in range(seeds)
                for kept, sparsity in (([], 1.0), (UnitLayout(30, 9).units(), 0.0))]
        _save(out / "scores" / task / "node-kl-target-ends.json", faithfulness_curve(model, ends, scoring,
                                                                                  CORRUPT), 0.0, where)


def drawing_path(docs: Path, task: str) -> Path:
    """The SVG of a task's EAP-IG circuit, beside the page."""
    return docs.with_name(f"{docs.stem}-{task}-eap-ig-edges.svg")


def draw(out: Path, docs: Path, top: int = DRAWN) -> None:
    """Each task's EAP-IG edge ranking (the ``eap-ig-edge`` job's run folder, attributed when it has none) drawn as
    its ``top`` strongest edges (``heurlens draw``'s drawing) beside the page."""
    model = heurlens.load_model("smollm2")
    layout = edge_layout(model)
    for task, title in TASKS.items():
        attributed = attribute(model, PromptTaskData(task, EXAMPLES, seed=0), out / "runs" / task / "eap-ig-edge",
                               level="edge", method="eap-ig")
        drawn = circuit_to_draw(attributed.ranking, layout, top, label=f"EAP-IG on {title}, SmolLM2-135M")
        write_drawing(circuit_drawing(drawn, layout.n_heads, layout.n_kv_heads), drawing_path(docs, task))
        print(f"{drawing_path(docs, task)}: {drawn.title} ({attributed.seconds:.0f} s to attribute)")


def _save(path: Path, curve: FaithfulnessCurve, seconds: float, where: str, **extra) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_json(path, {"circuits": curve.circuits.to_dict(orient="records"), "full": curve.full,
                             "empty": curve.empty, "n_items": curve.n_items, "seconds": seconds, "where": where,
                             "cpr_from": curve.cpr_from, "cmd_from": curve.cmd_from, **extra})


def _load(path: Path) -> tuple[FaithfulnessCurve, dict]:
    """A kept curve; one kept before 2026-12-02 has no ``cpr_from`` (every area from its one order: |score| for
    attribution scores then)."""
    stored = json.loads(path.read_text())
    return FaithfulnessCurve(pd.DataFrame(stored["circuits"]), stored["full"], stored["empty"], stored["n_items"],
                             cpr_from=stored.get("cpr_from"), cmd_from=stored.get("cmd_from")), stored


def cpu_cost(out: Path) -> None:
    """Seconds per mask-training step on this CPU (one seed, 32 IOI prompts a step, the run's own threads), node and
    edge level, each objective: 10 steps timed by the record's train_seconds."""
    model = heurlens.load_model("smollm2")
    train = PromptTaskData("ioi", EXAMPLES, seed=0).train(model)
    steps, cost = 10, {}
    for level in ("node", "edge"):
        for objective in ("kl", "logit-diff"):
            [record] = heurlens.prune(model, train, sparsity=TARGETS[level], seeds=[0], progress=False, config=
                                      heurlens.PruneSettings(level=level, ablation="corrupt", objective=objective,
                                                             total_steps=steps), cache=False)
            cost[f"{level}-{objective}"] = record.metrics["train_seconds"] / steps
    start = time.time()
    attribution_scores(model, train, logit_difference, AttributionSettings(ablation="corrupt"))
    cost["attribution"] = time.time() - start
    cost["where"] = describe_device(device_of(model))
    atomic_write_json(out / "cpu-cost.json", cost)
    print(cost)


METHODS = {"node-kl": "node masks, KL", "node-logit-diff": "node masks, logit difference",
           "edge-kl": "edge masks, KL", "edge-logit-diff": "edge masks, logit difference",
           "attribution": "attribution patching (nodes)", "random-node": "random (nodes)",
           "random-edge": "random (edges)", "node-kl-targets": "node masks, KL, one run per size",
           "eap-ig-edge": "EAP-IG (edges)", "eap-edge": "EAP (edges)", "eap-ig-node": "EAP-IG (nodes)",
           "eap-ig-edge-mib": "EAP-IG (edges of MIB's graph, 123,211)",
           "edge-kl-warm": "edge masks, KL, warm-started from EAP-IG",
           "random-edge-mib": "random (edges of MIB's graph, 123,211)",
           **{f"{level}-{objective}-ranking{start}": f"{level} masks, {name}, trained for a ranking{how}"
              for level in ("node", "edge") for objective, name in (("kl", "KL"), ("logit-diff", "logit difference"),
                                                                    ("logit-diff-max", "logit difference raised"))
              for start, how in (("", ""), ("-warm", ", warm-started from EAP-IG"))},
           **{f"edge-{objective}-joint-ranking{start}": f"edge masks, {name}, node masks beside them (target "
              f"{NODES_BESIDE}), trained for a ranking{how}"
              for objective, name in (("kl", "KL"), ("logit-diff-max", "logit difference raised"))
              for start, how in (("", ""), ("-warm", ", warm-started from EAP-IG"))},
           # the joint warm job before its node masks were warm-started too (2026-12-03; its score file renamed)
           "edge-kl-joint-ranking-warm-cold-nodes": f"edge masks, KL, node masks beside them (target {NODES_BESIDE}) "
           "from log_alpha 10, trained for a ranking, the edges warm-started from EAP-IG"}


def keep_scores(out: Path, kept: Path) -> None:
    """Copy the scores (and the CPU's step times) under ``out`` into ``kept``, the page's committed record (a few KB
    a job; run folders are not committed), so that a page is drawn from every job ever scored, not only from the
    runs on one machine."""
    for path in [*sorted((out / "scores").rglob("*.json")), out / "cpu-cost.json"]:
        if path.exists():
            target = kept / path.relative_to(out)
            target.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_bytes(target, path.read_bytes())


def kept_folder(docs: Path) -> Path:
    """The page's committed record of scores, beside the page."""
    return docs.with_name(f"{docs.stem}-scores")


def unkept(kept: Path) -> list[str]:
    """The jobs the page last showed (``kept/drawn.json``: task -> score files) whose scores ``kept`` lacks: the page
    of 2026-11-28 was drawn from run folders lost with their machine, so until those jobs run again its numbers stand
    as written then and drawing it anew would drop them."""
    drawn = json.loads((kept / "drawn.json").read_text()) if (kept / "drawn.json").exists() else {}
    return [f"{task}/{name}" for task, names in drawn.items() for name in names
            if not (kept / "scores" / task / f"{name}.json").exists()]


def page(out: Path, docs: Path) -> None:
    """The page from the scores under ``out``, kept beside the page first (``keep_scores``): per task, every method's
    f at MIB's sizes, CPR, CMD and cost, from every score kept; refused while a job the page shows has none kept."""
    out, scored = kept_folder(docs), out
    keep_scores(scored, out)
    missing = unkept(out)
    if missing:
        raise SystemExit(f"the page shows jobs whose scores are not kept in {out}: {', '.join(missing)}; run "
                         "them (`run JOB`) before drawing it again (the scores of the others are kept)")
    cpu = json.loads((out / "cpu-cost.json").read_text()) if (out / "cpu-cost.json").exists() else {}
    lines = ["# SmolLM2-135M circuits on MIB's yardstick: IOI and greater-than\n",
             f"Produced by `analyses/circuits_ioi_smollm2.py` (its jobs on the machine each row names, the page on "
             f"this project's CPU). {EXAMPLES} prompts "
             "(seed 0) to prune and rank, as many others (seed 1) to score; m the logit difference; every unit or "
             "edge outside a circuit carries its activation on the corrupted prompt (IOI: ABC names; greater-than: "
             "the 01 year). f at MIB's ten sizes, CPR and CMD MIB's trapezoids on linear k over [0.001, 1] "
             f"({SEEDS} seeds' curves averaged; mask runs: one target each, node {TARGETS['node']}, edge "
             f"{TARGETS['edge']}, cut by their log_alpha ranking at every size; EAP and EAP-IG, `heurlens attribute`: "
             "one ranking of the pruning prompts; `curves`: how many were averaged). Units: 300 heads and MLPs (MIB also "
             f"counts the embeddings as a node); edges: heurlens' graph, {70651:,} edges, key-value heads grouped "
             f"(MIB's ungrouped graph has {MibGraph(EdgeLayout(30, 9, 3)).n_edges:,}, so edge k is not "
             "MIB's k and the edge numbers are not comparable with MIB's published ones). Discovery: the minutes "
             "the run took where it ran (a stacked run's seeds together); *on this CPU*: steps x seeds x the seconds "
             f"a step took here at one thread ({_step_times(cpu)}), attribution timed here whole.\n"]
    for task, title in TASKS.items():
        curves, rows = {}, []
        for path in sorted((out / "scores" / task).glob("*.json")):
            if "target-" in path.stem:
                continue
            curve, stored = _load(path)
            curves[path.stem] = curve
            rows.append(_row(path.stem, curve, stored, cpu))
        sweep = sorted((out / "scores" / task).glob("node-kl-target-*.json"))
        if sweep:
            loaded = [_load(path) for path in sweep]
            circuits = pd.concat([curve.circuits for curve, _ in loaded], ignore_index=True)
            curve = FaithfulnessCurve(circuits, loaded[0][0].full, loaded[0][0].empty, N_UNITS)
            curves["node-kl-targets"] = curve
            rows.append(_row("node-kl-targets", curve, {"seconds": sum(s["seconds"] for _, s in loaded),
                                                        "where": loaded[0][1]["where"],
                                                        "steps": sum(s.get("steps", 0) for _, s in loaded)}, cpu))
        if not curves:
            continue
        matched = _ranking_against_targets(curves) if "node-kl-targets" in curves and "node-kl" in curves else None
        table = pd.DataFrame(rows).sort_values(["axis", "CPR"], ascending=[False, False])
        first = next(iter(curves.values()))
        lines += [f"## {title}\n", f"m(full) {first.full:.3f}, m(empty) {first.empty:.3f}.\n",
                  table.to_markdown(index=False, floatfmt=".3f"), "",
                  "f at each size (mean over the curves):\n", _points(curves), ""]
        figure = faithfulness_figure({_method(name): curve for name, curve in curves.items()},
                                     f"{title} (SmolLM2-135M)")
        figure_path, _ = write_figure_files(figure, docs.with_name(f"{docs.stem}-{task}.html"))
        lines += [f"Curves: [{figure_path.name}]({figure_path.name}).\n", figure_markdown(figure_path, f"f(k) on {title}")]
        if drawing_path(docs, task).exists():  # `draw`'s
            lines += [f"EAP-IG's {DRAWN} strongest edges (`heurlens draw`; width |score|, colour the sign, line the "
                      f"input entered):\n", f"![EAP-IG's circuit on {title}]({drawing_path(docs, task).name})\n"]
        if matched is not None:
            lines += ["### One run's ranking against one run per size (node masks, KL)\n",
                      "f of the circuit of each size that a per-target run measured (seeds as measured), beside the "
                      f"ranking run's (target {TARGETS['node']}) circuit of that size. At {1 - TARGETS['node']:.0%} "
                      "the ranking run is itself the per-target run.\n", matched.to_markdown(floatfmt=".3f"), ""]
    RunFolder(out, "MIB yardstick run", ("scores",)).write_results_page(docs, "\n".join(lines))
    atomic_write_json(out / "drawn.json", {task: sorted(path.stem for path in (out / "scores" / task).glob("*.json"))
                                           for task in TASKS if (out / "scores" / task).is_dir()})
    print("\n".join(lines))


def table(out: Path, docs: Path) -> str:
    """Every kept score of the edge axis (the scores under ``out`` kept first), per task: CPR, CMD, f at MIB's sizes and
    the discovery time where it ran, as one markdown table, and each task's curves drawn beside the page
    (``PAGE-TASK-edges.svg``; for the page's hand-written part while ``page`` is refused for jobs whose scores were
    lost)."""
    kept = kept_folder(docs)
    keep_scores(out, kept)
    rows = []
    for task, title in TASKS.items():
        curves = {}
        for path in sorted((kept / "scores" / task).glob("*.json")):
            curve, stored = _load(path)
            if "edges_kept" not in curve.circuits or path.stem.startswith("random"):
                continue
            curves[_method(path.stem)] = curve
            f = curve.curve.set_index("kept_fraction")["faithfulness"]
            rows.append({"task": title, "method": _method(path.stem), "curves": curve.circuits["curve"].nunique(),
                         "CPR": curve.cpr, "CMD": curve.cmd,
                         "f at 0.1 / 1 / 5 / 20 / 50%": " / ".join(f"{f.get(size, math.nan):.2f}"
                                                                   for size in (0.001, 0.01, 0.05, 0.2, 0.5)),
                         "each ranking alone: CPR / CMD": _each_ranking(curve),
                         "steps": stored.get("steps", "-"),
                         "discovery (min, where)": f"{stored['seconds'] / 60:.1f} ({stored['where']})"})
        if curves:
            write_figure_files(faithfulness_figure(curves, f"{title}, edges (SmolLM2-135M)"),
                               docs.with_name(f"{docs.stem}-{task}-edges.html"))
    text = pd.DataFrame(rows).to_markdown(index=False, floatfmt=".3f")
    print(text)
    return text


def _each_ranking(curve: FaithfulnessCurve) -> str:
    """Both areas of each ranking a curve's two areas came from (signed scores: CPR by score, CMD by |score|), "-"
    when both came from one; one ranking's CMD is at least |0.999 - CPR|, so no one order has EAP-IG's pair."""
    if curve.cpr_from == curve.cmd_from:
        return "-"
    alone = [replace(curve, cpr_from=by, cmd_from=by) for by in (curve.cpr_from, curve.cmd_from)]
    return "; ".join(f"by {str(one.cpr_from).replace('|', '&#124;')} {one.cpr:.3f} / {one.cmd:.3f}" for one in alone)


def _method(stem: str) -> str:
    """A score file's method, in words (``-bf16``: its masks trained in bfloat16)."""
    return METHODS[stem] if stem in METHODS else f"{METHODS[stem.removesuffix('-bf16')]}, trained in bfloat16"


def _step_times(cpu: dict) -> str:
    """The measured CPU seconds per mask step, as text."""
    steps = {name: seconds for name, seconds in cpu.items() if name not in ("attribution", "where")}
    return ", ".join(f"{name} {seconds:.1f} s" for name, seconds in steps.items()) or "not measured"


def _row(name: str, curve: FaithfulnessCurve, stored: dict, cpu: dict) -> dict:
    level = "edge" if "edges_kept" in curve.circuits else "node"
    per_step = cpu.get(name.replace("-targets", ""))
    steps = stored.get("steps")
    curves = curve.circuits["curve"].nunique()
    seeds = SEEDS if name.endswith("-targets") else curves  # the sweep's circuits of 3 seeds share one curve per size
    cpu_minutes = (per_step * steps * seeds / 60 if per_step and steps else
                   cpu.get("attribution", math.nan) / 60 if name == "attribution" else 0.0 if "random" in name
                   else stored["seconds"] / 60 if name in ATTRIBUTIONS and stored["where"].startswith("cpu")
                   else math.nan)
    return {"method": _method(name), "axis": level, "curves": curves,
            "CPR": curve.cpr, "CMD": curve.cmd, "areas from": _areas_from(name, curve),
            "discovery (min, where)": f"{stored['seconds'] / 60:.1f} ({stored['where']})",
            "on this CPU (min)": round(cpu_minutes, 1)}


def _areas_from(name: str, curve: FaithfulnessCurve) -> str:
    """Which ranking CPR and CMD came from: an attribution job's by score and by |score| (MIB's print_results.py; a
    job kept before 2026-12-02 both by |score|), a mask run's log_alpha, a random order, or the sweep's circuits."""
    if name.endswith("-targets"):
        return "its circuits"
    if name.startswith("random"):
        return "a random order"
    if name in ATTRIBUTIONS or name == "attribution":
        return curve.area_rankings if curve.cpr_from else "both by |score| (kept before 2026-12-02)"
    return "log_alpha"


def _ranking_against_targets(curves: dict[str, FaithfulnessCurve]) -> pd.DataFrame:
    """Per size the per-target runs measured: their f (mean over their seeds, and which seeds) beside the ranking
    run's (mean over its seeds, and seed 0's)."""
    targets, ranking = curves["node-kl-targets"].points.dropna(), curves["node-kl"].points
    rows = []
    for size, points in targets.groupby("kept_fraction"):
        ranked = ranking[ranking["kept_fraction"] == size]
        rows.append({"size": f"{100 * size:g}%", "units": int(points["kept"].iloc[0]),
                     "per-target run": points["faithfulness"].mean(),
                     "its seeds": ", ".join(c.split()[-1] for c in points["curve"]),
                     "ranking (3 seeds)": ranked["faithfulness"].mean(),
                     "ranking, seed 0": ranked["faithfulness"].iloc[0]})
    return pd.DataFrame(rows).set_index("size")


def _points(curves: dict[str, FaithfulnessCurve]) -> str:
    columns = {_method(name): curve.curve.set_index("kept_fraction")["faithfulness"] for name, curve in curves.items()}
    table = pd.DataFrame(columns)
    table.index = [f"{100 * size:g}%" for size in table.index]
    return table.T.to_markdown(floatfmt=".3f")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=("run", "cpu-cost", "keep", "page", "table", "draw", "jobs"))
    parser.add_argument("job", nargs="?", help="A job of `jobs`, e.g. ioi/edge-kl.")
    parser.add_argument("--out", type=Path, default=Path("runs/mib"))
    parser.add_argument("--examples", type=int, default=EXAMPLES, help="Prompts to prune and to score (a trial: fewer).")
    parser.add_argument("--seeds", type=int, default=SEEDS, help="Seeds of a mask job (a CPU run: fewer).")
    parser.add_argument("--steps", type=int, default=None, help="Mask-training steps (default: prune's schedule).")
    parser.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32",
                        help="A mask job's training precision (bfloat16: ~3x faster on an AVX-512 BF16 CPU).")
    parser.add_argument("--docs", type=Path, default=Path("docs/results/circuits-ioi-smollm2.md"))
    args = parser.parse_args()
    if args.what == "jobs":
        print("\n".join(jobs()))
    elif args.what == "run":
        if args.job not in jobs():
            parser.error(f"job {args.job!r} is not one of: {', '.join(jobs())}")
        run(args.job, args.out, args.examples, args.steps, args.seeds, args.dtype)
    elif args.what == "cpu-cost":
        cpu_cost(args.out)
    elif args.what == "draw":
        draw(args.out, args.docs)
    elif args.what == "keep":
        keep_scores(args.out, kept_folder(args.docs))
    elif args.what == "table":
        table(args.out, args.docs)
    else:
        page(args.out, args.docs)


if __name__ == "__main__":
    main()
