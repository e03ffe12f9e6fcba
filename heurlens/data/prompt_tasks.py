"""Prompt tasks for decoder LMs: a prompt, the answer token that should come next (and optionally further
correct tokens), distractor answers, and optionally a corrupted prompt (the same prompt with the information
that decides the answer changed).

Sources: a JSONL or CSV file (columns ``prompt``, ``answer``, optional ``distractors`` and ``other_answers``
(lists in JSONL, ``|``-separated in CSV) and ``corrupted_prompt``), or a generator made offline
(``heurlens.data.prompt_generators``). Tokenized (``tokenize_prompt_task``) every answer and distractor must be one token
and every prompt fit the model's context; metrics at the answer position are in ``prompt_metrics``.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch
from jaxtyping import Float, Int
from torch import Tensor

from heurlens.data.files import read_jsonl_objects
from heurlens.errors import HeurlensError
from heurlens.evaluate import mean_kl
from heurlens.tasks import batch_examples


@dataclass(frozen=True)
class PromptExample:
    """``answer`` and ``other_answers`` are the correct next tokens, ``distractors`` the wrong ones compared
    with them (greater-than: every later year is correct, every earlier one a distractor)."""

    prompt: str
    answer: str
    distractors: tuple[str, ...] = ()
    corrupted_prompt: str | None = None
    other_answers: tuple[str, ...] = ()

    @property
    def answers(self) -> tuple[str, ...]:
        return (self.answer, *self.other_answers)


def load_prompt_file(path: str | Path) -> list[PromptExample]:
    """Examples from a JSONL or CSV file (see the module docstring); a missing column or an empty prompt or
    answer is named with its line."""
    path = Path(path)
    if not path.is_file():
        raise HeurlensError(f"prompt task file {path} does not exist; give a .jsonl or .csv file")
    if path.suffix not in (".jsonl", ".csv"):
        raise HeurlensError(f"prompt task file {path}: use .jsonl or .csv (columns prompt, answer, distractors, "
                            "corrupted_prompt)")
    try:
        text = path.read_text()
    except UnicodeDecodeError as error:
        raise HeurlensError(f"prompt task file {path} is not text (byte {error.start} is not UTF-8); give a .jsonl "
                            "or .csv file of prompt, answer, distractors") from error
    if path.suffix == ".jsonl":
        rows = read_jsonl_objects(path, text, "prompt, answer, distractors")
    else:
        rows = [row | {column: [d for d in (row.get(column) or "").split("|") if d]
                       for column in ("distractors", "other_answers")}
                for row in csv.DictReader(io.StringIO(text, newline=""))]
    examples = []
    for number, row in enumerate(rows, start=1):
        answer = row.get("answer")
        if isinstance(answer, list) and len(answer) == 1 and isinstance(answer[0], str):
            row = row | {"answer": answer[0]}  # ["dog"]: one answer written as a list, unambiguous
        if not row.get("prompt") or not row.get("answer"):
            raise HeurlensError(f"{path}, example {number}: every example needs a non-empty prompt and answer")
        for column in ("prompt", "answer", "corrupted_prompt"):
            if row.get(column) is not None and not isinstance(row[column], str):
                raise HeurlensError(f"{path}, example {number}: {column} is a {type(row[column]).__name__}, not a "
                                    "text" + (" (one answer token; further correct ones go in other_answers)"
                                              if column == "answer" else ""))
        for column in ("distractors", "other_answers"):
            value = row.get(column) or []
            if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
                raise HeurlensError(f"{path}, example {number}: {column} must be a list of texts")
        examples.append(PromptExample(row["prompt"], row["answer"], tuple(row.get("distractors") or ()),
                                      row.get("corrupted_prompt") or None, tuple(row.get("other_answers") or ())))
    if not examples:
        raise HeurlensError(f"prompt task file {path} holds no examples")
    return examples


# Wang et al. (2022), the BABA templates of their IOI dataset: [B] is the subject (named twice), [A] the
# indirect object, the answer. Their ABBA forms name the two in the other order in the first clause.
@dataclass
class PromptSet:
    """Tokenized prompts (right-padded batches: a decoder ``HookedClassifier`` scores the last real token,
    the answer position) with the token ids of each example's correct answers and distractors, padded with -1
    where examples have different numbers of them, and the prompts' text. ``corrupted``: the same examples'
    corrupted prompts as a prompt set in the same batches (``heurlens.interventions.corruption``), when every example
    has one."""

    name: str
    batches: list[dict[str, Tensor]]
    answers: Int[Tensor, "example answer"]
    distractors: Int[Tensor, "example distractor"] = field(
        default_factory=lambda: torch.zeros(0, 0, dtype=torch.long, device="cpu"))
    prompts: list[str] = field(default_factory=list)
    corrupted: PromptSet | None = None

    def __len__(self) -> int:
        return len(self.answers)

    def batch_task(self, index: int) -> PromptSet:
        """Batch ``index`` alone, as a task (a metric's view of one pruning batch: ``heurlens.metrics``)."""
        rows = batch_examples(self.batches, index)
        return PromptSet(self.name, [self.batches[index]], self.answers[rows],
                         self.distractors[rows] if self.distractors.numel() else self.distractors, self.prompts[rows],
                         self.corrupted.batch_task(index) if self.corrupted is not None else None)

    def accuracy(self, scores: Float[Tensor, "example vocab"], model_labels: tuple[str, ...] | None = None) -> float:
        """Fraction of prompts whose best correct answer beats every distractor (``prompt_metrics``)."""
        return prompt_metrics(scores, self)["accuracy"]


def _one_token(tokenizer, text: str, where: str) -> int:
    ids = tokenizer.encode(text, add_special_tokens=False)
    if len(ids) != 1:
        raise HeurlensError(f"{where}: {text!r} is {len(ids)} tokens for this tokenizer; answers and distractors "
                            "must be single tokens (mind the leading space, e.g. ' Mary')")
    if ids[0] == tokenizer.unk_token_id:
        raise HeurlensError(f"{where}: {text!r} is the unknown token for this tokenizer; use a word it knows")
    return ids[0]


def _padded(rows: list[list[int]]) -> Int[Tensor, "example column"]:
    width = max((len(row) for row in rows), default=0)
    return torch.tensor([row + [-1] * (width - len(row)) for row in rows], dtype=torch.long,
                        device="cpu").view(len(rows), width)


def tokenize_prompt_task(name: str, examples: Sequence[PromptExample], tokenizer, n_ctx: int, batch_size: int = 32,
                         corrupted: bool = False, add_special_tokens: bool = True) -> PromptSet:
    """``examples`` (or their corrupted prompts) as a ``PromptSet``; refuses answers or distractors that are not
    one token, a mix of examples with and without distractors, and prompts longer than the context.
    ``add_special_tokens``: whether the tokenizer adds its special tokens (a decoder's BOS, as TransformerLens'
    ``prepend_bos``); turn it off for a tokenizer that would append one after the prompt (BERT's [SEP]), which
    would move the scored position off the prompt's last token. When every example has a corrupted prompt, the
    set carries them too, tokenised in the same batches (``PromptSet.corrupted``)."""
    if not examples:
        raise HeurlensError(f"prompt task {name} has no examples")
    if len({bool(e.distractors) for e in examples}) != 1:
        raise HeurlensError(f"prompt task {name}: give every example distractors, or none")
    prompts = []
    for number, example in enumerate(examples, start=1):
        prompt = example.corrupted_prompt if corrupted else example.prompt
        if prompt is None:
            raise HeurlensError(f"prompt task {name}, example {number} has no corrupted prompt")
        length = len(tokenizer.encode(prompt, add_special_tokens=add_special_tokens))
        if length > n_ctx:
            raise HeurlensError(f"prompt task {name}, example {number}: {length} tokens, longer than the model's "
                                f"context of {n_ctx}; shorten the prompt")
        prompts.append(prompt)
    answers = _padded([[_one_token(tokenizer, a, f"{name}, example {i}") for a in e.answers]
                       for i, e in enumerate(examples, 1)])
    distractors = _padded([[_one_token(tokenizer, d, f"{name}, example {i}") for d in e.distractors]
                           for i, e in enumerate(examples, 1)])
    batches = [{k: v for k, v in tokenizer(prompts[i:i + batch_size], padding=True, return_tensors="pt",
                                           add_special_tokens=add_special_tokens).items()
                if k in ("input_ids", "attention_mask")} for i in range(0, len(prompts), batch_size)]
    corruption = (tokenize_prompt_task(f"{name} (corrupted)", examples, tokenizer, n_ctx, batch_size, True,
                                       add_special_tokens)
                  if not corrupted and all(example.corrupted_prompt for example in examples) else None)
    return PromptSet(name, batches, answers, distractors, prompts, corruption)


def _masked(values: Float[Tensor, "example vocab"], ids: Int[Tensor, "example k"],
            fill: float) -> Float[Tensor, "example k"]:
    """``values`` at ``ids`` per example, ``fill`` where ``ids`` is padding (-1)."""
    ids = ids.to(values.device)
    return values.gather(1, ids.clamp(min=0)).masked_fill(ids < 0, fill)


def logit_difference(logits: Float[Tensor, "example vocab"], prompts: PromptSet) -> Float[Tensor, ""]:
    """Wang et al.'s IOI metric, differentiable: the mean over examples of the mean correct-answer logit minus the
    mean distractor logit (the prompts must have distractors).

    Args:
        logits: the scores at the answer position ``[example, vocab]``.
        prompts: the prompt task (with distractors).

    Returns:
        A zero-dimensional tensor, with a gradient."""
    is_answer, is_distractor = prompts.answers >= 0, prompts.distractors >= 0
    mean_answer = _masked(logits, prompts.answers, 0.0).sum(1) / is_answer.sum(1).to(logits.device)
    mean_distractor = _masked(logits, prompts.distractors, 0.0).sum(1) / is_distractor.sum(1).to(logits.device)
    return (mean_answer - mean_distractor).mean()


def prompt_metrics(logits: Float[Tensor, "example vocab"], prompts: PromptSet,
                   reference: Float[Tensor, "example vocab"] | None = None) -> dict[str, float]:
    """At the answer position: ``accuracy`` (the best correct answer's logit above every distractor's; with no
    distractors, the top token is a correct answer), ``logit_difference`` (mean correct-answer logit minus mean
    distractor logit: Wang et al.'s IOI metric), ``probability_difference`` (summed probability of the correct
    answers minus that of the distractors: Hanna et al.'s greater-than metric), the last two only with
    distractors; with ``reference`` logits (the full model's) ``kl``: the mean KL(reference || model) of the
    next-token distributions, in nats."""
    logits = logits.float()
    best_answer = _masked(logits, prompts.answers, -math.inf).max(1).values
    metrics: dict[str, float] = {}
    if prompts.distractors.shape[1]:
        metrics["accuracy"] = float((best_answer > _masked(logits, prompts.distractors, -math.inf).max(1).values)
                                    .float().mean())
        metrics["logit_difference"] = float(logit_difference(logits, prompts))
        probabilities = logits.softmax(1)
        metrics["probability_difference"] = float((_masked(probabilities, prompts.answers, 0.0).sum(1)
                                                   - _masked(probabilities, prompts.distractors, 0.0).sum(1)).mean())
    else:
        metrics["accuracy"] = float((best_answer >= logits.max(1).values).float().mean())
    if reference is not None:
        metrics["kl"] = mean_kl(reference, logits)
    return metrics
