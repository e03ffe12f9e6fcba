"""Weight-level subnetwork discovery by continuous sparsification (Subtask Induction paper, Appendix A, Algorithm 1).

For every selected weight tensor W a mask weight tensor s of the same shape; the model runs with
W * sigmoid(beta * s) while its own weights stay frozen, and s minimises

    loss_subtask(model with W * sigmoid(beta s)) + lambda * sum sigmoid(beta s)      (Eq. 2)

with s = -0.1 at the start and beta = 1 growing exponentially, by beta_final^(1/n) after each of
the n epochs (beta = beta_final^(e/n) during epoch e). The binary mask is s > 0. The masked
weights W * mask are swapped in for the duration of each forward call (as
``torch.func.functional_call`` does, but safe on TransformerLens bridges): nothing is copied and
the weights are never written, so any ``nn.Module`` works.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from typing import Any

import torch
from torch import Tensor, nn

from heurlens.errors import HeurlensError
from heurlens.runtime.progress import progress_bar
from heurlens.subtask.weight_subnetwork import WeightSubnetwork
from heurlens.training_helpers import frozen_parameters, run_with_denormals_flushed

DEFAULT_INCLUDE = r"(^|\.)(attn|mlp)\."  # every attention and MLP weight matrix; not embeddings or the head


@dataclass(frozen=True)
class DiscoverySettings:
    """Algorithm 1's settings; the defaults are the paper's (Appendix A and B.1)."""

    epochs: int = 50
    beta_final: float = 100.0
    mask_init: float = -0.1
    l0_lambda: float = 1e-7
    lr: float = 1e-3
    weight_decay: float = 0.0  # AdamW's decoupled decay of the mask scores (0: Adam; the release: 0.01)

    def to_dict(self) -> dict:
        return asdict(self)


def beta_at(epoch: int, epochs: int, beta_final: float) -> float:
    """beta during epoch ``epoch`` (0-based): 1 at the start, multiplied by beta_final^(1/epochs) after
    each epoch, so it would reach beta_final after the last."""
    return beta_final ** (epoch / epochs)


def select_weights(module: nn.Module, include: str | Iterable[str] | None = None) -> list[str]:
    """Names of the weight matrices to mask: by default those of attention and MLP layers (name has an
    ``attn.`` or ``mlp.`` component, two or more dimensions); else every parameter whose name matches
    one of the ``include`` regular expressions."""
    patterns = [DEFAULT_INCLUDE] if include is None else [include] if isinstance(include, str) else list(include)
    names = [name for name, p in module.named_parameters()
             if any(re.search(pattern, name) for pattern in patterns) and (include is not None or p.dim() >= 2)]
    if not names:
        raise HeurlensError(f"no parameter of this model matches {patterns}; pass include= with patterns "
                            f"of parameter names, e.g. {next(iter(dict(module.named_parameters())), 'layer.weight')!r}")
    return names


@contextmanager
def swapped_parameters(module: nn.Module, values: dict[str, Tensor]) -> Iterator[None]:
    """Inside the block, each named parameter of ``module`` reads as the given tensor; restored after.

    The owning submodule's parameter is taken out (``delattr``) and the tensor set as a plain attribute in its
    place; after the block the parameter is registered back (``register_parameter``, the owner's later ones
    registered again behind it, so ``named_parameters`` keeps its order). ``torch.func.functional_call`` would do
    the same, but TransformerLens bridges redirect attribute assignment, which makes it leave masked tensors
    behind in them.
    """
    swapped = []
    try:
        for name, value in values.items():
            path, _, leaf = name.rpartition(".")
            owner = module.get_submodule(path) if path else module
            order = [own for own, _ in owner.named_parameters(recurse=False)]
            original = getattr(owner, leaf)
            delattr(owner, leaf)
            setattr(owner, leaf, value)  # a plain tensor on purpose: the masked weights, part of the graph
            swapped.append((owner, leaf, original, order))
        yield
    finally:
        for owner, leaf, original, order in reversed(swapped):
            delattr(owner, leaf)
            owner.register_parameter(leaf, original)
            for later in order[order.index(leaf) + 1:]:
                parameter = getattr(owner, later)
                delattr(owner, later)
                owner.register_parameter(later, parameter)


def masked_forward(module: nn.Module, masks: dict[str, Tensor]) -> Callable:
    """``forward(*args, **kwargs)`` of ``module`` with each named weight multiplied by its mask (the
    weights themselves are never written)."""
    weights = dict(module.named_parameters())

    def forward(*args, **kwargs):
        with swapped_parameters(module, {name: weights[name] * mask for name, mask in masks.items()}):
            return module(*args, **kwargs)

    return forward


def discover_subnetwork(module: nn.Module, loss_fn: Callable[[Callable, Any], Tensor], batches: Sequence,
                        config: DiscoverySettings = DiscoverySettings(), include: str | Iterable[str] | None = None,
                        description: str = "", seed: int = 0, progress: bool = True) -> WeightSubnetwork:
    """Learn a binary weight mask for which ``loss_fn(forward, batch)`` stays low (Algorithm 1).

    ``loss_fn`` receives the masked model's forward function and one batch. ``module``'s
    parameters are left exactly as they were (frozen during the search, restored after).
    """
    torch.manual_seed(seed)
    names = select_weights(module, include)
    parameters = dict(module.named_parameters())
    scores = {name: torch.full_like(parameters[name], config.mask_init, requires_grad=True) for name in names}
    optimizer = torch.optim.AdamW(scores.values(), lr=config.lr, weight_decay=config.weight_decay)
    bar = progress_bar(total=config.epochs * len(batches), desc="subnetwork discovery", unit="step", disable=not progress)

    def train_scores() -> None:
        with frozen_parameters(module), bar:  # only the mask scores train
            for epoch in range(config.epochs):
                beta = beta_at(epoch, config.epochs, config.beta_final)
                for batch in batches:
                    soft = {name: torch.sigmoid(beta * s) for name, s in scores.items()}
                    task_loss = loss_fn(masked_forward(module, soft), batch)
                    density = sum(m.sum() for m in soft.values())
                    loss = task_loss + config.l0_lambda * density
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
                    bar.update(1)
                kept = sum((s > 0).sum().item() for s in scores.values()) / sum(s.numel() for s in scores.values())
                bar.set_postfix(beta=f"{beta:.1f}", loss=f"{task_loss.item():.4f}", kept=f"{kept:.3f}")

    run_with_denormals_flushed(train_scores)
    return WeightSubnetwork({name: (s > 0).detach().cpu() for name, s in scores.items()}, description,
                            config.to_dict() | {"seed": seed})
