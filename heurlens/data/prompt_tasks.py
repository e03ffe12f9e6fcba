"""Prompt tasks for decoder LMs: a prompt, the answer token that should come next, distractor answers, and
optionally a corrupted prompt (the same prompt with the information that decides the answer changed).

Sources: a JSONL or CSV file (columns ``prompt``, ``answer``, optional ``distractors`` (a list in JSONL,
``|``-separated in CSV) and ``corrupted_prompt``), or a generator made offline: indirect-object
identification with the templates of Wang et al. (2022, "Interpretability in the wild"). Tokenized
(``tokenize_prompt_task``) every answer and distractor must be one token and every prompt fit the
model's context; metrics at the answer position are in ``prompt_metrics``.
"""

from __future__ import annotations

import csv
import json
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch
from jaxtyping import Float, Int
from torch import Tensor

from heurlens.errors import HeurlensError


@dataclass(frozen=True)
class PromptExample:
    prompt: str
    answer: str
    distractors: tuple[str, ...] = ()
    corrupted_prompt: str | None = None


def load_prompt_file(path: str | Path) -> list[PromptExample]:
    """Examples from a JSONL or CSV file (see the module docstring); a missing column or an empty prompt or
    answer is named with its line."""
    path = Path(path)
    if not path.is_file():
        raise HeurlensError(f"prompt task file {path} does not exist; give a .jsonl or .csv file")
    if path.suffix == ".jsonl":
        rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    elif path.suffix == ".csv":
        with path.open(newline="") as handle:
            rows = [row | {"distractors": [d for d in (row.get("distractors") or "").split("|") if d]}
                    for row in csv.DictReader(handle)]
    else:
        raise HeurlensError(f"prompt task file {path}: use .jsonl or .csv (columns prompt, answer, distractors, "
                            "corrupted_prompt)")
    examples = []
    for number, row in enumerate(rows, start=1):
        if not row.get("prompt") or not row.get("answer"):
            raise HeurlensError(f"{path}, example {number}: every example needs a non-empty prompt and answer")
        examples.append(PromptExample(row["prompt"], row["answer"], tuple(row.get("distractors") or ()),
                                      row.get("corrupted_prompt") or None))
    if not examples:
        raise HeurlensError(f"prompt task file {path} holds no examples")
    return examples


# Wang et al. (2022), the BABA templates of their IOI dataset: [B] is the subject (named twice), [A] the
# indirect object, the answer. Their ABBA forms name the two in the other order in the first clause.
IOI_TEMPLATES = (
    "Then, [B] and [A] went to the [PLACE]. [B] gave a [OBJECT] to",
    "Then, [B] and [A] had a lot of fun at the [PLACE]. [B] gave a [OBJECT] to",
    "Then, [B] and [A] were working at the [PLACE]. [B] decided to give a [OBJECT] to",
    "Then, [B] and [A] were thinking about going to the [PLACE]. [B] wanted to give a [OBJECT] to",
    "Then, [B] and [A] had a long argument, and afterwards [B] said to",
    "After [B] and [A] went to the [PLACE], [B] gave a [OBJECT] to",
    "When [B] and [A] got a [OBJECT] at the [PLACE], [B] decided to give it to",
    "When [B] and [A] got a [OBJECT] at the [PLACE], [B] decided to give the [OBJECT] to",
    "While [B] and [A] were working at the [PLACE], [B] gave a [OBJECT] to",
    "While [B] and [A] were commuting to the [PLACE], [B] gave a [OBJECT] to",
    "After the lunch, [B] and [A] went to the [PLACE]. [B] gave a [OBJECT] to",
    "Afterwards, [B] and [A] went to the [PLACE]. [B] gave a [OBJECT] to",
    "Then, [B] and [A] had a long argument. Afterwards [B] said to",
    "The [PLACE] [B] and [A] went to had a [OBJECT]. [B] gave it to",
    "Friends [B] and [A] found a [OBJECT] at the [PLACE]. [B] gave it to",
)
IOI_NAMES = ("Mary", "John", "Tom", "James", "Dan", "Sarah", "Anna", "Paul", "Mark", "Lisa", "Kate", "David",
             "Michael", "Emma", "Laura", "Peter", "Jack", "Alice", "Rose", "Sam")
IOI_PLACES = ("store", "garden", "restaurant", "school", "hospital", "office", "house", "station")
IOI_OBJECTS = ("ring", "kiss", "bone", "basketball", "computer", "necklace", "drink", "snack")


def ioi_examples(n: int, seed: int = 0, names: Sequence[str] = IOI_NAMES) -> list[PromptExample]:
    """n indirect-object-identification prompts, half in the BABA and half in the ABBA order: the answer is
    `` IO`` (named once), the distractor `` S`` (the subject, named twice); the corrupted prompt names two
    other people in the first clause, so nothing in it says who the indirect object is (Wang et al.'s ABC
    baseline)."""
    if len(set(names)) < 4:
        raise HeurlensError("the IOI task needs at least 4 different names (IO, S and two for the corrupted prompt)")
    generator = random.Random(seed)
    examples = []
    for index in range(n):
        template = IOI_TEMPLATES[index % len(IOI_TEMPLATES)]
        if index % 2:  # ABBA: the indirect object is named first
            template = template.replace("[B] and [A]", "[A] and [B]", 1)
        io, subject, other1, other2 = generator.sample(list(dict.fromkeys(names)), 4)
        filled = (template.replace("[PLACE]", generator.choice(IOI_PLACES))
                  .replace("[OBJECT]", generator.choice(IOI_OBJECTS)))
        prompt = filled.replace("[A]", io).replace("[B]", subject)
        first_clause, rest = _split_at_second_subject(filled)
        corrupted = (first_clause.replace("[A]", other1).replace("[B]", other2) + rest.replace("[B]", subject))
        examples.append(PromptExample(prompt, f" {io}", (f" {subject}",), corrupted))
    return examples


def _split_at_second_subject(filled: str) -> tuple[str, str]:
    """The template up to (not including) its second [B], and the rest."""
    second = filled.index("[B]", filled.index("[B]") + 3)
    return filled[:second], filled[second:]


def single_token_names(tokenizer, names: Sequence[str] = IOI_NAMES) -> list[str]:
    """The names that are one token after a space for this tokenizer (IOI answers must be single tokens)."""
    return [name for name in names if len(tokenizer.encode(f" {name}", add_special_tokens=False)) == 1]


@dataclass
class PromptSet:
    """Tokenized prompts (right-padded batches: a decoder ``HookedClassifier`` scores the last real token,
    the answer position) with the token ids of each example's answer and distractors."""

    name: str
    batches: list[dict[str, Tensor]]
    answers: Int[Tensor, " example"]
    distractors: Int[Tensor, "example distractor"] = field(default_factory=lambda: torch.zeros(0, 0, dtype=torch.long))

    def __len__(self) -> int:
        return len(self.answers)


def _one_token(tokenizer, text: str, where: str) -> int:
    ids = tokenizer.encode(text, add_special_tokens=False)
    if len(ids) != 1:
        raise HeurlensError(f"{where}: {text!r} is {len(ids)} tokens for this tokenizer; answers and distractors "
                            "must be single tokens (mind the leading space, e.g. ' Mary')")
    return ids[0]


def tokenize_prompt_task(name: str, examples: Sequence[PromptExample], tokenizer, n_ctx: int, batch_size: int = 32,
                         corrupted: bool = False) -> PromptSet:
    """``examples`` (or their corrupted prompts) as a ``PromptSet``; refuses answers or distractors that are not
    one token, examples with different numbers of distractors, and prompts longer than the context."""
    if not examples:
        raise HeurlensError(f"prompt task {name} has no examples")
    if len({len(e.distractors) for e in examples}) != 1:
        raise HeurlensError(f"prompt task {name}: give every example the same number of distractors")
    prompts = []
    for number, example in enumerate(examples, start=1):
        prompt = example.corrupted_prompt if corrupted else example.prompt
        if prompt is None:
            raise HeurlensError(f"prompt task {name}, example {number} has no corrupted prompt")
        length = len(tokenizer.encode(prompt))
        if length > n_ctx:
            raise HeurlensError(f"prompt task {name}, example {number}: {length} tokens, longer than the model's "
                                f"context of {n_ctx}; shorten the prompt")
        prompts.append(prompt)
    answers = torch.tensor([_one_token(tokenizer, e.answer, f"{name}, example {i}") for i, e in enumerate(examples, 1)])
    distractors = torch.tensor([[_one_token(tokenizer, d, f"{name}, example {i}") for d in e.distractors]
                                for i, e in enumerate(examples, 1)], dtype=torch.long)
    batches = [{k: v for k, v in tokenizer(prompts[i:i + batch_size], padding=True, return_tensors="pt").items()
                if k in ("input_ids", "attention_mask")} for i in range(0, len(prompts), batch_size)]
    return PromptSet(name, batches, answers, distractors.view(len(examples), -1))


def prompt_metrics(logits: Float[Tensor, "example vocab"], prompts: PromptSet,
                   reference: Float[Tensor, "example vocab"] | None = None) -> dict[str, float]:
    """At the answer position: ``accuracy`` (the answer's logit above every distractor's; with no distractors,
    the answer is the top token), ``logit_difference`` (the answer's logit minus the mean distractor logit,
    Wang et al.'s IOI metric; with no distractors absent), and with ``reference`` logits (the full model's)
    ``kl``: the mean KL(reference || model) of the next-token distributions, in nats."""
    answer = logits.gather(1, prompts.answers[:, None])[:, 0]
    metrics: dict[str, float] = {}
    if prompts.distractors.shape[1]:
        others = logits.gather(1, prompts.distractors)
        metrics["accuracy"] = int((answer > others.max(1).values).sum()) / len(answer)
        metrics["logit_difference"] = float((answer - others.mean(1)).mean())
    else:
        metrics["accuracy"] = int((logits.argmax(1) == prompts.answers).sum()) / len(answer)
    if reference is not None:
        from heurlens.evaluate import mean_kl  # evaluate reads PromptSet from here: imported when used

        metrics["kl"] = mean_kl(reference, logits)
    return metrics


PROMPT_TASKS = ("ioi",)  # built-in generators; anything else is read as a task file


def prompt_task_set(task: str, tokenizer, n_ctx: int, examples: int = 200, seed: int = 0,
                    batch_size: int = 32) -> PromptSet:
    """``task``: "ioi" (``examples`` prompts drawn with ``seed``, names that are one token for this tokenizer)
    or a prompt task file (its first ``examples`` rows after a shuffle with ``seed``), tokenized."""
    if task == "ioi":
        chosen = ioi_examples(examples, seed, single_token_names(tokenizer))
    elif Path(task).suffix in (".jsonl", ".csv"):
        rows = load_prompt_file(task)
        chosen = random.Random(seed).sample(rows, min(examples, len(rows)))
    else:
        raise HeurlensError(f"unknown task {task!r}: use {', '.join(PROMPT_TASKS)} or a .jsonl/.csv prompt task file")
    return tokenize_prompt_task(f"{Path(task).stem}-s{seed}", chosen, tokenizer, n_ctx, batch_size)
