"""GPT-2-style decoders for the arithmetic tasks (Subtask Induction paper, Appendix B.1): 4 heads, d_model 128,
d_mlp 512, 2 to 12 layers, TransformerLens-native with hook points. Trained with next-token
cross-entropy on ``<a> <b> <sep> <c>`` and scored on the last token (c)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from jaxtyping import Int
from torch import Tensor, nn

from heurlens.errors import HeurlensError
from heurlens.runtime.devices import device_of
from heurlens.subtask.arithmetic import ArithmeticTask
from heurlens.trainer import train_epochs
from heurlens.training_helpers import FrozenWeights, shuffled_batches


def arithmetic_model(task: ArithmeticTask, n_layers: int = 2, seed: int = 0,
                     device: torch.device | str = "cpu") -> nn.Module:
    """A fresh decoder for ``task`` on ``device`` (a TransformerLens bridge: ``model(tokens)`` gives logits);
    its weights are drawn on the CPU, so a seed gives the same model on every device."""
    from heurlens.models.loading import load_native

    config = dict(n_layers=n_layers, d_model=128, n_heads=4, d_head=32, d_mlp=512, d_vocab=task.vocab_size,
                  n_ctx=4, act_fn="gelu", normalization_type="LN")
    with torch.device("cpu"):
        return load_native(config, seed=seed).bridge.to(device)


def next_token_loss(forward: Callable, sequences: Int[Tensor, "batch 4"]) -> Tensor:
    """Mean cross-entropy of predicting every next token (b, <sep>, c) from the ones before."""
    logits = forward(sequences[:, :-1])
    return F.cross_entropy(logits.flatten(0, 1), sequences[:, 1:].flatten())


def last_token_loss(forward: Callable, sequences: Int[Tensor, "batch 4"]) -> Tensor:
    """Cross-entropy of the answer c only (the subtask objective of subnetwork discovery)."""
    return F.cross_entropy(forward(sequences[:, :-1])[:, -1], sequences[:, -1])


@torch.no_grad()
def answer_accuracy(model: Callable[[Tensor], Tensor], sequences: Int[Tensor, "example 4"],
                    batch_size: int = 1024, device: torch.device | None = None) -> float:
    """Fraction of sequences whose answer token c is the model's top prediction after ``<sep>``; each chunk of
    sequences runs on ``device`` (default: where ``model``'s weights are, when it is a module)."""
    device = device or device_of(model)
    correct = 0
    for begin in range(0, len(sequences), batch_size):
        chunk = sequences[begin:begin + batch_size].to(device)
        correct += int((model(chunk[:, :-1])[:, -1].argmax(-1) == chunk[:, -1]).sum())
    return correct / len(sequences)


def batches_of(sequences: Tensor, batch_size: int, generator: torch.Generator) -> list[Tensor]:
    """``sequences`` in random order (drawn by the CPU ``generator``), cut into batches; on the CPU
    (``shuffled_batches`` of the sequences alone)."""
    return [batch for (batch,) in shuffled_batches([sequences], batch_size, generator)]


@contextmanager
def seeded_dropout(seed: int, device: torch.device) -> Iterator[None]:
    """Inside the block, the random draws of the CPU (and of ``device`` when it is a GPU), dropout's among them,
    start from ``seed``; the caller's random state is restored afterwards. So a seeded training gives the same model
    whatever ran before it in the process (a resumed sweep included)."""
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        torch.manual_seed(seed)
        yield


@dataclass
class TrainingResult:
    best_eval_accuracy: float
    test_accuracy: float  # at the (last) epoch with the best evaluation accuracy (the paper's model selection)
    history: list[dict] = field(default_factory=list)  # per epoch: loss, eval (and test where eval was a best)
    lr: float | None = None


def train_next_token(model: nn.Module, train: Tensor, evaluation: Tensor, test: Tensor, epochs: int,
                     lr: float = 5e-4, batch_size: int = 128, frozen: FrozenWeights | None = None, seed: int = 0,
                     progress: bool = True, desc: str = "training", patience: int | None = None,
                     weight_decay: float = 0.01) -> TrainingResult:
    """AdamW (torch's default decay 0.01; 0: plain Adam) on next-token loss, the model in train mode (dropout on,
    where it has any, as the released scripts' ``model.train()``); after each epoch, in eval mode, accuracy on
    ``evaluation``, and on ``test`` when the evaluation accuracy is at least the best so far; reports the test
    accuracy of the last epoch with the best evaluation accuracy (the released transfer script's model
    selection). ``frozen`` weights never move. The model is left in eval mode. Dropout draws come from ``seed``
    (``seeded_dropout``), as the data order does: the same call trains the same model.

    With ``patience`` (the released T1 script: the HF Trainer's ``EarlyStoppingCallback(early_stopping_patience=10)``
    with the best model loaded at the end), training stops once the evaluation accuracy has not risen strictly for
    ``patience`` epochs, and the model is left with the weights of the first epoch with the highest evaluation
    accuracy (HF's best checkpoint); the result then reports that epoch."""
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=lr,
                                  weight_decay=weight_decay, fused=True)
    generator = torch.Generator().manual_seed(seed)
    device = device_of(model)
    with seeded_dropout(seed, device):
        run = train_epochs(model, optimizer, lambda: batches_of(train, batch_size, generator),
                           lambda batch: next_token_loss(model, batch.to(device)),
                           lambda: {"eval": answer_accuracy(model, evaluation)}, epochs, "eval",
                           "later" if patience is None else "earlier", frozen=frozen, patience=patience,
                           restore_best=patience is not None, progress=progress, desc=desc,
                           at_best=None if patience is not None else lambda: {"test": answer_accuracy(model, test)})
    if patience is not None and run.best_epoch is not None:  # the best epoch's weights, restored: its test accuracy
        return TrainingResult(run.best["eval"], answer_accuracy(model, test), run.history, lr)
    return TrainingResult(run.best.get("eval", -1.0), run.best.get("test", 0.0), run.history, lr)


def best_by_evaluation(results: Sequence[TrainingResult]) -> TrainingResult:
    """The learning-rate search of the released transfer script, one result per lr in search order: it keeps
    the model of every epoch whose evaluation accuracy is at least the best so far (across lrs) and stops
    after the first lr that reaches 100%. So: the first perfect run if there is one, else the last run with
    the best evaluation accuracy."""
    if not results:
        raise HeurlensError("give at least one learning rate to search")
    perfect = [result for result in results if result.best_eval_accuracy == 1.0]
    if perfect:
        return perfect[0]
    top = max(result.best_eval_accuracy for result in results)
    return [result for result in results if result.best_eval_accuracy == top][-1]
