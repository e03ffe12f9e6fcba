"""The full model's activations on an evaluation set, kept on disk: the residual stream entering a block, and
the final logits.

Ablations, scans, super-additivity and subnetwork evaluations compare many ablated models with the same full
model on the same data, and an ablation whose lowest unit sits in layer l changes nothing below l. So the
residual stream entering block l (the output of block l-1) is computed once per model fingerprint (weights
and vocabulary), token fingerprint and layer, and every later ablated pass starts there
(``heurlens.interventions.resumed_passes``). The final logits are the entry's last file. One entry is a folder
``cache_dir()/activations/{model}-{tokens}[-bf16|-fp16]/`` (the suffix: the precision, ``heurlens.runtime.precision``)
holding ``residual-{l}.safetensors`` (the real tokens only, padding dropped) and ``logits.safetensors``; all are
written atomically, within the cache's size cap (``heurlens.runtime.cache_contents``), and a file that cannot be read back
whole, or does not fit the data, is computed again. Each is stored in the narrowest precision that holds its
values exactly (``exact_narrowest``): a model with bfloat16 weights, or run under bfloat16 autocast, produces
logits (and a bfloat16 model residual streams) that bfloat16 holds bit for bit, half the bytes of float32.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from jaxtyping import Float
from safetensors import safe_open
from torch import Tensor
from transformer_lens.model_bridge.exceptions import StopAtLayerException

from heurlens.errors import HeurlensError
from heurlens.evaluate import logits_in_context
from heurlens.protocols import Batch, PreparedModel, Task
from heurlens.runtime.cache import UNREADABLE, atomic_save_tensors, cache_dir, stored
from heurlens.runtime.cache_contents import mark_used
from heurlens.runtime.call_context import CallContext
from heurlens.runtime.devices import to_device
from heurlens.runtime.precision import CACHE_SUFFIX, Precision, autocast, check_precision
from heurlens.runtime.progress import progress_bar
from heurlens.tasks import scored_rows

BlockInput = Float[Tensor, "batch pos d_model"]


@dataclass(frozen=True)
class ResidualStream:
    """The full model's residual stream entering one block, per batch of the data (padded as the batch is, zeros
    at padding, on the CPU, in the precision it was computed or stored in), and whether the model's blocks return
    their output as a 1-tuple (TransformerLens' native models) or a tensor (HF models)."""

    batches: list[BlockInput]
    as_tuple: bool

    def block_output(self, index: int, device: torch.device, dtype: torch.dtype) -> Any:
        """Batch ``index`` on ``device`` in ``dtype``, as the block below would have returned it."""
        stream = self.batches[index].to(device, dtype)
        return (stream,) if self.as_tuple else stream


def data_fingerprint(data: Task) -> str:
    """sha256 (16 hex digits) of every token id and mask of a tokenised set."""
    digest = hashlib.sha256()
    for batch in data.batches:
        for key in sorted(batch):
            digest.update(key.encode())
            digest.update(batch[key].cpu().numpy().tobytes())
    return digest.hexdigest()[:16]


def entry_dir(model_fingerprint: str, data: Task, dtype: Precision = "float32") -> Path:
    """The folder of the full model's activations on ``data``, one per precision (``heurlens.runtime.precision``)."""
    return cache_dir() / "activations" / (f"{model_fingerprint}-{data_fingerprint(data)}"
                                          + CACHE_SUFFIX[check_precision(dtype)])


def full_model_logits(model: PreparedModel, eval_set: Task, context: CallContext,
                      streams_for: Iterable[int] = ()) -> Float[Tensor, "row label"]:
    """``predict_logits`` of the model without hooks, read from the activation cache or computed and kept
    there: evaluation sets do not change, so ablations, scans and subnetwork evaluations read the full model's
    logits instead of recomputing them. ``context``: the call's device, precision, cache use and fingerprint
    (``heurlens.runtime.call_context``, decided once by the public function that called).
    ``streams_for``: layers an ablation will start from; when the logits are computed, the residual streams
    entering those layers that the cache lacks are kept from the same pass and stored (``residual_streams`` then
    reads them), instead of a second pass over the data for them."""
    folder = entry_dir(context.fingerprint or model.fingerprint(), eval_set, context.dtype) if context.cache else None

    def compute() -> Tensor:
        layers = [] if folder is None else _missing_layers(folder, streams_for, model.n_layers)
        logits, streams = _compute(model, eval_set, layers, context, with_logits=True) if layers else (None, {})
        if folder is not None:
            _store(folder, model, eval_set, streams)
        if logits is None:
            logits = logits_in_context(model, eval_set, context)
        if not logits.isfinite().all():
            raise HeurlensError(f"the full model {model.model_id!r} gives NaN or inf scores on {eval_set.name} "
                                f"(in {context.dtype}): nothing to compare an ablation with. Check the model's "
                                "weights, or run it in float32")
        return logits

    if folder is None:
        return compute()
    path = folder / "logits.safetensors"

    def load() -> Tensor:
        with safe_open(str(path), "pt") as handle:
            logits = handle.get_tensor("logits").float()
        if logits.shape[0] != scored_rows(eval_set):
            raise HeurlensError(f"{path} holds {logits.shape[0]} rows of logits, not {scored_rows(eval_set)}")
        if not logits.isfinite().all():
            raise HeurlensError(f"{path} holds NaN or inf: damaged, computed again")
        return logits

    return stored(path, compute, lambda logits: atomic_save_tensors(path, {"logits": exact_narrowest(logits)},
                                                                    _about(model, eval_set)), load)


def residual_streams(model: PreparedModel, data: Task, layers: Iterable[int], context: CallContext
                     ) -> dict[int, ResidualStream]:
    """For each layer l in ``layers`` (1 <= l < n_layers), the full model's residual stream entering block l on
    each batch of ``data``. Layers the cache lacks are computed in one pass over the data that stops after the
    deepest of them, then stored. ``context`` as for ``full_model_logits``."""
    wanted = sorted(set(layers))
    if any(not 1 <= layer < model.n_layers for layer in wanted):
        raise HeurlensError(f"residual streams enter blocks 1..{model.n_layers - 1}; asked for {wanted}")
    if not context.cache:
        return _compute(model, data, wanted, context)[1] if wanted else {}
    folder = entry_dir(context.fingerprint or model.fingerprint(), data, context.dtype)
    streams: dict[int, ResidualStream] = {}
    for layer in wanted:
        path = folder / f"residual-{layer}.safetensors"
        try:
            streams[layer] = _read(path, data, model)
            mark_used(path)
        except UNREADABLE:
            pass  # missing, or cannot be read back whole: computed below
    missing = [layer for layer in wanted if layer not in streams]
    if missing:
        computed = _compute(model, data, missing, context)[1]
        _store(folder, model, data, computed)
        streams |= computed
    return streams


def _missing_layers(folder: Path, layers: Iterable[int], n_layers: int) -> list[int]:
    """Those of ``layers`` (a block's input past the first) whose residual stream the entry ``folder`` lacks."""
    return sorted(layer for layer in set(layers) if 1 <= layer < n_layers
                  and not (folder / f"residual-{layer}.safetensors").exists())


def _store(folder: Path, model: PreparedModel, data: Task, streams: dict[int, ResidualStream]) -> None:
    """Each stream as ``residual-{layer}.safetensors`` in the data's entry ``folder`` (real tokens only)."""
    for layer, stream in streams.items():
        atomic_save_tensors(folder / f"residual-{layer}.safetensors",
                            {"residual": exact_narrowest(_unpadded(stream.batches, data))},
                            _about(model, data) | {"layer": str(layer),
                                                   "block_output": "tuple" if stream.as_tuple else "tensor"})


def exact_narrowest(values: Tensor) -> Tensor:
    """``values`` in bfloat16 or float16 when that holds every value bit for bit (what a bfloat16 model or a
    bfloat16 autocast produced, then widened), else as they are: what is read back is exactly what was stored."""
    if values.dtype == torch.float32:
        for narrower in (torch.bfloat16, torch.float16):
            narrow = values.to(narrower)
            if torch.equal(narrow.float(), values):
                return narrow
    return values


def _about(model: PreparedModel, data: Task) -> dict[str, str]:
    """What ``heurlens cache list`` shows of an entry (safetensors metadata)."""
    return {"model": str(getattr(model, "model_id", "")), "eval_set": data.name, "examples": str(len(data))}


def _compute(model: PreparedModel, data: Task, layers: list[int], context: CallContext, with_logits: bool = False
             ) -> tuple[Tensor | None, dict[int, ResidualStream]]:
    """The full model's residual streams entering each of ``layers``, batch by batch, on the CPU; with
    ``with_logits`` the pass runs to the end and its logits come too (``predict_logits``'s calls, so its
    logits), else it stops after the deepest block those streams need (None for the logits)."""
    batches: dict[int, list[BlockInput]] = {layer: [] for layer in layers}
    logits: list[Tensor] = []
    as_tuple = False
    with torch.no_grad(), autocast(context.dtype, context.device):
        for batch in progress_bar(data.batches, desc=f"the full model on {data.name}", unit="batch",
                                  short=True):  # shown once it takes a while (a first ablation)
            outputs, scores = full_block_outputs(model, to_device(batch, context.device),
                                                 {layer - 1 for layer in layers}, stop=not with_logits)
            if with_logits:
                logits.append(scores.float().cpu())
            for layer in layers:
                output = outputs[layer - 1]
                as_tuple = isinstance(output, tuple)
                batches[layer].append((output[0] if as_tuple else output).cpu())  # a bfloat16 model's stays so
    return (torch.cat(logits) if with_logits else None,
            {layer: ResidualStream(batches[layer], as_tuple) for layer in layers})


def full_block_outputs(model: PreparedModel, batch: Batch, blocks: set[int], stop: bool = True
                       ) -> tuple[dict[int, Any], Any]:
    """The full model's output (as the block returns it) of each block in ``blocks`` on ``batch``, and what the
    model returns. With ``stop`` the pass ends after the deepest of them (the bridge's own ``StopAtLayerException``
    ends it cleanly) and the model's return is not its scores."""
    outputs: dict[int, Any] = {}
    deepest = max(blocks)

    def keep(index: int):
        def hook(module, args, output) -> None:
            outputs[index] = output
            if stop and index == deepest:
                raise StopAtLayerException(output[0] if isinstance(output, tuple) else output)
        return hook

    handles = [model.bridge.blocks[index].register_forward_hook(keep(index)) for index in blocks]
    try:
        returned = model(**batch)
    finally:
        for handle in handles:
            handle.remove()
    return outputs, returned


def _real_positions(batch: Batch) -> Tensor:
    """Where the batch has real tokens (its attention mask; every position without one)."""
    mask = batch.get("attention_mask")
    return torch.ones(batch["input_ids"].shape, dtype=torch.bool) if mask is None else mask.cpu().bool()


def _unpadded(streams: list[BlockInput], data: Task) -> Float[Tensor, "token d_model"]:
    """The real tokens' rows of every batch, one after another."""
    return torch.cat([stream[_real_positions(batch)] for stream, batch in zip(streams, data.batches)])


def _read(path: Path, data: Task, model: PreparedModel) -> ResidualStream:
    """A stored residual stream put back into ``data``'s batches (zeros at padding), refused when its number of
    tokens or width does not fit them."""
    with safe_open(str(path), "pt") as handle:
        rows = handle.get_tensor("residual")
        block_output = (handle.metadata() or {}).get("block_output")
    if block_output not in ("tuple", "tensor"):
        raise HeurlensError(f"{path} does not say how the blocks return their output")
    positions = [_real_positions(batch) for batch in data.batches]
    width = model.bridge.cfg.d_model
    if rows.shape != (sum(int(p.sum()) for p in positions), width):
        raise HeurlensError(f"{path} does not fit the data (shape {tuple(rows.shape)})")
    if not rows.isfinite().all():
        raise HeurlensError(f"{path} holds NaN or inf: damaged, computed again")
    streams: list[Any] = []
    start = 0
    for real in positions:
        stream = rows.new_zeros((*real.shape, width))
        count = int(real.sum())
        stream[real] = rows[start:start + count]
        streams.append(stream)
        start += count
    return ResidualStream(streams, block_output == "tuple")
