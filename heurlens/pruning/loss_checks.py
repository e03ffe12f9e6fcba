"""The loss values mask training refuses, each in one line that says what to fix: one that is not a one-element
tensor (a Python float carries no gradient to the masks), and a NaN or inf one (read back every few steps)."""

from __future__ import annotations

import torch
from torch import Tensor

from heurlens.errors import HeurlensError


def scalar_loss(value: object) -> Tensor:
    """The loss function's value, refused in one line unless it is a one-element tensor (a Python float carries no
    gradient to the masks)."""
    if not isinstance(value, Tensor) or value.numel() != 1:
        shape = f" of shape {tuple(value.shape)}" if isinstance(value, Tensor) else ""
        raise HeurlensError(f"the loss must return a one-element torch tensor computed from the scores it is given "
                            f"(got a {type(value).__name__}{shape}): e.g. (scores - full_scores).pow(2).mean(), "
                            "without .item() or float()")
    return value.reshape(())


def finite_losses(losses: list[Tensor], steps_done: int, planned: int, names: str) -> Tensor:
    """The last ``len(losses)`` steps' losses ([step, seed], on the CPU), refused in one line at the first step
    where one is NaN or inf (mask training reads them back every ``mask_loop.READ_BACK_EVERY`` steps, not every step)."""
    fits = torch.stack(losses).cpu()
    finite = fits.isfinite().all(dim=1)
    if not bool(finite.all()):
        first = int((~finite).nonzero()[0])
        raise HeurlensError(f"the loss was {fits[first].tolist()} at step {steps_done - len(losses) + first + 1} of "
                            f"{planned} (seeds {names}): masks cannot be trained on NaN or inf. Check the loss "
                            "function and the data (a division by zero, a log of 0)")
    return fits
