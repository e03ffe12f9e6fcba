"""Sparsity targets a run may miss: the warning a missed target raises (``SparsityTargetMissed``, from the records
and from the check before training) and that check, so nothing is spent on a run that cannot reach its target."""

from __future__ import annotations

from heurlens.protocols import Task
from heurlens.pruning.schedule import steps_before_pruning
from heurlens.pruning.settings import PruneSettings
from heurlens.runtime.caller_warnings import warn_at_caller


class SparsityTargetMissed(UserWarning):
    """A pruned subnetwork's achieved sparsity is more than ``SPARSITY_TOLERANCE`` away from its target."""


def warn_of_too_few_steps(config: PruneSettings, sparsities: list[float], data: Task) -> None:
    """Before any training: a ``SparsityTargetMissed`` warning for each sparsity whose steps end before a unit
    can be pruned (``steps_before_pruning``)."""
    needed = steps_before_pruning(config.log_alpha_init, config.lr_log_alpha)
    # warm-started masks start from 0 up, by the scores; a ranking's are cut by their order, whatever their level
    for target in sparsities if not config.init_from and config.train_for != "ranking" else ():
        total = config.steps_for(target, len(data), data.batches[0]["input_ids"].shape[0])[1]
        if target > 0 and total < needed:
            warn_at_caller(f"sparsity {target:.2f} cannot be reached in {total} steps: the masks start at log_alpha "
                          f"{config.log_alpha_init:g} and Adam moves them by about PruneSettings(lr_log_alpha="
                          f"{config.lr_log_alpha:g}) a step, so no unit can be pruned before ~{needed} steps. Give "
                          f"PruneSettings(total_steps={needed * 3}) or more, or start the masks lower "
                          "(PruneSettings(log_alpha_init=0))", SparsityTargetMissed)
