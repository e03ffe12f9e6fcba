"""A TransformerLens ``TransformerBridge`` with a classification head on its final hidden states.

TransformerLens 4 bridges BERT only as a masked LM (``BertForSequenceClassification`` is not an
adapter it accepts), so heurlens runs the bridge up to the encoder's output and applies the
classifier there: HF's BERT pooler + linear layer on [CLS] for encoders, a linear "score" on the
last non-padding token for GPT-2-style decoders. Every hook point of the bridge
(``blocks.{L}.attn.hook_z``, ``blocks.{L}.hook_mlp_out``, ``hook_pattern``...) stays live, and the
output equals the plain HF classifier's on the same weights.

A next-token model (no head) is scored on the last real position of its logits, or on the positions a task marks;
its unembedding runs there only where the HF model takes ``logits_to_keep`` (most decoders: a 49k-256k vocabulary
makes it a fifth or more of a small decoder's forward pass)."""

from __future__ import annotations

import copy
import inspect
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from typing import Any, Literal

import torch
from jaxtyping import Float, Int
from torch import Tensor, nn
from transformer_lens.model_bridge import TransformerBridge
from transformer_lens.model_bridge.exceptions import StopAtLayerException

from heurlens.errors import HeurlensError
from heurlens.models.pickling import rewire_capture_hooks
from heurlens.protocols import HookedModel, HookList, ModelLike, PreparedModel, is_hooked_model, is_prepared_model
from heurlens.runtime.devices import device_of
from heurlens.runtime.model_identity import remembered, weights_digest

Pooling = Literal["first", "last"]


def _stop_before(module: nn.Module, args: tuple[Any, ...]) -> None:
    """Forward pre-hook on the module that reads the classifier's hidden states: ends the bridge's forward pass and
    hands back its input, every hook at the hook point before it (a user's, an ablation's) fired. TransformerLens'
    own ``stop_at_layer`` uses the same exception, which the bridge turns into its return value. It skips the
    masked-LM head of a bridged BERT and a decoder's unembedding."""
    raise StopAtLayerException(args[0])


class HookedClassifier(nn.Module):
    """``bridge`` (hook points) -> hidden states -> ``head`` -> logits over ``labels``.

    ``HookedClassifier(bridge)`` alone is a next-token model scored on the last real token (what
    ``heurlens.wrap_bridge`` makes of a researcher's own bridge).

    Args:
        bridge: the TransformerLens model; its hook points are the ones heurlens ablates.
        head: maps pooled hidden states ``[batch, d_model]`` to ``[batch, n_labels]``;
            None for a next-token model, whose own logits at the pooled position are used.
        pooling: "first" ([CLS], encoders) or "last" (last non-padding token, decoders).
        hidden_hook: the ``hook_in`` of the bridge component whose input the head reads instead (e.g.
            ``unembed.hook_in``, ``mlm_head.hook_in``); the forward pass stops after that hook point's hooks, before
            the component computes. None when the head is None.
        labels: label names, in the order of the logits (None for a next-token model).
        model_id: how the model was loaded (a path, a hub name, "default", "native"); default: the
            bridge's ``cfg.model_name``.
        tokenizer: the tokenizer heurlens tokenises with; default: the bridge's own.
    """

    def __init__(self, bridge: TransformerBridge, head: nn.Module | None = None, pooling: Pooling = "last",
                 hidden_hook: str | None = None, labels: tuple[str, ...] | None = None, model_id: str | None = None,
                 tokenizer: Any = None):
        super().__init__()
        if (head is None) != (hidden_hook is None):
            raise HeurlensError("give a classification head together with the hook point it reads (hidden_hook), "
                                "or neither (a next-token model)")
        self.bridge = bridge
        self.head = head
        self.pooling = pooling
        self.labels = labels
        self.model_id = model_id or str(getattr(bridge.cfg, "model_name", "") or "bridge")
        self._tokenizer = tokenizer
        if hidden_hook is not None:
            _component_reading(bridge, hidden_hook).register_forward_pre_hook(_stop_before)
        self._keeps_logits = head is None and "logits_to_keep" in inspect.signature(
            getattr(bridge, "original_model", bridge).forward).parameters  # HF's: the unembedding at given positions
        self._cls_only = None  # a BERT head on [CLS]: the final block at [CLS] only when nothing hooks it
        if head is not None and pooling == "first":
            from heurlens.models.pooled_final_block import ClsOnlyFinalBlock

            self._cls_only = ClsOnlyFinalBlock(bridge)
        self.eval()

    def __setstate__(self, state: dict[str, Any]) -> None:
        """Unpickled (a Ray worker's copy): the bridge's capture hooks wired afresh (``heurlens.models.pickling``)."""
        super().__setstate__(state)
        rewire_capture_hooks(self.bridge)

    @property
    def n_layers(self) -> int:
        """The bridge's layers (``cfg.n_layers``)."""
        return self.bridge.cfg.n_layers

    @property
    def n_heads(self) -> int:
        """Query heads per layer (``cfg.n_heads``; the units heurlens ablates)."""
        return self.bridge.cfg.n_heads

    @property
    def d_head(self) -> int:
        """Each head's width (``cfg.d_head``)."""
        return self.bridge.cfg.d_head

    @property
    def tokenizer(self):
        """The tokenizer heurlens tokenises with: the one given, else the bridge's."""
        return self.bridge.tokenizer if self._tokenizer is None else self._tokenizer

    @property
    def device(self) -> torch.device:
        """Where the weights are; each batch is moved here when it is run."""
        return device_of(self)

    def forward(self, input_ids: Int[Tensor, "batch pos"], attention_mask: Int[Tensor, "batch pos"] | None = None,
                token_type_ids: Int[Tensor, "batch pos"] | None = None,
                score_mask: Int[Tensor, "batch pos"] | None = None) -> Float[Tensor, "row label"]:
        """One row of scores per example: the head's logits on the pooled position, or a next-token model's
        logits at the last real token. With ``score_mask`` (a next-token model only), one row per position it
        marks instead, in example then position order (``heurlens.tasks``: scoring positions). A next-token
        model's unembedding runs on the scored positions only (``_scored_positions``)."""
        device = self.device
        input_ids = input_ids.to(device)
        attention_mask = torch.ones_like(input_ids) if attention_mask is None else attention_mask.to(device)
        extra = {} if token_type_ids is None else {"token_type_ids": token_type_ids.to(device)}
        if score_mask is not None and self.head is not None:
            raise HeurlensError("a classifier scores its pooled position only: scoring positions (positions=) are "
                                "for next-token models")
        if score_mask is not None:
            score_mask = score_mask.to(device).bool()
        pooled_at = (torch.zeros_like(attention_mask[:, 0]) if self.pooling == "first"
                     else attention_mask.sum(dim=-1) - 1)  # right padding: the last real token
        kept = self._scored_positions(pooled_at, score_mask, input_ids.shape[1])
        if kept is not None:
            extra["logits_to_keep"] = kept
        with self._cls_only.engaged() if self._cls_only is not None else nullcontext():
            out = self.bridge(input_ids, attention_mask=attention_mask, **extra)
        if score_mask is not None:
            return out[score_mask if kept is None else score_mask[:, kept]]
        column = pooled_at if kept is None else torch.searchsorted(kept, pooled_at)
        pooled = out[torch.arange(out.shape[0], device=out.device), column]
        return pooled if self.head is None else self.head(pooled)

    def _scored_positions(self, pooled_at: Int[Tensor, " batch"], score_mask: Tensor | None, positions: int
                          ) -> Int[Tensor, " kept"] | None:
        """The positions whose logits a next-token model's scores read (ascending; HF's ``logits_to_keep``), or
        None where every position is read or the model computes them all (a classifier, or an HF model without
        ``logits_to_keep``). Hooks at ``unembed.hook_in`` / ``hook_out`` then see those positions only."""
        if not self._keeps_logits:
            return None
        kept = (score_mask.any(dim=0).nonzero()[:, 0] if score_mask is not None
                else torch.unique(pooled_at))  # sorted
        return kept if len(kept) < positions else None

    @contextmanager
    def hooks(self, fwd_hooks: HookList) -> Iterator[HookedClassifier]:
        """Run forward passes inside with ``fwd_hooks`` ([(hook name, fn)]) on the bridge's hook points."""
        with self.bridge.hooks(fwd_hooks=fwd_hooks):
            yield self

    def fingerprint(self) -> str:
        """sha256 (first 16 hex digits) of every weight, in name order, and of the tokenizer's vocabulary:
        identifies what the model computes, whatever path or name it was loaded by. Hashed once per state of the
        weights (``heurlens.runtime.model_identity``): a weight changed in place gives a new fingerprint."""
        tokenizer = self.tokenizer
        return remembered(self._weights(), "fingerprint",
                          (id(tokenizer), len(tokenizer) if tokenizer is not None else 0), self._fingerprint)

    def _weights(self) -> nn.Module:
        """The module whose weights identify the model (itself: the bridge and the head)."""
        return self

    def _fingerprint(self) -> str:
        digest = weights_digest(self._weights())
        if self.tokenizer is not None:
            digest.update(repr(sorted(self.tokenizer.get_vocab().items())).encode())
            digest.update(repr(sorted(map(str, self.tokenizer.all_special_tokens))).encode())
        return digest.hexdigest()[:16]

    def known_fingerprints(self) -> tuple[str, ...]:
        """This model's fingerprint and the one heurlens recorded before 2026-11-23 (the model id as typed,
        then the weights), so run folders written then still match. Each is hashed once per state of the
        weights."""
        legacy = remembered(self, "legacy fingerprint", (self.model_id,),
                            lambda: weights_digest(self, self.model_id.encode()).hexdigest()[:16])
        return self.fingerprint(), legacy


def _component_reading(bridge: TransformerBridge, hidden_hook: str) -> nn.Module:
    """The module ``hidden_hook`` (a component's ``hook_in``) feeds: the component's own HF module."""
    component = hidden_hook.removesuffix(".hook_in")
    reader = None if component == hidden_hook else getattr(
        dict(bridge.named_modules()).get(component), "original_component", None)
    if reader is None:
        raise HeurlensError(f"the classification head reads {hidden_hook!r}, which is not the hook_in of a bridge "
                            "component: give the hook_in of the component the head replaces (unembed.hook_in for a "
                            "decoder, mlm_head.hook_in for a masked LM)")
    return reader


def padded_right(tokenizer):
    """Decoders often have no pad token: pad with end-of-sequence, on the right (the last real token is scored)."""
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.padding_side = "right"
    return tokenizer


def wrap_bridge(bridge: TransformerBridge, model_id: str | None = None) -> HookedClassifier:
    """A researcher's own bridge as a heurlens model, scored on the last real token of each prompt, tokenised with a
    copy of its tokenizer that pads on the right; every hook point stays the bridge's own.

    Args:
        bridge: a next-token ``TransformerBridge`` (``boot_transformers``, ``boot_native``: any architecture).
        model_id: its name in records (None: the bridge's).

    Returns:
        The wrapper, kept with the bridge and returned again (one model identity for every call on it)."""
    if not isinstance(bridge, TransformerBridge):
        raise HeurlensError(f"wrap_bridge takes a TransformerLens TransformerBridge, not a {type(bridge).__name__}")
    kept = bridge.__dict__.get(_WRAPPER)  # in __dict__, not as a submodule: the bridge's state_dict is unchanged
    if kept is None or (model_id is not None and kept.model_id != model_id):
        own = None if bridge.tokenizer is None else padded_right(copy.deepcopy(bridge.tokenizer))
        kept = bridge.__dict__[_WRAPPER] = HookedClassifier(bridge, model_id=model_id, tokenizer=own)
    return kept


_WRAPPER = "_heurlens_wrapper"


class AdaptedModel(HookedClassifier):
    """A user's own ``HookedModel`` (bridge, tokenizer, forward pass, hooks) with what heurlens needs besides: the
    shape from ``bridge.cfg``; ``labels`` and ``model_id`` when the model has them (else None and its class name);
    its identity from its own ``fingerprint()`` when it has one, else from its weights (an ``nn.Module``'s, or the
    bridge's) and tokenizer, as ``HookedClassifier``'s fingerprint is made. Forward passes and hooks are the user's
    model's own."""

    def __init__(self, users: HookedModel):
        super().__init__(users.bridge, labels=getattr(users, "labels", None),
                         model_id=getattr(users, "model_id", None) or type(users).__name__)
        self.__dict__["users"] = users  # not a submodule: the bridge is not held twice in the state dict

    @property
    def tokenizer(self):
        return self.__dict__["users"].tokenizer

    def _weights(self) -> nn.Module:
        users = self.__dict__["users"]
        return users if isinstance(users, nn.Module) else self.bridge

    def parameters(self, recurse: bool = True):
        return self._weights().parameters(recurse)

    def forward(self, input_ids: Int[Tensor, "batch pos"], attention_mask: Int[Tensor, "batch pos"] | None = None,
                token_type_ids: Int[Tensor, "batch pos"] | None = None,
                score_mask: Int[Tensor, "batch pos"] | None = None) -> Float[Tensor, "batch output"]:
        """The user's model's own scores (which positions it scores is its own affair)."""
        if score_mask is not None:
            raise HeurlensError(f"a {type(self.__dict__['users']).__name__} scores the positions it chooses itself: "
                                "scoring positions (positions=) need a bridge (pass it, or heurlens.wrap_bridge(it))")
        extra = {} if token_type_ids is None else {"token_type_ids": token_type_ids}
        return self.__dict__["users"](input_ids, attention_mask, **extra)

    @contextmanager
    def hooks(self, fwd_hooks: HookList) -> Iterator[AdaptedModel]:
        with self.__dict__["users"].hooks(fwd_hooks):
            yield self

    def fingerprint(self) -> str:
        own = getattr(self.__dict__["users"], "fingerprint", None)
        return str(own()) if callable(own) else super().fingerprint()

    def known_fingerprints(self) -> tuple[str, ...]:
        return (self.fingerprint(),)


def as_model(model: ModelLike) -> PreparedModel:
    """``model`` as heurlens uses it: a ``TransformerBridge`` is wrapped (``wrap_bridge``), a ``PreparedModel``
    (``HookedClassifier`` or any structural match) is used as it is, any other ``HookedModel`` is adapted
    (``AdaptedModel``, kept with its bridge and reused); anything else is refused."""
    if isinstance(model, TransformerBridge):
        return wrap_bridge(model)
    if is_prepared_model(model):
        return model
    if is_hooked_model(model):
        kept = model.bridge.__dict__.get(_ADAPTED)
        if kept is None or kept.__dict__["users"] is not model:
            kept = model.bridge.__dict__[_ADAPTED] = AdaptedModel(model)
        return kept
    raise HeurlensError(f"a {type(model).__name__} is not a model heurlens can use: pass a TransformerLens "
                        "TransformerBridge, what heurlens.load_model returns, or an object with a bridge, a tokenizer, "
                        "a forward pass and hooks (heurlens.HookedModel)")


_ADAPTED = "_heurlens_adapted"
