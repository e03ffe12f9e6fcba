"""IOI head-class signatures (Wang et al. 2022): exact shares on hand-built attention, and the hooks, positions and
padding checked against HF's own attention probabilities, read at positions found by hand."""

import pytest
import torch
from conftest import word_level_tokenizer

from heurlens.analysis.ioi_heads import IoiPositions, ioi_head_scores, ioi_positions, ioi_signature_scores
from heurlens.data.prompt_tasks import PromptExample, tokenize_prompt_task
from heurlens.errors import HeurlensError
from heurlens.interventions.units import Unit
from heurlens.models import load_model

# "the dog a man runs . dog sees": S1 = 1, IO = 3, S2 = 6, END = 7
WHERE = IoiPositions(io=3, s1=1, s2=6, end=7)


def test_positions_of_the_names():
    tokens = torch.tensor([2, 5, 3, 4, 6, 8, 5, 10])
    assert ioi_positions(tokens, io=4, subject=5) == WHERE
    assert ioi_positions(tokens, io=5, subject=4) is None  # the "IO" named twice, the "subject" once
    assert ioi_positions(tokens[:6], io=4, subject=5) is None  # the subject named once


def test_hand_built_heads_score_their_class():
    """Head 0 attends from END to IO (a name mover), head 1 from END to S2 (S-inhibition), head 2 from S2 3/4 to S1
    and 1/4 to the token after S1 (duplicate token 0.75, induction 0.25); every other query on itself. Head 3
    puts 3/4 of every query's attention on the first position and the rest as head 0 does: without the first
    position it is a pure name mover, with it a quarter of one."""
    attention = torch.zeros(4, 8, 8)
    for q in range(8):
        attention[:, q, q] = 1
    attention[0, 7] = torch.nn.functional.one_hot(torch.tensor(3), 8).float()
    attention[1, 7] = torch.nn.functional.one_hot(torch.tensor(6), 8).float()
    attention[2, 6] = 0
    attention[2, 6, 1], attention[2, 6, 2] = 0.75, 0.25
    attention[3] = attention[0] / 4
    attention[3, 1:, 0] = 0.75
    scores = ioi_signature_scores(attention, WHERE)
    assert scores["name_mover"].tolist() == pytest.approx([1, 0, 0, 1])
    assert scores["s_inhibition"].tolist() == pytest.approx([0, 1, 0, 0])
    assert scores["duplicate_token"].tolist() == pytest.approx([0, 0, 0.75, 0])
    assert scores["induction"].tolist() == pytest.approx([0, 0, 0.25, 0])
    with_first = ioi_signature_scores(attention, WHERE, exclude_bos=False)
    assert with_first["name_mover"].tolist() == pytest.approx([1, 0, 0, 0.25])


def test_scores_from_hooks_match_hf_attention(tiny_decoder_dirs):
    from transformers import AutoModelForCausalLM

    directory = tiny_decoder_dirs["llama"]
    model = load_model(directory, attn_implementation="eager")
    examples = [PromptExample("the dog a man runs . dog sees", " man", (" dog",)),  # IO 3, S 1 and 6, END 7
                PromptExample("a cat the dog sleeps . dog runs the", " cat", (" dog",)),  # IO 1, S 3 and 6, END 8
                PromptExample("the man sees a dog", " man", (" dog",))]  # the subject named once: not counted
    prompts = tokenize_prompt_task("toy-ioi", examples, word_level_tokenizer(), n_ctx=32, batch_size=3)
    table = ioi_head_scores(model, prompts, min_score=0.0)

    hf = AutoModelForCausalLM.from_pretrained(directory, attn_implementation="eager").eval()
    tokenizer = word_level_tokenizer()
    expected = {name: torch.zeros(2, 4) for name in ("name_mover", "s_inhibition", "duplicate_token", "induction")}
    with torch.no_grad():
        for example, (io, s1, s2, end) in zip(examples, [(3, 1, 6, 7), (1, 3, 6, 8)]):  # one prompt, no padding
            ids = tokenizer(example.prompt, return_tensors="pt")["input_ids"]
            for layer, attention in enumerate(hf(input_ids=ids, output_attentions=True).attentions):
                share = attention[0] / attention[0, :, :, 1:].sum(-1, keepdim=True)  # [head, query, key]
                for name, (query, key) in {"name_mover": (end, io), "s_inhibition": (end, s2),
                                           "duplicate_token": (s2, s1), "induction": (s2, s1 + 1)}.items():
                    expected[name][layer] += share[:, query, key] / 2
    assert set(table["prompts"]) == {2}
    for layer in range(2):
        for head in range(4):
            row = table[table["unit"] == str(Unit(layer, head))].iloc[0]
            for name, values in expected.items():
                assert row[name] == pytest.approx(values[layer, head].item(), abs=1e-5)
    assert ioi_head_scores(model, prompts, heads=[Unit(1, 2)])["unit"].tolist() == ["L1.H2"]


def test_tasks_that_are_not_ioi_are_refused(tiny_decoder_dirs):
    model = load_model(tiny_decoder_dirs["llama"], attn_implementation="eager")
    no_distractor = tokenize_prompt_task("toy", [PromptExample("the man sees the", " man")], word_level_tokenizer(),
                                         n_ctx=32)
    for not_ioi in (no_distractor, ["the man sees the"]):  # no distractor; texts without answers
        with pytest.raises(HeurlensError, match="not an IOI task"):
            ioi_head_scores(model, not_ioi)
    none_counted = tokenize_prompt_task("toy", [PromptExample("the man sees a dog", " man", (" dog",))],
                                        word_level_tokenizer(), n_ctx=32)
    with pytest.raises(HeurlensError, match="no prompt of toy"):
        ioi_head_scores(model, none_counted)
