"""Ablated forward passes that start at the first ablated layer, from the full model's residual stream there.

Ablating units whose lowest layer is L changes nothing below L: the input of block L is the full model's
output of block L-1, which the activation cache keeps per model, data and layer
(``heurlens.interventions.activation_cache.residual_streams``: computed on first use, read from disk after). Each ablated
pass runs with blocks 0..L-1 stood in for by a function that returns that residual stream
(``lower_blocks_replaced``): only the embeddings and blocks L and up are computed, with every hook point there
live. (TransformerLens' own ``start_at_layer`` still runs the lower blocks, on discarded input.) The logits are
bit for bit those of a whole ablated pass (tests/test_resumed_passes.py); ablating layer 4 of a 6-layer model
so computes 2 blocks, and a scan of every head 3.5 per head on average (benchmarks/activation_cache.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import torch
from jaxtyping import Float
from torch import Tensor
from tqdm.auto import tqdm

from heurlens.interventions.activation_cache import residual_streams
from heurlens.protocols import HookList, PreparedModel, Task
from heurlens.runtime.call_context import CallContext, call_context
from heurlens.runtime.devices import to_device
from heurlens.runtime.precision import autocast

Ablation = tuple[int, HookList]  # (first ablated layer, hooks [(hook name, fn)]) of one ablated model


@contextmanager
def lower_blocks_replaced(model: PreparedModel, layer: int, block_output: Any) -> Iterator[None]:
    """Inside, blocks 0..layer-1 compute nothing and return ``block_output`` (the full model's residual stream
    entering block ``layer`` on the batch about to run): block ``layer`` receives it as its input, as in a whole pass. The
    stand-in is an instance ``forward``, which ``nn.Module.__call__`` calls instead of the class's; it is set
    in the instance's ``__dict__`` because TransformerLens components pass attribute writes on to the HF module."""
    blocks = list(model.bridge.blocks)[:layer]
    for block in blocks:
        vars(block)["forward"] = lambda *args, **kwargs: block_output
    try:
        yield
    finally:
        for block in blocks:
            vars(block).pop("forward", None)


@torch.no_grad()
def ablated_logits(model: PreparedModel, ablations: Sequence[Ablation], eval_set: Task,
                   context: CallContext | None = None, bar: tqdm | None = None,
                   before_batch: Callable[[int], None] | None = None) -> list[Float[Tensor, "row label"]]:
    """For each (first ablated layer L, hooks) in ``ablations``, what ``predict_logits(model, eval_set,
    fwd_hooks=hooks, dtype=context.dtype)`` returns, the hooks firing only in blocks L and up, which start from the
    full model's residual stream entering L (from the activation cache; ``context``: the call's, as for
    ``full_model_logits``). ``L`` must not exceed the lowest layer the hooks change (0 is always right). ``bar`` (a
    progress bar) advances by one per ablated pass over a batch. ``before_batch(index)`` runs before the ablated
    passes over batch ``index`` (corrupt ablation sets its hooks' replacements from the corrupted batch there)."""
    context = context or call_context(model)
    layers = {layer for layer, _ in ablations if layer > 0}
    streams = residual_streams(model, eval_set, layers, context) if layers else {}
    device, dtype = context.device, context.dtype
    dtypes = {layer: next(model.bridge.blocks[layer].parameters()).dtype for layer in layers}
    logits: list[list[Tensor]] = [[] for _ in ablations]
    with autocast(dtype, device):
        for index, batch in enumerate(eval_set.batches):
            batch = to_device(batch, device)  # once per batch, for every ablation
            starts = {layer: stream.block_output(index, device, dtypes[layer]) for layer, stream in streams.items()}
            if before_batch is not None:
                before_batch(index)
            for (layer, hooks), outputs in zip(ablations, logits):
                with lower_blocks_replaced(model, layer, starts.get(layer)), model.hooks(hooks):
                    outputs.append(model(**batch).float().cpu())
                if bar is not None:
                    bar.update()
    return [torch.cat(outputs) for outputs in logits]
