"""Dropout whose masks are a function of one model's own key, for models trained stacked (``batched_training``).

Under ``vmap(randomness="different")`` every model of a stack draws its dropout masks as one slice of a single draw
from torch's global generator, so a model's masks depend on how many models train beside it and where it sits:
the same run gave other results in another stack. Here each ``nn.Dropout`` of the stack's template becomes a
``KeyedDropout`` whose mask at a step is a hash of (the model's seed, the step, the dropout module, the element's
index): counter-based randomness, as JAX's keys, in plain integer tensor ops, so it runs inside ``vmap`` with each
model's key as a stacked buffer, on any device, the same bits on CPU and GPU. Attention-probability dropout,
which Hugging Face models apply inside their attention function, goes through the same keyed module
(``keyed_eager_attention``, registered with transformers' ``AttentionInterface``).

The hash is splitmix64's finaliser over int64 (wrapping multiplication; logical shifts by masking); 24 bits of it
give a uniform number in [0, 1), and an element is kept when that number is at least p.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F
from jaxtyping import Float, Int
from torch import Tensor, nn

from heurlens.errors import HeurlensError

ATTENTION = "heurlens_keyed_dropout"  # the attention implementation's name in transformers' registries
KEY = "dropout_key"  # each KeyedDropout's buffer: (model seed, step)


def _signed(constant: int) -> int:
    """A 64-bit constant as the int64 that has its bits."""
    return constant - 2**64 if constant >= 2**63 else constant


GOLDEN, MIX1, MIX2 = _signed(0x9E3779B97F4A7C15), _signed(0xBF58476D1CE4E5B9), _signed(0x94D049BB133111EB)
SEED_STRIDE, STEP_STRIDE, SALT_STRIDE = _signed(0xD1B54A32D192ED03), _signed(0xABC98388FB8FAC03), _signed(0x8CB92BA72F3D8DD7)


def _shifted(h: Tensor, bits: int) -> Tensor:
    """h >>> bits: the logical right shift of int64 values (torch's >> keeps the sign)."""
    return (h >> bits) & ((1 << (64 - bits)) - 1)


def keyed_uniform(key: Int[Tensor, " key"], salt: int, shape: Sequence[int]) -> Float[Tensor, "*shape"]:
    """Uniform numbers in [0, 1) of ``shape``, a function of ``key`` (seed, step), ``salt`` and each index alone."""
    index = torch.arange(int(torch.Size(shape).numel()), device=key.device, dtype=torch.int64).view(*shape)
    salt_term = (salt * SALT_STRIDE + 2**63) % 2**64 - 2**63  # the wrapped product, as torch's int64 would give
    h = index * GOLDEN + key[0] * SEED_STRIDE + key[1] * STEP_STRIDE + salt_term
    h = (h ^ _shifted(h, 30)) * MIX1
    h = (h ^ _shifted(h, 27)) * MIX2
    h = h ^ _shifted(h, 31)
    return _shifted(h, 40).to(torch.float32) / 2**24


class KeyedDropout(nn.Module):
    """``nn.Dropout(p)`` with masks from ``keyed_uniform`` of its buffer ``dropout_key`` and its ``salt`` (the
    module's place among the model's dropouts)."""

    def __init__(self, p: float, salt: int):
        super().__init__()
        self.p, self.salt = p, salt
        self.register_buffer(KEY, torch.zeros(2, dtype=torch.int64))

    def forward(self, x: Tensor) -> Tensor:
        if not self.training or self.p == 0:
            return x
        keep = keyed_uniform(getattr(self, KEY), self.salt, x.shape) >= self.p
        return x * keep.to(x.dtype) / (1 - self.p)


def keyed_eager_attention(module: nn.Module, query: Tensor, key: Tensor, value: Tensor, attention_mask: Tensor | None,
                          scaling: float | None = None, dropout: float = 0.0, **kwargs) -> tuple[Tensor, Tensor]:
    """Eager attention (softmax(q k^T * scaling + mask) v) with the attention module's own ``attn_dropout`` (a
    ``KeyedDropout``) on the probabilities, for transformers' ``AttentionInterface``."""
    scaling = query.size(-1) ** -0.5 if scaling is None else scaling
    weights = torch.matmul(query, key.transpose(-1, -2)) * scaling
    if attention_mask is not None:
        weights = weights + attention_mask[..., : key.shape[-2]]
    weights = F.softmax(weights, dim=-1).type(value.dtype)
    if dropout > 0:
        weights = module.get_submodule("attn_dropout")(weights)
    return torch.matmul(weights, value).transpose(1, 2), weights


def _register_attention() -> None:
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, eager_mask

    AttentionInterface.register(ATTENTION, keyed_eager_attention)
    AttentionMaskInterface.register(ATTENTION, eager_mask)


def key_dropouts(template: nn.Module) -> list[str]:
    """Replace every ``nn.Dropout`` with p > 0 in ``template`` by a ``KeyedDropout`` (numbered in module order), and
    switch a Hugging Face model's attention to ``keyed_eager_attention``; the names of the key buffers it added."""
    dropouts = [(name, module) for name, module in template.named_modules()
                if isinstance(module, nn.Dropout) and module.p > 0]
    for salt, (name, module) in enumerate(dropouts):
        path, _, leaf = name.rpartition(".")
        owner = template.get_submodule(path) if path else template
        setattr(owner, leaf, KeyedDropout(module.p, salt))
    configs: dict[int, Any] = {id(m.config): m.config for m in template.modules()
                               if hasattr(getattr(m, "config", None), "_attn_implementation")}
    if dropouts and configs:
        _register_attention()
        for config in configs.values():
            config._attn_implementation = ATTENTION
        unkeyed = [name for name, m in template.named_modules() if hasattr(m, "attn_dropout")
                   and not isinstance(m.attn_dropout, KeyedDropout) and m.attn_dropout.p > 0]
        if unkeyed:
            raise HeurlensError(f"cannot key the attention dropout of {unkeyed[0]}: train these models one by one")
    return [f"{name}.{KEY}" if name else KEY for name, _ in dropouts]
