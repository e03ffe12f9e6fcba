"""Structured pruning of heads and MLPs with hard-concrete masks (Heuristic Core paper, Section 2, Appendix B)."""

from heurlens.pruning.hard_concrete import HardConcrete
from heurlens.pruning.runs import accuracy_table, evaluate_subnetworks, prune
from heurlens.pruning.subnetwork import Subnetwork, discretize
from heurlens.pruning.train import PruneSettings, train_unit_mask

__all__ = ["HardConcrete", "PruneSettings", "Subnetwork", "accuracy_table", "discretize", "evaluate_subnetworks",
           "prune", "train_unit_mask"]
