"""Circuit files in MIB's format, out and in: the JSON that EAP-IG's ``Graph.to_json`` writes and MIB's circuit track
reads (``Graph.from_json``; hannamw/MIB-circuit-track, ``circuit_loading.py``):

    {"cfg": {"n_layers": L, "n_heads": H, "parallel_attn_mlp": false, "d_model": D},
     "nodes": {"input": {"in_graph": true}, "a0.h0": {"in_graph": true, "score": 0.3}, ..., "logits": {...}},
     "edges": {"input->a0.h0<q>": {"score": -0.0003, "in_graph": false}, ...}}

An *importance* file carries a score per edge (edge level) or per node (node level: heads and MLPs; ``input`` has
none, so MIB always keeps it) and is cut at every size by MIB; a *circuit* file carries only ``in_graph``. Edges are
on MIB's ungrouped graph (``interventions.mib_graph``); heurlens writes a grouped-query model's key-value edges once
per query head (copied) and says so in ``cfg["heurlens"]``. It reads edges back onto one of two graphs: ``"mib"``,
the file's own edges, on the model's ungrouped copy (``models.ungrouped``: every query head's key and value inputs
its own, as MIB scores the file), or ``"heurlens"``, the model's grouped graph, by the rule ``MibGraph.grouped``
names: "mean" for its own copies, "sum" for another tool's scores, "any" for circuits. Without grouped-query
attention the two are the same edges.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from heurlens.errors import HeurlensError
from heurlens.interventions.circuits import Level
from heurlens.interventions.graph import EdgeLayout, edge_layout
from heurlens.interventions.mib_graph import GraphName, MibGraph, mib_node_name
from heurlens.interventions.nodes import Node
from heurlens.interventions.rankings import Ranking
from heurlens.interventions.units import Unit, UnitLayout
from heurlens.protocols import PreparedModel
from heurlens.runtime.cache import atomic_write_json

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


def _cfg(model: PreparedModel, level: Level, what: str) -> dict[str, Any]:
    cfg = getattr(getattr(model, "bridge", None), "cfg", None)
    d_model = int(getattr(cfg, "d_model", 0) or 0)
    n_kv = int(getattr(cfg, "n_key_value_heads", None) or model.n_heads)
    own = {"level": level, "content": what, "n_key_value_heads": n_kv}
    if level == "edge" and n_kv != model.n_heads:
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


def mib_document(model: PreparedModel, level: Level, scores: Tensor | None, keep: Tensor | None,
                 what: str) -> dict[str, Any]:
    """The JSON document of ``scores`` (an importance file) or ``keep`` (a 0/1 circuit) on heurlens' units or edges."""
    layout = UnitLayout(model.n_layers, model.n_heads)
    values = keep if keep is not None else scores
    assert values is not None
    nodes: dict[str, dict[str, Any]] = {"input": {"in_graph": True}}
    edges: dict[str, dict[str, Any]] = {}
    if level == "node":
        for unit, value in zip(layout.units(), values.tolist()):
            nodes[_unit_name(unit)] = {"in_graph": bool(value)} if keep is not None else {"in_graph": True,
                                                                                          "score": float(value)}
    else:
        graph = _mib_graph(edge_layout(model))
        mib_values = graph.ungrouped(values.detach().double().cpu())
        for name, value in zip(graph.edge_names, mib_values.tolist()):
            edges[name] = {"in_graph": bool(value)} if keep is not None else {"score": float(value), "in_graph": True}
        writers = {name.split("->")[0] for name, edge in edges.items() if edge["in_graph"]}
        for unit in layout.units():
            nodes[_unit_name(unit)] = {"in_graph": _unit_name(unit) in writers}
    nodes["logits"] = {"in_graph": True}
    return {"cfg": _cfg(model, level, what), "nodes": nodes, "edges": edges}


def write_mib_file(path: Path, model: PreparedModel, ranking: Ranking | None = None, keep: Tensor | None = None,
                   level: Level | None = None) -> None:
    """Write a ranking's scores (an importance file) or a 0/1 ``keep`` mask of ``level`` (a circuit file) to
    ``path``, atomically."""
    if (ranking is None) == (keep is None):
        raise HeurlensError("give a ranking (an importance file) or a keep mask (a circuit file), one of the two")
    level = ranking.level if ranking is not None else level
    if level is None:
        raise HeurlensError("a circuit file needs its level: 'node' or 'edge'")
    what = f"scores: {ranking.label}" if ranking is not None else "circuit"
    atomic_write_json(Path(path), mib_document(model, level, None if ranking is None else ranking.scores, keep, what))


def read_mib_file(path: Path, model: PreparedModel, graph: GraphName = "heurlens") -> MibFile:
    """An importance or circuit file in MIB's format as a ranking or keep mask on ``model``'s units, or on the edges
    of ``graph``: "heurlens" (the model's own, key-value edges combined) or "mib" (each of the file's edges, on the
    model's ungrouped copy, ``attribution_runs.scored_model``); refused by name when it is not MIB's format or not this
    model's graph."""
    path = Path(path)
    try:
        document = json.loads(path.read_text())
        cfg, nodes, edges = document["cfg"], document["nodes"], document["edges"]
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise HeurlensError(f"{path} is not a circuit file in MIB's format (a JSON object with cfg, nodes and edges, "
                            f"as EAP-IG's Graph.to_json writes): {error}") from error
    shape = (cfg.get("n_layers"), cfg.get("n_heads"))
    if shape != (model.n_layers, model.n_heads) or cfg.get("parallel_attn_mlp"):
        raise HeurlensError(f"{path} is a graph of {shape[0]} layers of {shape[1]} heads, and the model "
                            f"{model.model_id!r} has {model.n_layers} of {model.n_heads}: score it on its own model")
    names = [_unit_name(unit) for unit in UnitLayout(model.n_layers, model.n_heads).units()]
    node_scores = [nodes.get(name, {}).get("score") for name in names]
    if any(score is not None for score in node_scores):  # node level: one score per head and MLP
        return MibFile(path, "node", Ranking(path.stem, "node", torch.tensor(_complete(node_scores, names, path))), None)
    if not edges:  # a node circuit
        return MibFile(path, "node", None, torch.tensor([float(bool(nodes.get(name, {}).get("in_graph"))) for name
                                                         in names]))
    grouped = edge_layout(model)
    ungrouped = EdgeLayout(grouped.n_layers, grouped.n_heads, grouped.n_heads)  # the copy's: MIB's edges one to one
    mib = _mib_graph(ungrouped if graph == "mib" else grouped)
    missing = next((name for name in mib.edge_names if name not in edges), None)
    if missing is not None:
        raise HeurlensError(f"{path} has no edge {missing!r} of this model's graph (MIB's, grouped-query attention "
                            "ungrouped): is it a file of another model?")
    if all("score" in edges[name] for name in mib.edge_names):
        copied = cfg.get("heurlens", {}).get("key_value_edges") == COPIED
        scores = torch.tensor(_complete([edges[name]["score"] for name in mib.edge_names], mib.edge_names, path))
        return MibFile(path, "edge", Ranking(path.stem, "edge", mib.grouped(scores, "mean" if copied else "sum")
                                             .float()), None, graph)
    kept = torch.tensor([float(bool(edges[name]["in_graph"])) for name in mib.edge_names])
    return MibFile(path, "edge", None, mib.grouped(kept, "any").float(), graph)


def _complete(scores: list[Any], names: list[str], path: Path) -> list[float]:
    """The scores as floats, refused naming the first item without a finite one (MIB's unscored: NaN)."""
    for name, score in zip(names, scores):
        if not isinstance(score, int | float) or math.isnan(score):
            raise HeurlensError(f"{path}: {name} has no score ({score!r}); every head and MLP (or edge) needs one to "
                                "be ranked")
    return [float(score) for score in scores]

