"""A researcher's own data as a heurlens task: plain prompt strings or a token tensor become a ``TokenSet``
(tokens only: enough for unit means, pattern scores and custom metrics), and ``as_task`` turns whatever a
library call is given into a ``Task``.

Scoring positions (``positions=``): a next-token model is scored at each example's last real token by default
("last": one row of scores per example). "all" scores every real token, and a 0/1 tensor ``[example, pos]``
the positions it marks (a copying or reversal task, induction on repeated tokens): the batches then carry that
mask as ``score_mask``, and the model's scores, every metric, loss and KL, and pruning have one row per scored
position, in example then position order (``scored_rows`` counts them)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Literal

import torch
from jaxtyping import Float, Int
from torch import Tensor
from transformer_lens.model_bridge import TransformerBridge

from heurlens.errors import HeurlensError
from heurlens.models.classifier import as_model
from heurlens.protocols import Batch, ModelLike, PreparedModel, Task, is_task
from heurlens.runtime.argument_checks import PositiveInt, checked

TaskLike = Task | Sequence[str] | Tensor  # what the library's functions accept as data
Positions = Literal["last", "all"] | Tensor  # which positions are scored: see the module's docstring


@dataclass
class TokenSet:
    """Tokenised texts with no answers: batches (right-padded) and the texts they came from."""

    name: str
    batches: list[Batch]
    texts: list[str]

    def __len__(self) -> int:
        return sum(len(batch["input_ids"]) for batch in self.batches)

    def batch_task(self, index: int) -> TokenSet:
        """Batch ``index`` alone, as a task (a metric's view of one pruning batch: ``heurlens.metrics``)."""
        return TokenSet(self.name, [self.batches[index]], self.texts[batch_examples(self.batches, index)])

    def accuracy(self, scores: Float[Tensor, "example output"], model_labels: tuple[str, ...] | None) -> float:
        """Refused: tokens alone have no answers to be right about."""
        raise HeurlensError(f"{self.name} holds tokens only (no labels or answers), so it has no accuracy; pass "
                            "metrics={name: function(scores, task)} that need none, or build a task with answers "
                            "(heurlens.data.prompt_tasks.tokenize_prompt_task, heurlens.tokenize_pairs)")


def bridge_tokens(model: PreparedModel, text: str, prepend_bos: bool | None = None) -> list[int]:
    """``text`` as TransformerLens' ``bridge.to_tokens(text, prepend_bos)`` tokenises it: BOS prepended by the
    bridge's rule (``cfg.default_prepend_bos`` when None), an appended EOS stripped, truncated to ``n_ctx``. It is
    TransformerLens' own method, run with heurlens' tokenizer (``model.tokenizer``: for a wrapped bridge a copy
    that pads on the right), so the caller's tokenizer is never touched."""
    rules = SimpleNamespace(cfg=model.bridge.cfg, tokenizer=model.tokenizer)  # all that to_tokens reads of a bridge
    tokens = TransformerBridge.to_tokens(rules, text, prepend_bos=prepend_bos,  # type: ignore[arg-type]
                                         padding_side="right", move_to_device=False)
    return tokens[0].tolist()


@checked
def tokenize_texts(model: ModelLike, texts: Sequence[str], *, name: str = "texts", batch_size: PositiveInt = 32,
                   prepend_bos: bool | None = None, positions: Literal["last", "all"] = "last") -> TokenSet:
    """``texts`` in right-padded batches, each text tokenised as TransformerLens' ``bridge.to_tokens`` does
    (``bridge_tokens``; ``prepend_bos`` as there: None follows the bridge's ``cfg.default_prepend_bos``, False
    leaves the BOS out, and a BERT-style tokenizer's [CLS]). ``positions``: the scored positions, "last" or "all"
    (the module's docstring).

    Args:
        model: a ``HookedModel`` or a bare ``TransformerBridge`` (its tokenizer).
        texts: the texts.
        name: the task's name in tables.
        batch_size: texts a batch.
        prepend_bos: as ``to_tokens``' (None: the bridge's ``cfg.default_prepend_bos``).
        positions: the scored positions: "last" (each text's last real token) or "all".

    Returns:
        A ``TokenSet``."""
    model = as_model(model)
    if isinstance(texts, str):
        raise HeurlensError("give a list of texts, not one string (e.g. [\"When Mary and John went...\"])")
    texts = list(texts)
    if not texts or not all(isinstance(text, str) for text in texts):
        raise HeurlensError("give at least one text, as a list of strings")
    if model.tokenizer is None:
        raise HeurlensError("this model has no tokenizer: pass token ids as a tensor [batch, pos] instead of texts")
    rows = [bridge_tokens(model, text, prepend_bos) for text in texts]
    if not all(rows):
        empty = next(index for index, row in enumerate(rows) if not row)
        raise HeurlensError(f"text {empty} ({texts[empty]!r}) has no tokens: give texts with at least one token "
                            "(or keep the BOS, prepend_bos=None)")
    pad = model.tokenizer.pad_token_id or 0  # under the attention mask: never attended to, never scored
    batches = []
    for start in range(0, len(rows), batch_size):
        chunk = rows[start:start + batch_size]
        width = max(map(len, chunk))
        batches.append(_scored({"input_ids": torch.tensor([row + [pad] * (width - len(row)) for row in chunk]),
                                "attention_mask": torch.tensor([[1] * len(row) + [0] * (width - len(row))
                                                                for row in chunk])}, positions))
    return TokenSet(name, batches, texts)


@checked
def token_batches(tokens: Int[Tensor, "example pos"], *, name: str = "tokens", batch_size: PositiveInt = 32,
                  attention_mask: Int[Tensor, "example pos"] | None = None, positions: Positions = "last") -> TokenSet:
    """A token tensor in batches: every row a real sequence, or padded on the right where ``attention_mask`` (1
    real, 0 padding) says so. ``positions``: the scored positions, "last", "all", or a 0/1 tensor ``[example,
    pos]`` marking real tokens (the module's docstring).

    Args:
        tokens: the token ids ``[example, pos]``.
        name: the task's name in tables.
        batch_size: rows a batch.
        attention_mask: 1 at real tokens, 0 at right padding (None: every token real).
        positions: the scored positions: "last", "all", or a 0/1 tensor ``[example, pos]``.

    Returns:
        A ``TokenSet``."""
    if tokens.dim() != 2 or tokens.dtype not in (torch.int64, torch.int32) or not len(tokens):
        raise HeurlensError(f"token ids must be a non-empty integer tensor [example, pos]; got {tuple(tokens.shape)} "
                            f"of {tokens.dtype}")
    for what, tensor in (("token ids", tokens), ("attention mask", attention_mask), ("scored positions", positions)):
        if isinstance(tensor, Tensor) and tensor.is_meta:
            raise HeurlensError(f"the {what} are on the meta device, which holds shapes and no values: give them on "
                                "the CPU (or the model's device), e.g. tokens.to('cpu') after filling them")
    mask = torch.ones_like(tokens) if attention_mask is None else attention_mask
    if mask.shape != tokens.shape:
        raise HeurlensError(f"the attention mask is {tuple(mask.shape)}, the tokens {tuple(tokens.shape)}: give one "
                            "0/1 entry per token")
    _check_zero_one(mask, "the attention mask")
    if not bool(mask.bool().any(-1).all()):
        empty = int((~mask.bool().any(-1)).nonzero()[0])
        raise HeurlensError(f"the attention mask of example {empty} is all 0: every example needs a real token")
    holes = (mask[:, 1:] > mask[:, :-1]).any(-1)  # a 1 after a 0: left padding, or padding between tokens
    if bool(holes.any()):
        raise HeurlensError(f"the attention mask of example {int(holes.nonzero()[0])} has padding (0) before a real "
                            "token (1): heurlens reads padding on the right (its last real token is the mask's last "
                            "1); pad on the right (tokenizer.padding_side = \"right\") or pass the texts")
    if isinstance(positions, Tensor):
        if positions.shape != tokens.shape:
            raise HeurlensError(f"the scored positions are {tuple(positions.shape)}, the tokens "
                                f"{tuple(tokens.shape)}: give one 0/1 entry per token")
        _check_zero_one(positions, "the scored positions")
        if bool((positions.bool() & ~mask.bool()).any()):
            raise HeurlensError("the scored positions mark padding: mark real tokens only (attention_mask 1)")
        if not bool(positions.bool().any(-1).all()):
            empty = int((~positions.bool().any(-1)).nonzero()[0])
            raise HeurlensError(f"example {empty} has no scored position: mark at least one per example")
    batches = [_scored({"input_ids": tokens[i:i + batch_size].long(), "attention_mask": mask[i:i + batch_size].long()},
                       positions[i:i + batch_size] if isinstance(positions, Tensor) else positions)
               for i in range(0, len(tokens), batch_size)]
    return TokenSet(name, batches, [])


def _check_zero_one(marks: Tensor, what: str) -> None:
    """Refuse a mask with an entry other than 0 and 1 (a 2, 0.5 or -1 would miscount the scored rows)."""
    odd = (marks != 0) & (marks != 1)
    if bool(odd.any()):
        example, position = odd.nonzero()[0].tolist()
        raise HeurlensError(f"{what} hold {marks[example, position].item()!r} at example {example}, position "
                            f"{position}: give 0 or 1 per token")


def _scored(batch: Batch, positions: Positions) -> Batch:
    """``batch`` with the positions to score: no ``score_mask`` for "last" (the model's own default), the
    attention mask for "all", the given 0/1 rows otherwise."""
    if isinstance(positions, Tensor):
        return batch | {"score_mask": positions.long()}
    if positions == "all":
        return batch | {"score_mask": batch["attention_mask"].clone()}
    if positions != "last":
        raise HeurlensError(f"unknown positions {positions!r}: use \"last\", \"all\" or a 0/1 tensor [example, pos]")
    return batch


def batch_examples(batches: Sequence[Batch], index: int) -> slice:
    """The examples of batch ``index`` among all the batches' (for a task's per-example fields)."""
    start = sum(len(batch["input_ids"]) for batch in batches[:index])
    return slice(start, start + len(batches[index]["input_ids"]))


def batch_rows(batch: Batch) -> int:
    """How many rows of scores the model gives on ``batch``: one per example, or one per scored position."""
    return int(batch["score_mask"].sum()) if "score_mask" in batch else len(batch["input_ids"])


def scored_rows(task: Task) -> int:
    """How many rows of scores the model gives on ``task`` (``batch_rows`` over its batches)."""
    return sum(batch_rows(batch) for batch in task.batches)


def _fitting(model: PreparedModel, task: Task) -> Task:
    """``task``, refused by name when a token id is outside the model's vocabulary or a sequence is longer than its
    context (an IndexError deep in the embedding, or positions past what rotary embeddings were built for)."""
    cfg = getattr(getattr(model, "bridge", None), "cfg", None)
    vocabulary, context = getattr(cfg, "d_vocab", None), getattr(cfg, "n_ctx", None)
    for batch in task.batches:
        ids = batch["input_ids"]
        if isinstance(vocabulary, int) and vocabulary > 0 and ids.numel() and not 0 <= int(ids.min()) <= int(
                ids.max()) < vocabulary:
            raise HeurlensError(f"{task.name}: token ids run from {int(ids.min())} to {int(ids.max())}, and the model's "
                                f"vocabulary has ids 0 to {vocabulary - 1}: tokenise with this model's tokenizer")
        if isinstance(context, int) and context > 0 and ids.shape[-1] > context:
            raise HeurlensError(f"{task.name}: sequences of {ids.shape[-1]} tokens, and the model's context is "
                                f"{context}: cut them to at most {context} tokens")
    return task


def as_task(model: PreparedModel, data: TaskLike, prepend_bos: bool | None = None, batch_size: int = 32) -> Task:
    """``data`` as a task: a task as it is, a list of strings tokenised (``tokenize_texts``, with ``prepend_bos``),
    a token tensor batched (``token_batches``), ``batch_size`` examples a batch. Anything else, or nothing, is refused
    naming what to pass."""
    if isinstance(data, Tensor):
        return _fitting(model, token_batches(data, batch_size=batch_size))
    if is_task(data):
        if not data.batches:
            raise HeurlensError(f"the task {data.name!r} has no examples; give it at least one")
        return _fitting(model, data)
    if isinstance(data, Sequence):  # one string is refused there
        return tokenize_texts(model, data, prepend_bos=prepend_bos, batch_size=batch_size)
    raise HeurlensError(f"cannot use a {type(data).__name__} as data: give a task (EvalSet, PromptSet, TokenSet), a "
                        "list of texts, or a token tensor [example, pos]")
