"""A BERT classifier's final block computed at [CLS] only, when nothing watches the block.

A classifier that pools [CLS] reads one row of the final block's output. That row needs the block's keys and
values at every position (its attention reads them) but its query, attention output, layer norms and MLP at
[CLS] alone: per token, 4 d_model^2 of the block's 24 d_model^2 multiply-adds. Resumed ablated passes run
from the first ablated layer up (``heurlens.interventions.resumed_passes``), so for the default 6-layer model's layer-4
ablation this cuts the compute from 2 blocks to 1.17 (``benchmarks/main_command.py``).

Used only when it changes nothing anyone sees: the model is a ``HookedClassifier`` with a head on [CLS] over a
HF ``BertLayer``, and no hook point from the final block on has a TransformerLens hook (an ablation or mask there,
a cache, a user's own hook) beyond those the bridge was built with (TransformerLens' own wiring), nor the final block
a torch hook. The block's own submodules (TransformerLens' bridges around HF's linear layers and layer norms) and HF's
attention function compute it, so the [CLS] row equals the whole block's up to float rounding
(tests/models/test_pooled_final_block.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from jaxtyping import Float
from torch import Tensor, nn
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
from transformers.models.bert.modeling_bert import BertLayer, eager_attention_forward


def lens_hook_ids(modules: Iterable[nn.Module]) -> set[int]:
    """The ids of the TransformerLens hooks on ``modules``' hook points (their ``fwd_hooks`` handles)."""
    return {handle.hook.id for module in modules for handle in getattr(module, "fwd_hooks", ())}


BEFORE_THE_BLOCKS = ("embed", "pos_embed", "token_type_embed", "hook_embed", "hook_pos_embed")  # hook point names


class ClsOnlyFinalBlock:
    """A bridged BERT classifier's final block, run at [CLS] only inside ``engaged()`` when nothing watches it.

    Built with the bridge: what hooks the bridge has then (TransformerLens' own wiring) are its own; any other
    TransformerLens hook on the final block's hook points or those after it, or a torch hook on the final block
    itself, means someone watches, and the block runs whole."""

    def __init__(self, bridge: Any):  # a TransformerBridge
        self.bridge = bridge
        self.final: Any = bridge.blocks[-1]
        self.bert = isinstance(getattr(self.final, "original_component", None), BertLayer)
        after = [point for name, point in bridge.hook_dict.items()
                 if not name.startswith((*BEFORE_THE_BLOCKS, "blocks."))]
        self.watch_points = [*self.final.modules(), *after]
        self.own_hooks = lens_hook_ids(bridge.modules())

    def applies(self) -> bool:
        """A BERT block, not training, no one's hook on the final block or after it."""
        final = self.final
        return (self.bert and not self.bridge.training and not (final._forward_hooks or final._forward_pre_hooks)
                and lens_hook_ids(self.watch_points) <= self.own_hooks)

    @contextmanager
    def engaged(self) -> Iterator[bool]:
        """Inside, the final block computes [CLS] alone when it ``applies``; yields whether it does."""
        if not self.applies():
            yield False
            return
        vars(self.final)["forward"] = cls_only_forward(self.final)  # an instance forward, as in resumed_passes
        try:
            yield True
        finally:
            vars(self.final).pop("forward", None)


def cls_only_forward(block: nn.Module) -> Any:
    """``block``'s forward (a bridged ``BertLayer``) returning the [CLS] row alone: ``[batch, 1, d_model]``."""
    layer: Any = block.original_component  # HF's BertLayer, its submodules TransformerLens bridges
    attention: Any = layer.attention.original_component
    self_attention: Any = attention.self

    def forward(hidden_states: Float[Tensor, "batch pos d_model"], attention_mask: Tensor | None = None,
                *args: Any, **kwargs: Any) -> Float[Tensor, "batch 1 d_model"]:
        batch = hidden_states.shape[0]
        cls = hidden_states[:, :1]

        def heads(x: Tensor) -> Tensor:
            return x.view(batch, x.shape[1], -1, self_attention.attention_head_size).transpose(1, 2)

        query = heads(self_attention.query(cls))
        key, value = heads(self_attention.key(hidden_states)), heads(self_attention.value(hidden_states))
        if attention_mask is not None and attention_mask.dim() == 4:
            attention_mask = attention_mask[:, :, :1]
        attend = ALL_ATTENTION_FUNCTIONS.get_interface(self_attention.config._attn_implementation,
                                                       eager_attention_forward)
        context, _ = attend(self_attention, query, key, value, attention_mask, dropout=0.0,
                            scaling=self_attention.scaling)
        attended = attention.output(context.reshape(batch, 1, -1).contiguous(), cls)
        return layer.output(layer.intermediate(attended), attended)

    return forward
