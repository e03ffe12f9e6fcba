"""Training and evaluating image classifiers, with frozen weights or only chosen parameters trainable.

SGD with momentum 0.9 and weight decay 1e-4, as the paper trains its ResNets (Subtask Induction paper, Appendix
C.1); after every epoch, accuracy on each evaluation set; the epoch with the best accuracy on the
selection set is the one reported (model selection on held-out data, Section 5.2).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from jaxtyping import Float, Int
from torch import Tensor, nn

from heurlens.errors import HeurlensError
from heurlens.runtime.devices import device_of
from heurlens.trainer import train_epochs
from heurlens.training_helpers import FrozenWeights, shuffled_batches
from heurlens.vision.metrics import prediction_accuracy

Images = Float[Tensor, "n channel height width"]
Labels = Int[Tensor, " n"]


@torch.no_grad()
def predict(model: nn.Module | Callable, images: Images, batch_size: int = 512,
            device: torch.device | None = None) -> Labels:
    """Predicted class of every image, on the CPU (the model in eval mode while predicting); each chunk of
    images runs on ``device`` (default: where ``model``'s weights are, when it is a module)."""
    device = device or device_of(model)
    was_training = getattr(model, "training", False)
    if isinstance(model, nn.Module):
        model.eval()
    try:
        return torch.cat([model(images[i:i + batch_size].to(device)).argmax(-1).cpu()
                          for i in range(0, len(images), batch_size)])
    finally:
        if isinstance(model, nn.Module):
            model.train(was_training)


def classification_loss(forward: Callable, batch: tuple[Images, Labels]) -> Tensor:
    """Cross-entropy of ``forward(images)`` against the labels (the loss subnetwork discovery uses)."""
    images, labels = batch
    return F.cross_entropy(forward(images), labels)


@dataclass
class ClassifierTraining:
    """Best-epoch accuracies on every evaluation set, and the per-epoch history."""

    best_epoch: int
    accuracies: dict[str, float]
    history: list[dict] = field(default_factory=list)


def train_classifier(model: nn.Module, images: Images, labels: Labels, evaluation: dict[str, tuple[Images, Labels]],
                     select_on: str, epochs: int, lr: float = 0.05, batch_size: int = 128,
                     frozen: FrozenWeights | None = None, trainable: Callable[[str], bool] | None = None,
                     seed: int = 0, progress: bool = True, desc: str = "training") -> ClassifierTraining:
    """Train ``model`` on (images, labels); keep the weights of the epoch with the best accuracy on
    ``evaluation[select_on]`` and return every set's accuracy at that epoch.

    ``frozen`` entries never move; with ``trainable`` only parameters whose name it accepts train,
    and the model stays in eval mode (batch-norm statistics fixed), as linear probing needs.
    """
    if select_on not in evaluation:
        raise HeurlensError(f"select_on={select_on!r} is not one of the evaluation sets {', '.join(evaluation)}")
    parameters = [p for name, p in model.named_parameters() if trainable is None or trainable(name)]
    if not parameters:
        raise HeurlensError("no parameter is trainable: `trainable` accepted no parameter name")
    optimizer = torch.optim.SGD(parameters, lr=lr, momentum=0.9, weight_decay=1e-4)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, epochs)
    generator = torch.Generator().manual_seed(seed)
    device = device_of(model)
    run = train_epochs(model, optimizer, lambda: shuffled_batches([images, labels], batch_size, generator),
                       lambda batch: classification_loss(model, (batch[0].to(device), batch[1].to(device))),
                       lambda: {name: prediction_accuracy(predict(model, x), y) for name, (x, y) in evaluation.items()},
                       epochs, select_on, "earlier", frozen=frozen, schedule=schedule, train_mode=trainable is None,
                       restore_best=True, progress=progress, desc=desc)
    if run.best_epoch is None:
        raise HeurlensError(f"train for at least one epoch (epochs = {epochs})")
    return ClassifierTraining(run.best_epoch, {name: run.best[name] for name in evaluation}, run.history)
