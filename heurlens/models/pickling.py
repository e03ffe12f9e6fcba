"""A TransformerBridge that survives pickling (Ray's object store, ``cloudpickle``, ``torch.save`` of a model).

TransformerLens 4.3's blocks wire their capture hooks on the first forward pass (``BlockBridge``: a forward pre-hook
on ``ln2`` that fires ``hook_mlp_in``, one on ``ln1`` that hands the attention its residual for the split query/key/
value inputs). Those hooks reach their block through ``weakref.proxy``, which pickles as a *copy* of the block: in the
unpickled model ``hook_mlp_in`` reads the copy's configuration and stays silent after ``set_use_hook_mlp_in(True)``,
and the attention's captured residual lands on a copy. An edge circuit trained on such a model is silently another
(issue 63). Removing the wired hooks after unpickling makes the block wire them again, on itself, at its next pass.
"""

from __future__ import annotations

from torch import nn


def rewire_capture_hooks(bridge: nn.Module) -> int:
    """Remove the capture hooks every TransformerLens block wired before ``bridge`` was pickled, so that each wires
    them afresh on its next forward pass; returns how many blocks had them. A no-op on a bridge that never ran (or
    a TransformerLens without capture hooks)."""
    rewired = 0
    for module in bridge.modules():
        teardown = getattr(module, "_teardown_capture_hooks", None)
        if getattr(module, "_capture_hooks_wired", False) and callable(teardown):
            teardown()
            rewired += 1
    return rewired
