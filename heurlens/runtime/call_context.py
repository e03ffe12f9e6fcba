"""What one library call runs with, decided once at its top and handed down the path: the model's device, the
precision of its matrix products (``heurlens.runtime.precision``), whether heurlens' disk cache is read and written
(``heurlens.runtime.cache.disk_cache``), and, only then, the model's fingerprint that keys the cache entries. Below the
public functions nothing asks the model for its device or hashes its weights again."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from heurlens.protocols import PreparedModel
from heurlens.runtime.cache import disk_cache_enabled
from heurlens.runtime.devices import device_of
from heurlens.runtime.precision import Precision, check_precision


@dataclass(frozen=True)
class CallContext:
    """``device``: where the model's weights are (each batch is moved there); ``dtype``: the matrix products'
    precision; ``cache``: whether the full model's logits and residual streams are read from and written to the
    cache folder; ``fingerprint``: ``model.fingerprint()`` when the cache is used (None otherwise)."""

    device: torch.device
    dtype: Precision = "float32"
    cache: bool = True
    fingerprint: str | None = None


def call_context(model: PreparedModel, dtype: Precision = "float32", cache: bool | None = None) -> CallContext:
    """The context of a call on ``model``: ``cache`` None follows a surrounding ``disk_cache(...)`` block (else the
    cache is used); the fingerprint is hashed here, once, when the cache is used."""
    cache = disk_cache_enabled() if cache is None else cache
    return CallContext(device_of(model), check_precision(dtype), cache, model.fingerprint() if cache else None)
