"""Subtask Induction (Zhang et al. 2023): weight-level subnetworks found by continuous sparsification and
transferred, frozen, into freshly initialised models. Names are imported on first use (``heurlens.runtime.lazy``)."""

from typing import TYPE_CHECKING

from heurlens.runtime.lazy import lazy_exports

_EXPORTS = {
    "ArithmeticTask": ".arithmetic", "ambiguous_set": ".arithmetic", "evaluation_set": ".arithmetic",
    "training_set": ".arithmetic",
    "DiscoverySettings": ".masks", "beta_at": ".masks", "discover_subnetwork": ".masks", "masked_forward": ".masks",
    "select_weights": ".masks",
    "TRANSFER_CONDITIONS": ".settings", "copy_subnetwork": ".transfer", "transfer_condition": ".transfer",
    "WeightSubnetwork": ".weight_subnetwork", "FrozenWeights": "heurlens.training_helpers",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

if TYPE_CHECKING:  # the lazy names' real types, for type checkers and editors (never run)
    from heurlens.subtask.arithmetic import ArithmeticTask as ArithmeticTask
    from heurlens.subtask.arithmetic import ambiguous_set as ambiguous_set
    from heurlens.subtask.arithmetic import evaluation_set as evaluation_set
    from heurlens.subtask.arithmetic import training_set as training_set
    from heurlens.subtask.masks import DiscoverySettings as DiscoverySettings
    from heurlens.subtask.masks import beta_at as beta_at
    from heurlens.subtask.masks import discover_subnetwork as discover_subnetwork
    from heurlens.subtask.masks import masked_forward as masked_forward
    from heurlens.subtask.masks import select_weights as select_weights
    from heurlens.subtask.settings import TRANSFER_CONDITIONS as TRANSFER_CONDITIONS
    from heurlens.subtask.transfer import copy_subnetwork as copy_subnetwork
    from heurlens.subtask.transfer import transfer_condition as transfer_condition
    from heurlens.subtask.weight_subnetwork import WeightSubnetwork as WeightSubnetwork
    from heurlens.training_helpers import FrozenWeights as FrozenWeights
