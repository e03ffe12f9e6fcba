"""Several small decoders trained at once. A Subtask Induction sweep trains many tiny models on the same
number of rows (every condition and seed at one disambiguation count): their parameters are stacked along a
leading model dimension (``torch.func.stack_module_state``), one forward serves them all
(``torch.func.vmap`` over ``functional_call``) and one AdamW steps the stacks. AdamW is elementwise and the
summed loss sum_i L_i has gradient dL_i/dtheta_i for model i, so each model follows the path
``train_next_token`` would take it on alone, with its own data order, frozen entries and best-evaluation
epoch, up to the float rounding of batched matrix products. Models with dropout train in train mode and are
evaluated in eval mode, as ``train_next_token`` does; each model's dropout masks are a function of its own seed
and the step (``keyed_dropout``), so a model trains the same whatever trains beside it in the stack (its draws
are not those of the model trained alone, which come from torch's global generator).

With a ``checkpoint`` file the training saves its progress (stacks, AdamW state, data-order random states, the
best epochs so far; dropout needs none, its keys being the seeds and the step) at most once a minute and after its
last epoch; called again with the same models, data and settings it goes on from there and ends bit for bit where
the uninterrupted call ends. A sweep count at 4 layers and 10,000 samples trains for two hours on one CPU thread:
a killed process loses a minute."""

from __future__ import annotations

import copy
import hashlib
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import torch
import torch.nn.functional as F
from jaxtyping import Int
from torch import Tensor, nn
from torch.func import functional_call, stack_module_state, vmap

from heurlens.errors import HeurlensError
from heurlens.runtime.checkpoints import load_checkpoint, save_checkpoint
from heurlens.runtime.devices import device_of
from heurlens.runtime.model_identity import weight_bytes
from heurlens.runtime.progress import progress_bar
from heurlens.subtask.keyed_dropout import key_dropouts
from heurlens.subtask.training import (
    TrainingResult,
    answer_accuracy,
    batches_of,
    best_by_evaluation,
)
from heurlens.training_helpers import FrozenWeights, is_best_epoch


def native_module(model: nn.Module) -> nn.Module:
    """The module whose forward ``vmap`` can trace: a TransformerLens bridge's original model (the
    bridge's own wrappers read weights outside the traced call), any other module itself."""
    return getattr(model, "original_model", model)


class StackedModels:
    """Models of one architecture as stacked parameters [model, ...] with a forward for all of them."""

    def __init__(self, models: Sequence[nn.Module]):
        modules = [native_module(model) for model in models]
        shapes = {tuple((name, p.shape) for name, p in module.named_parameters()) for module in modules}
        if len(shapes) != 1:
            raise HeurlensError("models trained together must share one architecture (same parameter names "
                                "and shapes)")
        self.models = list(models)
        self.parameters, self.buffers = stack_module_state(modules)
        self.template = copy.deepcopy(modules[0]).to("meta")
        retie(self.template, modules[0])
        self.dropout_keys = key_dropouts(self.template)
        self.set_dropout_keys(seeds=[0] * len(self.models), step=0)

        def forward_one(parameters: dict, buffers: dict, tokens: Tensor) -> Tensor:
            return functional_call(self.template, (parameters, buffers), (tokens,))

        # tokens [model, batch, position], one batch per model; no draw from torch's generator (keyed dropout)
        self.forward_each = vmap(forward_one, randomness="error")

    def set_dropout_keys(self, seeds: Sequence[int], step: int) -> None:
        """Key every model's dropout masks of the next forward pass: model i's by ``seeds[i]`` and ``step``."""
        if self.dropout_keys:
            device = next(iter(self.parameters.values())).device
            key = torch.tensor([[seed, step] for seed in seeds], dtype=torch.int64, device=device)
            self.buffers.update(dict.fromkeys(self.dropout_keys, key))

    def __len__(self) -> int:
        return len(self.models)

    @torch.no_grad()
    def answer_accuracies(self, sequences: Int[Tensor, "example 4"], models: Sequence[int] | None = None,
                          batch_size: int = 1024) -> list[float]:
        """Per model (all, or those at the indices ``models``), the fraction of sequences whose answer c is its top
        prediction after ``<sep>``. (Model by model: on shared inputs vmap's broadcast forward measured slower than
        a loop.)"""
        accuracies = []
        self.template.eval()
        for index in range(len(self)) if models is None else models:
            parameters = {name: stack[index] for name, stack in self.parameters.items()}
            buffers = {name: stack[index] for name, stack in self.buffers.items()}
            accuracies.append(answer_accuracy(partial(functional_call, self.template, (parameters, buffers)),
                                              sequences, batch_size, device_of(self.models[index])))
        return accuracies

    @torch.no_grad()
    def write_back(self) -> None:
        """Copy each model's trained stack slice into the model itself."""
        for index, model in enumerate(self.models):
            for name, parameter in native_module(model).named_parameters():
                parameter.copy_(self.parameters[name][index])


def retie(template: nn.Module, original: nn.Module) -> None:
    """Give ``template`` the parameter sharing of ``original`` (tied input and output embeddings), which moving
    a copy to the meta device loses; ``functional_call`` then fills every tied name from one stacked tensor."""
    first: dict[int, str] = {}
    for name, parameter in original.named_parameters(remove_duplicate=False):
        if id(parameter) not in first:
            first[id(parameter)] = name
            continue
        path, _, leaf = name.rpartition(".")
        owner = template.get_submodule(path) if path else template
        owner.register_parameter(leaf, template.get_parameter(first[id(parameter)]))


def train_next_token_together(models: Sequence[nn.Module], trains: Sequence[Int[Tensor, "example 4"]],
                              evaluation: Tensor, test: Tensor, epochs: int, lr: float = 5e-4, batch_size: int = 128,
                              frozen: Sequence[FrozenWeights | None] | None = None, seeds: Sequence[int] | None = None,
                              progress: bool = True, desc: str = "training together",
                              weight_decay: float = 0.01, checkpoint: Path | None = None,
                              checkpoint_seconds: float = 60.0) -> list[TrainingResult]:
    """``train_next_token`` for each model at once: model i trains on ``trains[i]`` in the order drawn from
    ``seeds[i]`` with ``frozen[i]`` held; one AdamW (lr, ``weight_decay``: torch's default 0.01; 0 is plain Adam)
    over the stacks. Every training set
    must have the same number of rows (then every step has the same batch size for all models). The models
    hold their final weights afterwards; the results are in the order of ``models``. With ``checkpoint``, the
    progress is saved there after an epoch when ``checkpoint_seconds`` have passed since the last save, and after
    the last epoch; a checkpoint of this same training resumes it (one of other models, data or settings, or a
    damaged one, is trained over from the start and overwritten)."""
    count = len(models)
    frozen = list(frozen) if frozen is not None else [None] * count
    seeds = list(seeds) if seeds is not None else [0] * count
    if not count or not len(trains) == len(frozen) == len(seeds) == count:
        raise HeurlensError(f"give one training set, frozen weights (or None) and seed per model: {count} models, "
                            f"{len(trains)} sets, {len(frozen)} frozen, {len(seeds)} seeds")
    if len({len(train) for train in trains}) != 1:
        raise HeurlensError(f"models trained together need training sets of one size, got "
                            f"{sorted({len(train) for train in trains})} rows")
    stacked = StackedModels(models)
    device = device_of(models[0])
    held = FrozenWeights.stacked(stacked.parameters, frozen)
    optimizer = torch.optim.AdamW(stacked.parameters.values(), lr=lr, weight_decay=weight_decay, fused=True)
    generators = [torch.Generator().manual_seed(seed) for seed in seeds]
    progress_state = _Progress(epochs_done=0, best=[(-1.0, 0.0)] * count, histories=[[] for _ in range(count)])
    identity = "" if checkpoint is None else _fingerprint(
        stacked, held, trains, evaluation, test,
        # "dropout": checkpoints written while dropout came from torch's generator (before 2026-11-26) start over
        dict(epochs=epochs, lr=lr, batch_size=batch_size, seeds=seeds, weight_decay=weight_decay, dropout="keyed"))
    if checkpoint is not None:
        progress_state = _resume(checkpoint, identity, stacked, optimizer, generators) or progress_state
    best, histories, saved_at = progress_state.best, progress_state.histories, time.monotonic()
    for epoch in progress_bar(range(progress_state.epochs_done, epochs), desc=desc, unit="epoch", disable=not progress,
                      leave=False, initial=progress_state.epochs_done, total=epochs):
        stacked.template.train()
        batches = zip(*(batches_of(train, batch_size, generator) for train, generator in zip(trains, generators)))
        for number, step in enumerate(batches):
            stacked.set_dropout_keys(seeds, epoch * STEPS_PER_EPOCH_BOUND + number)
            tokens = torch.stack(step).to(device)
            logits = stacked.forward_each(stacked.parameters, stacked.buffers, tokens[:, :, :-1])
            losses = F.cross_entropy(logits.flatten(0, 2), tokens[:, :, 1:].flatten(), reduction="none")
            losses = losses.view(count, -1).mean(1)  # each model's next_token_loss
            optimizer.zero_grad()
            losses.sum().backward()
            held.zero_gradients()
            optimizer.step()
            held.restore()
        evaluations = stacked.answer_accuracies(evaluation)
        improved = [index for index in range(count) if is_best_epoch(evaluations[index], best[index][0], ties="later")]
        tests = dict(zip(improved, stacked.answer_accuracies(test, improved)))  # only where it will be kept
        for index in range(count):
            scores = {"epoch": epoch, "loss": losses[index].item(), "eval": evaluations[index]}
            if index in tests:
                scores["test"] = tests[index]
                best[index] = (evaluations[index], tests[index])
            histories[index].append(scores)
        if checkpoint is not None and (epoch + 1 == epochs or time.monotonic() - saved_at >= checkpoint_seconds):
            _save(checkpoint, identity, _Progress(epoch + 1, best, histories), stacked, optimizer, generators)
            saved_at = time.monotonic()
    stacked.write_back()
    return [TrainingResult(eval_accuracy, test_accuracy, history, lr)
            for (eval_accuracy, test_accuracy), history in zip(best, histories)]


STEPS_PER_EPOCH_BOUND = 2**20  # dropout keys number the steps epoch * this + step (an epoch has fewer steps)


def train_together_with_lr_search(prepare: Callable[[], Sequence[tuple[nn.Module, FrozenWeights | None]]],
                                  lrs: Sequence[float], trains: Sequence[Tensor], evaluation: Tensor, test: Tensor,
                                  epochs: int, batch_size: int = 128, seeds: Sequence[int] | None = None,
                                  progress: bool = True, desc: str = "training together",
                                  weight_decay: float = 0.01, checkpoints: Path | None = None) -> list[TrainingResult]:
    """``train_next_token_together`` once per learning rate, each time on models fresh from ``prepare()``;
    per model, the learning rate ``best_by_evaluation`` picks (the released transfer script's search). With
    ``checkpoints`` (a folder), each learning rate's training resumes from ``checkpoint_path(checkpoints, lr)``."""
    if not lrs:
        raise HeurlensError("give at least one learning rate to search")
    per_lr = []
    for lr in lrs:
        prepared = prepare()
        per_lr.append(train_next_token_together(
            [model for model, _ in prepared], trains, evaluation, test, epochs, lr, batch_size,
            [frozen for _, frozen in prepared], seeds, progress, f"{desc} (lr {lr:g})", weight_decay,
            None if checkpoints is None else checkpoint_path(checkpoints, lr)))
    return [best_by_evaluation(results) for results in zip(*per_lr)]


def checkpoint_path(folder: Path, lr: float) -> Path:
    """Where ``train_together_with_lr_search`` keeps the progress of its training at ``lr``."""
    return Path(folder) / f"lr{lr:g}.pt"


@dataclass
class _Progress:
    """How far a training together got: epochs done, per model (best evaluation, its test) and history."""

    epochs_done: int
    best: list[tuple[float, float]]
    histories: list[list[dict]]


def _fingerprint(stacked: StackedModels, held: FrozenWeights, trains: Sequence[Tensor], evaluation: Tensor,
                 test: Tensor, settings: dict) -> str:
    """sha256 of everything a training together starts from: settings, data, initial stacks and frozen masks."""
    digest = hashlib.sha256(json.dumps(settings, sort_keys=True).encode())
    tensors = [*trains, evaluation, test, *(stacked.parameters[name] for name in sorted(stacked.parameters)),
               *(held.masks[name] for name in sorted(held.masks))]
    for tensor in tensors:
        digest.update(f"{tensor.dtype}{tuple(tensor.shape)}".encode())
        digest.update(weight_bytes(tensor))
    return digest.hexdigest()


def _save(path: Path, identity: str, progress: _Progress, stacked: StackedModels, optimizer: torch.optim.Optimizer,
          generators: Sequence[torch.Generator]) -> None:
    """Write everything the training needs to go on after ``progress.epochs_done`` epochs
    (``heurlens.runtime.checkpoints``)."""
    save_checkpoint(path, identity, {
        "epochs_done": progress.epochs_done, "best": progress.best, "histories": json.dumps(progress.histories),
        "parameters": {name: stack.detach().cpu() for name, stack in stacked.parameters.items()},
        "optimizer": optimizer.state_dict(), "generators": [g.get_state() for g in generators]})


def _resume(path: Path, identity: str, stacked: StackedModels, optimizer: torch.optim.Optimizer,
            generators: Sequence[torch.Generator]) -> _Progress | None:
    """Load the checkpoint at ``path`` into the stacks, optimizer and data-order generators if it was saved by this same
    training (``identity``); None (start from epoch 0) when there is none, it is damaged or it is another's."""
    checkpoint = load_checkpoint(path)
    if checkpoint is None or checkpoint[0] != identity:
        return None
    state = checkpoint[1]
    with torch.no_grad():
        for name, stack in stacked.parameters.items():
            stack.copy_(state["parameters"][name])
    optimizer.load_state_dict(state["optimizer"])
    for generator, generator_state in zip(generators, state["generators"]):
        generator.set_state(generator_state)
    return _Progress(int(state["epochs_done"]), [tuple(pair) for pair in state["best"]], json.loads(state["histories"]))
