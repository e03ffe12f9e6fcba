"""An edge circuit found by edge-level pruning (Edge Pruning, Bhaskar et al. 2024): the edges it keeps, the nodes
they join, how it was found, how it is saved, and its scores (every other edge carrying its writer's output on the
example's corrupted input).

Saved as a subnetwork is (``NAME.json`` + ``NAME.safetensors``), the JSON with ``edges`` (``"L0.H1->L1.H0.v"``, ...)
beside ``kept`` (the heads and MLPs an edge kept leaves from or goes into) and the safetensors with the trained
log_alpha of every edge (``EdgeLayout``'s order).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from jaxtyping import Float
from torch import Tensor

from heurlens.errors import HeurlensError
from heurlens.interventions.graph import EdgeLayout, parse_edges
from heurlens.interventions.nodes import Edge
from heurlens.interventions.scoring import scores_with_masks
from heurlens.interventions.units import Unit, parse_units
from heurlens.protocols import PreparedModel, Task
from heurlens.pruning.subnetwork import Subnetwork, target_percent
from heurlens.runtime.cache import atomic_save_tensors, atomic_write_json
from heurlens.runtime.call_context import CallContext
from heurlens.runtime.deprecations import STILL_WORKS


@dataclass
class EdgeCircuit(Subnetwork):
    """A ``Subnetwork`` whose unit of pruning is the edge: ``edges`` are the edges kept, ``kept`` the heads and MLPs
    they touch (``nodes_of``), ``log_alpha_edges`` the trained masks. Its scores come from its edge mask, never
    from ablating units: a unit in ``kept`` may still have most of its edges pruned."""

    edges: list[Edge] = field(default_factory=list)
    n_kv_heads: int = 0
    log_alpha_edges: Float[Tensor, " edge"] | None = None

    @property
    def level(self) -> Literal["node", "edge"]:
        """What it keeps: edges."""
        return "edge"

    def keep_mask(self) -> Float[Tensor, " mask"]:
        """The flat keep mask it sets on a model: 1 at its edges (``EdgeLayout``'s order)."""
        return self.layout.keep_mask(self.edges)

    def kept_edges(self, layout: EdgeLayout) -> list[Edge]:
        """Its edges (``layout``: the model's, the same as its own)."""
        return list(self.edges)

    @property
    def layout(self) -> EdgeLayout:
        """The edges of the model it was pruned from."""
        return EdgeLayout(self.n_layers, self.n_heads, self.n_kv_heads)

    @property
    def label(self) -> str:
        """How tables name it: its target share of edges pruned and its seed, e.g. '95% of edges seed 0'."""
        return f"{target_percent(self.target_sparsity)} of edges seed {self.seed}"

    def missed_target_message(self) -> str:
        """What went wrong and what to change: the masks' expected sparsity ended far from the target, so the top-k
        cut chose among edges the masks had not told apart."""
        reached = float(self.metrics.get("final_expected_sparsity", self.achieved_sparsity))
        return (f"circuit {self.label} keeps its target's number of edges, but its masks' expected sparsity ended at "
                f"{reached:.2f}, not {self.target_sparsity:.2f}: the cut chose among edges the masks had not told apart. "
                "Train longer (PruneSettings(total_steps=...)) or start the masks lower (PruneSettings(log_alpha_init=))")

    def discretized(self, method: str) -> Subnetwork:
        """Refused: an edge circuit has one cut, top-k."""
        raise HeurlensError("an edge circuit is cut by top-k only (the edges of highest log_alpha, as many as the "
                            "target leaves): it has no other discretisation")

    def to_json(self) -> dict:
        """What ``NAME.json`` holds: a subnetwork's record (``kept``: the nodes) with ``edges`` added."""
        record = super().to_json()
        record["edges"] = [str(edge) for edge in self.edges]
        return record

    def save(self, stem: Path) -> None:
        """Write ``stem.safetensors`` (every edge's log_alpha) then ``stem.json``, each atomically."""
        if self.log_alpha_edges is None:
            raise HeurlensError(f"circuit {stem} has no trained log_alpha to save (only circuits found by heurlens "
                                "prune --level edge carry them)")
        stem.parent.mkdir(parents=True, exist_ok=True)
        atomic_save_tensors(stem.with_suffix(".safetensors"), {"log_alpha_edges": self.log_alpha_edges.contiguous()})
        atomic_write_json(stem.with_suffix(".json"), self.to_json())

    @classmethod
    def from_record(cls, record: dict, tensors: dict[str, Tensor] | None) -> EdgeCircuit:
        """The circuit of a JSON record (``Subnetwork.load`` hands records with ``edges`` here)."""
        layout = EdgeLayout(record["n_layers"], record["n_heads"], record["n_kv_heads"])
        record = {**record, "edges": parse_edges(",".join(record["edges"]), layout),
                  "kept": parse_units(record["kept"], record["n_layers"], record["n_heads"]) if record["kept"] else []}
        return cls(**record, log_alpha_edges=None if tensors is None else tensors["log_alpha_edges"])


def nodes_of(edges: Sequence[Edge]) -> list[Unit]:
    """The heads and MLPs the edges leave from or go into (a key-value head's reader names no query head and adds
    none), in layer order."""
    return sorted({node.unit for edge in edges for node in (edge.writer, edge.reader) if node.unit is not None})


def circuit_scores(model: PreparedModel, masks: Sequence[Float[Tensor, " edge"]], task: Task, context: CallContext
                   ) -> list[Float[Tensor, "row output"]]:
    """The scores on ``task`` (CPU, float32) of the model with each edge mask (flat, ``edge_layout(model)``'s order),
    every pruned edge carrying its writer's output on the example's corrupted input (``task.corrupted``).
    Deprecated: ``heurlens.interventions.scoring.scores_with_masks(model, "edge", masks, task, "corrupt", None,
    context)``, the one scoring function of node and edge circuits."""
    warnings.warn("circuit_scores is now scores_with_masks(model, 'edge', masks, task, 'corrupt', None, context) "
                  f"(heurlens.interventions.scoring), which scores node and edge masks alike (circuit_scores "
                  f"{STILL_WORKS})", DeprecationWarning, stacklevel=2)
    return scores_with_masks(model, "edge", masks, task, "corrupt", None, context)
