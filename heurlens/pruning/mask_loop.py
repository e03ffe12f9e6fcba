"""The mask-training loop shared by unit and edge masks (``heurlens.pruning.train`` gives it its masks, and the
Heuristic Core paper's recipe written out there): per optimizer step, ``grad_accumulation`` micro-batches, each one
forward pass over every seed's own batch stacked (``stacked_batches``), the objective plus the Lagrangian terms, the
mask parameters stepped down and the multipliers up; then, with ``PruneSettings(extend_steps=N)``, the seeds still
off target train on (``_extend``). With node masks beside edge masks (``PruneSettings(node_sparsity=)``), each seed
has a second hard-concrete vector over the units with its own target and multipliers, each draw of both made into
the edge masks the hooks apply (``heurlens.interventions.joint_masks``). It asks of the hooks that mask the model only
what ``heurlens.protocols.MaskHooks`` promises."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from jaxtyping import Bool, Float
from torch import Tensor
from tqdm.auto import tqdm

from heurlens.errors import HeurlensError
from heurlens.interventions.corruption import corruption_of
from heurlens.interventions.joint_masks import NodeMasksBeside
from heurlens.interventions.rankings import Ranking
from heurlens.protocols import Batch, Loss, MaskHooks, PreparedModel, Task
from heurlens.pruning.hard_concrete import HardConcrete
from heurlens.pruning.loss_checks import finite_losses, scalar_loss
from heurlens.pruning.objective import expected_sparsity, kl_loss, mask_optimizer, sampled_sparsity
from heurlens.pruning.ranking_budgets import budget_draw, drawn_budget
from heurlens.pruning.schedule import target_at
from heurlens.pruning.settings import PruneSettings
from heurlens.pruning.warm_start import initial_log_alpha, warm_start_log_alpha
from heurlens.runtime.call_context import CallContext
from heurlens.runtime.devices import to_device
from heurlens.runtime.precision import Precision, autocast
from heurlens.runtime.progress import progress_bar
from heurlens.tasks import batch_rows
from heurlens.training_helpers import frozen_parameters, shuffled_order


@dataclass
class MaskTrainingResult:
    log_alpha: Float[Tensor, " mask"]  # per unit (``UnitLayout``'s order) or per edge (``EdgeLayout``'s)
    final_loss: float  # the objective's last value (KL by default) without the Lagrangian terms
    final_expected_sparsity: float
    steps: int
    multipliers: tuple[float, float]  # lambda1, lambda2 at the end (lambda1 stays 0 with penalty="quadratic")
    extension_steps: int = 0  # of ``steps``, those after the budget (``PruneSettings.extend_steps``)
    node_log_alpha: Float[Tensor, " unit"] | None = None  # node masks beside edge masks: theirs (``UnitLayout``'s order)
    node_sparsity: float | None = None  # their expected sparsity at the end


def stacked_batches(batches: Sequence[Batch], pad_token_id: int = 0) -> Batch:
    """Right-padded batches as one: each tensor padded on the right to the longest (``input_ids`` with the
    pad token, the attention mask and token types with 0) and concatenated along the examples. Padding is
    masked out of attention, so every example's scores are its own batch's up to float rounding."""
    if len(batches) == 1:
        return batches[0]
    length = max(batch["input_ids"].shape[1] for batch in batches)
    return {key: torch.cat([F.pad(batch[key], (0, length - batch[key].shape[1]),
                                  value=pad_token_id if key == "input_ids" else 0) for batch in batches])
            for key in batches[0]}


@dataclass
class _SeedRun:
    """One seed's own state in ``train_unit_masks``: its mask, multipliers, optimizer and random streams."""

    mask: HardConcrete
    lambdas: Tensor
    optimizer: torch.optim.Optimizer
    schedule: torch.optim.lr_scheduler.LRScheduler
    order_generator: torch.Generator  # the batches' order (CPU)
    draws: torch.Generator  # the masks' draws: the order generator on the CPU, one of the model's device elsewhere
    order: list[int] = field(default_factory=list)
    fit: Tensor | None = None
    model_sparsity: Tensor | None = None
    extension_steps: int = 0  # trained after the budget, while its masks were off target
    nodes: HardConcrete | None = None  # node masks beside edge masks, and their multipliers
    node_lambdas: Tensor = field(default_factory=lambda: torch.zeros(0))
    node_sparsity: Tensor | None = None


def train_masks(model: PreparedModel, data: Task, full_logits: Float[Tensor, "example label"], hooks: MaskHooks,
                prunable: Bool[Tensor, " mask"], sparsity: float, seeds: Sequence[int], config: PruneSettings,
                progress: bool, loss: Loss | None, off_target: Callable[[Tensor], bool], context: CallContext,
                warm_start: Ranking | None = None, node_masks: NodeMasksBeside | None = None
                ) -> list[MaskTrainingResult]:
    """The loop of ``train_unit_masks`` and ``train_edge_masks``: one hard-concrete mask per entry of ``prunable``
    (those False kept at 1), applied through ``hooks``, on ``context.device`` with the matrix products in
    ``context.dtype``; with ``config.extend_steps``, the seeds whose masks are still ``off_target(log_alpha)`` after
    the budget train on (``_extend``); with ``warm_start``, every seed's masks start from its scores
    (``pruning.warm_start``); with ``node_masks``, node masks beside them (from log_alpha_init; warm-started, from
    the units' summed edge scores) trained towards ``config.node_sparsity``, the hooks given the edge masks each
    seed's draw of both makes."""
    if len(set(seeds)) != len(seeds) or not seeds:
        raise HeurlensError(f"seeds {list(seeds)}: give at least one seed, each once")
    objective = loss or kl_loss
    device = context.device
    batch_size = data.batches[0]["input_ids"].shape[0]
    warmup, total = config.steps_for(sparsity, len(data), batch_size)
    runs = []
    start = None if warm_start is None else initial_log_alpha(warm_start, len(prunable), config.log_alpha_init)
    node_start = None if warm_start is None or node_masks is None else warm_start_log_alpha(  # units' summed scores
        node_masks.unit_scores(warm_start.scores.float()), config.log_alpha_init).to(device)
    for seed in seeds:
        torch.manual_seed(seed)  # log_alpha's initial draw, as for one seed alone
        mask = HardConcrete(len(prunable), config.log_alpha_init, config.log_alpha_init_std, device=device)
        if start is not None:  # warm-started: every seed from the ranking's scores
            mask.log_alpha.data.copy_(start)
        lambdas = torch.zeros(2, requires_grad=True, device=device)
        nodes = None if node_masks is None else HardConcrete(node_masks.n_units, config.log_alpha_init,
                                                             config.log_alpha_init_std, device=device)
        if nodes is not None and node_start is not None:
            nodes.log_alpha.data.copy_(node_start)
        node_lambdas = torch.zeros(0 if nodes is None else 2, requires_grad=True, device=device)
        optimizer, schedule = mask_optimizer(mask, lambdas, config, total, nodes, node_lambdas)
        order_generator = torch.Generator(device="cpu").manual_seed(seed)
        mask_draws = order_generator if device.type == "cpu" else torch.Generator(device=device).manual_seed(seed)
        runs.append(_SeedRun(mask, lambdas, optimizer, schedule, order_generator, mask_draws, nodes=nodes,
                             node_lambdas=node_lambdas))
    examples = [b["input_ids"].shape[0] for b in data.batches]  # each seed's mask draw covers its batch's examples
    offsets = torch.tensor([0] + [batch_rows(b) for b in data.batches], device="cpu").cumsum(0)  # rows of scores
    tokenizer = getattr(model, "tokenizer", None)
    pad_token_id = getattr(tokenizer, "pad_token_id", None) or 0

    corruption = corruption_of(data) if config.ablation == "corrupt" else None  # edge level: always
    # on the model's device once, so no step waits for a copy from the host
    shared = _Shared(model, [to_device(batch, device) for batch in data.batches],
                     None if corruption is None else [to_device(batch, device) for batch in corruption.batches],
                     full_logits.to(device), hooks, prunable, config, objective, offsets, examples, pad_token_id,
                     device, context.dtype, config.warmup_steps or max(1, total // 2), warmup, node_masks)
    names = ",".join(map(str, seeds))
    warm = "" if warm_start is None else f", warm-started from {warm_start.label}"
    aim = "for a ranking of MIB's sizes, cut at" if config.train_for == "ranking" else "to"
    bar = progress_bar(total=total, desc=f"pruning seed{'s' if len(seeds) > 1 else ''} {names} {aim} {sparsity:.0%}{warm}",
                       unit="step", disable=not progress)
    try:
        model.train(config.dropout)
        with frozen_parameters(model), hooks.attached(model):  # only the masks and the multipliers train
            _train_steps(shared, runs, range(total), lambda step: target_at(step, warmup, sparsity), bar, names)
            _extend(shared, runs, total, sparsity, off_target, bar, names)
    finally:
        bar.close()
        model.eval()
    results = []
    for run in runs:
        lambda1, lambda2 = run.lambdas.tolist()
        results.append(MaskTrainingResult(
            run.mask.log_alpha.detach().cpu().clone(), _item(run.fit), expected_sparsity(run.mask, prunable).item(),
            total + run.extension_steps, (lambda1, lambda2), run.extension_steps,
            None if run.nodes is None else run.nodes.log_alpha.detach().cpu().clone(),
            None if run.nodes is None else expected_sparsity(run.nodes).item()))
    return results


def _train_steps(shared: _Shared, runs: list[_SeedRun], steps: range, target_of: Callable[[int], float], bar: tqdm,
                 names: str) -> None:
    """Optimizer steps ``steps`` (0-based, the sparsity warm-up's clock) for every seed of ``runs`` at once, the losses
    read back to the host every ``READ_BACK_EVERY`` steps and at the last."""
    config = shared.config
    losses: list[Tensor] = []  # each step's losses since they were last read back to the host
    for step in steps:
        target = target_of(step)
        for run in runs:
            run.optimizer.zero_grad()
        for _ in range(config.grad_accumulation):
            _micro_batch(shared, runs, target, step)
        for run in runs:
            if config.max_grad_norm is not None:
                nodes = [] if run.nodes is None else [run.nodes.log_alpha, run.node_lambdas]
                torch.nn.utils.clip_grad_norm_([run.mask.log_alpha, run.lambdas, *nodes], config.max_grad_norm)
            run.optimizer.step()
            run.schedule.step()
        bar.update(1)
        losses.append(torch.stack([run.fit.detach() for run in runs if run.fit is not None]))
        if len(losses) == READ_BACK_EVERY or step == steps[-1]:
            fits = finite_losses(losses, step + 1, steps.stop, names)
            shown_target = {} if config.train_for == "ranking" else {"target": f"{target:.3f}"}  # a ranking's: drawn
            shown_nodes = {} if runs[0].nodes is None else {"node_sparsity": f"{_item(runs[0].node_sparsity):.3f}"}
            bar.set_postfix(sparsity=f"{_item(runs[0].model_sparsity):.3f}", **shown_target, **shown_nodes,
                            loss=f"{float(fits[-1, 0]):.4f}")
            losses.clear()


def _extend(shared: _Shared, runs: list[_SeedRun], total: int, sparsity: float,
            off_target: Callable[[Tensor], bool], bar: tqdm, names: str) -> None:
    """``PruneSettings.extend_steps``: after the budget, ``READ_BACK_EVERY`` steps more at the target at a time, for
    the seeds whose masks are still ``off_target`` (each seed alone: the others do not move, as they would not
    alone), until none is or the extension's limit is reached."""
    limit, done = shared.config.extend_steps, 0
    if not limit:  # no extension asked for: nothing to check (each check reads the masks back to the host)
        return
    pending = [run for run in runs if off_target(run.mask.log_alpha.detach())]
    while pending and done < limit:
        block = min(READ_BACK_EVERY, limit - done)
        bar.total += block
        _train_steps(shared, pending, range(total + done, total + done + block), lambda step: sparsity, bar, names)
        done += block
        for run in pending:
            run.extension_steps += block
        pending = [run for run in pending if off_target(run.mask.log_alpha.detach())]


READ_BACK_EVERY = 25  # steps between reading the losses back to the host (where a GPU's queue would drain)


@dataclass(frozen=True)
class _Shared:
    """What every micro-batch of one ``train_unit_masks`` call reads (and the hooks it sets each time), the
    tensors on the model's device."""

    model: PreparedModel
    batches: list[Batch]  # the data's
    corrupted: list[Batch] | None  # corrupt ablation: the data's corrupted examples, batch for batch
    full_logits: Float[Tensor, "row label"]
    hooks: MaskHooks
    prunable: Bool[Tensor, " unit"]
    config: PruneSettings
    objective: Loss
    offsets: Tensor  # where each batch's rows of scores start among the data's
    examples: list[int]  # each batch's examples (each seed's mask draw covers its own batch's)
    pad_token_id: int
    device: torch.device
    dtype: Precision  # the matrix products' (the call context's)
    budget_warmup: int  # a ranking's: the steps over which its budgets' floor falls to the smallest (ranking_budgets)
    target_warmup: int  # the steps over which the target sparsity rises (node masks beside edge masks: theirs too)
    node_masks: NodeMasksBeside | None  # node masks beside edge masks: how a draw of both becomes edge masks


def _micro_batch(shared: _Shared, runs: list[_SeedRun], target: float, step: int) -> None:
    """One micro-batch of mask training for every seed at once: each seed's next batch and a fresh mask draw, one
    forward pass over the seeds' batches stacked (``stacked_batches``; one seed: its batch as it is), each
    example masked by its seed's draw, then the objective and the Lagrangian terms of every seed backpropagated
    (each seed's depend on its own rows and mask only)."""
    config = shared.config
    indices, draws, node_draws = [], [], []
    for run in runs:
        if not run.order:
            run.order = shuffled_order(len(shared.batches), run.order_generator).tolist()
        indices.append(run.order.pop())
        if config.train_for == "ranking":  # a budget from MIB's range of sizes, kept in sum (ranking_budgets)
            keep = drawn_budget(run.order_generator, (step + 1) / shared.budget_warmup)
            draws.append(budget_draw(run.mask.log_alpha, shared.prunable, keep, run.draws))
        else:
            draws.append(run.mask.sample(run.draws).where(shared.prunable, 1.0))
        node_draws.append(None if run.nodes is None else run.nodes.sample(run.draws))
    beside = shared.node_masks
    masks = [draw if nodes is None or beside is None else beside.edge_masks(draw, nodes)
             for draw, nodes in zip(draws, node_draws)]
    # each example its seed's draw (sizes from the host: no device-to-host wait, as a tensor of counts would need)
    shared.hooks.set_masks(torch.cat([mask.expand(shared.examples[i], -1) for mask, i in zip(masks, indices)]))
    with autocast(shared.dtype, shared.device):
        if shared.corrupted is not None:  # corrupt ablation: the activations on the corrupted batches
            corrupted = stacked_batches([shared.corrupted[i] for i in indices], shared.pad_token_id)
            shared.hooks.use_corrupted(shared.model, corrupted)
        logits = shared.model(**stacked_batches([shared.batches[i] for i in indices], shared.pad_token_id)).float()
    lagrangian = torch.zeros((), device=shared.device)
    start = 0
    for run, index, z, nodes in zip(runs, indices, draws, node_draws):
        first, end = int(shared.offsets[index]), int(shared.offsets[index + 1])
        reference = shared.full_logits[first:end]
        run.fit = scalar_loss(shared.objective(logits[start:start + end - first], reference,
                                                torch.arange(first, end, device="cpu")))
        start += end - first
        sampled = config.sparsity_estimate == "sampled" or config.train_for == "ranking"  # a ranking: the budget's
        run.model_sparsity = (sampled_sparsity(z, shared.prunable) if sampled
                              else expected_sparsity(run.mask, shared.prunable))
        lagrangian = lagrangian + run.fit
        if config.train_for != "ranking":  # a ranking's budget is its constraint: no Lagrangian terms
            lagrangian = _with_penalty(lagrangian, run.model_sparsity - target, run.lambdas, config)
        if nodes is not None and run.nodes is not None:  # node masks beside edge masks: their own target, always
            run.node_sparsity = (sampled_sparsity(nodes) if config.sparsity_estimate == "sampled"
                                 else expected_sparsity(run.nodes))
            node_target = target_at(step, shared.target_warmup, float(config.node_sparsity or 0.0))
            lagrangian = _with_penalty(lagrangian, run.node_sparsity - node_target, run.node_lambdas, config)
    (lagrangian / config.grad_accumulation).backward()


def _with_penalty(total: Tensor, gap: Tensor, lambdas: Tensor, config: PruneSettings) -> Tensor:
    """total + lambda1 (s - t) + lambda2 (s - t)^2, added in that order (``penalty="quadratic"``: lambda1 held at 0)."""
    linear = lambdas[0] * gap if config.penalty == "lagrangian" else 0.0
    return total + linear + lambdas[1] * gap ** 2


def _item(value: Tensor | None) -> float:
    return 0.0 if value is None else value.item()
