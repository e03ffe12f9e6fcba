"""The one epoch trainer (SAELens' ``SAETrainer`` shape: the loop fixed, the parts injected): each epoch the model in
its training mode, every batch's loss stepped (frozen entries held still), the schedule stepped, the model in eval
mode and evaluated, the best epoch chosen by one rule (``is_best_epoch``, its ties stated), with optional early
stopping and the best epoch's weights restored. The arithmetic decoders (``subtask.training.train_next_token``) and
the image classifiers (``vision.training.train_classifier``) train through it, bit for bit as their own loops did.

Loops that do not fit it, and why: mask training (``pruning.mask_loop``: steps, not epochs, and Lagrange multipliers
stepped up while the masks step down, several seeds in one pass), weight-mask discovery (``subtask.masks``: no
evaluation, a temperature annealed per epoch), models trained in one stack (``subtask.batched_training``: one
optimizer over many models, each with its own selection and checkpoint) and the NLI fine-tune
(``models.nli_finetune``: resumable mid-epoch from checkpoints, HF's warm-up schedule and ``datasets``' order).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor, nn

from heurlens.runtime.progress import progress_bar
from heurlens.training_helpers import FrozenWeights, TieRule, is_best_epoch, optimizer_step


@dataclass
class EpochTraining:
    """What ``train_epochs`` returns: the best epoch (None when none ran) and its scores, every epoch's scores
    (``epoch``, ``loss``: the last batch's, then the evaluation's), and whether early stopping ended it."""

    best_epoch: int | None = None
    best: dict[str, float] = field(default_factory=dict)
    history: list[dict[str, Any]] = field(default_factory=list)
    stopped_early: bool = False


def train_epochs(model: nn.Module, optimizer: torch.optim.Optimizer, batches: Callable[[], Iterable[Any]],
                 loss_of: Callable[[Any], Tensor], evaluate: Callable[[], dict[str, float]], epochs: int,
                 select_on: str, ties: TieRule, *, frozen: FrozenWeights | None = None,
                 schedule: torch.optim.lr_scheduler.LRScheduler | None = None, train_mode: bool = True,
                 at_best: Callable[[], dict[str, float]] | None = None, patience: int | None = None,
                 restore_best: bool = False, progress: bool = True, desc: str = "training") -> EpochTraining:
    """Train ``model`` for ``epochs`` epochs: ``batches()`` gives an epoch's batches, ``loss_of(batch)`` a batch's
    loss, ``evaluate()`` the scores after an epoch (the model in eval mode), of which ``select_on`` chooses the best
    epoch (``ties``: which of two equal epochs wins). ``train_mode``: the mode while training (False: batch-norm
    statistics fixed, for linear probing). ``at_best()``: scores added to a best epoch's (a test set's, measured
    only there). ``patience``: stop once ``patience`` epochs in a row were not the best. ``restore_best``: leave the
    model with the best epoch's weights. The model is left in eval mode."""
    run, best_score, best_state, waited = EpochTraining(), None, None, 0
    for epoch in progress_bar(range(epochs), desc=desc, unit="epoch", disable=not progress, leave=False):
        model.train(train_mode)
        for batch in batches():
            loss = loss_of(batch)
            optimizer_step(optimizer, loss, frozen)
        if schedule is not None:
            schedule.step()
        model.eval()
        scores = {"epoch": epoch, "loss": loss.item(), **evaluate()}
        run.history.append(scores)
        if is_best_epoch(scores[select_on], best_score, ties):
            scores |= at_best() if at_best is not None else {}
            best_score, run.best_epoch, run.best, waited = scores[select_on], epoch, scores, 0
            if restore_best:
                best_state = {name: value.detach().clone() for name, value in model.state_dict().items()}
        elif patience is not None:
            waited += 1
            if waited >= patience:
                run.stopped_early = True
                break
    if best_state is not None:
        model.load_state_dict(best_state)
    model.eval()
    return run
