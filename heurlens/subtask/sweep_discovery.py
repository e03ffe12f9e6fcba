"""Step 2 of the arithmetic sweep (Subtask Induction paper, Section 4.2 and Appendix B.1): the subtask's
subnetwork of the T1 model, found once per L0 lambda (``candidates/lambda-*``) and the most accurate kept."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from heurlens.errors import HeurlensError
from heurlens.runtime.devices import device_of
from heurlens.runtime.distributed import Workers, run_each
from heurlens.runtime.run_folders import RunFolder
from heurlens.subtask.arithmetic import ArithmeticTask, evaluation_set, training_set
from heurlens.subtask.masks import DiscoverySettings, discover_subnetwork, masked_forward
from heurlens.subtask.settings import SweepSettings
from heurlens.subtask.training import answer_accuracy, batches_of, last_token_loss, next_token_loss
from heurlens.subtask.weight_subnetwork import WeightSubnetwork


def most_accurate(candidates: Sequence[WeightSubnetwork]) -> WeightSubnetwork:
    """The candidate with the highest ``settings["subtask_accuracy"]``; ties go to the sparser one
    (the paper keeps the most accurate, and prefers sparser subnetworks among equals)."""
    if not candidates:
        raise HeurlensError("no candidate subnetworks to choose from")
    return max(candidates, key=lambda sub: (sub.settings["subtask_accuracy"], -sub.kept))


@dataclass(frozen=True)
class DiscoveryRecipe:
    """What ``SweepSettings.discovery`` names: the batch size, the mask scores' AdamW weight decay and the loss."""

    batch_size: int
    weight_decay: float
    loss: Callable[[Callable, Tensor], Tensor]


DISCOVERY_RECIPES = {
    "native": DiscoveryRecipe(128, 0.0, last_token_loss),  # heurlens' first reading of Appendix B.1
    "released": DiscoveryRecipe(500, 0.01, next_token_loss),  # ablate.py and subnet_1e-7/configs.yaml
}


@dataclass(frozen=True)
class _DiscoveryJob:
    """What the discoveries of one sweep (one per L0 lambda) share."""

    trained: nn.Module  # the T1 model
    t1: ArithmeticTask
    subtask: ArithmeticTask
    settings: SweepSettings
    folder: RunFolder
    progress: bool


def chosen_subnetwork(folder: RunFolder, trained: nn.Module, t1: ArithmeticTask, subtask: ArithmeticTask,
                      settings: SweepSettings, progress: bool, workers: Workers | None) -> WeightSubnetwork:
    """The subnetwork the sweep transfers (``subnetwork.*`` in the folder): the most accurate of those found
    once per L0 lambda (``candidates/lambda-*``, on ``workers`` at once with Ray), which it lists."""
    def choose() -> WeightSubnetwork:
        job = _DiscoveryJob(trained, t1, subtask, settings, folder, progress and workers is None)
        candidates = run_each(_discovered, job, list(settings.l0_lambdas), workers, "L0 lambdas",
                              progress and workers is not None)
        subnetwork = most_accurate(candidates)
        subnetwork.settings["candidates"] = [{"l0_lambda": c.settings["l0_lambda"], "kept": c.kept,
                                              "subtask_accuracy": c.settings["subtask_accuracy"]}
                                             for c in candidates]
        return subnetwork

    return _stored_subnetwork(folder, "subnetwork", choose)


def _discovered(job: _DiscoveryJob, l0_lambda: float) -> WeightSubnetwork:
    """The subtask's subnetwork found with one L0 lambda (kept in ``candidates/``)."""
    recipe = DISCOVERY_RECIPES[job.settings.discovery]
    return _stored_subnetwork(job.folder, f"candidates/lambda-{l0_lambda:g}",
                              lambda: discover_for_sweep(job.trained, job.t1, job.subtask, job.settings, recipe,
                                                         l0_lambda, job.progress))


def _stored_subnetwork(folder: RunFolder, name: str, compute: Callable[[], WeightSubnetwork]) -> WeightSubnetwork:
    stem = folder.path / name
    return folder.stored(f"{name}.json", compute, lambda sub: sub.save(stem), lambda: WeightSubnetwork.load(stem))


def discover_for_sweep(trained: nn.Module, t1: ArithmeticTask, subtask: ArithmeticTask, settings: SweepSettings,
                       recipe: DiscoveryRecipe, l0_lambda: float, progress: bool = True) -> WeightSubnetwork:
    """The subtask's subnetwork of the T1 model ``trained`` as a sweep finds it (``settings``' share of the
    subtask's pairs, epochs and lr; the batch size, weight decay and loss of ``recipe``), scored on 1,000
    rows of the subtask and of T1 (``settings["subtask_accuracy"]``, ``["t1_accuracy_of_subnetwork"]``)."""
    device = device_of(trained)
    batches = [batch.to(device) for batch in batches_of(training_set(subtask, settings.subtask_fraction, 3),
                                                         recipe.batch_size, torch.Generator().manual_seed(0))]
    config = DiscoverySettings(epochs=settings.discovery_epochs, l0_lambda=l0_lambda, lr=settings.discovery_lr,
                               weight_decay=recipe.weight_decay)
    subnetwork = discover_subnetwork(trained, recipe.loss, batches, config,
                                     description=f"{settings.subtask} subnetwork of a {settings.t1} model",
                                     progress=progress)
    binary = masked_forward(trained, {name: mask.float() for name, mask in subnetwork.masks.items()})
    subnetwork.settings["subtask_accuracy"] = answer_accuracy(binary, evaluation_set(subtask, 1000, 1), device=device)
    subnetwork.settings["t1_accuracy_of_subnetwork"] = answer_accuracy(binary, evaluation_set(t1, 1000, 1),
                                                                       device=device)
    return subnetwork
