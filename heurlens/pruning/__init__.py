"""Structured pruning of heads and MLPs with hard-concrete masks (Heuristic Core paper, Section 2, Appendix B).
Names are imported on first use (``heurlens.runtime.lazy``)."""

from typing import TYPE_CHECKING

from heurlens.runtime.lazy import lazy_exports

_EXPORTS = {"HardConcrete": ".hard_concrete", "accuracy_table": ".evaluation", "evaluate_subnetworks": ".evaluation",
            "prune": ".runs", "Subnetwork": ".subnetwork", "discretize": ".subnetwork", "PruneSettings": ".settings",
            "train_unit_mask": ".train", "train_unit_masks": ".train", "train_edge_masks": ".train",
            "EdgeCircuit": ".circuit"}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

if TYPE_CHECKING:  # the lazy names' real types, for type checkers and editors (never run)
    from heurlens.pruning.circuit import EdgeCircuit as EdgeCircuit
    from heurlens.pruning.evaluation import accuracy_table as accuracy_table
    from heurlens.pruning.evaluation import evaluate_subnetworks as evaluate_subnetworks
    from heurlens.pruning.hard_concrete import HardConcrete as HardConcrete
    from heurlens.pruning.runs import prune as prune
    from heurlens.pruning.settings import PruneSettings as PruneSettings
    from heurlens.pruning.subnetwork import Subnetwork as Subnetwork
    from heurlens.pruning.subnetwork import discretize as discretize
    from heurlens.pruning.train import train_edge_masks as train_edge_masks
    from heurlens.pruning.train import train_unit_mask as train_unit_mask
    from heurlens.pruning.train import train_unit_masks as train_unit_masks
