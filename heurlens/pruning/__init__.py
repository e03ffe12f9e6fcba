"""Structured pruning of heads and MLPs with hard-concrete masks (Heuristic Core paper, Section 2, Appendix B).
Names are imported on first use (``heurlens.lazy``)."""

from heurlens.lazy import lazy_exports

_EXPORTS = {"HardConcrete": ".hard_concrete", "accuracy_table": ".runs", "evaluate_subnetworks": ".runs",
            "prune": ".runs", "Subnetwork": ".subnetwork", "discretize": ".subnetwork", "PruneSettings": ".settings",
            "train_unit_mask": ".train", "train_unit_masks": ".train"}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
