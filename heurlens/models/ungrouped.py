"""A grouped-query model with its key-value heads ungrouped: every query head gets its own copy of the key and value
weights of the head it shares, so the copy computes the same function while each query head reads its own key and
value inputs. Its edges are MIB's graph (EAP-IG's, with TransformerLens' ``ungroup_grouped_query_attention``, an
option of ``HookedTransformer`` the 4.3 bridge does not have): the G query heads of a key-value head each have their
own edges into their k and v inputs, and an edge's score on the grouped model is the sum of its G copies' (the
grouped input feeds each of them).
"""

from __future__ import annotations

import copy
from typing import Any

from torch import Tensor
from transformer_lens.model_bridge.sources import build_bridge_from_module

from heurlens.errors import HeurlensError
from heurlens.models.classifier import HookedClassifier, as_model
from heurlens.protocols import ModelLike, PreparedModel

_KEY_VALUE = ("k_proj.weight", "v_proj.weight", "k_proj.bias", "v_proj.bias")


def ungrouped_copy(model: ModelLike) -> PreparedModel:
    """A copy of the next-token ``model`` (a TransformerLens 4 bridge over a Hugging Face grouped-query decoder:
    Llama, Qwen2, Mistral, SmolLM2, ...) with as many key-value heads as query heads, each a copy of the one it
    shared; ``model`` itself when it has no grouped heads. Refused by name for a classifier or a model whose key and
    value projections are not ``k_proj``/``v_proj``.

    Args:
        model: a next-token model (``HookedModel`` or bridge).

    Returns:
        The ungrouped copy (MIB's graph), or ``model`` itself without grouped heads."""
    model = as_model(model)
    bridge = getattr(model, "bridge", None)
    original = getattr(bridge, "original_model", None)
    config = getattr(original, "config", None)
    if bridge is None or original is None or config is None:
        raise HeurlensError("ungrouping needs a TransformerLens 4 bridge over a Hugging Face model "
                            "(heurlens.load_model or heurlens.wrap_bridge)")
    n_heads = int(config.num_attention_heads)
    n_kv = int(getattr(config, "num_key_value_heads", None) or n_heads)
    if n_kv == n_heads:
        return model
    if getattr(model, "head", None) is not None:
        raise HeurlensError("ungrouping copies next-token models; this one has a classification head: attribute its "
                            "edges on its grouped graph (--graph heurlens)")
    ungrouped_config = copy.deepcopy(config)
    ungrouped_config.num_key_value_heads = n_heads
    parameter = next(original.parameters())
    twin = type(original)(ungrouped_config).to(device=parameter.device, dtype=parameter.dtype)
    state = _hugging_face_state(original, set(twin.state_dict()))
    projections = [name for name in state if name.endswith(_KEY_VALUE)]
    if not projections:
        raise HeurlensError(f"{type(original).__name__} has no k_proj/v_proj weights to copy per query head: attribute "
                            "its edges on its grouped graph (--graph heurlens)")
    for name in projections:
        state[name] = state[name].unflatten(0, (n_kv, -1)).repeat_interleave(n_heads // n_kv, dim=0).flatten(0, 1)
    twin.load_state_dict(state)
    architecture = (config.architectures or [type(original).__name__])[0]
    twin_bridge = build_bridge_from_module(twin.eval(), architecture, hf_config=ungrouped_config,
                                           tokenizer=bridge.tokenizer, model_name=f"{model.model_id} (ungrouped)")
    return HookedClassifier(twin_bridge, model_id=model.model_id, tokenizer=getattr(model, "_tokenizer", None))


def _hugging_face_state(original: Any, names: set[str]) -> dict[str, Tensor]:
    """The Hugging Face model's weights under its own names (``names``): the bridge wraps each module in place (its
    weights then read ``..._original_component.weight``) and adds aliases (``ln1``, ``attn.q``), which are left out."""
    state = {}
    for key, value in original.state_dict().items():
        name = key.replace("._original_component", "")
        if name in names:
            state[name] = value
    return state
