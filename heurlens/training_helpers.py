"""What every training loop of heurlens shares: the examples shuffled one way (``shuffled_order``, into batches:
``shuffled_batches``), the best epoch chosen by one rule with its ties stated (``is_best_epoch``), the model's
own weights held still while masks train (``frozen_parameters``), entries of weights that must never move while
the rest trains (``FrozenWeights``), one optimizer step that respects them (``optimizer_step``), float32
denormals flushed to zero where masks saturate (``run_with_denormals_flushed``), and the global random state a
killed fine-tune saves so that, resumed, it draws the same dropout masks (``random_state``,
``restore_random_state``). The resumable checkpoint itself is ``heurlens.runtime.checkpoints``."""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, Literal, TypeVar

import torch
from jaxtyping import Bool
from torch import Tensor, nn

from heurlens.protocols import PreparedModel

Result = TypeVar("Result")


def shuffled_order(count: int, generator: torch.Generator) -> Tensor:
    """``0 .. count-1`` in a random order drawn by the CPU ``generator`` (``torch.randperm``, on the CPU, so an
    order is the same on every device): the one shuffle of heurlens' training loops. (The NLI fine-tune keeps
    ``datasets``' numpy permutation, which made the default model's batches.)"""
    return torch.randperm(count, generator=generator, device="cpu")


def shuffled_batches(tensors: Sequence[Tensor], batch_size: int, generator: torch.Generator
                     ) -> list[tuple[Tensor, ...]]:
    """The rows of ``tensors`` (one row per example in each: sequences, or images and their labels) in one
    ``shuffled_order``, cut into batches of ``batch_size``; on the CPU."""
    order = shuffled_order(len(tensors[0]), generator)
    return [tuple(tensor[order[begin:begin + batch_size]] for tensor in tensors)
            for begin in range(0, len(order), batch_size)]


TieRule = Literal["later", "earlier"]


def is_best_epoch(score: float, best: float | None, ties: TieRule) -> bool:
    """Whether an epoch scoring ``score`` on the evaluation set is the best so far (``best`` None: the first).
    ``ties``: which of two epochs with the same score is kept. "later": the Subtask Induction paper's released
    transfer script (``>=``), for the transfer runs; "earlier": HF Trainer's best checkpoint (``>``), for T1's
    early stopping (the released T1 script uses the Trainer) and for the vision classifiers, which follow it."""
    if best is None:
        return True
    return score >= best if ties == "later" else score > best


@contextmanager
def frozen_parameters(module: nn.Module | PreparedModel) -> Iterator[None]:
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


def run_with_denormals_flushed(work: Callable[[], Result]) -> Result:
    """``work()`` with CPU float results below float32's smallest normal number (1.2e-38) set to zero
    (``torch.set_flush_denormal``). Mask training with a growing temperature drives sigmoid(beta * s)
    and its gradients into that range, where x86 CPUs compute many times slower (measured: discovery
    steps at beta ~100 about 7x slower); the values flushed are below anything that can change a loss
    or a binary mask.

    The setting is per thread, and torch's compute threads, started earlier, keep theirs: set here
    alone it would reach only the share of each operation that this thread computes. So ``work`` runs
    in a new thread, which inherits the setting (POSIX threads copy their creator's floating-point
    environment), as do the compute threads that thread starts; this thread's setting is restored
    before returning. ``work``'s exception is raised here as itself. ``work`` runs in a copy of this thread's
    context, so ``contextvars`` settings (``heurlens.runtime.cache.disk_cache(False)``) reach it."""
    outcome: dict[str, object] = {}
    context = contextvars.copy_context()

    def run() -> None:
        try:
            outcome["value"] = context.run(work)
        except BaseException as error:  # handed to the caller below
            outcome["error"] = error

    before = denormals_flushed()
    torch.set_flush_denormal(True)
    try:
        worker = threading.Thread(target=run, name="heurlens-denormals-flushed", daemon=True)
        worker.start()
    finally:
        torch.set_flush_denormal(before)
    worker.join()
    if "error" in outcome:
        raise outcome["error"]  # type: ignore[misc]
    return outcome["value"]  # type: ignore[return-value]


def denormals_flushed() -> bool:
    """Whether CPU float arithmetic flushes denormals to zero now (torch has no getter: 1e-39 * 1 tells)."""
    return torch.tensor([1e-39], device="cpu").mul(1.0).item() == 0.0


class FrozenWeights:
    """Entries of parameters that training must not move: of one module's parameters (``FrozenWeights(module,
    masks)``), or of models stacked along a leading dimension (``FrozenWeights.stacked``).

    After the backward pass ``zero_gradients()`` zeroes their gradients, and after the optimizer step
    ``restore()`` writes their saved values back, so optimizers with weight decay cannot drift them either: they
    stay equal bit for bit (``optimizer_step`` does both).
    """

    def __init__(self, parameters: nn.Module | Mapping[str, Tensor], masks: Mapping[str, Bool[Tensor, " ..."]]):
        tensors = dict(parameters.named_parameters()) if isinstance(parameters, nn.Module) else dict(parameters)
        self.masks = {name: mask.to(tensors[name].device) for name, mask in masks.items()}
        self.parameters = {name: tensors[name] for name in self.masks}
        self.values = {name: tensors[name].detach()[mask].clone() for name, mask in self.masks.items()}

    @classmethod
    def stacked(cls, stacks: Mapping[str, Tensor], frozen: Sequence[FrozenWeights | None]) -> FrozenWeights:
        """Model i's ``frozen[i]`` (None: nothing frozen) over ``stacks`` (each parameter of every model stacked
        along a leading dimension, model i at index i)."""
        names = sorted({name for weights in frozen if weights is not None for name in weights.masks})
        return cls(stacks, {name: torch.stack([
            weights.masks[name].to(stacks[name].device) if weights is not None and name in weights.masks
            else torch.zeros(stacks[name].shape[1:], dtype=torch.bool, device=stacks[name].device)
            for weights in frozen]) for name in names})

    def zero_gradients(self) -> None:
        for name, mask in self.masks.items():
            gradient = self.parameters[name].grad
            if gradient is not None:
                gradient.masked_fill_(mask, 0)

    @torch.no_grad()
    def restore(self) -> None:
        for name, mask in self.masks.items():
            self.parameters[name][mask] = self.values[name]


def optimizer_step(optimizer: torch.optim.Optimizer, loss: Tensor, frozen: FrozenWeights | None = None) -> None:
    """One optimizer step on ``loss``, ``frozen`` entries' gradients zeroed before it and their values written
    back after it."""
    optimizer.zero_grad()
    loss.backward()
    if frozen is not None:
        frozen.zero_gradients()
    optimizer.step()
    if frozen is not None:
        frozen.restore()


def random_state(device: torch.device) -> dict[str, Tensor | None]:
    """torch's global random state, to save beside a checkpoint: the CPU generator's (``rng``) and, when the
    training runs on a GPU, that device's (``cuda_rng``), which dropout draws from there; None on the CPU."""
    return {"rng": torch.get_rng_state(),
            "cuda_rng": torch.cuda.get_rng_state(device) if device.type == "cuda" else None}


def restore_random_state(state: Mapping[str, Any], device: torch.device) -> None:
    """Set torch's global random state back to what ``random_state`` returned (read from a checkpoint's keys
    ``rng`` and ``cuda_rng``; the GPU's is restored only when the training runs on one and it was saved)."""
    torch.set_rng_state(state["rng"])
    if device.type == "cuda" and state.get("cuda_rng") is not None:
        torch.cuda.set_rng_state(state["cuda_rng"], device)
