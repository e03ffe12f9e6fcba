"""The products through which edge masks' readers read their writers (``interventions.edge_masks``), written as
autograd functions so that backpropagation keeps each block of writers' differences once: a reader's correction
``so_far + (1 - m) D`` (``BlockRead``) leaves its gradient for a block D in the block's ``GradientSum``, summed in
place, which the identity on D (``SharedBlock``) hands to D once (benchmarks/edge_pruning_step.py).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor


class GradientSum:
    """The gradient the readers' products (``BlockRead``) leave for one block of writers' differences, summed in
    place."""

    def __init__(self) -> None:
        self.total: Tensor | None = None


class SharedBlock(torch.autograd.Function):
    """The identity on a block D of writers' differences that every reader above reads. Its gradient from those
    readers, sum_r (1 - m_r)^T G_r, is summed in place by their products (``BlockRead``) and handed to D once here:
    without this each reader's share is a fresh [batch, writers, pos * d_model] tensor, written and then added, a
    memory-bound pass that cost a third of an edge step on SmolLM2 (benchmarks/edge_pruning_step.py)."""

    @staticmethod
    def forward(ctx: Any, block: Tensor, gradient: GradientSum) -> Tensor:
        ctx.gradient = gradient
        ctx.set_materialize_grads(False)
        return block.view_as(block)

    @staticmethod
    def backward(ctx: Any, grad: Tensor | None) -> tuple[Tensor | None, None]:
        total, ctx.gradient.total = ctx.gradient.total, None
        if total is None:
            return grad, None
        return (total if grad is None else total.add_(grad)), None


class BlockRead(torch.autograd.Function):
    """``so_far`` + (1 - m) D for one block D (``so_far`` summed into in place, or none: ``torch.bmm(dropped,
    block)``), whose gradient for D goes into the block's ``GradientSum`` (``SharedBlock``) instead of to autograd."""

    @staticmethod
    def forward(ctx: Any, dropped: Tensor, block: Tensor, gradient: GradientSum, so_far: Tensor | None) -> Tensor:
        ctx.save_for_backward(dropped, block)
        ctx.gradient = gradient
        if so_far is None:
            return torch.bmm(dropped, block)
        ctx.mark_dirty(so_far)  # under autocast the blocks' precisions differ (embeddings float32, heads bfloat16)
        return so_far.baddbmm_(dropped.to(so_far.dtype), block.to(so_far.dtype))

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor | None, None, None, Tensor | None]:
        dropped, block = ctx.saved_tensors
        of_output = grad.to(block.dtype)
        if ctx.needs_input_grad[1]:
            share = dropped.transpose(1, 2).to(block.dtype)
            gradient = ctx.gradient
            total = gradient.total  # a backward run under autocast may have made it another precision
            gradient.total = (torch.bmm(share, of_output) if total is None
                              else total.baddbmm_(share.to(total.dtype), of_output.to(total.dtype)))
        of_dropped = torch.bmm(of_output, block.transpose(1, 2)) if ctx.needs_input_grad[0] else None
        return of_dropped, None, None, (grad if ctx.needs_input_grad[3] else None)
