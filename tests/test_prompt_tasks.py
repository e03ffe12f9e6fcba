"""Prompt tasks for decoder LMs: generators right by construction, the file format and its errors, tokenization
refusals, and the answer-position metrics on hand-set logits."""

import json
import math

import pytest
import torch
from conftest import word_level_tokenizer

from heurlens.data.prompt_tasks import (
    IOI_NAMES,
    PromptExample,
    ioi_examples,
    load_prompt_file,
    prompt_metrics,
    tokenize_prompt_task,
)
from heurlens.errors import HeurlensError


def test_ioi_answers_are_the_indirect_object_by_construction():
    examples = ioi_examples(30, seed=3)
    for index, example in enumerate(examples):
        io, subject = example.answer.strip(), example.distractors[0].strip()
        words = example.prompt.replace(",", " ").replace(".", " ").split()
        assert words.count(io) == 1 and words.count(subject) == 2 and io != subject
        assert not example.prompt.endswith(" ") and example.prompt.endswith("to")
        first = min(words.index(io), words.index(subject))
        assert words[first] == (io if index % 2 else subject)  # ABBA for odd examples, BABA for even
        corrupted = example.corrupted_prompt.replace(",", " ").replace(".", " ").split()
        assert io not in corrupted and corrupted.count(subject) == 1  # nothing left says who receives
        assert {w for w in corrupted if w in IOI_NAMES} - {subject}  # two other people in the first clause
    assert ioi_examples(30, seed=3) == examples and ioi_examples(30, seed=4) != examples


def test_prompt_files_in_jsonl_and_csv(tmp_path):
    jsonl = tmp_path / "task.jsonl"
    jsonl.write_text(json.dumps({"prompt": "the man sees the", "answer": " dog", "distractors": [" cat"]}) + "\n")
    csv_file = tmp_path / "task.csv"
    csv_file.write_text("prompt,answer,distractors,corrupted_prompt\nthe man sees the, dog, cat| man,a dog sees the\n")
    assert load_prompt_file(jsonl) == [PromptExample("the man sees the", " dog", (" cat",))]
    assert load_prompt_file(csv_file) == [PromptExample("the man sees the", " dog", (" cat", " man"), "a dog sees the")]
    jsonl.write_text(json.dumps({"prompt": "the man sees the"}) + "\n")
    with pytest.raises(HeurlensError, match="example 1: every example needs a non-empty prompt and answer"):
        load_prompt_file(jsonl)
    with pytest.raises(HeurlensError, match="use .jsonl or .csv"):
        load_prompt_file(_written(tmp_path / "task.txt"))


def _written(path):
    path.write_text("prompt,answer\n")
    return path


def test_tokenizing_refuses_multi_token_answers_and_long_prompts():
    tokenizer = word_level_tokenizer()
    good = [PromptExample("the man sees the", " dog", (" cat",)), PromptExample("a cat sees a", " man", (" dog",))]
    prompts = tokenize_prompt_task("toy", good, tokenizer, n_ctx=8)
    assert prompts.answers.tolist() == [5, 4] and prompts.distractors.tolist() == [[9], [5]]
    assert prompts.batches[0]["input_ids"].shape == (2, 4)
    with pytest.raises(HeurlensError, match="' a dog' is 2 tokens"):
        tokenize_prompt_task("toy", [PromptExample("the man sees", " a dog")], tokenizer, n_ctx=8)
    with pytest.raises(HeurlensError, match="5 tokens, longer than the model's context of 4"):
        tokenize_prompt_task("toy", [PromptExample("the man sees the cat", " dog")], tokenizer, n_ctx=4)


def test_metrics_on_hand_set_logits():
    tokenizer = word_level_tokenizer()
    prompts = tokenize_prompt_task("toy", [PromptExample("the man sees the", " dog", (" cat",)),
                                           PromptExample("a cat sees a", " man", (" dog",))], tokenizer, n_ctx=8)
    logits = torch.zeros(2, 11)
    logits[0, 5], logits[0, 9] = 3.0, 1.0  # answer dog beats cat by 2
    logits[1, 4], logits[1, 5] = 0.0, 1.0  # answer man loses to dog by 1
    metrics = prompt_metrics(logits, prompts, reference=logits)
    assert metrics["accuracy"] == 0.5 and metrics["logit_difference"] == pytest.approx((2 - 1) / 2)
    assert metrics["kl"] == 0.0
    shifted = logits.clone()
    shifted[0, 5] = 0.0  # the model now gives dog no more than any other token
    p = torch.softmax(logits[0], -1)
    expected = float((p * (torch.log_softmax(logits[0], -1) - torch.log_softmax(shifted[0], -1))).sum()) / 2
    assert prompt_metrics(shifted, prompts, reference=logits)["kl"] == pytest.approx(expected)
    no_distractors = tokenize_prompt_task("toy", [PromptExample("the man sees the", " dog")], tokenizer, n_ctx=8)
    assert prompt_metrics(logits[:1], no_distractors) == {"accuracy": 1.0}
    assert math.isfinite(metrics["logit_difference"])
