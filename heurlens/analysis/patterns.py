"""Attention-pattern classification of heads (Heuristic Core paper, Section 5, Figures 7 to 9).

For head h and a query token q (a real, non-special token), with A = softmax attention from
``blocks.L.attn.hook_pattern``:

- ``repeated_token``: sum of A[q, k] over keys k in the *other* sentence carrying q's token id,
  averaged over the queries that have such a repeat (the lexical-overlap heads of Figure 7);
- ``previous_token``: A[q, q-1];   ``next_token``: A[q, q+1];   ``self``: A[q, q];
- ``cls``: the attention on the [CLS] token;   ``sep``: the attention on the [SEP] tokens (the
  paper's separator heads). A model without such a token scores 0 on it.

Scores are means over every eligible query of a data set (padding excluded). A head's label is
its highest-scoring pattern, or ``other`` when no score reaches ``min_score``: 0.3 by default,
heurlens' own choice (the paper labels heads by looking at their patterns and gives no number), so
the full score table is always returned next to the label.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pandas as pd
import torch
from jaxtyping import Bool, Float, Int
from torch import Tensor

from heurlens.errors import HeurlensError
from heurlens.interventions.units import Unit
from heurlens.protocols import Batch, PreparedModel, Task
from heurlens.runtime.devices import device_of, to_device

PATTERNS = ("repeated_token", "previous_token", "next_token", "cls", "sep", "self")


@dataclass
class PatternTotals:
    """Running sums of attention mass per pattern and the number of queries behind each, per head."""

    n_heads: int
    sums: dict[str, Tensor] = field(default_factory=dict)
    counts: dict[str, Tensor] = field(default_factory=dict)

    def add(self, pattern: str, mass: Float[Tensor, "batch head query"], eligible: Bool[Tensor, "batch query"]) -> None:
        weights = eligible[:, None, :].to(mass.dtype)
        self.sums[pattern] = self.sums.get(pattern, 0) + (mass * weights).sum(dim=(0, 2))
        self.counts[pattern] = self.counts.get(pattern, 0) + eligible.sum()

    def scores(self) -> dict[str, Float[Tensor, " head"]]:
        return {p: self.sums[p] / self.counts[p].clamp(min=1) if p in self.sums
                else torch.zeros(self.n_heads, device="cpu")
                for p in PATTERNS}


def accumulate_patterns(totals: PatternTotals, pattern: Float[Tensor, "batch head query key"],
                        input_ids: Int[Tensor, "batch pos"], attention_mask: Int[Tensor, "batch pos"],
                        segment_ids: Int[Tensor, "batch pos"], special: Bool[Tensor, "batch pos"],
                        cls_id: int | None = None, sep_id: int | None = None) -> None:
    """Add one batch's attention patterns to ``totals`` (see the module docstring for the scores);
    ``special`` marks the tokens that are never queries, ``cls_id`` / ``sep_id`` the [CLS] and [SEP] ids."""
    real = attention_mask.bool()
    query = real & ~special
    totals.add("self", pattern.diagonal(0, -2, -1), query)
    # diagonal(-1) holds A[q, q-1] for q = 1..n-1; diagonal(1) holds A[q, q+1] for q = 0..n-2.
    totals.add("previous_token", pattern.diagonal(-1, -2, -1), query[:, 1:])
    totals.add("next_token", pattern.diagonal(1, -2, -1), query[:, :-1] & real[:, 1:])
    for name, token_id in (("cls", cls_id), ("sep", sep_id)):
        keys = (real & (input_ids == (-1 if token_id is None else token_id)))[:, None, None, :]
        totals.add(name, (pattern * keys).sum(-1), query)
    repeats = ((input_ids[:, :, None] == input_ids[:, None, :]) & (segment_ids[:, :, None] != segment_ids[:, None, :])
               & query[:, None, :])
    totals.add("repeated_token", (pattern * repeats[:, None]).sum(-1), query & repeats.any(-1))


def segments_of(batch: dict[str, Tensor], separator_id: int | None) -> Int[Tensor, "batch pos"]:
    """Sentence index of every token: token_type_ids when the tokenizer gives them, else the number of
    separator tokens before it (so a GPT-2 style ``a <sep> b`` pair splits too)."""
    if "token_type_ids" in batch:
        return batch["token_type_ids"]
    if separator_id is None:
        raise HeurlensError("cannot tell the two sentences apart: no token_type_ids and no separator token")
    is_separator = (batch["input_ids"] == separator_id).long()
    return is_separator.cumsum(-1) - is_separator


def pattern_scores(model: PreparedModel, data: Task, heads: list[Unit] | None = None,
                   min_score: float = 0.3) -> pd.DataFrame:
    """Score every head (or ``heads``) for each pattern over ``data``; one row per head with a label.

    The model must expose ``hook_pattern``: load HF models with ``attn_implementation="eager"``.
    """
    tokenizer = model.tokenizer
    special_ids = torch.tensor(sorted(tokenizer.all_special_ids) if tokenizer is not None else [], device="cpu")
    separator_id = getattr(tokenizer, "sep_token_id", None) if tokenizer is not None else None
    cls_id = getattr(tokenizer, "cls_token_id", None) if tokenizer is not None else None
    layers = sorted({u.layer for u in heads}) if heads else list(range(model.n_layers))
    totals = {layer: PatternTotals(model.n_heads) for layer in layers}
    for batch in data.batches:
        patterns = attention_patterns(model, batch, layers)
        input_ids = batch["input_ids"]
        attention_mask = batch.get("attention_mask", torch.ones_like(input_ids))
        segments, is_special = segments_of(batch, separator_id), torch.isin(input_ids, special_ids)  # once a batch
        for layer in layers:
            accumulate_patterns(totals[layer], patterns[layer].float(), input_ids, attention_mask, segments, is_special,
                                cls_id, separator_id)
    rows = []
    for layer in layers:
        scores = totals[layer].scores()
        for head in range(model.n_heads):
            if heads and Unit(layer, head) not in heads:
                continue
            row: dict[str, Any] = {"unit": str(Unit(layer, head)), "layer": layer, "head": head}
            row |= {p: float(scores[p][head]) for p in PATTERNS}
            row["label"] = best_label({p: row[p] for p in PATTERNS}, min_score)
            rows.append(row)
    return pd.DataFrame(rows)



@torch.no_grad()
def attention_patterns(model: PreparedModel, batch: Batch,
                       layers: list[int]) -> dict[int, Float[Tensor, "batch head query key"]]:
    """Each layer's attention pattern (``blocks.{L}.attn.hook_pattern``) on one batch, cached by TransformerLens'
    own ``run_with_cache(names_filter=...)``, returned on the CPU."""
    names = {f"blocks.{layer}.attn.hook_pattern": layer for layer in layers}
    batch = to_device(batch, device_of(model))
    extra: dict[str, Any] = {key: value for key, value in batch.items() if key in ("attention_mask", "token_type_ids")}
    _, cache = model.bridge.run_with_cache(batch["input_ids"], names_filter=lambda name: name in names, **extra)
    missing = [name for name in names if name not in cache]
    if missing:
        raise HeurlensError("hook_pattern never fired: this model computes attention with a fused kernel. Load it "
                            "with attn_implementation='eager' (CLI: heurlens patterns does this)")
    return {layer: cache[name].cpu() for name, layer in names.items()}  # scored on the CPU, with the tokens


def best_label(scores: dict[str, float], min_score: float) -> str:
    """The highest-scoring pattern's name, or "other" when no score reaches ``min_score``."""
    best = max(scores, key=scores.__getitem__)
    return best if scores[best] >= min_score else "other"


def example_patterns(model: PreparedModel, text: str, text_pair: str | None,
                     heads: list[Unit]) -> tuple[list[str], Float[Tensor, "head query key"]]:
    """The tokens of one sentence pair (or, with ``text_pair`` None, one prompt) and the attention pattern of
    each of ``heads`` on it."""
    if model.tokenizer is None:
        raise HeurlensError("attention plots need a model with a tokenizer")
    encoded = model.tokenizer(text, text_pair, return_tensors="pt")
    batch = {k: v for k, v in encoded.items() if k in ("input_ids", "attention_mask", "token_type_ids")}
    captured = attention_patterns(model, batch, sorted({u.layer for u in heads}))
    tokens = str_tokens(model.tokenizer, batch["input_ids"][0].tolist())
    return tokens, torch.stack([captured[u.layer][0, u.head].float() for u in heads])


def str_tokens(tokenizer, ids: list[int]) -> list[str]:
    """Each token as the text it stands for (``" Rose"``, not the byte-level BPE piece ``"ĠRose"``), as
    TransformerLens' ``to_str_tokens`` shows them."""
    return [tokenizer.decode([token], clean_up_tokenization_spaces=False) for token in ids]


def attention_plot(model: PreparedModel, text: str, text_pair: str | None, heads: list[Unit]):
    """circuitsvis head plot of ``heads`` on one pair (or one prompt: ``text_pair`` None): shows inline in a
    notebook; ``.local_src`` is a standalone HTML page with the JavaScript embedded (works offline). Tokens are shown
    as text (``str_tokens``); the upper triangle (a query's attention to later keys) is greyed out only where every
    pattern is causal, so an encoder's attention to later tokens (BERT's hypothesis-to-premise direction) shows."""
    import circuitsvis

    tokens, patterns = example_patterns(model, text, text_pair, heads)
    causal = bool((patterns.triu(diagonal=1) == 0).all())
    return circuitsvis.attention.attention_heads(attention=patterns, tokens=tokens, mask_upper_tri=causal,
                                                 attention_head_names=[str(u) for u in heads])
