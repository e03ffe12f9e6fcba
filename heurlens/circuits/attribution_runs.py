"""Attribution run folders (``heurlens attribute``): one method's score of every unit or edge on a prompt task's
training prompts, kept as a ranking that ``heurlens faithfulness`` scores at MIB's sizes and ``heurlens export-mib``
writes in MIB's format.

A folder holds ``settings.json`` (the model and its fingerprint, the task, its prompts, the level, the method, its
steps, the ablation and the graph) and ``scores.safetensors``: one score per item in ``UnitLayout``'s or
``EdgeLayout``'s order, on the graph named: "heurlens" (a grouped-query model's key and value inputs once per
key-value head) or "mib" (the edges of its ungrouped copy, ``models.ungrouped``: MIB's graph), with the seconds the
attribution took. The metric is the task's logit difference, MIB's.

The scores file keeps delta_m, the estimated change of the metric when the item alone is ablated (the mean over
prompts, as heurlens has always written it); the ranking read back holds -delta_m, EAP-IG's sign, as a
``signed`` ranking.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, cast

import torch
from safetensors import safe_open
from safetensors.torch import save

from heurlens.circuits.attribution import AttributionMethod, ranking_of_attribution
from heurlens.circuits.mib_graph import GraphName, graph_of
from heurlens.circuits.settings import IG_STEPS, AttributionSettings
from heurlens.data.prompt_tasks import logit_difference
from heurlens.data.run_data import PromptTaskData
from heurlens.errors import HeurlensError
from heurlens.interventions.circuits import Level
from heurlens.interventions.graph import EdgeLayout
from heurlens.interventions.layouts import layout_of
from heurlens.interventions.rankings import Ranking
from heurlens.interventions.scoring import MethodName
from heurlens.models.ungrouped import ungrouped_copy
from heurlens.protocols import PreparedModel
from heurlens.runtime.cache import atomic_write_bytes
from heurlens.runtime.run_folders import SETTINGS_FILE, RunFolder

SCORES_FILE = "scores.safetensors"


def holds_scores(run_dir: str | Path) -> bool:
    """Whether ``run_dir`` holds a ranking's scores (an attribution run, not a prune run's records)."""
    return (Path(run_dir) / SCORES_FILE).exists()


def write_scores(run_dir: str | Path, ranking: Ranking, seconds: float) -> None:
    """Keep ``ranking``'s scores (one per item, in the layout's order) in ``run_dir`` as delta_m, atomically."""
    metadata = {"label": ranking.label, "seconds": f"{seconds:.3f}"}
    delta_m = (-ranking.scores).detach().float().cpu().contiguous()
    atomic_write_bytes(Path(run_dir) / SCORES_FILE, save({"scores": delta_m}, metadata=metadata))


def read_ranking(run_dir: str | Path) -> tuple[Ranking, dict[str, Any], float]:
    """The ranking kept in ``run_dir`` (``signed``: -delta_m, EAP-IG's sign), its folder's settings and the seconds
    it took; refused by name when the folder holds none, or a damaged or non-finite one."""
    settings = RunFolder(Path(run_dir), "attribution run", (SCORES_FILE,)).settings(
        f"make one with heurlens attribute --out {run_dir}")
    if not holds_scores(run_dir):
        raise HeurlensError(f"{run_dir} holds no attribution scores ({SCORES_FILE}); make them with heurlens "
                            f"attribute --out {run_dir}")
    path = Path(run_dir) / SCORES_FILE
    try:
        with safe_open(path, framework="pt") as handle:
            scores = handle.get_tensor("scores")
            metadata = handle.metadata() or {}
    except Exception as error:  # safetensors raises its own error types for a cut or overwritten file
        raise HeurlensError(f"{path} cannot be read ({type(error).__name__}: {error}); it is damaged: remove it and "
                            f"run the same heurlens attribute --out {run_dir} again to compute the scores anew") from None
    if scores.dim() != 1 or not torch.isfinite(scores).all():
        raise HeurlensError(f"{path} holds scores that are not one finite number per item (shape "
                            f"{tuple(scores.shape)}); it is damaged: remove it and run heurlens attribute --out "
                            f"{run_dir} again")
    ranking = Ranking(metadata.get("label", Path(run_dir).name), cast(Level, settings["level"]),
                      -scores.to(torch.float32), signed=True, graph=settings.get("graph", "heurlens"))
    return ranking, settings, float(metadata.get("seconds", "nan"))


def check_scored_model(settings: dict[str, Any], model: PreparedModel, run_dir: str | Path) -> None:
    """Refuse ``model`` unless it is the one the ranking in ``run_dir`` (its ``settings``) scored: by fingerprint,
    as ``heurlens evaluate`` checks a prune run (a folder written before fingerprints were recorded: by name)."""
    fingerprint, model_id = settings.get("model_fingerprint"), settings.get("model_id")
    if fingerprint is None and model_id == model.model_id:
        return
    if fingerprint is None or fingerprint not in model.known_fingerprints():
        raise HeurlensError(f"the attribution run {run_dir} scored model {model_id!r}"
                            + (f" (fingerprint {fingerprint})" if fingerprint else "")
                            + f", not {model.model_id!r} (fingerprint {model.fingerprint()}): use it with its own "
                            f"model (--model {model_id}), or attribute this model into another folder")


@dataclass(frozen=True)
class AttributionRun:
    """A finished attribution run: its folder, its settings and its ranking (by |score|)."""

    path: Path
    settings: dict[str, Any]
    ranking: Ranking
    seconds: float

    @property
    def level(self) -> Level:
        return cast(Level, self.settings["level"])

    @property
    def graph(self) -> GraphName:
        return cast(GraphName, self.settings["graph"])

    @property
    def model_id(self) -> str:
        return str(self.settings["model_id"])

    def check_model(self, model: PreparedModel) -> None:
        """Refuse a model other than the one this run scored (``check_scored_model``)."""
        check_scored_model(self.settings, model, self.path)

    def check_task(self, data: PromptTaskData) -> None:
        """Refuse a task other than the one this run was attributed on (the task, its number of prompts and seed)."""
        ran = (self.settings.get("task"), self.settings.get("examples"), self.settings.get("seed"))
        if ran != (data.task, data.examples, data.seed):
            raise HeurlensError(f"the attribution run {self.path} was attributed on {describe_task(*ran)}, not on "
                                f"{describe_task(data.task, data.examples, data.seed)}: give --task {ran[0]} "
                                f"--task-examples {ran[1]} --seed {ran[2]}, or attribute this task into another folder")


def describe_task(task: Any, examples: Any, seed: Any) -> str:
    """"task 'ioi' (200 prompts, seed 0)": how refusals name the prompts a run was made on."""
    return f"task {task!r} ({examples} prompts, seed {seed})"


def attribution_folder(out: str | Path) -> RunFolder:
    """The folder of ``heurlens attribute``, checked before any work (refused when it holds files it did not make;
    a run stopped before its scores were written left its settings, and is resumed)."""
    return RunFolder(Path(out), "attribution run", (SETTINGS_FILE, SCORES_FILE)).opened()


def item_names(model: PreparedModel, level: Level, graph: GraphName) -> list[str]:
    """The names of the units or edges a run's scores are on, in their order (edges on MIB's graph: those of the
    ungrouped copy, a key-value head per query head), without building the copy."""
    layout = layout_of(model, level)
    return (layout.ungrouped() if isinstance(layout, EdgeLayout) and graph == "mib" else layout).item_names()


def scored_model(model: PreparedModel, level: Level, graph: GraphName) -> PreparedModel:
    """The model whose units or edges the scores are on: ``model``, or its ungrouped copy for edges on MIB's graph."""
    return ungrouped_copy(model) if graph_of(layout_of(model, level), graph) == "mib" else model


def attribute(model: PreparedModel, data: PromptTaskData, out: str | Path, *, level: Level = "edge",
              method: AttributionMethod = "eap-ig", ig_steps: int = IG_STEPS, ablation: MethodName = "corrupt",
              graph: GraphName = "heurlens", ig_points_per_pass: int | None = 1) -> AttributionRun:
    """Attribute ``data``'s training prompts' logit difference to every unit or edge of ``model`` and keep the scores
    in the folder ``out`` (read back when it holds them: a second call with the same settings computes nothing;
    other settings are refused).

    Args:
        model: the model (``heurlens.load_model``).
        data: the prompt task and its draw (``PromptTaskData``).
        out: the run folder.
        level: "edge" or "node" (heads and MLPs).
        method: "eap", or "eap-ig" (integrated gradients along the inputs, ``ig_steps`` points).
        ig_steps: EAP-IG's points on the path (MIB's 5).
        ablation: what an ablated item carries: "corrupt" (the only one for EAP-IG), "mean" or "zero".
        graph: the edges scored: "heurlens" (a grouped-query model's key-value inputs once per key-value head) or
            "mib" (its ungrouped copy's, MIB's graph).
        ig_points_per_pass: EAP-IG's points a forward and backward pass runs (1, MIB's way; None: all in one pass).
            Not recorded: the scores are the same up to float rounding.

    Returns:
        The finished ``AttributionRun`` (its ranking: signed, on the graph scored)."""
    folder = attribution_folder(out)
    graph = graph_of(layout_of(model, level), graph)
    settings = {"model_id": model.model_id, "model_fingerprint": model.fingerprint(), "task": data.task,
                "examples": data.examples, "seed": data.seed, "level": level, "method": method,
                "ig_steps": ig_steps if method == "eap-ig" else None, "ablation": ablation,
                "graph": graph}

    label = ("EAP" if method == "eap" else f"EAP-IG ({ig_steps} steps)") + (" on MIB's graph" if graph == "mib"
                                                                            else "")

    def compute() -> tuple[Ranking, float]:
        start = time.perf_counter()
        target = scored_model(model, level, graph)
        train = data.train(target)
        means = data.means(target) if ablation == "mean" else None
        ranking = ranking_of_attribution(target, train, logit_difference, AttributionSettings(
            level, ig_steps if method == "eap-ig" else None, ablation, ig_points_per_pass), means)
        return replace(ranking, label=label, graph=graph), time.perf_counter() - start

    def written() -> tuple[Ranking, float]:
        run = load_attribution(out)
        return run.ranking, run.seconds

    with folder.writing():
        folder.record_settings(settings)
        folder.stored(SCORES_FILE, compute, lambda result: write_scores(out, *result), written)
    return load_attribution(out)


def load_attribution(run_dir: str | Path) -> AttributionRun:
    """The attribution run in ``run_dir``, refused by name when it holds none.

    Args:
        run_dir: a folder ``attribute`` (or ``heurlens attribute``) wrote.

    Returns:
        The run: its settings and its ranking (signed: -delta_m, EAP-IG's sign)."""
    ranking, settings, seconds = read_ranking(run_dir)
    return AttributionRun(Path(run_dir), settings, ranking, seconds)
