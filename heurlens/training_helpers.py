"""What every training loop of heurlens shares: the model's own weights held still while masks
train (``frozen_parameters``), entries of weights that must never move while the rest trains
(``FrozenWeights``), and one optimizer step that respects them (``optimizer_step``)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch
from jaxtyping import Bool
from torch import Tensor, nn


@contextmanager
def frozen_parameters(module: nn.Module) -> Iterator[None]:
    """Inside the block no parameter of ``module`` takes gradients (only tensors made outside it, such as
    masks, train); on leaving, even by an exception, the parameters that did take them take them again."""
    trainable = [p for p in module.parameters() if p.requires_grad]
    try:
        for parameter in trainable:
            parameter.requires_grad_(False)
        yield
    finally:
        for parameter in trainable:
            parameter.requires_grad_(True)


class FrozenWeights:
    """Entries of a module's parameters that training must not move.

    Their gradients are zeroed by tensor hooks, and ``restore()`` (call it after every optimizer
    step) writes the saved values back, so optimizers with weight decay cannot drift them either:
    they stay equal bit for bit.
    """

    def __init__(self, module: nn.Module, masks: dict[str, Bool[Tensor, " ..."]]):
        parameters = dict(module.named_parameters())
        self.masks = dict(masks)
        self.entries = [(parameters[name], mask, parameters[name].detach()[mask].clone()) for name, mask in masks.items()]
        self.handles = [p.register_hook(lambda grad, mask=mask: grad.masked_fill(mask, 0)) for p, mask, _ in self.entries]

    @torch.no_grad()
    def restore(self) -> None:
        for parameter, mask, values in self.entries:
            parameter[mask] = values

    def remove(self) -> None:
        for handle in self.handles:
            handle.remove()


def optimizer_step(optimizer: torch.optim.Optimizer, loss: Tensor, frozen: FrozenWeights | None = None) -> None:
    """One optimizer step on ``loss``; then any ``frozen`` entries are written back."""
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if frozen is not None:
        frozen.restore()
