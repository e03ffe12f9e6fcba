"""The precision a model's matrix products run in: one setting, ``dtype``, for evaluation and mask training.

"float32" changes nothing. "bfloat16" and "float16" run the matrix products under ``torch.autocast`` on the
model's device (PyTorch's mixed precision: softmax, LayerNorm and reductions stay in float32); what heurlens
trains and compares (masks, Lagrange multipliers, log_alpha, the KL, stored logits) stays float32. On a GPU
both halve the products' memory traffic; on this project's CPU (AVX-512 BF16) bfloat16 evaluates about 2x
faster (``benchmarks/bf16_evaluation.py``) and the predicted label of about 0.2% of pairs changes.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Literal, get_args

from heurlens.errors import HeurlensError

if TYPE_CHECKING:
    import torch

Precision = Literal["float32", "bfloat16", "float16"]
PRECISIONS: tuple[str, ...] = get_args(Precision)
CACHE_SUFFIX = {"float32": "", "bfloat16": "-bf16", "float16": "-fp16"}  # activation cache entries, kept apart


def check_precision(dtype: str) -> Precision:
    """``dtype`` if it is one of ``PRECISIONS``, else a HeurlensError naming them."""
    if dtype not in PRECISIONS:
        raise HeurlensError(f"unknown precision {dtype!r}: choose {', '.join(PRECISIONS)} (dtype=)")
    return dtype  # type: ignore[return-value]


def weights_precision(dtype: str | torch.dtype | None) -> torch.dtype | None:
    """The weights' precision asked for (``load_model(dtype=)``): a floating torch dtype, or its name
    ("bfloat16", "float16", "float32"); None: as saved. Anything else is refused naming the choices."""
    import torch

    if dtype is None or isinstance(dtype, torch.dtype) and dtype.is_floating_point:
        return dtype
    resolved = getattr(torch, dtype, None) if isinstance(dtype, str) else None
    if not isinstance(resolved, torch.dtype) or not resolved.is_floating_point:
        raise HeurlensError(f"unknown weights precision {dtype!r}: choose {', '.join(PRECISIONS)} (a torch dtype or "
                            "its name)")
    return resolved


def precision_name(dtype: torch.dtype) -> str:
    """"bfloat16" for torch.bfloat16: how tables name a precision."""
    return str(dtype).removeprefix("torch.")


def autocast(dtype: Precision, device: torch.device | str = "cpu") -> contextlib.AbstractContextManager:
    """Matrix products in ``dtype`` on ``device`` (``torch.autocast``); float32: nothing changed."""
    import torch  # here, so that the CLI can read PRECISIONS without importing torch

    if check_precision(dtype) == "float32":
        return contextlib.nullcontext()
    return torch.autocast(torch.device(device).type, dtype=getattr(torch, dtype))
