"""Previous-token, duplicate-token and induction scores of decoder heads over a prompt task, as TransformerLens'
head detector defines them (``transformer_lens.head_detector``, error measure "mul").

For one prompt of n tokens, a head's attention A (query x key, causal) and a 0/1 detection pattern D from
TransformerLens (``get_previous_token_head_detection_pattern``: D[q, q-1] = 1; ``..._duplicate_token_...``:
D[q, k] = 1 for k < q with the same token; ``..._induction_...``: D[q, k] = 1 when token k-1 equals token q,
k <= q), the score is sum(A * D) / sum(A): the share of the head's attention on the detected positions. A head's
score is the mean over prompts (TransformerLens' rule for a list of prompts). The current token is kept (the
detector's default); the first position is left out (its ``exclude_bos=True``; the detector's default keeps it)
because decoders such as SmolLM2 park most of their attention there (an attention sink): with it kept, no
SmolLM2 head reaches 0.3 on induction prompts; without, six do (L18.H7 0.95). The label is the highest score if
it reaches ``min_score`` (0.3, heurlens' own threshold, as in ``heurlens.analysis.patterns``), else "other".
"""

from __future__ import annotations

import pandas as pd
import torch
from jaxtyping import Float
from torch import Tensor
from transformer_lens.head_detector import (
    get_duplicate_token_head_detection_pattern,
    get_induction_head_detection_pattern,
    get_previous_token_head_detection_pattern,
)

from heurlens.analysis.patterns import attention_patterns, best_label
from heurlens.interventions.units import Unit, UnitsLike, as_units
from heurlens.models.classifier import as_model
from heurlens.protocols import ModelLike
from heurlens.runtime.argument_checks import checked
from heurlens.tasks import TaskLike, as_task

DETECTION_PATTERNS = {"previous_token": get_previous_token_head_detection_pattern,
                      "duplicate_token": get_duplicate_token_head_detection_pattern,
                      "induction": get_induction_head_detection_pattern}


def detection_scores(attention: Float[Tensor, "head query key"], detection: Float[Tensor, "query key"],
                     exclude_bos: bool = False) -> Float[Tensor, " head"]:
    """sum(A * D) / sum(A) for every head of one prompt (TransformerLens' "mul" measure); with ``exclude_bos``
    the attention on the first position is set to 0 first (TransformerLens' ``exclude_bos``)."""
    if exclude_bos:
        attention = attention.clone()
        attention[..., 0] = 0
    return (attention * detection).sum((-2, -1)) / attention.sum((-2, -1))


@checked
def head_detector_scores(model: ModelLike, prompts: TaskLike, *, heads: UnitsLike | None = None,
                         min_score: float = 0.3, exclude_bos: bool = True) -> pd.DataFrame:
    """One row per head (or per head of ``heads``): the mean score of each detection pattern over the prompts,
    and a label. ``prompts``: any task, a list of texts or a token tensor (tokens are all it reads). The model
    must expose ``hook_pattern`` (load HF models with ``attn_implementation="eager"``).

    Args:
        model: a ``HookedModel`` or a bare ``TransformerBridge``.
        prompts: a task, a list of texts or a token tensor (tokens are all it reads).
        heads: the heads scored (None: every head).
        min_score: a head is labelled with a pattern it scores at least this on.
        exclude_bos: leave attention to the first token out of the scores (TransformerLens' ``exclude_bos``).

    Returns:
        One row per head: its score on each pattern and its label."""
    model = as_model(model)
    prompts = as_task(model, prompts)
    heads = as_units(heads, model.n_layers, model.n_heads) if heads is not None else None
    layers = sorted({u.layer for u in heads}) if heads else list(range(model.n_layers))
    sums = {layer: {name: torch.zeros(model.n_heads, device="cpu") for name in DETECTION_PATTERNS} for layer in layers}
    for batch in prompts.batches:
        captured = attention_patterns(model, batch, layers)
        mask = batch.get("attention_mask", torch.ones_like(batch["input_ids"]))
        for example, tokens in enumerate(batch["input_ids"]):
            where = mask[example].bool()  # the prompt's real tokens (padding may sit on either side)
            with torch.device(tokens.device):  # TransformerLens' patterns are made on the default device
                detections = {name: make(tokens[where][None]) for name, make in DETECTION_PATTERNS.items()}
            for layer in layers:
                attention = captured[layer][example].float()[:, where][:, :, where]
                for name, detection in detections.items():
                    sums[layer][name] += detection_scores(attention, detection, exclude_bos)
    return labelled_heads(sums, len(prompts), model.n_heads, heads, min_score)


def labelled_heads(sums: dict[int, dict[str, Float[Tensor, " head"]]], count: int, n_heads: int,
                   heads: list[Unit] | None, min_score: float) -> pd.DataFrame:
    """One row per head of the layers in ``sums`` (or per head of ``heads``): each score summed over ``count``
    prompts, as its mean, and the label of the highest (``best_label``)."""
    rows = []
    for layer, per_score in sums.items():
        for head in range(n_heads):
            if heads and Unit(layer, head) not in heads:
                continue
            scores = {name: float(total[head]) / count for name, total in per_score.items()}
            rows.append({"unit": str(Unit(layer, head)), "layer": layer, "head": head, **scores,
                         "label": best_label(scores, min_score)})
    return pd.DataFrame(rows)
