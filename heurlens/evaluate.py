"""Running a model over a task: logits, accuracy, and KL divergence to another run.

An ``EvalSet`` is a labelled task (``heurlens.protocols.Task``): a named, pre-tokenised list of batches, so the
same tokens serve the full model and every ablated variant, with a label per example. Text pair data
(premise, hypothesis, label) becomes one with ``tokenize_pairs``; a test can build one straight from tensors.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import datasets
import torch
import torch.nn.functional as F
from jaxtyping import Float, Int
from torch import Tensor

from heurlens.errors import HeurlensError
from heurlens.models.classifier import as_model
from heurlens.protocols import Batch, HookList, Metric, ModelLike, PreparedModel, Task
from heurlens.runtime.argument_checks import checked
from heurlens.runtime.call_context import CallContext, call_context
from heurlens.runtime.devices import to_device
from heurlens.runtime.precision import Precision, autocast
from heurlens.runtime.progress import progress_bar
from heurlens.tasks import TaskLike, as_task, batch_examples

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase


@dataclass
class EvalSet:
    """Tokenised examples in batches, their labels, and the names of those labels."""

    name: str
    batches: list[Batch]
    labels: Int[Tensor, " example"]
    label_names: tuple[str, ...]

    def __len__(self) -> int:
        return len(self.labels)

    def batch_task(self, index: int) -> EvalSet:
        """Batch ``index`` alone, as a task (a metric's view of one pruning batch: ``heurlens.metrics``)."""
        return EvalSet(self.name, [self.batches[index]], self.labels[batch_examples(self.batches, index)],
                       self.label_names)

    def accuracy(self, scores: Float[Tensor, "example label"], model_labels: tuple[str, ...] | None) -> float:
        """Fraction of examples whose top label, mapped to the data's labels (``label_map``), is the gold label."""
        if model_labels is None and scores.shape[-1] != len(self.label_names):
            raise HeurlensError(
                f"the model scores {scores.shape[-1]} outputs (a next-token model?) but {self.name} has "
                f"{len(self.label_names)} labels: accuracy on labelled pairs needs a classifier with one output per "
                "label (give the model's number of labels, or use a classifier)")
        predicted = label_map(model_labels, self.label_names)[scores.argmax(dim=-1).cpu()]
        return int((predicted == self.labels).sum()) / len(self.labels)  # exact: no float32 rounding


def tokenize_pairs(name: str, data: datasets.Dataset, tokenizer: PreTrainedTokenizerBase, batch_size: int = 64,
                   max_length: int = 128, sort_by_length: bool = False) -> EvalSet:
    """Tokenise premise/hypothesis pairs (as the model's tokenizer pairs them: [SEP], token types).

    Each batch is padded to its longest pair. ``sort_by_length`` orders the pairs by token count
    first, so batches hold pairs of similar length and carry little padding (training data, whose
    batches are drawn in random order anyway, and evaluation sets, whose metrics are means; SNLI
    pairs: 1.6x faster mask-training steps, benchmarks/length_sorted_batches.py).

    Args:
        name: the set's name in tables.
        data: a Dataset with premise, hypothesis and label columns.
        tokenizer: the model's tokenizer.
        batch_size: pairs a batch.
        max_length: tokens a pair at most (longer pairs are truncated).
        sort_by_length: order the pairs by token count before batching.

    Returns:
        An ``EvalSet``.
    """
    if tokenizer is None:
        raise HeurlensError(f"cannot tokenise {name}: this model has no tokenizer; build an EvalSet from token ids")
    if sort_by_length:
        lengths = [len(ids) for ids in tokenizer(list(data["premise"]), list(data["hypothesis"]), truncation=True,
                                                 max_length=max_length)["input_ids"]]
        data = data.select(sorted(range(len(data)), key=lengths.__getitem__))
    batches = []
    for begin in range(0, len(data), batch_size):
        rows = data[begin:begin + batch_size]
        encoded = tokenizer(rows["premise"], rows["hypothesis"], truncation=True, max_length=max_length,
                            padding=True, return_tensors="pt")
        batches.append({k: v for k, v in encoded.items() if k in ("input_ids", "attention_mask", "token_type_ids")})
    return EvalSet(name, batches, torch.tensor(data["label"], device="cpu"), tuple(data.features["label"].names))


@torch.no_grad()
@checked
def predict_logits(model: ModelLike, eval_set: TaskLike, *, fwd_hooks: HookList | None = None,
                   dtype: Precision = "float32") -> Float[Tensor, "example label"]:
    """The model's logits on every example (float32, on the CPU), with optional hooks ([(hook name, fn)])
    active; ``eval_set`` a task, a list of texts or a token tensor. ``dtype`` "bfloat16" or "float16" runs the
    matrix products in that precision (``heurlens.runtime.precision``; bfloat16 on this project's CPU: about 2x faster, and
    the predicted label of about 0.2% of pairs changes: ``benchmarks/bf16_evaluation.py``).

    Args:
        model: a ``HookedModel`` or a bare ``TransformerBridge``.
        eval_set: a task, a list of texts or a token tensor.
        fwd_hooks: ``(hook point, function)`` pairs active during the pass.
        dtype: the matrix products' precision, "float32", "bfloat16" or "float16" (``heurlens.runtime.precision``).

    Returns:
        The logits ``[example, label]``, float32, on the CPU."""
    model = as_model(model)
    return logits_in_context(model, as_task(model, eval_set), call_context(model, dtype, cache=False), fwd_hooks)


@torch.no_grad()
def logits_in_context(model: PreparedModel, task: Task, context: CallContext, fwd_hooks: HookList | None = None
                      ) -> Float[Tensor, "row output"]:
    """``predict_logits`` below the public door: the model and task as heurlens holds them, run where and in the
    precision the call's ``context`` says (each batch moved to ``context.device`` as it runs)."""
    outputs = []
    with model.hooks(fwd_hooks or []), autocast(context.dtype, context.device):
        for batch in progress_bar(task.batches, desc=f"the model on {task.name}", unit="batch", short=True):
            outputs.append(model(**to_device(batch, context.device)).float().cpu())
    return torch.cat(outputs)


def label_map(model_labels: tuple[str, ...] | None, data_labels: tuple[str, ...]) -> Int[Tensor, " model_label"]:
    """For each model label, the index of the data label it predicts.

    Same names map by name; a 3-way NLI model on 2-way HANS-style data maps neutral and
    contradiction to non-entailment; models with generic names (label_0..., HF's LABEL_0...) map by position.
    """
    if model_labels is None or tuple(model_labels) == tuple(data_labels):
        return torch.arange(len(data_labels) if model_labels is None else len(model_labels), device="cpu")
    if set(model_labels) <= set(data_labels):
        return torch.tensor([data_labels.index(label) for label in model_labels], device="cpu")
    if "non-entailment" in data_labels and "entailment" in model_labels:
        return torch.tensor([data_labels.index("entailment" if label == "entailment" else "non-entailment")
                             for label in model_labels], device="cpu")
    if all(label.lower().startswith("label_") for label in model_labels) and len(model_labels) == len(data_labels):
        return torch.arange(len(model_labels), device="cpu")
    raise HeurlensError(f"the model's labels {list(model_labels)} do not match the data's labels {list(data_labels)}")


def accuracy(logits: Float[Tensor, "example label"], task: Task, model_labels: tuple[str, ...] | None) -> float:
    """The task's accuracy of these logits (``Task.accuracy``): for labelled pairs, the fraction whose top label
    (mapped to the data's labels) is right; for a prompt task, of prompts whose answer beats its distractors.

    Args:
        logits: the model's scores ``[example, label]``.
        task: the task they are of.
        model_labels: the model's label names, mapped to the task's (None: in the task's order).

    Returns:
        The accuracy, a fraction."""
    return task.accuracy(logits, model_labels)


def accuracy_metric(model: PreparedModel) -> Metric:
    """The default metric of ablation tables: the task's accuracy, with ``model``'s label names."""
    return lambda scores, task: task.accuracy(scores, model.labels)


KL_CHUNK_ELEMENTS = 2**24  # scores per chunk of rows in mean_kl: 64 MiB of float32 temporaries at a time


def mean_kl(reference_logits: Float[Tensor, "example label"], logits: Float[Tensor, "example label"]) -> float:
    """Mean over examples of KL(p_reference || p), the pruning objective of the Heuristic Core paper (nats). KL is never
    negative; rounding in float32 can make a near-zero sum so, and it is reported as 0. NaN stays NaN (scores holding
    NaN or inf), never shown as a KL of 0. Computed over chunks of rows (``KL_CHUNK_ELEMENTS`` scores each), so a
    next-token model's rows x vocabulary needs a chunk's temporaries, not three copies of the whole.

    Args:
        reference_logits: the full model's scores ``[example, label]``.
        logits: the other model's scores, the same shape.

    Returns:
        The mean KL in nats (NaN when a score is NaN or infinite)."""
    rows = max(1, KL_CHUNK_ELEMENTS // max(1, reference_logits.shape[-1]))
    per_row = []
    for start in range(0, len(reference_logits), rows):
        reference = F.log_softmax(reference_logits[start:start + rows].float(), dim=-1)
        other = F.log_softmax(logits[start:start + rows].float(), dim=-1)
        per_row.append((reference.exp() * (reference - other)).sum(dim=-1))
    kl = torch.cat(per_row).mean().item() if per_row else math.nan  # no rows: no mean
    return kl if math.isnan(kl) else max(0.0, kl)
