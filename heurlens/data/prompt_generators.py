"""Prompt tasks made offline, and the choice between them and a task file (``prompt_task_set``):
indirect-object identification with the templates of Wang et al. (2022, "Interpretability in the wild"),
greater-than with the template of Hanna et al. (2023, "How does GPT-2 compute greater-than?") and induction on
repeated random words. Each returns ``PromptExample``s (``heurlens.data.prompt_tasks``)."""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path

from heurlens.data.prompt_tasks import PromptExample, PromptSet, load_prompt_file, tokenize_prompt_task
from heurlens.errors import HeurlensError

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
    below (the equal digit can go either way and is left out). Centuries 11-17, start years YY in 10..89. The
    corrupted prompt starts the span in the year CC01 (Hanna et al.'s "01-year" corruption): every ending is
    then later, so the start year's information is gone."""
    endings = _year_tokens(tokenizer)
    generator = random.Random(seed)
    examples = []
    for _ in range(n):
        century, start = generator.randrange(11, 18), generator.randrange(10, 90)
        noun = generator.choice(GREATER_THAN_NOUNS)
        prompt = GREATER_THAN_TEMPLATE.format(noun=noun, century=century, start=start)
        if endings == 2:
            later, earlier = [f"{y:02d}" for y in range(start + 1, 100)], [f"{y:02d}" for y in range(start + 1)]
        else:
            later, earlier = [str(d) for d in range(start // 10 + 1, 10)], [str(d) for d in range(start // 10)]
        corrupted = GREATER_THAN_TEMPLATE.format(noun=noun, century=century, start=1)
        examples.append(PromptExample(prompt, later[0], tuple(earlier), corrupted, other_answers=tuple(later[1:])))
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


PROMPT_TASKS = ("ioi", "greater-than", "induction")  # built-in generators; anything else is a task file


def file_draw(n_rows: int, examples: int, seed: int) -> list[int]:
    """Which rows of a prompt task file a set of ``examples`` prompts drawn with ``seed`` holds (all of them, in a
    shuffled order, when the file has fewer)."""
    return random.Random(seed).sample(range(n_rows), min(examples, n_rows))


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
        chosen = [rows[index] for index in file_draw(len(rows), examples, seed)]
    else:
        raise HeurlensError(f"unknown task {task!r}: use {', '.join(PROMPT_TASKS)} or a .jsonl/.csv prompt task file")
    return tokenize_prompt_task(f"{Path(task).stem}-s{seed}", chosen, tokenizer, n_ctx, batch_size,
                                add_special_tokens=add_special_tokens)
