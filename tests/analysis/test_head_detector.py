"""Decoder head-detector scores (TransformerLens' previous-token, duplicate-token and induction patterns): exact
values on hand-built attention, and the hook wiring checked against HF's own attention probabilities scored
with TransformerLens' own similarity function."""

import pytest
import torch
from conftest import word_level_tokenizer
from transformer_lens.head_detector import compute_head_attention_similarity_score

from heurlens.analysis.head_detector import DETECTION_PATTERNS, detection_scores, head_detector_scores
from heurlens.data.prompt_tasks import PromptExample, tokenize_prompt_task
from heurlens.interventions.units import Unit
from heurlens.models import load_model

TOKENS = torch.tensor([[5, 6, 7, 5, 6, 7]])  # a b c a b c


def hand_attention() -> torch.Tensor:
    """Three pure heads on a b c a b c: previous token (position 0 on itself), duplicate token (each repeat on
    its first occurrence, q - 3; the first three on themselves), induction (each repeat on the token after its
    first occurrence, q - 2; the first three on themselves)."""
    attention = torch.zeros(3, 6, 6)
    for q in range(6):
        attention[0, q, max(q - 1, 0)] = 1
        attention[1, q, q - 3 if q >= 3 else q] = 1
        attention[2, q, q - 2 if q >= 3 else q] = 1
    return attention


def test_hand_built_heads_score_what_the_detection_patterns_say():
    scores = {name: detection_scores(hand_attention(), make(TOKENS)) for name, make in DETECTION_PATTERNS.items()}
    # sum(A * D) / sum(A) with sum(A) = 6 (one unit of attention per query)
    assert scores["previous_token"].tolist() == pytest.approx([5 / 6, 0, 0])  # query 0 has no previous token
    assert scores["duplicate_token"].tolist() == pytest.approx([0, 3 / 6, 0])
    assert scores["induction"].tolist() == pytest.approx([0, 0, 3 / 6])
    # without the first position (TransformerLens' exclude_bos) the attention on it no longer counts: the
    # previous-token head loses queries 0 and 1 (4 of 4 left hit), the duplicate head queries 0 and 3 (2 of 4
    # left hit), the induction head query 0 (3 of 5 left hit)
    tokens_excluded = {name: detection_scores(hand_attention(), make(TOKENS), exclude_bos=True)
                       for name, make in DETECTION_PATTERNS.items()}
    assert tokens_excluded["previous_token"].tolist() == pytest.approx([4 / 4, 0, 0])
    assert tokens_excluded["duplicate_token"].tolist() == pytest.approx([0, 2 / 4, 0])
    assert tokens_excluded["induction"].tolist() == pytest.approx([0, 0, 3 / 5])


def test_scores_from_hooks_match_hf_attention_and_transformer_lens(tiny_decoder_dirs):
    from transformers import AutoModelForCausalLM

    directory = tiny_decoder_dirs["llama"]
    model = load_model(directory, attn_implementation="eager")
    examples = [PromptExample("the man sees the man", " sees"), PromptExample("a dog runs a dog runs a", " dog"),
                PromptExample("cat sleeps . cat", " sleeps")]
    prompts = tokenize_prompt_task("toy", examples, word_level_tokenizer(), n_ctx=32, batch_size=2)
    table = head_detector_scores(model, prompts, min_score=0.0, exclude_bos=False)
    without_first = head_detector_scores(model, prompts, min_score=0.0)  # exclude_bos=True, heurlens' default

    hf = AutoModelForCausalLM.from_pretrained(directory, attn_implementation="eager").eval()
    expected = {name: torch.zeros(2, 4) for name in DETECTION_PATTERNS}
    expected_without = {name: torch.zeros(2, 4) for name in DETECTION_PATTERNS}
    tokenizer = word_level_tokenizer()
    with torch.no_grad():
        for example in examples:  # one prompt at a time, no padding: TransformerLens' detect_head per prompt
            ids = tokenizer(example.prompt, return_tensors="pt")["input_ids"]
            attentions = hf(input_ids=ids, output_attentions=True).attentions
            for name, make in DETECTION_PATTERNS.items():
                for layer in range(2):
                    for head in range(4):
                        for exclude, table_of in ((False, expected), (True, expected_without)):
                            table_of[name][layer, head] += compute_head_attention_similarity_score(
                                attentions[layer][0, head], make(ids), exclude_bos=exclude,
                                exclude_current_token=False, error_measure="mul") / len(examples)
    for layer in range(2):
        for head in range(4):
            row = table[table["unit"] == str(Unit(layer, head))].iloc[0]
            row_without = without_first[without_first["unit"] == str(Unit(layer, head))].iloc[0]
            for name in DETECTION_PATTERNS:
                assert row[name] == pytest.approx(expected[name][layer, head].item(), abs=1e-5)
                assert row_without[name] == pytest.approx(expected_without[name][layer, head].item(), abs=1e-5)
    assert len(table) == 8 and set(table["label"]) <= {*DETECTION_PATTERNS, "other"}
    only = head_detector_scores(model, prompts, heads=[Unit(1, 3)])
    assert only["unit"].tolist() == ["L1.H3"]

