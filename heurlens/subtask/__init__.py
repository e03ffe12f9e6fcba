"""Subtask Induction (Zhang et al. 2023): weight-level subnetworks found by continuous sparsification and
transferred, frozen, into freshly initialised models."""

from heurlens.subtask.arithmetic import ArithmeticTask, ambiguous_set, evaluation_set, training_set
from heurlens.subtask.masks import DiscoverySettings, beta_at, discover_subnetwork, masked_forward, select_weights
from heurlens.subtask.transfer import TRANSFER_CONDITIONS, copy_subnetwork, transfer_condition
from heurlens.subtask.weight_subnetwork import WeightSubnetwork
from heurlens.training_helpers import FrozenWeights

__all__ = ["ArithmeticTask", "DiscoverySettings", "FrozenWeights", "TRANSFER_CONDITIONS", "WeightSubnetwork",
           "ambiguous_set", "beta_at", "copy_subnetwork", "discover_subnetwork", "evaluation_set",
           "masked_forward", "select_weights", "training_set", "transfer_condition"]
