"""Attention-pattern scores on hand-built patterns with known labels, and the hook wiring checked
against the attention probabilities HF returns itself."""

import pytest
import torch

from heurlens.analysis.patterns import (
    PATTERNS,
    PatternTotals,
    accumulate_patterns,
    attention_plot,
    pattern_scores,
)
from heurlens.errors import HeurlensError
from heurlens.evaluate import tokenize_pairs
from heurlens.interventions.units import Unit
from heurlens.models import load_model

# [CLS] a b c [SEP] c a d [SEP] [PAD]: ids 101/102 special, 0 padding
IDS = torch.tensor([[101, 5, 6, 7, 102, 7, 5, 8, 102, 0]])
MASK = torch.tensor([[1, 1, 1, 1, 1, 1, 1, 1, 1, 0]])
SEGMENTS = torch.tensor([[0, 0, 0, 0, 0, 1, 1, 1, 1, 0]])
SPECIAL = torch.isin(IDS, torch.tensor([101, 102, 0]))
N = IDS.shape[1]


def hand_patterns() -> torch.Tensor:
    """Six heads, each a pure pattern: previous token, next token, [CLS] only, repeat, self, [SEP] only.

    The repeat head attends to the same token in the other sentence where one exists (c<->c,
    a<->a) and to itself otherwise (b, d)."""
    pattern = torch.zeros(1, 6, N, N)
    for q in range(N):
        pattern[0, 0, q, max(q - 1, 0)] = 1
        pattern[0, 1, q, min(q + 1, N - 1)] = 1
        pattern[0, 2, q, 0] = 1
        pattern[0, 4, q, q] = 1
        pattern[0, 5, q, [4, 8]] = 1 / 2
    repeat_of = {1: 6, 6: 1, 3: 5, 5: 3}
    for q in range(N):
        pattern[0, 3, q, repeat_of.get(q, q)] = 1
    return pattern


def test_hand_built_patterns_get_their_labels_and_exact_scores():
    totals = PatternTotals(n_heads=6)
    accumulate_patterns(totals, hand_patterns(), IDS, MASK, SEGMENTS, SPECIAL, cls_id=101, sep_id=102)
    scores = totals.scores()
    expected_label = ["previous_token", "next_token", "cls", "repeated_token", "self", "sep"]
    for head, label in enumerate(expected_label):
        assert max(PATTERNS, key=lambda p: scores[p][head]) == label
    # 6 real queries a b c c a d (positions 1-3, 5-7); each pure head scores 1 on its own pattern
    assert scores["previous_token"][0] == pytest.approx(1.0)
    assert scores["next_token"][1] == pytest.approx(1.0)
    assert scores["cls"][2] == pytest.approx(1.0) and scores["sep"][2] == 0.0
    assert scores["sep"][5] == pytest.approx(1.0) and scores["cls"][5] == 0.0
    assert scores["repeated_token"][3] == pytest.approx(1.0)  # over the 4 queries with a repeat
    assert scores["self"][3] == pytest.approx(2 / 6)  # b and d attend to themselves
    assert scores["self"][4] == pytest.approx(1.0)
    # the [SEP] head puts 1/2 on each [SEP]: the next token of positions 3 and 7
    assert scores["next_token"][5] == pytest.approx((2 / 2) / 6)
    assert scores["previous_token"][2] == pytest.approx(1 / 6)  # [CLS] is the previous token of position 1
    assert scores["repeated_token"][4] == pytest.approx(0.0)
    # previous token: the previous-token head's A[q, q-1] = 1 for every query; the others' only by accident
    assert scores["previous_token"][1] == 0.0


def test_scores_from_hooks_match_hf_attention_probabilities(tiny_bert_dir):
    from transformers import BertForSequenceClassification

    import heurlens

    model = load_model(tiny_bert_dir, attn_implementation="eager")
    pairs = heurlens.generate_hans(4, ["ln_subject/object_swap"], seed=0)
    data = tokenize_pairs("hans", pairs, model.tokenizer, batch_size=3)
    table = pattern_scores(model, data, min_score=0.0)

    hf = BertForSequenceClassification.from_pretrained(tiny_bert_dir, attn_implementation="eager").eval()
    special_ids = torch.tensor(model.tokenizer.all_special_ids)
    totals = [PatternTotals(4), PatternTotals(4)]
    with torch.no_grad():
        for batch in data.batches:
            attentions = hf(**batch, output_attentions=True).attentions
            for layer in range(2):
                accumulate_patterns(totals[layer], attentions[layer], batch["input_ids"], batch["attention_mask"],
                                    batch["token_type_ids"], torch.isin(batch["input_ids"], special_ids),
                                    model.tokenizer.cls_token_id, model.tokenizer.sep_token_id)
    for layer in range(2):
        scores = totals[layer].scores()
        for head in range(4):
            row = table[table["unit"] == str(Unit(layer, head))].iloc[0]
            for pattern in PATTERNS:
                assert row[pattern] == pytest.approx(scores[pattern][head].item(), abs=1e-5)
    assert len(table) == 8 and set(table["label"]) <= set(PATTERNS)


def test_fused_attention_is_a_clear_error(tiny_bert_dir):
    import heurlens

    model = load_model(tiny_bert_dir)  # sdpa: no hook_pattern
    data = tokenize_pairs("hans", heurlens.generate_hans(2, ["ln_preposition"]), model.tokenizer)
    with pytest.raises(HeurlensError, match="eager"):
        pattern_scores(model, data)


def test_attention_plot_is_standalone_html(tiny_bert_dir):
    model = load_model(tiny_bert_dir, attn_implementation="eager")
    rendered = attention_plot(model, "The doctor saw the cat.", "The cat saw the doctor.", [Unit(1, 2), Unit(0, 0)])
    page = rendered.local_src
    assert "L1.H2" in page and "doctor" in page
    assert "<script" in page and "src=\"http" not in page and "unpkg" not in page
    assert '"maskUpperTri": false' in page  # BERT attends to later tokens: the whole pattern is shown


def test_tokens_are_shown_as_text_and_a_causal_models_upper_triangle_is_greyed(tiny_gpt2_dirs):
    """A byte-level BPE (trained here, offline) writes " Rose" as the piece "ĠRose": the plot shows the text, as
    TransformerLens' to_str_tokens does; a decoder's patterns are causal, so their upper triangle is masked."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    from heurlens.analysis.patterns import str_tokens

    backend = Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()  # as GPT-2's and SmolLM2's tokenizers have
    backend.train_from_iterator(["Rose met Anna", "Anna met Rose"] * 20,
                                trainers.BpeTrainer(vocab_size=300, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    bpe = PreTrainedTokenizerFast(tokenizer_object=backend)
    ids = bpe("Anna met Rose")["input_ids"]
    assert "ĠRose" in bpe.convert_ids_to_tokens(ids)  # the raw piece
    assert str_tokens(bpe, ids) == ["Anna", " met", " Rose"]
    model = load_model(tiny_gpt2_dirs["lm"], attn_implementation="eager")
    page = attention_plot(model, "the man sees the dog", None, [Unit(0, 1)]).local_src
    assert '"maskUpperTri": true' in page
