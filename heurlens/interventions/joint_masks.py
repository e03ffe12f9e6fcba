"""Node masks beside edge masks (Edge Pruning, Bhaskar et al., NeurIPS 2024, Section 3: its joint edge and node
sparsity): besides one mask per edge, one per head and MLP (``UnitLayout``'s units), and an edge carries its writer's
output only while its own mask and both its nodes' are on,

    m_wr (in effect) = z_wr * z_w * z_r,

z_w the node mask of the unit that writes (1 for the embeddings), z_r that of the unit that reads (1 for the logits;
a grouped key-value input, which several query heads share, the largest of theirs: it stays while one of them does).
A pruned node so takes every edge out of it and into it along. What the edge hooks (``EdgeMaskHooks``) apply is
the product, computed once per seed's draw (``NodeMasksBeside``), not once per example.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from jaxtyping import Float, Int
from torch import Tensor

from heurlens.interventions.graph import EdgeLayout
from heurlens.interventions.nodes import Node


@dataclass(frozen=True)
class EdgeEnds:
    """Per edge, the units at its two ends as indices into the node masks; ``n_units`` (one past the last) stands for
    an end no node mask covers (the embeddings, the logits), whose factor is 1."""

    writer: Int[Tensor, " edge"]
    readers: Int[Tensor, "edge sharing"]  # a grouped key-value input's query heads (each reader: as many columns)

    def to(self, device: torch.device | str) -> EdgeEnds:
        return EdgeEnds(self.writer.to(device), self.readers.to(device))


def edge_ends(layout: EdgeLayout) -> EdgeEnds:
    """Every edge's writer unit and reader units, in the layout's flat order."""
    n_units = layout.n_layers * (layout.n_heads + 1)
    sharing = layout.n_heads // layout.n_kv_heads
    writers = torch.tensor([n_units] + list(range(n_units)))  # writers: the embeddings, then the units in order
    writer, readers = [], []
    for group in layout.groups:
        for reader in group.readers:
            writer.append(writers[:group.n_writers])
            units = torch.tensor(_reader_units(reader, layout, sharing, n_units))
            readers.append(units.expand(group.n_writers, sharing))
    return EdgeEnds(torch.cat(writer), torch.cat(readers))


def _reader_units(reader: Node, layout: EdgeLayout, sharing: int, n_units: int) -> list[int]:
    """The units whose node masks gate a reader (``sharing`` entries, repeated when one unit does)."""
    if reader.kind == "logits":
        return [n_units] * sharing
    first = int(reader.layer or 0) * (layout.n_heads + 1)
    if reader.kind == "mlp_in":
        return [first + layout.n_heads] * sharing
    head = int(reader.head or 0)
    if reader.grouped:  # a key-value head: the query heads that share it
        return [first + head * sharing + i for i in range(sharing)]
    return [first + head] * sharing


def joint_edge_masks(edges: Float[Tensor, "*example edge"], nodes: Float[Tensor, "*example unit"],
                     ends: EdgeEnds) -> Float[Tensor, "*example edge"]:
    """z_wr z_w z_r: each edge's mask times its writer's node mask and its reader's (the largest of a shared one's)."""
    padded = torch.cat([nodes, nodes.new_ones(*nodes.shape[:-1], 1)], dim=-1)
    return edges * padded[..., ends.writer] * padded[..., ends.readers].amax(dim=-1)


def joint_log_alpha(edges: Float[Tensor, " edge"], nodes: Float[Tensor, " unit"], ends: EdgeEnds
                    ) -> Float[Tensor, " edge"]:
    """An edge's place in the joint masks' ranking: the smallest log_alpha of its own and its two nodes' (a node's
    largest among a shared reader's), so a circuit cut from it never keeps an edge of a node ranked below it."""
    padded = torch.cat([nodes, nodes.new_full((1,), float("inf"))])
    return torch.minimum(edges, torch.minimum(padded[ends.writer], padded[ends.readers].amax(dim=-1)))


@dataclass(frozen=True)
class NodeMasksBeside:
    """Node masks beside edge masks, as mask training takes them: how many (one per unit) and how a seed's draw of
    both becomes the edge masks the hooks apply (``joint_edge_masks``, once per seed, before the seed's draw is
    repeated for each of its examples)."""

    n_units: int
    ends: EdgeEnds

    def edge_masks(self, edges: Float[Tensor, " edge"], nodes: Float[Tensor, " unit"]) -> Float[Tensor, " edge"]:
        return joint_edge_masks(edges, nodes, self.ends)

    def unit_scores(self, edge_scores: Float[Tensor, " edge"]) -> Float[Tensor, " unit"]:
        """Each unit's score from an edge ranking's: the sum of its outgoing edges' (for attribution, the unit's own
        score; the embeddings' dropped), to warm-start the node masks from the same ranking as the edges."""
        scores = edge_scores.new_zeros(self.n_units + 1)
        return scores.index_add_(0, self.ends.writer.to(scores.device), edge_scores)[:self.n_units]
