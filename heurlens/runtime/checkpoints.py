"""The one resumable checkpoint of heurlens' training loops (the NLI fine-tune, models trained together): what a
killed training needs to go on as if never stopped, saved with the identity of the training that wrote it and
written atomically, so a reader finds the previous checkpoint whole or the new one, never half of one.

What goes in is the caller's: weights, optimizer and schedule states, data-order generators, and where the loop
draws from torch's global generator, its state (``training_helpers.random_state``). Whether a checkpoint of
another training is refused or trained over is the caller's choice too (``load_checkpoint`` hands back its
identity)."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import torch

from heurlens.runtime.cache import atomic_write_bytes

_LEGACY_IDENTITY = "run"  # the fine-tune's key before 2026-11-26: the same string, its settings as JSON


def save_checkpoint(path: Path, identity: str, state: dict[str, Any]) -> None:
    """Write ``state`` (tensors, state dicts, numbers, strings) and ``identity`` to ``path``, atomically."""
    buffer = io.BytesIO()
    torch.save({"identity": identity, **state}, buffer)
    atomic_write_bytes(Path(path), buffer.getvalue())


def load_checkpoint(path: Path) -> tuple[str, dict[str, Any]] | None:
    """(identity, state) of the checkpoint at ``path``, on the CPU (it may have been saved on any device); None
    when there is none, or it cannot be read whole (cut short by a kill: the training starts over)."""
    try:
        state = torch.load(Path(path), weights_only=True, map_location="cpu")
    except (OSError, RuntimeError, EOFError, ValueError):
        return None
    if not isinstance(state, dict):
        return None
    identity = state.pop("identity", None)
    if identity is None:
        identity = state.pop(_LEGACY_IDENTITY, None)
    return (identity, state) if isinstance(identity, str) else None
