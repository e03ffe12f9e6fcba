"""Subtask Induction (Zhang et al. 2023, Section 3.2, Eq. 1): copy a subnetwork's weights into a freshly
initialised model of the same architecture and keep them fixed while the rest trains:

    theta_new = gamma * theta_trained + (1 - gamma) * theta_init,   gradients on gamma = 1 entries masked.

``transfer_condition`` builds the model for Subtask Induction and for each control of the paper
(random initialisation, a random subnetwork with the same number of weights per tensor, one drawn
from the complement, the whole trained model), frozen or not. What fills the weights outside the
subnetwork (``FILLINGS``):

- ``fresh`` (the paper's prose, Section 3.2): every other weight is freshly initialised, the
  embeddings, LayerNorms, biases and unembedding included;
- ``inherited`` (the released transfer script, which starts from the trained model and re-initialises
  only the unselected entries of the masked matrices): every parameter the subnetwork does not mask
  is copied from the trained model; only the masked-out entries of the masked matrices are fresh, as a
  new model of this architecture draws them;
- ``released``: as ``inherited``, with the masked-out entries drawn as the release's copy of NeuroSurgeon
  does (``contsparse_layer.py``, ``_init_subnet_transfer``: ``nn.init.normal_(weight, std=0.02)`` for every
  masked matrix, residual projections included, no 1/sqrt(2 n_layer)), from a generator seeded by the run.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from heurlens.errors import HeurlensError
from heurlens.subtask.settings import FILLINGS, TRANSFER_CONDITIONS, Filling
from heurlens.subtask.weight_subnetwork import WeightSubnetwork
from heurlens.training_helpers import FrozenWeights


@torch.no_grad()
def copy_subnetwork(subnetwork: WeightSubnetwork, source: nn.Module, target: nn.Module) -> None:
    """Write the subnetwork's weights from ``source`` into ``target`` (Eq. 1); other entries untouched."""
    subnetwork.check_module(source)
    subnetwork.check_module(target)
    source_parameters, target_parameters = dict(source.named_parameters()), dict(target.named_parameters())
    for name, mask in subnetwork.masks.items():
        mask = mask.to(target_parameters[name].device)
        target_parameters[name][mask] = source_parameters[name].to(mask.device)[mask]


@torch.no_grad()
def inherit_unmasked(subnetwork: WeightSubnetwork, source: nn.Module, target: nn.Module) -> None:
    """Copy every parameter the subnetwork does not mask (embeddings, LayerNorms, biases...) from
    ``source`` into ``target``: the ``inherited`` filling. A tied source fills both of an untied target's
    matrices (input and output embeddings) from its one tensor."""
    source_parameters = dict(source.named_parameters(remove_duplicate=False))
    for name, parameter in target.named_parameters():
        if name not in subnetwork.masks:
            parameter.copy_(source_parameters[name])


RELEASED_FILL_STD = 0.02  # NeuroSurgeon's init_subnet_transfer: nn.init.normal_(self.weight, std=0.02)


@torch.no_grad()
def draw_masked_matrices(subnetwork: WeightSubnetwork, model: nn.Module, seed: int) -> None:
    """Every matrix the subnetwork masks re-drawn from N(0, 0.02) (drawn on the CPU from ``seed``, the same on
    every device): what the release leaves in the masked-out entries."""
    parameters = dict(model.named_parameters())
    generator = torch.Generator(device="cpu").manual_seed(seed)
    for name in subnetwork.masks:
        parameter = parameters[name]
        parameter.copy_(torch.normal(0.0, RELEASED_FILL_STD, parameter.shape, generator=generator, device="cpu"))


def transfer_condition(condition: str, subnetwork: WeightSubnetwork, trained: nn.Module,
                       make_model: Callable[[int], nn.Module], seed: int, filling: Filling = "fresh"
                       ) -> tuple[nn.Module, FrozenWeights | None]:
    """A fresh model (``make_model(seed)``) prepared for one condition, and its frozen weights (if any).
    ``filling`` decides what lies outside the (real or random) subnetwork; it does not apply to
    "random init" and "full model"."""
    if condition not in TRANSFER_CONDITIONS:
        raise HeurlensError(f"unknown condition {condition!r}; choose from {', '.join(TRANSFER_CONDITIONS)}")
    if filling not in FILLINGS:
        raise HeurlensError(f"unknown filling {filling!r}; choose from {', '.join(FILLINGS)}")
    model = make_model(seed)
    if condition == "random init":
        return model, None
    if condition == "full model":
        model.load_state_dict(trained.state_dict())
        return model, None
    if condition.startswith("subtask induction"):
        chosen = subnetwork
    else:
        chosen = subnetwork.random_like(seed, complement=condition == "random complement")
    if filling == "released":
        draw_masked_matrices(chosen, model, seed)
    copy_subnetwork(chosen, trained, model)
    if filling in ("inherited", "released"):
        inherit_unmasked(chosen, trained, model)
    return model, None if condition.endswith("(unfrozen)") else FrozenWeights(model, chosen.masks)
