"""Circuit files in MIB's format, out and in: the JSON that EAP-IG's ``Graph.to_json`` writes and MIB's circuit track
reads (``Graph.from_json``; hannamw/MIB-circuit-track, ``circuit_loading.py``):

    {"cfg": {"n_layers": L, "n_heads": H, "parallel_attn_mlp": false, "d_model": D},
     "nodes": {"input": {"in_graph": true}, "a0.h0": {"in_graph": true, "score": 0.3}, ..., "logits": {...}},
     "edges": {"input->a0.h0<q>": {"score": -0.0003, "in_graph": false}, ...}}

An *importance* file carries a score per edge (edge level) or per node (node level: heads and MLPs; ``input`` has
none, so MIB always keeps it) and is cut at every size by MIB (whatever its ``in_graph`` says); a *circuit* file marks
the items kept with ``in_graph`` and carries no scores, except heurlens' own, which carry the ranking's scores too
(EAP-IG's ``Graph.from_json`` needs a score on every edge) and say ``"content": "circuit ..."`` in
``cfg["heurlens"]``.

Scores are written so that both of MIB's evaluations (``absolute=False``: by score, highest first; ``absolute=True``:
by |score|) rank as heurlens does:
- an attribution ranking (EAP, EAP-IG): -delta_m, the mean over prompts of the metric's estimated drop when the item
  alone is ablated: EAP-IG's sign (its metric is the loss -m), higher kept first. EAP-IG's own files hold the same
  numbers divided by its batch size (its loss is a mean over each batch, and its sums are divided by the prompts
  again), the same ranking in both modes. MIB reports such a file's CPR by score and its CMD by |score|;
- a mask run's ranking (log_alpha) or a random one: log_alpha + c, c = 1 - min log_alpha, so every score is at least
  1 and both modes keep the highest log_alpha first; c is recorded as ``cfg["heurlens"]["score_offset"]``, so
  heurlens reads the file back to the exact log_alpha.
``cfg["heurlens"]["scores"]`` names which ("attribution" or "log_alpha"); a file without it (another tool's) is read
as signed scores, as MIB's scripts report one. Edges are
on MIB's ungrouped graph (``circuits.mib_graph``); heurlens writes a grouped-query model's key-value edges once
per query head (copied) and says so in ``cfg["heurlens"]``. It reads edges back onto one of two graphs: ``"mib"``,
the file's own edges, on the model's ungrouped copy (``models.ungrouped``: every query head's key and value inputs
its own, as MIB scores the file), or ``"heurlens"``, the model's grouped graph, by the rule ``MibGraph.grouped``
names: "mean" for its own copies, "sum" for another tool's scores, "any" for circuits. Without grouped-query
attention the two are the same edges.
"""

from __future__ import annotations

import json
import math
import warnings
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path
from typing import Any, get_args

import torch
from torch import Tensor

from heurlens.circuits.mib_graph import GraphName, GroupRule, MibGraph, mib_node_name
from heurlens.errors import HeurlensError
from heurlens.interventions.circuits import Level
from heurlens.interventions.graph import EdgeLayout, edge_layout
from heurlens.interventions.layouts import layout_of
from heurlens.interventions.nodes import Node
from heurlens.interventions.rankings import Ranking
from heurlens.interventions.units import Unit, UnitLayout
from heurlens.protocols import PreparedModel
from heurlens.runtime.cache import atomic_write_json
from heurlens.runtime.deprecations import STILL_WORKS

COPIED = "copied to each query head"  # cfg["heurlens"]["key_value_edges"] of heurlens' own files


@dataclass(frozen=True)
class MibFile:
    """A file read for a model: its ``level``, and a ``ranking`` (an importance file) or a ``keep`` mask (a circuit
    file) on heurlens' units or on the edges of ``graph`` (``"mib"``: the model's ungrouped copy's, in its
    ``EdgeLayout`` order)."""

    path: Path
    level: Level
    ranking: Ranking | None
    keep: Tensor | None
    graph: GraphName = "heurlens"


def exported_scores(ranking: Ranking) -> tuple[Tensor, dict[str, Any]]:
    """The scores a file holds for ``ranking`` (float64) and what ``cfg["heurlens"]`` says of them (the module's
    conventions): a signed ranking's own scores, another's shifted to 1 and above."""
    scores = ranking.scores.detach().double().cpu()
    if ranking.signed:
        return scores, {"scores": "attribution"}
    offset = 1.0 - float(scores.min())
    return scores + offset, {"scores": "log_alpha", "score_offset": offset}


def _cfg(model: PreparedModel, level: Level, what: str, convention: dict[str, Any]) -> dict[str, Any]:
    cfg = getattr(getattr(model, "bridge", None), "cfg", None)
    d_model = int(getattr(cfg, "d_model", 0) or 0)
    n_kv = int(getattr(cfg, "n_key_value_heads", None) or model.n_heads)
    own = {"level": level, "content": what, "n_key_value_heads": n_kv, **convention}
    if isinstance(layout_of(model, level), EdgeLayout) and n_kv != model.n_heads:
        own["key_value_edges"] = COPIED
    return {"n_layers": model.n_layers, "n_heads": model.n_heads, "parallel_attn_mlp": False, "d_model": d_model,
            "heurlens": own}


def _unit_name(unit: Unit) -> str:
    """A head's or MLP's node name on MIB's graph (its output: ``mib_node_name``)."""
    return mib_node_name(Node("mlp_out", unit.layer) if unit.is_mlp else Node("attn_head_out", unit.layer, unit.head))


@lru_cache(maxsize=4)
def _mib_graph(layout: EdgeLayout) -> MibGraph:
    """MIB's graph of ``layout``, built once for the files of one model (SmolLM2's 123,211 names take about a
    second)."""
    return MibGraph(layout)


def mib_document(model: PreparedModel, ranking: Ranking, keep: Tensor | None = None) -> dict[str, Any]:
    """The JSON document of ``ranking`` (an importance file: every item in the graph) or of the circuit ``keep``
    (0/1 per item, the ranking's scores beside it) on heurlens' units or edges."""
    scores, convention = exported_scores(ranking)
    kept = [True] * len(scores) if keep is None else [bool(value) for value in keep.tolist()]
    nodes: dict[str, dict[str, Any]] = {"input": {"in_graph": True}}
    edges: dict[str, dict[str, Any]] = {}
    layout = UnitLayout(model.n_layers, model.n_heads)
    if ranking.level == "node":
        for unit, score, in_graph in zip(layout.units(), scores.tolist(), kept):
            nodes[_unit_name(unit)] = {"in_graph": in_graph, "score": score}
    else:
        graph = _mib_graph(edge_layout(model))
        index = graph.heurlens_index.tolist()
        for name, score, i in zip(graph.edge_names, graph.ungrouped(scores).tolist(), index):
            edges[name] = {"score": score, "in_graph": kept[i]}
        writers = {name.split("->")[0] for name, edge in edges.items() if edge["in_graph"]}
        for unit in layout.units():
            nodes[_unit_name(unit)] = {"in_graph": keep is None or _unit_name(unit) in writers}
    nodes["logits"] = {"in_graph": True}
    what = f"scores: {ranking.label}" if keep is None else f"circuit of {ranking.label}, {int(sum(kept))} kept"
    return {"cfg": _cfg(model, ranking.level, what, convention), "nodes": nodes, "edges": edges}


def write_mib_file(path: Path, model: PreparedModel, ranking: Ranking | None = None, keep: Tensor | None = None,
                   level: Level | None = None) -> None:
    """Write a ranking, or a circuit cut from it, as a file in MIB's format, atomically (the module's conventions).

    Args:
        path: the file written.
        model: the model the ranking ranks (an edge ranking on MIB's graph: its ungrouped copy).
        ranking: its scores are the file's (an importance file).
        keep: a 0/1 mask of the items kept: a circuit file, with the ranking's scores on every item.
        level: only for a ``keep`` mask given without its ranking (deprecated: its file then scores the kept items 2
            and the others 1)."""
    if ranking is None and keep is not None and level is not None:
        warnings.warn("write_mib_file(keep=..., level=...) without the ranking writes 0/1 scores; give the ranking the "
                      f"circuit was cut from, write_mib_file(path, model, ranking, keep) (it {STILL_WORKS})",
                      DeprecationWarning, stacklevel=2)
        ranking = Ranking("circuit", level, keep.float())
    if not isinstance(ranking, Ranking):
        raise HeurlensError("write_mib_file: give the ranking whose scores the file carries (a Ranking), and keep= "
                            "for a circuit file")
    if keep is not None and keep.shape != ranking.scores.shape:
        raise HeurlensError(f"the circuit keeps {keep.numel()} entries and the ranking ranks {ranking.n_items}: give "
                            "a keep mask of the ranking's items")
    atomic_write_json(Path(path), mib_document(model, ranking, keep))


def read_mib_file(path: Path, model: PreparedModel, graph: GraphName = "heurlens") -> MibFile:
    """An importance or circuit file in MIB's format, refused by name when it is not MIB's format or not this
    model's graph. heurlens' own files come back as written (a mask run's log_alpha exactly, one order; attribution
    scores signed); another tool's scores are read as signed (MIB's scripts: CPR by score, CMD by |score|).

    Args:
        path: the file.
        model: the model it scores (its units, or its edges).
        graph: where an edge file's edges go: "heurlens" (the model's own, key-value edges combined) or "mib" (each of
            the file's edges, on the model's ungrouped copy, ``attribution_runs.scored_model``).

    Returns:
        A ``MibFile``: its level and a ranking (an importance file) or a keep mask (a circuit file)."""
    if graph not in get_args(GraphName):
        raise HeurlensError(f"graph={graph!r}: read the file onto 'mib' (its own edges, MIB's graph) or 'heurlens' "
                            "(the model's grouped graph)")
    path = Path(path)
    cfg, nodes, edges = _document(path)
    shape = (cfg.get("n_layers"), cfg.get("n_heads"))
    if shape != (model.n_layers, model.n_heads) or cfg.get("parallel_attn_mlp"):
        raise HeurlensError(f"{path} is a graph of {shape[0]} layers of {shape[1]} heads, and the model "
                            f"{model.model_id!r} has {model.n_layers} of {model.n_heads}: score it on its own model")
    own: dict[str, Any] = cfg["heurlens"] if isinstance(cfg.get("heurlens"), dict) else {}
    names = [_unit_name(unit) for unit in UnitLayout(model.n_layers, model.n_heads).units()]
    unknown = next((name for name in nodes if name not in {"input", "logits", *names}), None)
    if unknown is not None:
        raise HeurlensError(f"{path} has a node {unknown!r} that this model's graph has not (its nodes: input, "
                            f"{names[0]} ... {names[-1]}, logits): is it a file of another model?")
    circuit = str(own.get("content", "")).startswith("circuit")  # heurlens' circuit files carry scores too
    node_scores = [nodes.get(name, {}).get("score") for name in names]
    if not edges:  # node level: a score per head and MLP (an importance file), or a circuit
        if any(score is not None for score in node_scores) and not circuit:
            return MibFile(path, "node", _ranking(path, "node", _complete(node_scores, names, path), own), None)
        return MibFile(path, "node", None, torch.tensor([float(_kept(nodes.get(name, {}), name, path))
                                                         for name in names]))
    grouped = edge_layout(model)
    ungrouped = EdgeLayout(grouped.n_layers, grouped.n_heads, grouped.n_heads)  # the copy's: MIB's edges one to one
    mib = _mib_graph(ungrouped if graph == "mib" else grouped)
    missing = next((name for name in mib.edge_names if name not in edges), None)
    extra = next((name for name in edges if name not in mib.name_set), None)
    if missing is not None or extra is not None:
        raise HeurlensError(f"{path} " + (f"has no edge {missing!r}" if missing is not None else
                                          f"has an edge {extra!r} that is not") + " of this model's graph (MIB's, "
                            f"{mib.n_edges} edges, grouped-query attention ungrouped): is it a file of another model?")
    kept = [_kept(edges[name], name, path) for name in mib.edge_names]
    with_score = ["score" in edges[name] for name in mib.edge_names]
    if any(with_score) and not all(with_score):
        first = mib.edge_names[with_score.index(False)]
        raise HeurlensError(f"{path}: edge {first!r} has no score, while others have: give every edge a score (an "
                            "importance file) or none (a circuit file)")
    rule: GroupRule = "mean" if own.get("key_value_edges") == COPIED else "sum"
    if all(with_score) and not circuit:  # MIB cuts such a file at every size, whatever its in_graph says
        scores = mib.grouped(torch.tensor(_complete([edges[name]["score"] for name in mib.edge_names],
                                                    mib.edge_names, path), dtype=torch.float64), rule)
        return MibFile(path, "edge", replace(_ranking(path, "edge", scores.tolist(), own), graph=graph), None, graph)
    return MibFile(path, "edge", None, mib.grouped(torch.tensor([float(k) for k in kept]), "any").float(), graph)


def _document(path: Path) -> tuple[dict[str, Any], dict[str, dict[str, Any]], dict[str, dict[str, Any]]]:
    """The file's cfg, nodes and edges, refused by name unless each is a JSON object of JSON objects."""
    try:
        document = json.loads(path.read_text())
        cfg, nodes, edges = document["cfg"], document["nodes"], document["edges"]
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise HeurlensError(f"{path} is not a circuit file in MIB's format (a JSON object with cfg, nodes and edges, "
                            f"as EAP-IG's Graph.to_json writes): {type(error).__name__}: {error}") from error
    for what, value in (("cfg", cfg), ("nodes", nodes), ("edges", edges)):
        if not isinstance(value, dict):
            raise HeurlensError(f"{path}: {what} is a {type(value).__name__}, and MIB's format (EAP-IG's "
                                f"Graph.to_json) has an object there, e.g. \"{what}\": {{...}}")
    for what, entries in (("node", nodes), ("edge", edges)):
        wrong = next((name for name, entry in entries.items() if not isinstance(entry, dict)), None)
        if wrong is not None:
            raise HeurlensError(f"{path}: {what} {wrong!r} is {entries[wrong]!r}; MIB's format gives each {what} an "
                                "object such as {\"in_graph\": true, \"score\": 0.5}")
    return cfg, nodes, edges


def _kept(entry: dict[str, Any], name: str, path: Path) -> bool:
    """An item's ``in_graph`` (true when absent), refused unless a JSON boolean (the string "false" is not one)."""
    value = entry.get("in_graph", True)
    if not isinstance(value, bool):
        raise HeurlensError(f"{path}: {name} has in_graph {value!r}; MIB's format takes true or false (JSON "
                            "booleans, not strings or numbers)")
    return value


def _ranking(path: Path, level: Level, scores: list[float], own: dict[str, Any]) -> Ranking:
    """The ranking of a file's scores: heurlens' own as it wrote them (a mask run's log_alpha, its offset removed;
    attribution scores signed), another tool's signed."""
    values = torch.tensor(scores, dtype=torch.float64)
    if own.get("scores") == "log_alpha":
        return Ranking(path.stem, level, (values - float(own["score_offset"])).float())
    if "scores" not in own and own:  # written by heurlens before 2026-12-02: one order, as it was read then
        return Ranking(path.stem, level, values.float())
    return Ranking(path.stem, level, values.float(), signed=True)


def _complete(scores: list[Any], names: list[str], path: Path) -> list[float]:
    """The scores as floats, refused naming the first item without a finite one (MIB's unscored: NaN)."""
    for name, score in zip(names, scores):
        if isinstance(score, bool) or not isinstance(score, int | float) or not math.isfinite(score):
            raise HeurlensError(f"{path}: {name} has no finite score ({score!r}); every head and MLP (or edge) needs "
                                "one to be ranked")
    return [float(score) for score in scores]
