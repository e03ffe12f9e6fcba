"""The one epoch trainer (heurlens.trainer.train_epochs): which epoch is best under each tie rule, early stopping, the
best weights restored, and the scores measured only at a best epoch."""

import pytest
import torch
from torch import nn

from heurlens.trainer import train_epochs

SCORES = [0.5, 0.7, 0.7, 0.6, 0.6, 0.9]  # what the evaluation says after each epoch
EPOCHS = len(SCORES)


def scripted(ties, patience=None, restore_best=False, epochs=EPOCHS):
    """A one-weight model trained toward 1 (its weight after epoch e is distinct), evaluated by ``SCORES``."""
    model = nn.Linear(1, 1, bias=False)
    with torch.no_grad():
        model.weight.zero_()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    weights, tested = [], []

    def evaluate():
        weights.append(model.weight.item())
        return {"eval": SCORES[len(weights) - 1]}

    def at_best():
        tested.append(len(weights) - 1)
        return {"test": -1.0}

    run = train_epochs(model, optimizer, lambda: [torch.ones(1, 1)], lambda x: ((model(x) - 1) ** 2).sum(), evaluate,
                       epochs, "eval", ties, patience=patience, restore_best=restore_best, at_best=at_best,
                       progress=False)
    return run, model, weights, tested


@pytest.mark.parametrize("ties, best", [("later", 2), ("earlier", 1)])
def test_a_tie_goes_to_the_later_or_the_earlier_epoch(ties, best):
    run, model, weights, tested = scripted(ties, epochs=5)
    assert run.best_epoch == best and run.best["eval"] == 0.7 and len(run.history) == 5 and not run.stopped_early
    assert tested == [0, 1, 2] if ties == "later" else tested == [0, 1]  # the test set measured at best epochs only
    assert model.weight.item() == weights[-1] and not model.training  # not restored: the last epoch's weights


def test_patience_stops_after_that_many_epochs_without_a_best_and_restores_the_best_weights():
    run, model, weights, _ = scripted("earlier", patience=2, restore_best=True)
    assert run.stopped_early and [row["epoch"] for row in run.history] == [0, 1, 2, 3]  # epochs 2, 3 not best
    assert run.best_epoch == 1 and model.weight.item() == weights[1] != weights[3]
    assert [row["loss"] for row in run.history] == sorted((row["loss"] for row in run.history), reverse=True)


def test_no_epoch_is_no_best():
    run, _, weights, _ = scripted("earlier", epochs=0)
    assert run.best_epoch is None and run.best == {} and run.history == [] and weights == []
