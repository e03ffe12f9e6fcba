"""Ablated forward passes that start at the first ablated layer, from the full model's residual stream there.

Ablating units whose lowest layer is L changes nothing below L: the input of block L is the full model's
output of block L-1. So, per batch, the full model runs once, up to the deepest block any of the ablations
needs, keeping those blocks' outputs (``full_block_outputs``); each ablated pass then runs with blocks
0..L-1 stood in for by a function that returns the full model's output of block L-1
(``lower_blocks_replaced``): only the embeddings and blocks L and up are computed, with every hook point
there live. (TransformerLens' own ``start_at_layer`` still runs the lower blocks, on discarded input.)
The logits are bit for bit those of a whole ablated pass (tests/test_resumed_passes.py). A scan of every
head of a 6-layer model computes 3.5 of its 6 blocks per head on average (benchmarks/resumed_ablation_scan.py).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import torch
from jaxtyping import Float
from torch import Tensor
from tqdm.auto import tqdm
from transformer_lens.model_bridge.exceptions import StopAtLayerException

from heurlens.devices import device_of, to_device
from heurlens.evaluate import matmul_precision
from heurlens.protocols import Batch, HookedModel, HookList, Task

Ablation = tuple[int, HookList]  # (first ablated layer, hooks [(hook name, fn)]) of one ablated model


def full_block_outputs(model: HookedModel, batch: Batch, blocks: set[int]) -> dict[int, Any]:
    """The full model's output (as the block returns it) of each block in ``blocks`` on ``batch``; the pass
    stops after the deepest of them (the bridge's own ``StopAtLayerException`` ends it cleanly)."""
    outputs: dict[int, Any] = {}
    deepest = max(blocks)

    def keep(index: int):
        def hook(module, args, output) -> None:
            outputs[index] = output
            if index == deepest:
                raise StopAtLayerException(output[0] if isinstance(output, tuple) else output)
        return hook

    handles = [model.bridge.blocks[index].register_forward_hook(keep(index)) for index in blocks]
    try:
        model(**batch)
    finally:
        for handle in handles:
            handle.remove()
    return outputs


@contextmanager
def lower_blocks_replaced(model: HookedModel, layer: int, block_output: Any) -> Iterator[None]:
    """Inside, blocks 0..layer-1 compute nothing and return ``block_output`` (the full model's output of block
    layer-1 on the batch about to run): block ``layer`` receives it as its input, as in a whole pass. The
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
def ablated_logits(model: HookedModel, ablations: Sequence[Ablation], eval_set: Task,
                   bf16: bool = False, bar: tqdm | None = None) -> list[Float[Tensor, "example label"]]:
    """For each (first ablated layer L, hooks) in ``ablations``, what ``predict_logits(model, eval_set, hooks,
    bf16)`` returns, the hooks firing only in blocks L and up; per batch the full model's lower blocks run once
    for all ablations. ``L`` must not exceed the lowest layer the hooks change (0 is always right). ``bar``
    (a progress bar) advances by one per ablated pass over a batch."""
    kept_blocks = {layer - 1 for layer, _ in ablations if layer > 0}
    logits: list[list[Tensor]] = [[] for _ in ablations]
    with matmul_precision(bf16, device_of(model)):
        for batch in eval_set.batches:
            batch = to_device(batch, device_of(model))  # once per batch, for the full pass and every ablation
            kept = full_block_outputs(model, batch, kept_blocks) if kept_blocks else {}
            for (layer, hooks), outputs in zip(ablations, logits):
                with lower_blocks_replaced(model, layer, kept.get(layer - 1)), model.hooks(hooks):
                    outputs.append(model(**batch).float().cpu())
                if bar is not None:
                    bar.update()
    return [torch.cat(outputs) for outputs in logits]
