"""A researcher's own data as a heurlens task: plain prompt strings or a token tensor become a ``TokenSet``
(tokens only: enough for unit means, pattern scores and custom metrics), and ``as_task`` turns whatever a
library call is given into a ``Task``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from jaxtyping import Float, Int
from torch import Tensor

from heurlens.errors import HeurlensError
from heurlens.protocols import Batch, HookedModel, Task, is_task

TaskLike = Task | Sequence[str] | Tensor  # what the library's functions accept as data


@dataclass
class TokenSet:
    """Tokenised texts with no answers: batches (right-padded) and the texts they came from."""

    name: str
    batches: list[Batch]
    texts: list[str]

    def __len__(self) -> int:
        return sum(len(batch["input_ids"]) for batch in self.batches)

    def accuracy(self, scores: Float[Tensor, "example output"], model_labels: tuple[str, ...] | None) -> float:
        raise HeurlensError(f"{self.name} holds tokens only (no labels or answers), so it has no accuracy; pass "
                            "metrics={name: function(scores, task)} that need none, or build a task with answers "
                            "(heurlens.data.prompt_tasks.tokenize_prompt_task, heurlens.tokenize_pairs)")


def tokenize_texts(model: HookedModel, texts: Sequence[str], name: str = "texts", batch_size: int = 32,
                   add_special_tokens: bool = True) -> TokenSet:
    """``texts`` tokenised by ``model``'s tokenizer in right-padded batches. ``add_special_tokens`` as
    TransformerLens' ``prepend_bos``: whether the tokenizer adds its special tokens (BOS for most decoders;
    [CLS] and [SEP] for BERT)."""
    texts = list(texts)
    if not texts or not all(isinstance(text, str) for text in texts):
        raise HeurlensError("give at least one text, as a list of strings")
    if model.tokenizer is None:
        raise HeurlensError("this model has no tokenizer: pass token ids as a tensor [batch, pos] instead of texts")
    batches = [{key: value for key, value in model.tokenizer(texts[i:i + batch_size], padding=True,
                                                              return_tensors="pt",
                                                              add_special_tokens=add_special_tokens).items()
                if key in ("input_ids", "attention_mask")} for i in range(0, len(texts), batch_size)]
    lengths = torch.cat([batch["attention_mask"].sum(-1) for batch in batches])
    if (lengths == 0).any():
        empty = int((lengths == 0).nonzero()[0])
        raise HeurlensError(f"text {empty} ({texts[empty]!r}) has no tokens: give texts with at least one token "
                            "(or keep the tokenizer's special tokens, add_special_tokens=True)")
    return TokenSet(name, batches, texts)


def token_batches(tokens: Int[Tensor, "example pos"], name: str = "tokens", batch_size: int = 32,
                  attention_mask: Int[Tensor, "example pos"] | None = None) -> TokenSet:
    """A token tensor (every row a real sequence unless ``attention_mask`` says otherwise) in batches."""
    if tokens.dim() != 2 or tokens.dtype not in (torch.int64, torch.int32) or not len(tokens):
        raise HeurlensError(f"token ids must be a non-empty integer tensor [example, pos]; got {tuple(tokens.shape)} "
                            f"of {tokens.dtype}")
    mask = torch.ones_like(tokens) if attention_mask is None else attention_mask
    batches = [{"input_ids": tokens[i:i + batch_size].long(), "attention_mask": mask[i:i + batch_size].long()}
               for i in range(0, len(tokens), batch_size)]
    return TokenSet(name, batches, [])


def as_task(model: HookedModel, data: TaskLike, add_special_tokens: bool = True) -> Task:
    """``data`` as a task: a task as it is, a list of strings tokenised (``tokenize_texts``), a token tensor
    batched (``token_batches``). Anything else, or nothing, is refused naming what to pass."""
    if isinstance(data, Tensor):
        return token_batches(data)
    if is_task(data):
        if not data.batches:
            raise HeurlensError(f"the task {data.name!r} has no examples; give it at least one")
        return data
    if isinstance(data, str):
        raise HeurlensError("give a list of texts, not one string (e.g. [\"When Mary and John went...\"])")
    if isinstance(data, Sequence):
        return tokenize_texts(model, data, add_special_tokens=add_special_tokens)
    raise HeurlensError(f"cannot use a {type(data).__name__} as data: give a task (EvalSet, PromptSet, TokenSet), a "
                        "list of texts, or a token tensor [example, pos]")
