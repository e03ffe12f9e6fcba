"""Mean (or zero) ablation of attention heads and MLP layers through TransformerLens hook points.

Ablating a unit replaces its output by a constant: for head h of layer L, its slice
``z[:, :, h, :]`` of ``blocks.L.attn.hook_z`` (the head's output before W_O, so its whole
contribution W_O^h z_h becomes W_O^h mean(z_h)); for an MLP layer, ``blocks.L.hook_mlp_out``.
Mean ablation uses the unit's mean over a reference set (``heurlens.means``), zero ablation 0.
It is a binary unit mask (``heurlens.masking``): 0 on the ablated units, 1 elsewhere.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import pandas as pd
from torch import Tensor
from tqdm.auto import tqdm

from heurlens.data.prompt_tasks import PromptSet
from heurlens.errors import HeurlensError
from heurlens.evaluate import EvalSet, accuracy, full_model_logits, mean_kl
from heurlens.masking import UnitMaskHooks
from heurlens.means import UnitMeans, zero_means
from heurlens.models.classifier import HookedClassifier
from heurlens.resumed_passes import ablated_logits
from heurlens.units import Unit, UnitLayout, format_units

Method = Literal["mean", "zero"]


def ablation_hooks(model: HookedClassifier, units: list[Unit], method: Method = "mean",
                   means: UnitMeans | None = None) -> list:
    """Hooks that replace each unit's output by its mean (or zero) and leave every other unit as is."""
    if method not in ("mean", "zero"):
        raise HeurlensError(f"unknown ablation method {method!r}; use mean or zero")
    if method == "zero":
        replacement = zero_means(model)
    elif means is None:
        raise HeurlensError("mean ablation needs the units' means: pass means=compute_means(model, reference)")
    else:
        replacement = means
    heads, mlps = UnitLayout(model.n_layers, model.n_heads).mask(units)
    return UnitMaskHooks(replacement, heads, mlps).hooks


def ablate(model: HookedClassifier, units: list[Unit], eval_sets: Sequence[EvalSet | PromptSet], method: Method = "mean",
           means: UnitMeans | None = None, full_logits: dict[str, Tensor] | None = None,
           bf16: bool = False) -> pd.DataFrame:
    """Accuracy of the full and the ablated model on each evaluation set, their difference, and KL.

    Returns one row per evaluation set: eval_set, examples, full_accuracy, ablated_accuracy,
    delta (ablated - full) and kl (mean KL(full || ablated), nats). ``full_logits`` (by set name)
    reuses an earlier run of the full model; otherwise they come from the disk cache (``full_model_logits``).
    ``bf16``: both models in bfloat16 matrix products (``predict_logits``), about 2x faster on a CPU with
    AVX-512 BF16; the full logits passed in must then be bf16 ones too.
    """
    return ablate_groups(model, [units], eval_sets, method, means, full_logits, bf16).drop(columns="ablated")


def ablate_groups(model: HookedClassifier, groups: Sequence[list[Unit]], eval_sets: Sequence[EvalSet | PromptSet],
                  method: Method = "mean", means: UnitMeans | None = None,
                  full_logits: dict[str, Tensor] | None = None, bf16: bool = False,
                  progress: bool = False, desc: str = "ablations") -> pd.DataFrame:
    """``ablate`` for each group of units, the group named in a first column ``ablated``; rows group by group.

    Every ablated pass starts at the group's lowest layer from the full model's residual stream there, and
    per batch the full model's lower blocks run once for all groups (``heurlens.resumed_passes``): the same
    logits as whole passes, with less computed the higher the ablated units sit. ``progress``: a bar named
    ``desc`` counting ablated passes over a batch.
    """
    ablations = [(min((unit.layer for unit in group), default=0), ablation_hooks(model, group, method, means))
                 for group in groups]
    fingerprint = None if full_logits is not None else model.fingerprint()
    rows: list[list[dict]] = [[] for _ in groups]
    bar = tqdm(total=len(groups) * sum(len(s.batches) for s in eval_sets), desc=desc, unit="pass",
               disable=not progress)
    for eval_set in eval_sets:
        full = (full_logits or {}).get(eval_set.name)
        if full is None:
            full = full_model_logits(model, eval_set, fingerprint, bf16)
        full_acc = accuracy(full, eval_set, model.labels)
        for group, group_rows, ablated in zip(groups, rows, ablated_logits(model, ablations, eval_set, bf16, bar)):
            ablated_acc = accuracy(ablated, eval_set, model.labels)
            group_rows.append({"ablated": format_units(group), "eval_set": eval_set.name, "examples": len(eval_set),
                               "full_accuracy": full_acc, "ablated_accuracy": ablated_acc,
                               "delta": ablated_acc - full_acc, "kl": mean_kl(full, ablated)})
    bar.close()
    return pd.DataFrame([row for group_rows in rows for row in group_rows])
