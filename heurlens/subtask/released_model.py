"""The Subtask Induction release's model for the arithmetic tasks: Hugging Face ``GPT2LMHeadModel`` built from
``GPT2Config`` (``Rock-Z/instilling-inductive-bias``, ``math/base.py``; docs/subtask-induction-released-code.md).

Paper sizes: 4 heads, d_model 128, d_ff 512 (``n_inner`` None = 4 d_model), vocabulary max_value + 1 (the
numbers and the separator), 4 positions. What differs from heurlens' TransformerLens-native decoder
(``subtask.training.arithmetic_model``): dropout 0.1 on embeddings, attention and residual (active in train
mode), input and output embeddings tied, ``gelu_new``, and HF GPT-2's initialisation (N(0, 0.02); residual
projections N(0, 0.02 / sqrt(2 n_layer)); biases 0). ``dropout`` and ``tie_embeddings`` can be changed one at a
time. The model is wrapped so that ``model(tokens)`` gives next-token logits, as the native one does; its weight
matrices are ``model.transformer.h.{L}.attn.c_attn.weight`` and so on, the ``Conv1D`` weights the release masks
(``subtask.masks.select_weights`` picks them: attention and MLP, not embeddings).
"""

from __future__ import annotations

import torch
from jaxtyping import Float, Int
from torch import Tensor, nn

from heurlens.subtask.arithmetic import ArithmeticTask


class NextTokenLogits(nn.Module):
    """A Hugging Face causal LM as ``model(tokens) -> logits [batch, position, vocab]``."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def forward(self, tokens: Int[Tensor, "batch position"]) -> Float[Tensor, "batch position vocab"]:
        return self.model(input_ids=tokens).logits


def released_arithmetic_model(task: ArithmeticTask, n_layers: int = 2, seed: int = 0,
                              device: torch.device | str = "cpu", dropout: float = 0.1,
                              tie_embeddings: bool = True) -> NextTokenLogits:
    """A fresh GPT-2 for ``task`` as the release builds it, on ``device``; its weights are drawn on the CPU
    from ``seed`` (so a seed gives the same model on every device), without touching the global random state."""
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(vocab_size=task.vocab_size, n_positions=4, n_embd=128, n_layer=n_layers, n_head=4,
                        n_inner=None, activation_function="gelu_new", resid_pdrop=dropout, embd_pdrop=dropout,
                        attn_pdrop=dropout, layer_norm_epsilon=1e-5, initializer_range=0.02,
                        tie_word_embeddings=tie_embeddings, bos_token_id=task.separator,
                        eos_token_id=task.separator)
    with torch.random.fork_rng(devices=[]), torch.device("cpu"):
        torch.manual_seed(seed)
        model = GPT2LMHeadModel(config)
    return NextTokenLogits(model).to(device)
