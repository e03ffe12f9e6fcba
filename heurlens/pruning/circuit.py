"""An edge circuit found by edge-level pruning (Edge Pruning, Bhaskar et al. 2024): the edges it keeps, the nodes
they join, how it was found, how it is saved, and its scores (every other edge carrying its writer's output on the
example's corrupted input).

Saved as a subnetwork is (``NAME.json`` + ``NAME.safetensors``), the JSON with ``edges`` (``"L0.H1->L1.H0.v"``, ...)
beside ``kept`` (the heads and MLPs an edge kept leaves from or goes into) and the safetensors with the trained
log_alpha of every edge (``EdgeLayout``'s order).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import pandas as pd
import torch
from jaxtyping import Float
from torch import Tensor

from heurlens.errors import HeurlensError
from heurlens.evaluate import mean_kl
from heurlens.interventions.ablation import one_chunk_at_a_time
from heurlens.interventions.corruption import corruption_of
from heurlens.interventions.edge_masks import EdgeMaskHooks
from heurlens.interventions.graph import LOGITS, Edge, EdgeLayout, edge_layout, parse_edges
from heurlens.interventions.units import Unit, parse_units
from heurlens.metrics import metric_value
from heurlens.protocols import Metrics, PreparedModel, Task
from heurlens.pruning.subnetwork import Subnetwork, target_percent
from heurlens.runtime.cache import atomic_save_tensors, atomic_write_json
from heurlens.runtime.call_context import CallContext
from heurlens.runtime.devices import to_device
from heurlens.runtime.precision import autocast


@dataclass
class EdgeCircuit(Subnetwork):
    """A ``Subnetwork`` whose unit of pruning is the edge: ``edges`` are the edges kept, ``kept`` the heads and MLPs
    they touch (``nodes_of``), ``log_alpha_edges`` the trained masks. Its scores come from ``circuit_scores``, never
    from ablating units: a unit in ``kept`` may still have most of its edges pruned."""

    edges: list[Edge] = field(default_factory=list)
    n_kv_heads: int = 0
    log_alpha_edges: Float[Tensor, " edge"] | None = None

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
    names = {edge.writer for edge in edges} | {edge.reader.rsplit(".", 1)[0] if edge.reader.count(".") == 2
                                                else edge.reader for edge in edges}
    units = []
    for name in names - {"embed", LOGITS}:
        layer, part = name.split(".")
        if part.upper() == "MLP" or part.startswith("H"):
            units.append(Unit(int(layer[1:])) if part.upper() == "MLP" else Unit(int(layer[1:]), int(part[1:])))
    return sorted(set(units))


def circuit_scores(model: PreparedModel, masks: Sequence[Float[Tensor, " edge"]], task: Task, context: CallContext
                   ) -> list[Float[Tensor, "row output"]]:
    """The scores on ``task`` (CPU, float32) of the model with each edge mask (flat, ``edge_layout(model)``'s order),
    every pruned edge carrying its writer's output on the example's corrupted input (``task.corrupted``)."""
    corruption = corruption_of(task)
    hooks = EdgeMaskHooks(edge_layout(model), torch.ones(0))
    scores: list[list[Tensor]] = [[] for _ in masks]
    with torch.no_grad(), hooks.attached(model), autocast(context.dtype, context.device):
        for batch, corrupted in zip(task.batches, corruption.batches):
            hooks.use_corrupted(model, to_device(corrupted, context.device))
            for mask, rows in zip(masks, scores):
                hooks.set_masks(mask.to(context.device))
                rows.append(model(**to_device(batch, context.device)).float().cpu())
    return [torch.cat(rows) for rows in scores]


def circuit_table(model: PreparedModel, circuits: Sequence[EdgeCircuit], tasks: Sequence[Task],
                  full_logits: dict[str, Tensor], metrics: Metrics, context: CallContext) -> pd.DataFrame:
    """Each metric and the KL to the full model of each circuit on each task, as ``ablation.ablated_tables`` gives
    them for unit groups (columns eval_set, examples, ``ablated_{metric}``, kl; circuit by circuit)."""
    layout = edge_layout(model)
    masks = [layout.mask(c.edges) for c in circuits]
    rows: list[list[dict]] = [[] for _ in circuits]
    for task in tasks:
        full = full_logits[task.name]
        score = partial(circuit_scores, model, task=task, context=context)
        for index, scores in one_chunk_at_a_time(masks, full.numel() * 4, score):
            rows[index].append({"eval_set": task.name, "examples": len(task),
                                **{f"ablated_{name}": metric_value(metric, scores, task, name)
                                   for name, metric in metrics.items()},
                                "kl": mean_kl(full, scores)})
    return pd.DataFrame([row for circuit_rows in rows for row in circuit_rows])
