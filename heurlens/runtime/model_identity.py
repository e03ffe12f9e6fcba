"""A model's identity, for the disk caches and for matching run folders to their model: sha256 over every weight's
bytes in name order (and over the tokenizer's vocabulary), computed once per state of the weights.

Each tensor's bytes are hashed where they lie, through a ``uint8`` view: no copy of a CPU tensor, and any dtype
(bfloat16 included, which numpy cannot hold). A tensor on an accelerator is brought to the host one at a time,
on the first call only. For float32 weights the digest is byte for byte the one heurlens computed before
(``.numpy().tobytes()``), so caches and run folders written earlier still match.

The digest is remembered on the model with the *version* of its weights: for every parameter and buffer its
storage, dtype, shape, device and torch's version counter, which every in-place torch operation bumps
(``with torch.no_grad(): w.add_(1)``, an optimizer step, ``load_state_dict``, ``copy_``). A weight replaced or
changed that way gives a new identity on the next call; an unchanged model is not hashed again. Writing through
``tensor.data`` bypasses the version counter (that is what ``.data`` is for): after such a write call
``forget_identity(model)``, or write under ``torch.no_grad()`` instead.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import Tensor, nn

_MEMO = "_heurlens_identity"  # attribute on the model: {what: (weights version, hex digest)}


def weights_version(module: nn.Module) -> tuple:
    """What changes whenever a weight of ``module`` is replaced, resized, retyped, moved or written in place by
    torch: per state-dict entry its name, storage address, dtype, shape, device and version counter."""
    return tuple((name, tensor.data_ptr(), tensor.dtype, tuple(tensor.shape), tensor.device, tensor._version)
                 for name, tensor in module.state_dict(keep_vars=True).items())


def weight_bytes(tensor: Tensor) -> Any:
    """The bytes of ``tensor`` as a buffer for ``hashlib`` (a numpy ``uint8`` view; copied only off the CPU)."""
    flat = tensor.detach().reshape(-1)
    if flat.device.type != "cpu":
        flat = flat.cpu()
    return flat.contiguous().view(torch.uint8).numpy()


def weights_digest(module: nn.Module, prefix: bytes = b"") -> hashlib._Hash:
    """sha256 of ``prefix``, then of every state-dict entry's name and bytes, in name order."""
    digest = hashlib.sha256(prefix)
    for name, tensor in sorted(module.state_dict(keep_vars=True).items()):
        digest.update(name.encode())
        digest.update(weight_bytes(tensor))
    return digest


def remembered(module: nn.Module, what: str, extra: tuple, compute: Callable[[], str]) -> str:
    """``compute()``, remembered on ``module`` under ``what`` until its weights (or ``extra``) change."""
    key = (weights_version(module), extra)
    memo: dict[str, tuple[tuple, str]] = module.__dict__.setdefault(_MEMO, {})
    if what not in memo or memo[what][0] != key:
        memo[what] = (key, compute())
    return memo[what][1]


def forget_identity(module: nn.Module) -> None:
    """Drop what ``remembered`` holds for ``module``: the next identity is computed from the weights again (needed
    only after writing weights through ``tensor.data``, which torch's version counters do not see)."""
    module.__dict__.pop(_MEMO, None)


def embedding_sample(model: Any) -> tuple[float, ...] | None:
    """64 entries of the token embedding matrix at fixed places (drawn with seed 0), what unit means remember of the
    model they were taken on (``same_embeddings`` compares two): the same, to rounding, for a model in float32 and
    its bfloat16 or float16 copy, for two wrappers of one bridge and for an ungrouped copy; others for a model of the
    same shape with other weights (a fine-tune that froze the embeddings would share them). None when the model has
    no Hugging Face input embeddings."""
    original = getattr(getattr(model, "bridge", None), "original_model", None)
    getter = getattr(original, "get_input_embeddings", None)
    embedding = getter() if callable(getter) else None
    weight = getattr(embedding, "weight", None)
    if not isinstance(weight, Tensor) or not weight.numel():
        return None
    flat = weight.detach().reshape(-1)
    places = torch.randint(0, flat.numel(), (64,), generator=torch.Generator(device="cpu").manual_seed(0),
                           device="cpu")  # on the CPU whatever the default device (a meta default too)
    return tuple(flat[places.to(flat.device)].float().cpu().tolist())


def same_embeddings(sample: Sequence[float], other: Sequence[float]) -> bool:
    """Whether two ``embedding_sample``s are one model's: equal within half-precision rounding (2e-2 relative)."""
    if len(sample) != len(other):
        return False
    first, second = torch.tensor(sample, device="cpu"), torch.tensor(other, device="cpu")
    return bool(torch.allclose(first, second, rtol=2e-2, atol=1e-3 * float(first.abs().max())))
