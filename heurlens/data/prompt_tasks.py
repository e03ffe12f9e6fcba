"""Prompt tasks for decoder LMs: a prompt, the answer token that should come next (and optionally further
correct tokens), distractor answers, and optionally a corrupted prompt (the same prompt with the information
that decides the answer changed).

Sources: a JSONL or CSV file (columns ``prompt``, ``answer``, optional ``distractors`` and ``other_answers``
(lists in JSONL, ``|``-separated in CSV) and ``corrupted_prompt``), or a generator made offline:
indirect-object identification with the templates of Wang et al. (2022, "Interpretability in the wild"),
greater-than with the template of Hanna et al. (2023, "How does GPT-2 compute greater-than?") and induction
on repeated random words. Tokenized (``tokenize_prompt_task``) every answer and distractor must be one token
and every prompt fit the model's context; metrics at the answer position are in ``prompt_metrics``.
"""

from __future__ import annotations

import csv
import io
import math
import random
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
    """The names (or words) that are one known token after a space for this tokenizer (answers must be single
    tokens; a word the tokenizer maps to its unknown token is left out)."""
    return [name for name in names
            if len(ids := tokenizer.encode(f" {name}", add_special_tokens=False)) == 1 and ids[0] != tokenizer.unk_token_id]


# Hanna et al. (2023), Section 2: "The [NOUN] lasted from the year XXYY to the year XX", with their event nouns.
GREATER_THAN_TEMPLATE = "The {noun} lasted from the year {century}{start:02d} to the year {century}"
GREATER_THAN_NOUNS = ("war", "expedition", "project", "contract", "deal", "dynasty", "conflict", "reign",
                      "occupation", "pilgrimage", "journey", "voyage", "siege", "blockade", "campaign")


def greater_than_examples(n: int, tokenizer, seed: int = 0) -> list[PromptExample]:
    """n greater-than prompts for this tokenizer's way of writing years. Where the year's last two digits are
    one token (GPT-2: " 17", "32"), the correct answers are the later two-digit endings YY+1..99 and the
    distractors 00..YY (Hanna et al.'s probability difference); where digits are single tokens (Llama, SmolLM2),
    the next token is the tens digit: correct are the digits above the start's tens digit, distractors those
    below (the equal digit can go either way and is left out). Centuries 11-17, start years YY in 10..89."""
    endings = _year_tokens(tokenizer)
    generator = random.Random(seed)
    examples = []
    for _ in range(n):
        century, start = generator.randrange(11, 18), generator.randrange(10, 90)
        prompt = GREATER_THAN_TEMPLATE.format(noun=generator.choice(GREATER_THAN_NOUNS), century=century, start=start)
        if endings == 2:
            later, earlier = [f"{y:02d}" for y in range(start + 1, 100)], [f"{y:02d}" for y in range(start + 1)]
        else:
            later, earlier = [str(d) for d in range(start // 10 + 1, 10)], [str(d) for d in range(start // 10)]
        examples.append(PromptExample(prompt, later[0], tuple(earlier), other_answers=tuple(later[1:])))
    return examples


def _year_tokens(tokenizer) -> int:
    """How this tokenizer writes the year after "the year 17": 2 (two-digit tokens) or 1 (one token per digit)."""
    context = tokenizer.encode("from the year 1732", add_special_tokens=False)
    if [tokenizer.decode(i).strip() for i in context[-2:]] == ["17", "32"]:
        return 2
    if [tokenizer.decode(i).strip() for i in context[-4:]] == ["1", "7", "3", "2"]:
        return 1
    raise HeurlensError("greater-than needs a tokenizer that writes years as two two-digit tokens (GPT-2) or one "
                        "token per digit; this one does neither. Bring the task as a prompt file instead")


# Induction (Olsson et al. 2022) on repeated random words: after "A B C ... A B", the next word is "C". The prefix
# gives every word of the sequence its leading space, so a word's repeat is the same token as its first occurrence.
INDUCTION_PREFIX = "Words:"
INDUCTION_WORDS = ("apple", "river", "chair", "window", "garden", "music", "paper", "horse", "bottle", "mountain",
                   "pencil", "doctor", "island", "camera", "butter", "forest", "engine", "silver", "rabbit", "candle",
                   "letter", "bridge", "planet", "jacket", "carpet", "market", "tiger", "basket", "ocean", "hammer",
                   "pocket", "violin", "lemon", "rocket", "cloud", "desert", "kettle", "ladder", "mirror", "tunnel")


def induction_examples(n: int, tokenizer, seed: int = 0, length: int = 10,
                       words: Sequence[str] = INDUCTION_WORDS) -> list[PromptExample]:
    """n prompts of ``INDUCTION_PREFIX`` and ``length`` random words (one token each after a space, no word
    twice) followed by the first k of them again (k from 1 to length - 1): the answer is word k + 1 of the
    sequence, the distractors the other words of the sequence (copying any of them would be wrong)."""
    pool = single_token_names(tokenizer, words)
    if len(pool) < length:
        raise HeurlensError(f"induction needs {length} different words that are one token for this tokenizer; "
                            f"{len(pool)} of the words are. Lower the length or bring a prompt file")
    generator = random.Random(seed)
    examples = []
    for _ in range(n):
        sequence = generator.sample(pool, length)
        repeated = generator.randrange(1, length)
        prompt = INDUCTION_PREFIX + " " + " ".join(sequence + sequence[:repeated])
        answer = sequence[repeated]
        examples.append(PromptExample(prompt, f" {answer}", tuple(f" {w}" for w in sequence if w != answer)))
    return examples


@dataclass
class PromptSet:
    """Tokenized prompts (right-padded batches: a decoder ``HookedClassifier`` scores the last real token,
    the answer position) with the token ids of each example's correct answers and distractors, padded with -1
    where examples have different numbers of them, and the prompts' text."""

    name: str
    batches: list[dict[str, Tensor]]
    answers: Int[Tensor, "example answer"]
    distractors: Int[Tensor, "example distractor"] = field(
        default_factory=lambda: torch.zeros(0, 0, dtype=torch.long, device="cpu"))
    prompts: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.answers)

    def batch_task(self, index: int) -> PromptSet:
        """Batch ``index`` alone, as a task (a metric's view of one pruning batch: ``heurlens.metrics``)."""
        rows = batch_examples(self.batches, index)
        return PromptSet(self.name, [self.batches[index]], self.answers[rows],
                         self.distractors[rows] if self.distractors.numel() else self.distractors, self.prompts[rows])

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
    would move the scored position off the prompt's last token."""
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
    return PromptSet(name, batches, answers, distractors, prompts)


def _masked(values: Float[Tensor, "example vocab"], ids: Int[Tensor, "example k"],
            fill: float) -> Float[Tensor, "example k"]:
    """``values`` at ``ids`` per example, ``fill`` where ``ids`` is padding (-1)."""
    ids = ids.to(values.device)
    return values.gather(1, ids.clamp(min=0)).masked_fill(ids < 0, fill)


def prompt_metrics(logits: Float[Tensor, "example vocab"], prompts: PromptSet,
                   reference: Float[Tensor, "example vocab"] | None = None) -> dict[str, float]:
    """At the answer position: ``accuracy`` (the best correct answer's logit above every distractor's; with no
    distractors, the top token is a correct answer), ``logit_difference`` (mean correct-answer logit minus mean
    distractor logit: Wang et al.'s IOI metric), ``probability_difference`` (summed probability of the correct
    answers minus that of the distractors: Hanna et al.'s greater-than metric), the last two only with
    distractors; with ``reference`` logits (the full model's) ``kl``: the mean KL(reference || model) of the
    next-token distributions, in nats."""
    logits = logits.float()
    is_answer, is_distractor = prompts.answers >= 0, prompts.distractors >= 0
    best_answer = _masked(logits, prompts.answers, -math.inf).max(1).values
    metrics: dict[str, float] = {}
    if prompts.distractors.shape[1]:
        metrics["accuracy"] = float((best_answer > _masked(logits, prompts.distractors, -math.inf).max(1).values)
                                    .float().mean())
        mean_answer = _masked(logits, prompts.answers, 0.0).sum(1) / is_answer.sum(1)
        mean_distractor = _masked(logits, prompts.distractors, 0.0).sum(1) / is_distractor.sum(1)
        metrics["logit_difference"] = float((mean_answer - mean_distractor).mean())
        probabilities = logits.softmax(1)
        metrics["probability_difference"] = float((_masked(probabilities, prompts.answers, 0.0).sum(1)
                                                   - _masked(probabilities, prompts.distractors, 0.0).sum(1)).mean())
    else:
        metrics["accuracy"] = float((best_answer >= logits.max(1).values).float().mean())
    if reference is not None:
        metrics["kl"] = mean_kl(reference, logits)
    return metrics


PROMPT_TASKS = ("ioi", "greater-than", "induction")  # built-in generators; anything else is a task file


def prompt_task_set(task: str, tokenizer, n_ctx: int, examples: int = 200, seed: int = 0,
                    batch_size: int = 32, add_special_tokens: bool = True) -> PromptSet:
    """``task``: a built-in generator ("ioi", "greater-than", "induction": ``examples`` prompts drawn with
    ``seed`` for this tokenizer) or a prompt task file (``examples`` rows drawn with ``seed``), tokenized."""
    if task == "ioi":
        chosen = ioi_examples(examples, seed, single_token_names(tokenizer))
    elif task == "greater-than":
        chosen = greater_than_examples(examples, tokenizer, seed)
    elif task == "induction":
        chosen = induction_examples(examples, tokenizer, seed)
    elif Path(task).suffix in (".jsonl", ".csv"):
        rows = load_prompt_file(task)
        chosen = random.Random(seed).sample(rows, min(examples, len(rows)))
    else:
        raise HeurlensError(f"unknown task {task!r}: use {', '.join(PROMPT_TASKS)} or a .jsonl/.csv prompt task file")
    return tokenize_prompt_task(f"{Path(task).stem}-s{seed}", chosen, tokenizer, n_ctx, batch_size,
                                add_special_tokens=add_special_tokens)
