"""A hand-set Llama in which the answer flows along one path of edges: embed -> L0.H1 (value) -> L1.H0 (value) ->
logits (used by the edge-pruning tests)."""

import json
from pathlib import Path

import torch
from conftest import word_level_tokenizer
from transformers import LlamaConfig, LlamaForCausalLM

from heurlens.data.prompt_tasks import PromptExample, tokenize_prompt_task

WORDS = ["the", "a", "man", "dog"]  # tokens 2-5 of the word-level tokenizer, one-token prompts
PATH = ["embed->L0.H1.v", "L0.H1->L1.H0.v", "L1.H0->logits"]  # the only edges whose corruption changes the logits
N_EDGES = 46  # layer 0: q, k, v of 2 heads and the MLP read 1, 1, 1, 1 and 3 writers; layer 1: 4 and 6; logits 7


SECOND_PATH = ["embed->L0.H0.v", "L0.H0->L1.H1.v", "L1.H1->logits"]  # the tiered model's weaker tier (one fourth)


def build_planted_edges_model(out, second_path: float = 0.0):
    """Two layers of two heads (head_dim 10, no grouping) and MLPs that output 0, d_model 20 in blocks of 4 dims:
    A (0-3) the token's one-hot embedding, B (4-7) written by L0.H1, C (8-11) by L1.H0, D (12-15) by L0.H0, E (16-19)
    by L1.H1. Each head's value reads one block and its output writes it to the next (W_V, W_O copies): L0.H1 A -> B,
    L1.H0 B -> C, L0.H0 A -> D, L1.H1 D -> E; W_Q = W_K = 0. The unembedding reads C only (4x). On one-token prompts
    attention is each token to itself, and every writer's output is a one-hot of a fixed size in its own block whatever
    the token, so RMSNorm scales every reader's input by the same factor whichever edges carry the corrupted token:
    an edge changes the logits exactly when it is on the path A -> B -> C -> logits. Node pruning keeps L0.H1 and
    L1.H0 (every edge between them); edge pruning keeps ``PATH``.

    ``second_path`` > 0: the unembedding also reads E, that many times (the tiered model): then the edges come in
    tiers, ``PATH`` (the answer read 4x), ``SECOND_PATH`` (read ``second_path`` times) and every other edge (nothing),
    and a good ranking of the edges lists them in that order."""
    config = LlamaConfig(vocab_size=11, hidden_size=20, intermediate_size=8, num_hidden_layers=2, num_attention_heads=2,
                         num_key_value_heads=2, head_dim=10, max_position_embeddings=8, pad_token_id=0,
                         eos_token_id=0, bos_token_id=0, tie_word_embeddings=False, architectures=["LlamaForCausalLM"])
    torch.manual_seed(0)
    model = LlamaForCausalLM(config).eval()
    eye = torch.eye(4)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if "norm" not in name:
                parameter.zero_()  # RMSNorm weights stay 1
        model.model.embed_tokens.weight[2:6, 0:4] = eye
        for layer, copies in ((0, {1: (0, 4), 0: (0, 12)}), (1, {0: (4, 8), 1: (12, 16)})):
            attention = model.model.layers[layer].self_attn
            for head, (source, target) in copies.items():
                attention.v_proj.weight[10 * head:10 * head + 4, source:source + 4] = eye
                attention.o_proj.weight[target:target + 4, 10 * head:10 * head + 4] = eye
        model.lm_head.weight[2:6, 8:12] = 4 * eye
        model.lm_head.weight[2:6, 16:20] = second_path * eye
    model.save_pretrained(out)
    word_level_tokenizer().save_pretrained(out)
    return out


def planted_edges_task(copies: int = 4):
    """Each word as a prompt whose answer is itself, the next word its distractor and its corrupted prompt."""
    examples = [PromptExample(word, f" {word}", (f" {WORDS[(i + 1) % 4]}",), WORDS[(i + 1) % 4])
                for i, word in enumerate(WORDS)] * copies
    return tokenize_prompt_task("planted-edges", examples, word_level_tokenizer(), n_ctx=8, batch_size=4,
                                add_special_tokens=False)


def planted_edges_task_file(path: Path) -> Path:
    """``planted_edges_task`` (four copies) as the .jsonl file a ``--task`` takes, written to ``path``."""
    rows = [{"prompt": word, "answer": f" {word}", "distractors": [f" {WORDS[(i + 1) % 4]}"],
             "corrupted_prompt": WORDS[(i + 1) % 4]} for i, word in enumerate(WORDS)] * 4
    path.write_text("\n".join(json.dumps(row) for row in rows) + "\n")
    return path
