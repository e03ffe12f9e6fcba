"""Mean (or zero) ablation of attention heads and MLP layers through TransformerLens hook points.

Ablating a unit replaces its output by a constant: for head h of layer L, its slice
``z[:, :, h, :]`` of ``blocks.L.attn.hook_z`` (the head's output before W_O, so its whole
contribution W_O^h z_h becomes W_O^h mean(z_h)); for an MLP layer, ``blocks.L.hook_mlp_out``.
Mean ablation uses the unit's mean over every non-padding token of a reference set (the training
data, as in seed 001, Section 2); zero ablation uses 0.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import pandas as pd
import torch
from jaxtyping import Float
from safetensors.torch import load_file, save_file
from torch import Tensor

from heurlens.cache import atomic_write_bytes
from heurlens.errors import HeurlensError
from heurlens.evaluate import EvalSet, accuracy, mean_kl, predict_logits
from heurlens.models.classifier import HookedClassifier
from heurlens.units import Unit

Method = Literal["mean", "zero"]


@dataclass
class UnitMeans:
    """Mean activation of every head (``[n_heads, d_head]`` per layer) and MLP (``[d_model]``)."""

    heads: dict[int, Float[Tensor, "head d_head"]]
    mlps: dict[int, Float[Tensor, "d_model"]]
    source: str  # what the means were taken over

    def save(self, path: Path) -> None:
        tensors = {f"heads.{layer}": t for layer, t in self.heads.items()}
        tensors |= {f"mlps.{layer}": t for layer, t in self.mlps.items()}
        tmp = path.with_name(path.name + ".tmp")
        save_file({k: v.contiguous() for k, v in tensors.items()}, str(tmp), metadata={"source": self.source})
        atomic_write_bytes(path, tmp.read_bytes())
        tmp.unlink()

    @classmethod
    def load(cls, path: Path) -> "UnitMeans":
        from safetensors import safe_open

        with safe_open(str(path), "pt") as handle:
            source = (handle.metadata() or {}).get("source", "")
        tensors = load_file(str(path))
        heads = {int(k.split(".")[1]): v for k, v in tensors.items() if k.startswith("heads.")}
        mlps = {int(k.split(".")[1]): v for k, v in tensors.items() if k.startswith("mlps.")}
        return cls(heads, mlps, source)


@torch.no_grad()
def compute_means(model: HookedClassifier, reference: EvalSet) -> UnitMeans:
    """Average ``hook_z`` and ``hook_mlp_out`` of every layer over the reference set's real tokens."""
    sums: dict[str, Tensor] = {}
    count = torch.zeros(())
    mask: dict[str, Tensor] = {}

    def accumulate_into(name: str):
        # The bridge may report an alias as hook.name (hook_z is attn.o.hook_in), so bind the name here.
        def accumulate(activation: Tensor, hook) -> None:
            weights = mask["current"].to(activation.dtype)
            weights = weights.view(*weights.shape, *([1] * (activation.dim() - 2)))
            sums[name] = sums.get(name, 0) + (activation * weights).sum(dim=(0, 1))
        return accumulate

    names = [unit.hook_name for layer in range(model.n_layers) for unit in (Unit(layer, 0), Unit(layer))]
    hooks = [(name, accumulate_into(name)) for name in names]

    def set_mask(batch) -> None:
        nonlocal count
        mask["current"] = batch.get("attention_mask", torch.ones_like(batch["input_ids"]))
        count = count + mask["current"].sum()

    predict_logits(model, reference, hooks, on_batch=set_mask)
    heads = {layer: sums[Unit(layer, 0).hook_name] / count for layer in range(model.n_layers)}
    mlps = {layer: sums[Unit(layer).hook_name] / count for layer in range(model.n_layers)}
    return UnitMeans(heads, mlps, source=f"{reference.name} ({len(reference)} examples, {int(count)} tokens)")


def ablation_hooks(units: list[Unit], method: Method = "mean", means: UnitMeans | None = None) -> list:
    """Hooks that replace each unit's output by its mean (or zero): one hook per hook point."""
    if method not in ("mean", "zero"):
        raise HeurlensError(f"unknown ablation method {method!r}; use mean or zero")
    if method == "mean" and means is None:
        raise HeurlensError("mean ablation needs the units' means: pass means=compute_means(model, reference)")
    heads_by_layer: dict[int, list[int]] = defaultdict(list)
    hooks = []
    for unit in units:
        if unit.is_mlp:
            value = torch.zeros(()) if method == "zero" else means.mlps[unit.layer]
            hooks.append((unit.hook_name, _replace_all(value)))
        else:
            heads_by_layer[unit.layer].append(unit.head)
    for layer, heads in heads_by_layer.items():
        index = torch.tensor(heads)
        value = torch.zeros(()) if method == "zero" else means.heads[layer][index]
        hooks.append((Unit(layer, 0).hook_name, _replace_heads(index, value)))
    return hooks


def _replace_all(value: Tensor):
    def hook(activation: Tensor, hook) -> Tensor:
        return value.to(activation.dtype).expand_as(activation).clone()
    return hook


def _replace_heads(index: Tensor, value: Tensor):
    def hook(z: Float[Tensor, "batch pos head d_head"], hook) -> Tensor:
        z = z.clone()
        z[:, :, index, :] = value.to(z.dtype)
        return z
    return hook


def ablate(model: HookedClassifier, units: list[Unit], eval_sets: list[EvalSet], method: Method = "mean",
           means: UnitMeans | None = None, full_logits: dict[str, Tensor] | None = None) -> pd.DataFrame:
    """Accuracy of the full and the ablated model on each evaluation set, their difference, and KL.

    Returns one row per evaluation set: eval_set, examples, full_accuracy, ablated_accuracy,
    delta (ablated - full) and kl (mean KL(full || ablated), nats). ``full_logits`` (by set name)
    reuses an earlier run of the full model.
    """
    hooks = ablation_hooks(units, method, means)
    rows = []
    for eval_set in eval_sets:
        full = (full_logits or {}).get(eval_set.name)
        if full is None:
            full = predict_logits(model, eval_set)
        ablated = predict_logits(model, eval_set, hooks)
        full_acc = accuracy(full, eval_set, model.labels)
        ablated_acc = accuracy(ablated, eval_set, model.labels)
        rows.append({"eval_set": eval_set.name, "examples": len(eval_set), "full_accuracy": full_acc,
                     "ablated_accuracy": ablated_acc, "delta": ablated_acc - full_acc,
                     "kl": mean_kl(full, ablated)})
    return pd.DataFrame(rows)
