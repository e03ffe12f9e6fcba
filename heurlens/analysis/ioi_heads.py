"""The attention signatures of the IOI circuit's head classes (Wang et al. 2022, "Interpretability in the wild",
Section 3), to read which classes a circuit's heads look like.

On an IOI prompt ("Then, Mary and John went to the store. John gave a drink to"), IO the indirect object (named
once), S1 and S2 the subject's two mentions, END the last token (where the answer is predicted), a head's
attention A (query x key) gives four scores, each the share of one query's attention on one key:

- name mover: END -> IO (Wang et al.'s name movers, and their negative name movers, copy the name they attend to);
- S-inhibition: END -> S2 (they move "S is duplicated" to END, which keeps the name movers off S);
- duplicate token: S2 -> S1 (they find that S was named before);
- induction: S2 -> the token after S1.

With ``exclude_bos`` the attention on the first position (a decoder's attention sink; no name is ever there) is left
out and the rest renormalised, as heurlens' head detector does. A head's score is its mean over the prompts; its
label the highest score if it reaches ``min_score`` (0.3), else "other". Wang et al. assign classes by path patching,
not by attention alone: these scores say which class a head's attention looks like, not what the head does.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
import torch
from jaxtyping import Float, Int
from torch import Tensor

from heurlens.analysis.head_detector import labelled_heads
from heurlens.analysis.patterns import attention_patterns
from heurlens.data.prompt_tasks import PromptSet
from heurlens.errors import HeurlensError
from heurlens.interventions.units import UnitsLike, as_units
from heurlens.models.classifier import as_model
from heurlens.protocols import ModelLike
from heurlens.tasks import TaskLike, as_task, batch_examples

SIGNATURES = ("name_mover", "s_inhibition", "duplicate_token", "induction")


@dataclass(frozen=True)
class IoiPositions:
    """Where one IOI prompt names its indirect object and its subject, and its last token."""

    io: int
    s1: int
    s2: int
    end: int


def ioi_positions(tokens: Int[Tensor, " pos"], io: int, subject: int) -> IoiPositions | None:
    """The positions in one prompt's real tokens of the IO token ``io`` (once), the subject's token ``subject``
    (twice) and the last token; None when the prompt does not name them so (e.g. a name split into two tokens)."""
    io_at = (tokens == io).nonzero().flatten().tolist()
    s_at = (tokens == subject).nonzero().flatten().tolist()
    if len(io_at) != 1 or len(s_at) != 2 or s_at[1] + 1 >= len(tokens):
        return None
    return IoiPositions(io_at[0], s_at[0], s_at[1], len(tokens) - 1)


def ioi_signature_scores(attention: Float[Tensor, "head query key"], where: IoiPositions,
                         exclude_bos: bool = True) -> dict[str, Float[Tensor, " head"]]:
    """Each head's four shares of attention on one prompt (the module's list), the first position left out and
    each query's row renormalised with ``exclude_bos``."""
    if exclude_bos:
        attention = attention.clone()
        attention[..., 0] = 0
    shares = attention / attention.sum(-1, keepdim=True).clamp_min(torch.finfo(attention.dtype).tiny)
    return {"name_mover": shares[:, where.end, where.io], "s_inhibition": shares[:, where.end, where.s2],
            "duplicate_token": shares[:, where.s2, where.s1], "induction": shares[:, where.s2, where.s1 + 1]}


def ioi_head_scores(model: ModelLike, prompts: TaskLike, *, heads: UnitsLike | None = None,
                    min_score: float = 0.3, exclude_bos: bool = True) -> pd.DataFrame:
    """One row per head (or per head of ``heads``): its mean signature scores over the IOI ``prompts`` whose
    answer (IO) and distractor (S) are single tokens named once and twice, a label, and how many prompts counted.
    The model must expose ``hook_pattern`` (load HF models with ``attn_implementation="eager"``).

    Args:
        model: a ``HookedModel`` or a bare ``TransformerBridge``.
        prompts: IOI prompts (a prompt task with the IO as answer and S as distractor).
        heads: the heads scored (None: every head).
        min_score: a head is labelled with a signature it scores at least this on.
        exclude_bos: leave attention to the first token out of the scores.

    Returns:
        One row per head: its signature scores, its label and the prompts counted."""
    model = as_model(model)
    prompts = as_task(model, prompts)
    if not isinstance(prompts, PromptSet) or not len(prompts) or prompts.distractors.shape[-1] == 0:
        raise HeurlensError(f"{prompts.name} is not an IOI task: its prompts need an answer (the indirect object) "
                            "and a distractor (the subject); make them with prompt_task_set('ioi', ...)")
    heads = as_units(heads, model.n_layers, model.n_heads) if heads is not None else None
    layers = sorted({u.layer for u in heads}) if heads else list(range(model.n_layers))
    sums = {layer: {name: torch.zeros(model.n_heads) for name in SIGNATURES} for layer in layers}
    counted = 0
    for index, batch in enumerate(prompts.batches):
        captured = attention_patterns(model, batch, layers)
        mask = batch.get("attention_mask", torch.ones_like(batch["input_ids"])).cpu().bool()
        rows = batch_examples(prompts.batches, index)
        for example, (tokens, io, subject) in enumerate(zip(batch["input_ids"].cpu(), prompts.answers[rows, 0],
                                                            prompts.distractors[rows, 0])):
            real = mask[example]
            where = ioi_positions(tokens[real], int(io), int(subject))
            if where is None:
                continue
            counted += 1
            for layer in layers:
                attention = captured[layer][example].float()[:, real][:, :, real]
                for name, score in ioi_signature_scores(attention, where, exclude_bos).items():
                    sums[layer][name] += score
    if not counted:
        raise HeurlensError(f"no prompt of {prompts.name} names its answer once and its distractor twice as single "
                            "tokens: IOI signatures need prompts shaped as IOI's (prompt_task_set('ioi', ...))")
    return labelled_heads(sums, counted, model.n_heads, heads, min_score).assign(prompts=counted)
