"""Prompt tasks for decoder LMs: generators right by construction, the file format and its errors, tokenization
refusals, and the answer-position metrics on hand-set logits."""

import json

import pytest
import torch
from conftest import word_level_tokenizer

from heurlens.data.prompt_generators import (
    GREATER_THAN_NOUNS,
    IOI_NAMES,
    greater_than_examples,
    induction_examples,
    ioi_examples,
)
from heurlens.data.prompt_tasks import PromptExample, load_prompt_file, prompt_metrics, tokenize_prompt_task
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
    jsonl.write_text(json.dumps({"prompt": "the man sees the", "answer": [" dog"], "distractors": [" cat"]}) + "\n")
    assert load_prompt_file(jsonl) == [PromptExample("the man sees the", " dog", (" cat",))]  # a list of one
    jsonl.write_text(json.dumps({"prompt": "the man sees the", "answer": [" dog", " cat"]}) + "\n")
    with pytest.raises(HeurlensError, match="example 1: answer is a list, not a text .*other_answers"):
        load_prompt_file(jsonl)
    assert load_prompt_file(csv_file) == [PromptExample("the man sees the", " dog", (" cat", " man"), "a dog sees the")]
    jsonl.write_text(json.dumps({"prompt": "the man sees the"}) + "\n")
    with pytest.raises(HeurlensError, match="example 1: every example needs a non-empty prompt and answer"):
        load_prompt_file(jsonl)
    with pytest.raises(HeurlensError, match="use .jsonl or .csv"):
        load_prompt_file(_written(tmp_path / "task.txt"))
    for binary in (jsonl, csv_file):  # bytes that are not UTF-8 (a compressed file under a .jsonl name)
        binary.write_bytes(b"\x1f\x8b\x08\x00\xff\xfe")
        with pytest.raises(HeurlensError, match=r"is not text \(byte 1 is not UTF-8\)"):
            load_prompt_file(binary)


def _written(path):
    path.write_text("prompt,answer\n")
    return path


def test_tokenizing_refuses_multi_token_answers_and_long_prompts():
    tokenizer = word_level_tokenizer()
    good = [PromptExample("the man sees the", " dog", (" cat",)), PromptExample("a cat sees a", " man", (" dog",))]
    prompts = tokenize_prompt_task("toy", good, tokenizer, n_ctx=8)
    assert prompts.answers.tolist() == [[5], [4]] and prompts.distractors.tolist() == [[9], [5]]
    assert prompts.batches[0]["input_ids"].shape == (2, 4)
    with pytest.raises(HeurlensError, match="' a dog' is 2 tokens"):
        tokenize_prompt_task("toy", [PromptExample("the man sees", " a dog")], tokenizer, n_ctx=8)
    with pytest.raises(HeurlensError, match="' zebra' is the unknown token for this tokenizer"):
        tokenize_prompt_task("toy", [PromptExample("the man sees the", " zebra")], tokenizer, n_ctx=8)
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
    p0, p1 = torch.softmax(logits[0], -1), torch.softmax(logits[1], -1)
    assert metrics["probability_difference"] == pytest.approx(float(p0[5] - p0[9] + p1[4] - p1[5]) / 2)


def test_metrics_with_several_answers_and_padding():
    """Greater-than style: example 0 has correct {dog, cat} and distractor {man}; example 1 correct {man} and
    distractors {dog, cat}. Padding (-1) must count neither as a token nor in the means."""
    tokenizer = word_level_tokenizer()
    examples = [PromptExample("the man sees the", " dog", (" man",), other_answers=(" cat",)),
                PromptExample("a cat sees a", " man", (" dog", " cat"))]
    prompts = tokenize_prompt_task("toy", examples, tokenizer, n_ctx=8)
    assert prompts.answers.tolist() == [[5, 9], [4, -1]] and prompts.distractors.tolist() == [[4, -1], [5, 9]]
    logits = torch.zeros(2, 11)
    logits[0, 5], logits[0, 9], logits[0, 4] = -1.0, 2.0, 1.0  # best answer cat (2) beats man (1): right
    logits[1, 4], logits[1, 5], logits[1, 9] = 1.0, 3.0, -3.0  # man (1) loses to dog (3): wrong
    metrics = prompt_metrics(logits, prompts)
    assert metrics["accuracy"] == 0.5
    assert metrics["logit_difference"] == pytest.approx(((0.5 - 1.0) + (1.0 - 0.0)) / 2)
    p0, p1 = torch.softmax(logits[0], -1), torch.softmax(logits[1], -1)
    expected = float((p0[5] + p0[9] - p0[4]) + (p1[4] - p1[5] - p1[9])) / 2
    assert metrics["probability_difference"] == pytest.approx(expected)
    # with no distractors, a correct answer must be the top token: example 0's top token is cat, an answer
    top_only = tokenize_prompt_task("toy", [PromptExample("the man sees the", " dog", other_answers=(" cat",))],
                                    tokenizer, n_ctx=8)
    assert prompt_metrics(logits[:1], top_only) == {"accuracy": 1.0}
    with pytest.raises(HeurlensError, match="give every example distractors, or none"):
        tokenize_prompt_task("toy", [examples[0], PromptExample("a cat sees a", " man")], tokenizer, n_ctx=8)


def _year_tokenizer(two_digit: bool):
    """Words of the greater-than template plus years written as two-digit tokens (GPT-2) or single digits."""
    from tokenizers import Regex, Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    numbers = [f"{i:02d}" for i in range(100)] if two_digit else [str(i) for i in range(10)]
    words = ["<eos>", "<unk>", "The", "lasted", "from", "the", "year", "to", *GREATER_THAN_NOUNS, *numbers]
    backend = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.WhitespaceSplit(),
        pre_tokenizers.Split(Regex(r"\d\d" if two_digit else r"\d"), behavior="isolated")])
    return PreTrainedTokenizerFast(tokenizer_object=backend, eos_token="<eos>", unk_token="<unk>", pad_token="<eos>")


@pytest.mark.parametrize("two_digit", [True, False])
def test_greater_than_answers_are_the_later_years_by_construction(two_digit):
    tokenizer = _year_tokenizer(two_digit)
    examples = greater_than_examples(40, tokenizer, seed=1)
    for example in examples:
        words = example.prompt.split()
        assert words[:3] == ["The", words[1], "lasted"] and words[1] in GREATER_THAN_NOUNS
        start_year, century = words[6], words[-1]
        assert start_year.startswith(century) and 11 <= int(century) <= 17
        start = int(start_year[2:])
        # every correct completion makes the end year later than the start, every distractor earlier or equal
        if two_digit:
            assert sorted(int(a) for a in example.answers) == list(range(start + 1, 100))
            assert sorted(int(d) for d in example.distractors) == list(range(start + 1))
        else:  # the next token is the end year's tens digit; the start's own tens digit is ambiguous, left out
            assert all(int(f"{a}0") > start for a in example.answers)
            assert all(int(f"{d}9") < start for d in example.distractors)
            assert len(example.answers) + len(example.distractors) == 9
        # the corruption starts the span in the year CC01: every ending is later, the start year's information gone
        assert example.corrupted_prompt == example.prompt.replace(f"year {start_year}", f"year {century}01")
    prompts = tokenize_prompt_task("greater-than", examples, tokenizer, n_ctx=32)
    assert prompts.answers.shape[0] == 40
    for clean, corrupted in zip(prompts.batches, prompts.corrupted.batches):  # token for token: interchange-ready
        assert torch.equal(clean["attention_mask"], corrupted["attention_mask"])
        changed = (clean["input_ids"] != corrupted["input_ids"]).sum(-1)  # the start year's token(s) only
        assert 1 <= int(changed.min()) and int(changed.max()) <= (1 if two_digit else 2)
    assert greater_than_examples(40, tokenizer, seed=1) == examples != greater_than_examples(40, tokenizer, seed=2)


def test_greater_than_refuses_a_tokenizer_that_keeps_years_whole():
    with pytest.raises(HeurlensError, match="two two-digit tokens .* or one token per digit"):
        greater_than_examples(3, word_level_tokenizer())


def test_induction_answer_is_the_word_after_the_repeat():
    tokenizer = word_level_tokenizer()
    words = ("man", "dog", "runs", "sleeps", "cat", "sees")
    examples = induction_examples(25, tokenizer, seed=0, length=5, words=words)
    for example in examples:
        prefix, *prompt = example.prompt.split()
        assert prefix == "Words:"
        first = prompt[:5]
        assert len(set(first)) == 5 and prompt[5:] == first[:len(prompt) - 5]  # a repeat of the start
        assert example.answer == f" {first[len(prompt) - 5]}"  # the word that came next the first time
        assert sorted(d.strip() for d in example.distractors) == sorted(set(first) - {example.answer.strip()})
    with pytest.raises(HeurlensError, match="needs 8 different words .* 6 of the words are"):
        induction_examples(2, tokenizer, length=8, words=(*words, "zebra"))
