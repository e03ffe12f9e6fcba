"""Which edges a drawing of a circuit shows, and where their nodes go: the part both drawings share (the file for a
paper, ``circuits.circuit_files``; the interactive figure, ``circuits.drawing``).

A circuit is a ranking's whole graph, its top ``size`` share (MIB's cut), or a keep mask (a prune record's edges, a
MIB circuit file's ``in_graph``). A drawing shows its strongest ``top`` edges, by |score| for a ranking with a sign
(attribution), else by score (a mask run's log_alpha), and counts the rest, so a 3,533-edge circuit is drawn as its
50 strongest "and 3,483 more not drawn" rather than as a smudge.

Places: only the nodes the drawn edges touch, a row each for the layers they use, bottom to top: the embeddings
alone at the bottom, per layer its key-value heads (a grouped-query model's, between the query heads sharing them),
its query heads, and in a column of its own on the right its MLP; the logits alone at the top.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from heurlens.errors import HeurlensError
from heurlens.interventions.graph import EdgeLayout
from heurlens.interventions.nodes import EMBED, LOGITS, Edge
from heurlens.interventions.rankings import Ranking, ranking_of
from heurlens.pruning.circuit import EdgeCircuit


@dataclass(frozen=True)
class DrawnEdge:
    """An edge drawn, with its score in the ranking."""

    edge: Edge
    score: float


@dataclass(frozen=True)
class DrawnCircuit:
    """The edges a drawing shows (strongest first) of a circuit of ``in_circuit`` edges out of the graph's
    ``n_edges``, named ``label``."""

    edges: list[DrawnEdge]
    in_circuit: int
    n_edges: int
    label: str

    @property
    def not_drawn(self) -> int:
        """The circuit's edges left out of the drawing."""
        return self.in_circuit - len(self.edges)

    @property
    def title(self) -> str:
        """E.g. 'EAP-IG: the 50 strongest of its 6,160 edges (of 123,211), 6,110 more not drawn'."""
        rest = f", {self.not_drawn:,} more not drawn" if self.not_drawn else ""
        if self.in_circuit == self.n_edges:
            shown = f"all {self.n_edges:,}" if not self.not_drawn else f"the {len(self.edges)} strongest of"
            return f"{self.label}: {shown} {self.n_edges:,} edges{rest}"
        shown = "its" if not self.not_drawn else f"the {len(self.edges)} strongest of its"
        return f"{self.label}: {shown} {self.in_circuit:,} edges (of {self.n_edges:,}){rest}"


def reader_node(edge: Edge) -> tuple[str, str]:
    """(the node an edge enters, which input): ``L1.H0.v`` -> (``L1.H0``, ``v``), ``L1.MLP`` -> (``L1.MLP``, ``MLP``)."""
    reader = edge.reader
    if reader.kind == "logits":
        return LOGITS, LOGITS
    if reader.kind == "mlp_in":
        return str(reader), "MLP"
    node, _, kind = str(reader).rpartition(".")
    return node, kind


def _check_edge_ranking(ranking: Ranking, layout: EdgeLayout) -> None:
    if ranking.level != "edge" or ranking.n_items != layout.n_edges:
        raise HeurlensError(f"{ranking.label} ranks {ranking.n_items} {ranking.level}s and this model has "
                            f"{layout.n_edges} edges: draw an edge ranking of this model (heurlens attribute, or "
                            "prune --level edge)")


def strongest_edges(ranking: Ranking, layout: EdgeLayout, count: int) -> list[DrawnEdge]:
    """The edges a drawing shows: the first by |score| for a ranking with a sign, else by score (ties: the layout's
    order); refused by name for a ranking of units or of another model's edges.

    Args:
        ranking: an edge ranking (``load_attribution(dir).ranking``, ``ranking_of(edge circuit)``).
        layout: the edges of the model it ranks (``edge_layout``; MIB's graph: of the ungrouped copy).
        count: how many.

    Returns:
        The edges with their scores, strongest first."""
    return circuit_to_draw(ranking, layout, count).edges


def circuit_to_draw(ranking: Ranking, layout: EdgeLayout, top: int, size: float | None = None,
                    keep: Tensor | None = None, label: str | None = None) -> DrawnCircuit:
    """The strongest ``top`` edges of a circuit and how many more it holds (the module's rules).

    Args:
        ranking: an edge ranking of the model (what orders the edges; uniform scores draw in the layout's order).
        layout: the model's edges (``edge_layout``).
        top: how many edges to draw at most.
        size: the circuit as the ranking's top share of edges (0 < size <= 1; MIB's cut, ``ceil(size x edges)``);
            ``None``: ``keep``'s edges, or the whole graph.
        keep: the circuit as a 0/1 mask over the edges (a prune record's, a MIB circuit file's); not with ``size``.
        label: what the title calls it (default the ranking's label).

    Returns:
        A ``DrawnCircuit``: the edges drawn, strongest first, and the circuit's and graph's sizes."""
    _check_edge_ranking(ranking, layout)
    if top < 1:
        raise HeurlensError(f"--top {top}: draw one edge or more")
    if size is not None and keep is not None:
        raise HeurlensError("give the circuit as a size or as a keep mask, not both")
    if size is not None and not 0 < size <= 1:
        raise HeurlensError(f"--size {size}: give the circuit's share of edges, above 0 and at most 1 (0.05: 5%)")
    if keep is not None and keep.shape != (layout.n_edges,):
        raise HeurlensError(f"the keep mask has {keep.numel()} entries and the graph {layout.n_edges} edges")
    order = ranking.order("|score|" if ranking.signed else None)
    if size is not None:
        order = order[:math.ceil(size * layout.n_edges)]
    elif keep is not None:
        order = order[keep.bool()[order]]
    edges = layout.edges()
    drawn = [DrawnEdge(edges[index], float(ranking.scores[index])) for index in order[:top].tolist()]
    return DrawnCircuit(drawn, len(order), layout.n_edges, label or ranking.label)


def record_to_draw(circuit: EdgeCircuit, top: int, size: float | None = None, label: str | None = None
                   ) -> DrawnCircuit:
    """An edge prune record's circuit drawn (``circuit_to_draw``): its kept edges, or with ``size`` its log_alpha
    ranking cut there; strongest by log_alpha, a record saved without it in the layout's order."""
    ranking = (ranking_of(circuit) if circuit.log_alpha_edges is not None
               else uniform_ranking(circuit.layout, label or str(circuit.label)))
    return circuit_to_draw(ranking, circuit.layout, top, size=size,
                           keep=None if size is not None else circuit.keep_mask(), label=label)


def uniform_ranking(layout: EdgeLayout, label: str) -> Ranking:
    """A ranking that orders nothing (every score 1): a circuit file without scores is drawn in the layout's order."""
    return Ranking(label, "edge", torch.ones(layout.n_edges))


def node_places(drawn: list[DrawnEdge], n_heads: int, n_kv_heads: int) -> dict[str, tuple[float, float]]:
    """(x, y) of each node the drawn edges touch: only the layers they use get rows (the module's layout)."""
    names = {str(d.edge.writer) for d in drawn} | {reader_node(d.edge)[0] for d in drawn}
    per_kv = n_heads // n_kv_heads
    middle = (n_heads - 1) / 2
    places = {EMBED: (middle, 0.0)} if EMBED in names else {}
    row = 1.0
    layers = sorted({int(name[1:].split(".")[0]) for name in names if name not in (EMBED, LOGITS)})
    for layer in layers:
        for kind, x_of in (("KV", lambda g: g * per_kv + (per_kv - 1) / 2), ("H", float)):
            used = sorted(int(name.split(".")[1][len(kind):]) for name in names
                          if name.startswith(f"L{layer}.{kind}") and name.split(".")[1][len(kind):].isdigit())
            if used:
                places |= {f"L{layer}.{kind}{index}": (x_of(index), row) for index in used}
                row += 1
        if f"L{layer}.MLP" in names:
            places[f"L{layer}.MLP"] = (n_heads + 1.0, row)
            row += 1
    if LOGITS in names:
        places[LOGITS] = (middle, row)
    return places
