"""Ablated forward passes that start at the first ablated layer, from the full model's residual stream there.

Ablating units whose lowest layer is L changes nothing below L: the input of block L is the full model's
output of block L-1, which the activation cache keeps per model, data and layer
(``heurlens.interventions.activation_cache.residual_streams``: computed on first use, read from disk after). Each ablated
pass runs with blocks 0..L-1 stood in for by a function that returns that residual stream
(``lower_blocks_replaced``): only the embeddings and blocks L and up are computed, with every hook point there
live. (TransformerLens' own ``start_at_layer`` still runs the lower blocks, on discarded input.) The logits are
bit for bit those of a whole ablated pass (tests/interventions/test_resumed_passes.py); ablating layer 4 of a 6-layer model
so computes 2 blocks, and a scan of every head 3.5 per head on average (benchmarks/activation_cache.py).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any

import torch
from jaxtyping import Float
from torch import Tensor
from tqdm.auto import tqdm

from heurlens.errors import HeurlensError
from heurlens.interventions.activation_cache import residual_streams
from heurlens.protocols import Batch, HookList, MaskHooks, PreparedModel, Task
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
def masked_scores(model: PreparedModel, hooks: MaskHooks, masks: Sequence[Float[Tensor, " mask"]], task: Task,
                  context: CallContext, bar: tqdm | None = None, corruption: Task | None = None
                  ) -> list[Float[Tensor, "row output"]]:
    """The one scoring loop of masked models, unit and edge masks alike: the scores on ``task`` (CPU, float32) of
    the model with each of ``masks`` set on ``hooks`` (``heurlens.interventions.circuits.mask_hooks``), each pass
    resumed at the lowest layer its masks change (``hooks.start_layer()``; an edge mask at 0) from the full model's
    residual stream there (the activation cache; ``context``: the call's, as for ``full_model_logits``). Per batch,
    the batch is moved once and, with ``corruption`` (corrupt ablation: the task's corrupted examples, batch for
    batch), the hooks take their replacements from its corrupted batch once for every mask. ``bar`` (a progress
    bar) advances by one per masked pass over a batch.

    Args:
        model: a prepared model (``as_model``).
        hooks: the level's ``MaskHooks``.
        masks: keep masks (flat, 1: kept).
        task: the task scored.
        context: the call's context (``runtime.call_context``: device, precision, cache use).
        bar: a progress bar to advance (a masked pass over a batch a step).
        corruption: the task's corrupted examples (corrupt ablation).

    Returns:
        The scores of each masked model."""
    device, dtype = context.device, context.dtype
    masks = [mask.to(device) for mask in masks]
    starts = []
    for mask in masks:
        hooks.set_masks(mask)
        starts.append(hooks.start_layer())
    layers = {layer for layer in starts if layer > 0}
    streams = residual_streams(model, task, layers, context) if layers else {}
    dtypes = {layer: next(model.bridge.blocks[layer].parameters()).dtype for layer in layers}
    scores: list[list[Tensor]] = [[] for _ in masks]
    with autocast(dtype, device), hooks.prepared(model):
        for index, batch in enumerate(task.batches):
            batch = to_device(batch, device)  # once per batch, for every mask
            inputs = {layer: stream.block_output(index, device, dtypes[layer]) for layer, stream in streams.items()}
            if corruption is not None:
                hooks.use_corrupted(model, to_device(corruption.batches[index], device))
            for mask, layer, rows in zip(masks, starts, scores):
                hooks.set_masks(mask)
                with lower_blocks_replaced(model, layer, inputs.get(layer)), model.hooks(hooks.pass_hooks):
                    rows.append(model(**batch).float().cpu())
                if bar is not None:
                    bar.update()
    return [torch.cat(rows) for rows in scores]


def ablated_logits(model: PreparedModel, ablations: Sequence[Ablation], eval_set: Task,
                   context: CallContext | None = None, bar: tqdm | None = None) -> list[Float[Tensor, "row label"]]:
    """For each (first ablated layer L, hooks) in ``ablations`` (hooks of one's own), what ``predict_logits(model,
    eval_set, fwd_hooks=hooks, dtype=context.dtype)`` returns, the hooks firing only in blocks L and up, which start
    from the full model's residual stream entering L (``masked_scores``, each ablation a mask of its own). ``L``
    must not exceed the lowest layer the hooks change (0 is always right). ``context``: None, the model's own
    (``call_context``)."""
    return masked_scores(model, _FixedHooks(ablations), [torch.tensor(i) for i in range(len(ablations))], eval_set,
                         context or call_context(model), bar)


class _FixedHooks:
    """``MaskHooks`` over fixed ablations: the "mask" is the index of the ablation whose hooks the next pass uses."""

    def __init__(self, ablations: Sequence[Ablation]):
        self.ablations, self.current = ablations, 0

    def set_masks(self, flat: Tensor) -> None:
        self.current = int(flat)

    def start_layer(self) -> int:
        return self.ablations[self.current][0]

    @property
    def pass_hooks(self) -> HookList:
        return self.ablations[self.current][1]

    def prepared(self, model: PreparedModel) -> AbstractContextManager[None]:
        return nullcontext()

    def use_corrupted(self, model: PreparedModel, batch: Batch) -> None:
        raise HeurlensError("fixed ablations take no corrupted batch")

    def attached(self, model: PreparedModel) -> AbstractContextManager[None]:
        return model.hooks([hook for _, hooks in self.ablations for hook in hooks])
