"""MIB's graph beside heurlens' (``graph.EdgeLayout``): the edges as EAP-IG's ``Graph.from_model`` builds them for the
MIB circuit track (hannamw/EAP-IG, ``graph.py``), their names, and conversions between the two.

MIB's nodes are ``input`` (the embeddings), ``a{L}.h{H}`` (a head's output), ``m{L}`` (an MLP) and ``logits``; its
edges ``a0.h1->a1.h0<v>`` (into a head's query, key or value input), ``a0.h1->m1``, ``m1->logits``, each writer into
every later reader as heurlens' graph has them. The one difference is grouped-query attention: MIB (and TransformerLens'
``ungroup_grouped_query_attention``) ungroups it, giving every *query* head its own key and value inputs, where
heurlens masks a key-value head's inputs once for the G = n_heads / n_kv_heads query heads that share it. So MIB
has G edges (``->a1.h0<k>`` ... ``->a1.h{G-1}<k>``) where heurlens has one (``->L1.KV0.k``); SmolLM2 (9 query heads,
3 key-value heads, 30 layers) has 123,211 edges on MIB's graph and 70,651 on heurlens'. Without grouping the two
graphs are the same edges under two names.

Conversions: heurlens -> MIB copies a key-value edge's value to each of its query heads' edges (``ungrouped``: a kept
edge keeps all G, a score ranks all G together); MIB -> heurlens combines the G values by an explicit rule
(``grouped``): ``"sum"`` (an attribution score: the grouped edge's first-order effect is the sum of its query heads'),
``"mean"`` (undoes ``ungrouped`` exactly), or ``"any"`` (a binary circuit: the key-value edge is kept when one of its
query heads' edges is, a superset of MIB's circuit when they differ).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Literal

import torch
from torch import Tensor

from heurlens.errors import HeurlensError
from heurlens.interventions.graph import EdgeLayout
from heurlens.interventions.layouts import GraphName as GraphName  # where it was
from heurlens.interventions.layouts import ItemLayout
from heurlens.interventions.nodes import Edge, Node

GroupRule = Literal["sum", "mean", "any"]


def graph_of(layout: ItemLayout, graph: GraphName) -> GraphName:
    """The graph a run at ``layout``'s level is on: ``graph`` for edges; units are the same on both ("heurlens")."""
    return graph if isinstance(layout, EdgeLayout) else "heurlens"


def mib_node_name(node: Node) -> str:
    """A writer's name on MIB's graph: ``input``, ``a{L}.h{H}``, ``m{L}``."""
    if node.kind == "embed":
        return "input"
    if node.kind == "mlp_out":
        return f"m{node.layer}"
    if node.kind == "attn_head_out":
        return f"a{node.layer}.h{node.head}"
    raise HeurlensError(f"{node} is a reader, not one of MIB's source nodes")


@dataclass(frozen=True)
class MibGraph:
    """MIB's (ungrouped) edges of the model heurlens' ``layout`` describes, in EAP-IG's order (layer by layer: every
    earlier node into each head's q, k, v, then into the MLP; into the logits last), and where each one is on
    heurlens' graph (``heurlens_index``)."""

    layout: EdgeLayout

    @cached_property
    def _edges(self) -> tuple[list[str], list[int]]:
        layout = self.layout
        index = {str(edge): i for i, edge in enumerate(layout.edges())}
        per_kv = layout.n_heads // layout.n_kv_heads
        grouped = layout.n_kv_heads != layout.n_heads
        names: list[str] = []
        positions: list[int] = []
        stream: list[Node] = [Node("embed")]
        for layer in range(layout.n_layers):
            for writer in stream:
                for head in range(layout.n_heads):
                    for letter in "qkv":
                        kv = letter != "q" and grouped
                        reader = Node(f"{letter}_input", layer, head // per_kv if kv else head, grouped=kv)  # type: ignore[arg-type]
                        names.append(f"{mib_node_name(writer)}->a{layer}.h{head}<{letter}>")
                        positions.append(index[str(Edge(writer, reader))])
            stream += [Node("attn_head_out", layer, head) for head in range(layout.n_heads)]
            for writer in stream:
                names.append(f"{mib_node_name(writer)}->m{layer}")
                positions.append(index[str(Edge(writer, Node("mlp_in", layer)))])
            stream.append(Node("mlp_out", layer))
        for writer in stream:
            names.append(f"{mib_node_name(writer)}->logits")
            positions.append(index[str(Edge(writer, Node("logits")))])
        return names, positions

    @property
    def edge_names(self) -> list[str]:
        """Every edge's MIB name, in EAP-IG's order."""
        return self._edges[0]

    @cached_property
    def name_set(self) -> frozenset[str]:
        """Every edge's MIB name, for membership tests."""
        return frozenset(self.edge_names)

    @property
    def n_edges(self) -> int:
        """How many edges MIB's graph has (grouped-query attention ungrouped)."""
        return len(self.edge_names)

    @cached_property
    def heurlens_index(self) -> Tensor:
        """For each MIB edge, the index of the heurlens edge it is (or is one query head's share of)."""
        return torch.tensor(self._edges[1])

    def ungrouped(self, values: Tensor) -> Tensor:
        """Values on heurlens' edges (``EdgeLayout``'s order) as values on MIB's: each copied to the MIB edges it is."""
        self._check(values, self.layout.n_edges, "heurlens'")
        return values[self.heurlens_index]

    def grouped(self, values: Tensor, rule: GroupRule) -> Tensor:
        """Values on MIB's edges as values on heurlens': each heurlens edge's MIB edges (G of them into a key-value
        head, else one) combined by ``rule``: "sum", "mean" or "any" (nonzero when one of them is)."""
        self._check(values, self.n_edges, "MIB's")
        values = values.detach().double().cpu()
        if rule == "any":
            values = (values != 0).double()
        total = torch.zeros(self.layout.n_edges, dtype=torch.float64).index_add_(0, self.heurlens_index, values)
        if rule == "mean":
            return total / torch.bincount(self.heurlens_index, minlength=self.layout.n_edges)
        if rule == "any":
            return (total > 0).double()
        return total

    @staticmethod
    def _check(values: Tensor, expected: int, graph: str) -> None:
        if values.shape != (expected,):
            raise HeurlensError(f"expected one value per edge of {graph} graph ({expected}), got shape "
                                f"{tuple(values.shape)}")
