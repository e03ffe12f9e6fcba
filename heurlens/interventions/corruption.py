"""Corrupt ablation: an ablated unit takes its own activation on the paired corrupted input, example by
example and position by position, instead of a mean (Edge Pruning, Bhaskar et al. 2024; the MIB benchmark):

    z_h(clean) -> z_h(corrupted),

where the corrupted input differs from the clean one only in what the task is about (IOI's ABC prompts: the
same sentence with the two names replaced by two others, so the answer is no longer in the prompt). A task
carries its corruption as its attribute ``corrupted``: a task of the same examples corrupted, tokenised into the
same batches with the same lengths (``PromptSet`` from a prompt task with corrupted prompts). Positions are
patched one for one, so each corrupted prompt must be as many tokens as its clean one.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Any

import torch
from torch import Tensor

from heurlens.errors import HeurlensError
from heurlens.interventions.mask_sites import head_site, mlp_site
from heurlens.interventions.means import UnitMeans
from heurlens.protocols import Batch, PreparedModel, Task
from heurlens.tasks import batch_examples


def corruption_of(task: Task) -> Task:
    """``task.corrupted``, checked to pair with ``task`` batch for batch and token for token; refused by name when
    the task has none or when a corrupted example is not as long as its clean one.

    Args:
        task: a task with corrupted examples (a prompt task's ``corrupted_prompt``).

    Returns:
        Its corrupted task, batch for batch."""
    corrupted = getattr(task, "corrupted", None)
    if corrupted is None:
        raise HeurlensError(f"corrupt ablation needs each example's corrupted input, and the task {task.name!r} "
                            "carries none: use a prompt task whose examples have corrupted prompts (ioi, greater-than, "
                            "or a prompt file with a corrupted_prompt field), or ablate with method='mean'")
    if len(corrupted.batches) != len(task.batches):
        raise HeurlensError(f"the corrupted task of {task.name!r} has {len(corrupted.batches)} batches, the task "
                            f"{len(task.batches)}: tokenise both with the same batch size")
    for index, (clean, other) in enumerate(zip(task.batches, corrupted.batches)):
        if clean["input_ids"].shape[0] != other["input_ids"].shape[0]:
            raise HeurlensError(f"batch {index} of {task.name!r} has {clean['input_ids'].shape[0]} examples, its "
                                f"corrupted batch {other['input_ids'].shape[0]}: tokenise both with the same batch size")
        lengths, corrupted_lengths = _lengths(clean), _lengths(other)
        if not torch.equal(lengths, corrupted_lengths):
            row = int((lengths != corrupted_lengths).nonzero()[0])
            example = batch_examples(task.batches, index).start + row
            raise HeurlensError(
                f"example {example} of {task.name!r} is {int(lengths[row])} tokens and its corrupted input "
                f"{int(corrupted_lengths[row])}: corrupt ablation patches position by position, so each corrupted "
                "prompt must be as many tokens as its clean one (e.g. names and years of one token each)")
    return corrupted


def _lengths(batch: Batch) -> Tensor:
    mask = batch.get("attention_mask")
    if mask is None:
        return torch.full((batch["input_ids"].shape[0],), batch["input_ids"].shape[1])
    return mask.sum(-1)


@torch.no_grad()
def captured(model: PreparedModel, batch: Batch, hook_names: Sequence[str]) -> dict[str, Tensor]:
    """The activations at ``hook_names`` of one pass over ``batch`` (a corrupted batch, on the model's device): the one
    capture of the corrupted run, for unit masks (``corrupted_activations``) and edge masks (the writers' outputs,
    ``EdgeMaskHooks.use_corrupted``). Other hooks on the model fire as they are (mask hooks stand aside first)."""
    seen: dict[str, Tensor] = {}

    def keep(name: str, activation: Tensor, hook: Any) -> None:
        seen[name] = activation.detach().clone()

    # the bridge may report an alias as hook.name (hook_z is attn.o.hook_in), so each hook binds its own name
    with model.hooks([(name, partial(keep, name)) for name in hook_names]):
        model(**batch)
    return seen


def corrupted_activations(model: PreparedModel, batch: Batch) -> UnitMeans:
    """Every unit's activation on ``batch`` (a corrupted batch, on the model's device): ``hook_z`` of each layer
    ``[batch, pos, head, d_head]`` and ``hook_mlp_out`` ``[batch, pos, d_model]``, held as the replacement a unit
    mask reads (``UnitMaskHooks``; ``MaskSite.masked`` takes a replacement shaped like the whole batch's
    activation example by example).

    Args:
        model: a prepared model (``as_model``).
        batch: a corrupted batch, on the model's device.

    Returns:
        Every unit's activations, held as ``UnitMeans`` (the replacement a unit mask reads)."""
    sites = [site for layer in range(model.n_layers) for site in (head_site(layer, model.n_heads), mlp_site(layer))]
    seen = captured(model, batch, [site.name for site in sites])
    return UnitMeans({layer: seen[head_site(layer, model.n_heads).name] for layer in range(model.n_layers)},
                     {layer: seen[mlp_site(layer).name] for layer in range(model.n_layers)}, "a corrupted batch")
