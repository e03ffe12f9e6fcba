"""Multi-seed, multi-sparsity pruning runs that write each subnetwork as soon as it is found (their evaluation
beside the full model: ``heurlens.pruning.evaluation``).

With ``out`` (its layout and checks: ``heurlens.pruning.run_folder``), a finished subnetwork's JSON is written
last and atomically, so a run killed midway leaves only whole files; running the same command again loads the
finished seeds and trains only the missing ones. A folder another process is writing to is refused.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path

import datasets
from torch import Tensor

from heurlens.errors import HeurlensError
from heurlens.evaluate import tokenize_pairs
from heurlens.interventions.activation_cache import full_model_logits
from heurlens.interventions.circuits import check_level
from heurlens.interventions.corruption import corruption_of
from heurlens.interventions.graph import edge_layout
from heurlens.interventions.means import UnitMeans, compute_means
from heurlens.interventions.rankings import Ranking
from heurlens.interventions.scoring import as_method, scores_with_masks
from heurlens.interventions.units import UnitLayout
from heurlens.models.classifier import as_model
from heurlens.protocols import Loss, Metric, ModelLike, PreparedModel, Task, is_task
from heurlens.pruning.circuit import EdgeCircuit, nodes_of
from heurlens.pruning.hard_concrete import HardConcrete
from heurlens.pruning.objective import kl_loss, prunable_units, pruning_loss, subnetwork_loss
from heurlens.pruning.run_folder import (
    SparsityTargetMissed,
    check_run_folder,
    data_id_of,
    hyperparameters_of,
    prune_folder,
    record_name,
    seed_finished,
    subnetwork_stem,
)
from heurlens.pruning.settings import PruneSettings, checked_seeds, checked_targets
from heurlens.pruning.subnetwork import SPARSITY_TOLERANCE, Subnetwork, discretize, grid_threshold, top_k
from heurlens.pruning.targets import warn_of_too_few_steps
from heurlens.pruning.train import MaskTrainingResult, train_edge_masks, train_unit_masks
from heurlens.pruning.warm_start import ranking_of_folder
from heurlens.runtime.argument_checks import PositiveInt, checked
from heurlens.runtime.call_context import CallContext, call_context
from heurlens.runtime.caller_warnings import warn_at_caller
from heurlens.runtime.devices import describe_device
from heurlens.runtime.distributed import Workers, run_each
from heurlens.runtime.run_folders import RunFolder
from heurlens.tasks import TaskLike, as_task


@checked
def prune(model: ModelLike, data: TaskLike | datasets.Dataset, *, sparsity: float | Iterable[float] = 0.5,
          seeds: Iterable[int] = range(3), out: str | Path | None = None, config: PruneSettings = PruneSettings(),
          means: UnitMeans | None = None, batch_size: PositiveInt | None = None, progress: bool = True,
          workers: Workers | None = None, loss: Loss | None = None, metric: Metric | None = None,
          stack_seeds: bool | None = None, cache: bool | None = None, warm_start: Ranking | None = None
          ) -> list[Subnetwork]:
    """Prune ``model`` once per (sparsity, seed) and return the subnetworks, in that order. A subnetwork whose masks
    miss its target by more than ``SPARSITY_TOLERANCE`` (``Subnetwork.missed_target``) raises a
    ``SparsityTargetMissed`` warning and says so in its metrics (``missed_target``); so does, before any training, a
    sparsity whose steps end before a unit can be pruned.

    Args:
        model: a ``HookedModel`` or a bare ``TransformerBridge``.
        data: the pruning (training) data: a task (``EvalSet``, ``PromptSet``, ``TokenSet``: its own batches), a list
            of texts or a token tensor, or a Dataset of premise/hypothesis pairs (batched by length).
        sparsity: the target fraction of units (edges, ``config.level`` "edge") pruned, or several.
        seeds: the seeds, each a run per sparsity.
        out: a run folder: each subnetwork saved when found, a repeated call resumes; refused if it holds anything but
            a heurlens prune run of this model, data and settings (and loss), or if another process is writing to it.
        config: the recipe (``PruneSettings``; ``config.units``: which units may be pruned).
        means: what pruned units are replaced by (default: their means over ``data``).
        batch_size: examples a micro-batch for texts or tokens (default 32) or pairs (default 16).
        progress: a bar on stderr.
        workers: Ray workers (``heurlens.runtime.distributed``), each writing its subnetwork into ``out`` itself.
        loss: ``loss(scores, full scores, example ids)`` in place of the KL to the full model
            (``pruning.objective.kl_loss``).
        metric: a differentiable ``Metric`` kept at the full model's value (``heurlens.metrics.metric_loss``).
        stack_seeds: train a sparsity's seeds together, one forward pass over every seed's batch (the same subnetworks
            to float rounding); None stacks them on a CUDA GPU and not on a CPU, where it was measured not to pay.
        cache: False: the full model's logits are computed here, not read from or written to heurlens' cache folder.
        warm_start: a ranking of the items pruned (an attribution run's, ``heurlens.circuits.load_attribution(dir)
            .ranking``) whose scores set the masks' start (``pruning.warm_start``); ``config.init_from`` names it in
            the records (default: its label).

    Returns:
        The subnetworks (``EdgeCircuit``s at edge level), sparsity by sparsity, seed by seed.
    """
    model = as_model(model)
    if warm_start is None and config.init_from:
        warm_start = ranking_of_folder(config.init_from, model)
    elif warm_start is not None and not config.init_from:
        config = replace(config, init_from=warm_start.label)
    if batch_size is not None and is_task(data):
        raise HeurlensError(f"batch_size={batch_size} cannot rebatch a task ({data.name!r} brings its own batches): "
                            "give it when building the task (e.g. PromptTaskData(..., batch_size=...), "
                            "tokenize_texts(..., batch_size=...)), or pass the texts or token tensor themselves")
    if isinstance(data, datasets.Dataset):
        if not len(data):
            raise HeurlensError("the pruning data set is empty; give it at least one pair")
        data = tokenize_pairs("pruning-data", data, model.tokenizer, batch_size or 16, sort_by_length=True)
    data = as_task(model, data, batch_size=batch_size or 32)
    loss = pruning_loss(config, data, loss, metric)
    sparsities, seeds = checked_targets(sparsity), checked_seeds(seeds)
    warn_of_too_few_steps(config, sparsities, data)
    if config.ablation == "corrupt":
        corruption_of(data)  # refused before any work when the data has no corrupted examples of the same lengths
    check_level(model, config.level)  # refused before any work when the model cannot be masked at that level
    if means is not None:
        means.check_fits(model)
    if out is None:
        return _prune_each(model, data, sparsities, seeds, None, config,
                           means if means is not None else compute_means(model, data), progress, workers, loss,
                           stack_seeds, call_context(model, config.dtype, cache), warm_start)
    folder = prune_folder(out)
    with folder.writing():
        means = means if means is not None else compute_means(model, data)
        check_run_folder(folder, model, data, config, means, loss)
        return _prune_each(model, data, sparsities, seeds, folder, config, means, progress, workers, loss,
                           stack_seeds, call_context(model, config.dtype, cache), warm_start)


@dataclass(frozen=True)
class _PruneJob:
    """What every (sparsity, seed) run of one ``prune`` call shares (sent once to Ray's object store)."""

    model: PreparedModel
    data: Task
    out: RunFolder | None
    config: PruneSettings
    means: UnitMeans
    full_logits: Tensor | None  # None when every subnetwork is on disk already
    data_id: str
    fingerprint: str  # the model's, recorded in every subnetwork
    context: CallContext  # device, precision (config.dtype) and cache use, decided once by the caller
    progress: bool
    loss: Loss | None = None
    warm_start: Ranking | None = None  # its scores set every seed's start (``pruning.warm_start``)


def _prune_each(model: PreparedModel, data: Task, sparsities: list[float], seeds: Iterable[int],
                out: RunFolder | None, config: PruneSettings, means: UnitMeans, progress: bool,
                workers: Workers | None, loss: Loss | None, stack_seeds: bool | None, context: CallContext,
                warm_start: Ranking | None) -> list[Subnetwork]:
    """Train (or, from ``out``, load) one subnetwork per (sparsity, seed), here or on ``workers``: one run per
    (sparsity, seed), or with ``stack_seeds`` one run per sparsity training its missing seeds together."""
    seeds = list(seeds)
    runs = [(target, seed) for target in sparsities for seed in seeds]
    missing = out is None or any(not seed_finished(out, *run) for run in runs)
    job = _PruneJob(model, data, out, config, means, full_model_logits(model, data, context) if missing else None,
                    data_id_of(data), context.fingerprint or model.fingerprint(), context, progress and workers is None,
                    loss, warm_start)
    if stack_seeds is None:
        stack_seeds = context.device.type == "cuda"
    if stack_seeds and len(seeds) > 1:
        groups = run_each(_subnetworks_of_sparsity, job, [(target, seeds) for target in sparsities], workers,
                          "sparsities", progress and workers is not None)
        subnetworks = [subnetwork for group in groups for subnetwork in group]
    else:
        subnetworks = run_each(_subnetwork_of_run, job, runs, workers, "subnetworks", progress and workers is not None)
    for subnetwork in subnetworks:
        if subnetwork.missed_target:
            warn_at_caller(subnetwork.missed_target_message(), SparsityTargetMissed)
    return subnetworks


def _subnetwork_of_run(job: _PruneJob, run: tuple[float, int]) -> Subnetwork:
    """One (sparsity, seed): trained, or loaded from ``job.out`` (each subnetwork there is a ``stored`` stage,
    its files written atomically by whichever process trained it)."""
    if job.out is None:
        return _trained(job, *run)
    return _stored_subnetwork(job.out, *run, compute=partial(_trained, job, *run))


def _stored_subnetwork(folder: RunFolder, target: float, seed: int, compute: Callable[[], Subnetwork]) -> Subnetwork:
    """The subnetwork of (target, seed) in the run folder (what is there was checked against this run:
    ``check_run_folder``), or ``compute()``'s, saved there."""
    stem = subnetwork_stem(folder.path, target, seed)
    return folder.stored(record_name(folder, target, seed), compute, lambda subnetwork: subnetwork.save(stem),
                         partial(Subnetwork.load, stem))


def _subnetworks_of_sparsity(job: _PruneJob, group: tuple[float, list[int]]) -> list[Subnetwork]:
    """Every seed of one sparsity: those on disk in ``job.out`` loaded, the others trained together
    (``train_unit_masks``) and each saved as it would be alone."""
    target, seeds = group
    on_disk = {seed for seed in seeds if job.out is not None and seed_finished(job.out, target, seed)}
    to_train = [seed for seed in seeds if seed not in on_disk]
    trained = dict(zip(to_train, _trained_together(job, target, to_train))) if to_train else {}
    if job.out is None:
        return [trained[seed] for seed in seeds]
    return [_stored_subnetwork(job.out, target, seed, partial(trained.__getitem__, seed) if seed in trained
                               else partial(_trained, job, target, seed)) for seed in seeds]


def _trained(job: _PruneJob, target: float, seed: int) -> Subnetwork:
    return _trained_together(job, target, [seed])[0]


def _trained_together(job: _PruneJob, target: float, seeds: list[int]) -> list[Subnetwork]:
    """The subnetworks of ``seeds`` at ``target``, trained in one stacked run (one seed: the plain loop)."""
    model, config = job.model, job.config
    full_logits = (job.full_logits if job.full_logits is not None
                   else full_model_logits(model, job.data, job.context))
    start = time.time()
    train, record = _LEVELS[config.level]
    results = train(job, target, seeds, full_logits)
    seconds = round((time.time() - start) / len(seeds), 1)  # a stacked run's time shared out over its seeds
    subnetworks = [record(job, target, seed, result, seconds) for seed, result in zip(seeds, results)]
    all_scores = scores_with_masks(model, config.level, [sub.keep_mask() for sub in subnetworks], job.data,
                                   as_method(config.ablation), job.means, job.context)
    loss_name = "train_kl" if job.loss is None else "train_loss"
    for subnetwork, scores in zip(subnetworks, all_scores):
        subnetwork.metrics[f"subnetwork_{loss_name}"] = subnetwork_loss(scores, job.data, full_logits,
                                                                        job.loss or kl_loss)
    return subnetworks


def _metrics(job: _PruneJob, target: float, result: MaskTrainingResult, grid: float, reached: float,
             seconds: float) -> dict:
    """What a subnetwork records of its training: the last step's loss and expected sparsity, the Lagrange
    multipliers at the end (a lambda1 in the hundreds says the constraint wound up), the masks' sparsity on the
    paper's threshold grid, the time (a stacked run's shared over its seeds) and where it was spent (``trained_on``),
    whether it missed its target, with ``PruneSettings.extend_steps`` the steps it trained on after the budget
    (``extension_steps``), and with node masks beside edge masks their expected sparsity (``final_node_sparsity``)."""
    loss_name = "train_kl" if job.loss is None else "train_loss"
    ranking = job.config.train_for == "ranking"  # its masks' level is free (ranking_budgets): only their order counts
    return {f"final_{loss_name}": result.final_loss, "final_expected_sparsity": result.final_expected_sparsity,
            "final_lambda1": result.multipliers[0], "final_lambda2": result.multipliers[1],
            "grid_sparsity": grid, "train_seconds": seconds, "trained_on": describe_device(job.context.device),
            **({"extension_steps": result.extension_steps} if job.config.extend_steps else {}),
            **({"final_node_sparsity": result.node_sparsity} if result.node_sparsity is not None else {}),
            **({"missed_target": True} if abs(reached - target) > SPARSITY_TOLERANCE and not ranking else {})}


def _unit_subnetwork(job: _PruneJob, target: float, seed: int, result: MaskTrainingResult, seconds: float
                     ) -> Subnetwork:
    """The trained unit masks cut to a binary subnetwork (``PruneSettings.discretization``)."""
    model, config = job.model, job.config
    layout = UnitLayout(model.n_layers, model.n_heads)
    log_alpha_heads, log_alpha_mlps = layout.split(result.log_alpha)
    prunable = prunable_units(layout, config.units)
    kept, achieved, threshold = discretize(log_alpha_heads, log_alpha_mlps, target, config.discretization, prunable)
    # top-k always reaches the target: it missed when no threshold on the masks does (the paper's grid), as they
    # did not tell apart the units the target asks to drop and the cut chose among units they had left alike
    grid = achieved if config.discretization == "global-threshold" else discretize(
        log_alpha_heads, log_alpha_mlps, target, "global-threshold", prunable)[1]
    reached = grid if config.discretization == "top-k" else achieved
    return Subnetwork(
        kept=kept, n_layers=model.n_layers, n_heads=model.n_heads, target_sparsity=target,
        achieved_sparsity=achieved, threshold=threshold, seed=seed, model_id=model.model_id,
        model_fingerprint=job.fingerprint, data_id=job.data_id,
        hyperparameters=hyperparameters_of(config, target, job.data, job.means, job.loss),
        metrics=_metrics(job, target, result, grid, reached, seconds),
        log_alpha_heads=log_alpha_heads.clone(), log_alpha_mlps=log_alpha_mlps.clone())


def _edge_circuit(job: _PruneJob, target: float, seed: int, result: MaskTrainingResult, seconds: float
                  ) -> EdgeCircuit:
    """The trained edge masks cut to a binary circuit: the top-k edges by log_alpha (Edge Pruning's threshold found
    by binary search, here exactly by sorting). It missed its target when the masks' expected sparsity did (the
    paper's grid cannot say: at an edge sparsity such as 0.98 its threshold 1.0, which drops everything, is always
    within 0.05)."""
    model = job.model
    layout = edge_layout(model)
    keep, achieved, threshold = top_k(result.log_alpha, target)
    grid = grid_threshold(HardConcrete.keep_probability(result.log_alpha), target)[1]
    edges = [edge for edge, kept in zip(layout.edges(), keep.tolist()) if kept]
    return EdgeCircuit(
        kept=nodes_of(edges), n_layers=model.n_layers, n_heads=model.n_heads, target_sparsity=target,
        achieved_sparsity=achieved, threshold=threshold, seed=seed, model_id=model.model_id,
        model_fingerprint=job.fingerprint, data_id=job.data_id,
        hyperparameters=hyperparameters_of(job.config, target, job.data, job.means, job.loss),
        metrics=_metrics(job, target, result, grid, result.final_expected_sparsity, seconds), edges=edges,
        n_kv_heads=layout.n_kv_heads, log_alpha_edges=result.log_alpha)


def _train_units(job: _PruneJob, target: float, seeds: list[int], full_logits: Tensor) -> list[MaskTrainingResult]:
    return train_unit_masks(job.model, job.data, full_logits, job.means, target, seeds, job.config, job.progress,
                            job.loss, job.context, job.warm_start)


def _train_edges(job: _PruneJob, target: float, seeds: list[int], full_logits: Tensor) -> list[MaskTrainingResult]:
    return train_edge_masks(job.model, job.data, full_logits, target, seeds, job.config, job.progress, job.loss,
                            job.context, job.warm_start, job.means)


_LEVELS = {"node": (_train_units, _unit_subnetwork), "edge": (_train_edges, _edge_circuit)}  # trainer, record
