"""Subtask Induction (Zhang et al. 2023): weight-level subnetworks found by continuous sparsification and
transferred, frozen, into freshly initialised models. Names are imported on first use (``heurlens.lazy``)."""

from heurlens.lazy import lazy_exports

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
