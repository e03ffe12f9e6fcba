"""Where a model runs: one device setting, resolved as TransformerLens resolves its own.

``resolve_device(None)`` is ``$HEURLENS_DEVICE`` when set, else TransformerLens' ``get_device()`` ("cuda" when
CUDA is there, "mps" only with TransformerLens' own opt-in ``TRANSFORMERLENS_ALLOW_MPS=1``, else "cpu"). Any
torch device string ("cpu", "cuda", "cuda:1", "mps") is accepted; one that is unknown or absent on this
machine is refused in one line before anything loads. Data and caches live on the CPU; each batch moves to the
model's device as it is run, and results come back to the CPU to be stored, so a run folder written on a GPU
is read on a CPU and the other way round.
"""

from __future__ import annotations

import os

import torch
from torch import Tensor

from heurlens.errors import HeurlensError

DEVICE_ENV_VAR = "HEURLENS_DEVICE"


def resolve_device(device: str | torch.device | None = None) -> torch.device:
    """The device asked for (None: ``$HEURLENS_DEVICE``, else TransformerLens' choice), checked to exist here."""
    if device is None:
        from transformer_lens.utilities.devices import get_device

        device = os.environ.get(DEVICE_ENV_VAR) or get_device()
    try:
        resolved = torch.device(device)
    except (RuntimeError, TypeError) as error:
        raise HeurlensError(f"unknown device {str(device)!r}: give a torch device such as cpu, cuda, cuda:1 or mps "
                            f"(device=, or ${DEVICE_ENV_VAR})") from error
    if resolved.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0:
            raise HeurlensError(f"device {str(device)!r}: this machine has no CUDA GPU that torch can use; "
                                "use device=cpu")
        if resolved.index is not None and resolved.index >= count:
            raise HeurlensError(f"device {str(device)!r}: this machine has {count} CUDA GPU(s), cuda:0 to "
                                f"cuda:{count - 1}")
    elif resolved.type == "mps":
        if not (torch.backends.mps.is_available() and torch.backends.mps.is_built()):
            raise HeurlensError(f"device {str(device)!r}: Apple's MPS is not available on this machine; use device=cpu")
    elif resolved.type != "cpu":
        raise HeurlensError(f"device {str(device)!r}: heurlens runs on cpu, cuda or mps")
    return resolved


def device_of(model: object) -> torch.device:
    """The device a model's weights are on (the CPU for a model without parameters)."""
    parameters = getattr(model, "parameters", None)
    first = next(iter(parameters()), None) if callable(parameters) else None
    return first.device if isinstance(first, Tensor) else torch.device("cpu")


def describe_device(device: torch.device) -> str:
    """Where a run computed, for its record, so that its times can be read: 'cpu, 1 thread' (torch's threads in
    this process) or 'cuda, NVIDIA H200'."""
    if device.type == "cuda":
        return f"cuda, {torch.cuda.get_device_name(device)}"
    if device.type == "cpu":
        threads = torch.get_num_threads()
        return f"cpu, {threads} thread{'s' * (threads > 1)}"
    return device.type


def weights_dtype_of(model: object) -> torch.dtype:
    """The precision of a model's floating-point weights (float32 for a model without any)."""
    parameters = getattr(model, "parameters", None)
    floating = (p for p in (parameters() if callable(parameters) else ()) if p.is_floating_point())
    first = next(floating, None)
    return first.dtype if isinstance(first, Tensor) else torch.float32


def to_device(batch: dict[str, Tensor], device: torch.device) -> dict[str, Tensor]:
    """A batch's tensors on ``device`` (no copy when they are there already)."""
    return {key: value.to(device) for key, value in batch.items()}
