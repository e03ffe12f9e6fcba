"""A weight-level subnetwork: one boolean mask per masked parameter tensor (True = in the
subnetwork), its sizes, random controls of the same per-tensor size, and its files
(``NAME.safetensors`` with the masks, ``NAME.json`` with metadata and sizes)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import torch
from jaxtyping import Bool
from safetensors.torch import load_file
from torch import Tensor, nn

from heurlens.errors import HeurlensError
from heurlens.runtime.cache import atomic_save_tensors, atomic_write_json


@dataclass
class WeightSubnetwork:
    """A weight-level subnetwork (Subtask Induction paper, Section 3): a 0/1 mask over each masked parameter,
    found by continuous sparsification (``discover_subnetwork``) and copied into a fresh model by ``transfer``.

    Attributes:
        masks: per parameter name, a boolean mask of the parameter's shape (True: the weight is kept).
        description: what it is (the subtask it was found for, or the control it is).
        settings: how it was found (or the control's seed).
    """

    masks: dict[str, Bool[Tensor, " ..."]]
    description: str = ""
    settings: dict = field(default_factory=dict)

    @property
    def kept(self) -> int:
        """The number of weights kept, over every masked parameter."""
        return sum(int(m.sum()) for m in self.masks.values())

    @property
    def total(self) -> int:
        """The number of weights in the masked parameters."""
        return sum(m.numel() for m in self.masks.values())

    @property
    def fraction_kept(self) -> float:
        """Kept weights over all weights of the masked tensors (Subtask Induction paper, Table 3's percentage)."""
        return self.kept / self.total

    def sizes(self) -> pd.DataFrame:
        """Kept weights per tensor: columns tensor, kept, total, fraction."""
        return pd.DataFrame([{"tensor": name, "kept": int(m.sum()), "total": m.numel(),
                              "fraction": float(m.float().mean())} for name, m in self.masks.items()])

    def check_module(self, module: nn.Module) -> None:
        """Refuse a module whose parameters do not have this subnetwork's names and shapes."""
        parameters = dict(module.named_parameters())
        for name, mask in self.masks.items():
            if name not in parameters or parameters[name].shape != mask.shape:
                raise HeurlensError(f"this subnetwork masks {name} {tuple(mask.shape)}, which this model does not "
                                    f"have; use a model of the architecture it was found in")

    def random_like(self, seed: int, complement: bool = False) -> WeightSubnetwork:
        """A random subnetwork with exactly as many kept weights in each tensor as this one; with
        ``complement`` they are drawn only from the weights this one leaves out."""
        generator = torch.Generator().manual_seed(seed)
        masks = {}
        for name, mask in self.masks.items():
            mask = mask.cpu()  # drawn on the CPU: the same control on every device
            pool = (~mask).flatten().nonzero().flatten() if complement else torch.arange(mask.numel(), device="cpu")
            count = int(mask.sum())
            if count > len(pool):
                raise HeurlensError(f"{name}: the complement has {len(pool)} weights, fewer than the {count} needed")
            chosen = pool[torch.randperm(len(pool), generator=generator, device="cpu")[:count]]
            new = torch.zeros(mask.numel(), dtype=torch.bool, device="cpu")
            new[chosen] = True
            masks[name] = new.view(mask.shape)
        kind = "random complement" if complement else "random"
        return WeightSubnetwork(masks, f"{kind} control of {self.description}", {"seed": seed})

    def save(self, stem: Path) -> None:
        """Write ``stem.safetensors`` (the masks) then ``stem.json`` (what it is and its sizes), each atomically."""
        stem = Path(stem)
        stem.parent.mkdir(parents=True, exist_ok=True)
        atomic_save_tensors(stem.with_suffix(".safetensors"), self.masks)
        atomic_write_json(stem.with_suffix(".json"), {
            "description": self.description, "settings": self.settings, "fraction_kept": self.fraction_kept,
            "kept": self.kept, "total": self.total, "tensors": self.sizes().to_dict(orient="records")})

    @classmethod
    def load(cls, stem: Path) -> WeightSubnetwork:
        stem = Path(stem)
        stem = stem.with_suffix("") if stem.suffix in (".json", ".safetensors") else stem
        try:
            record = json.loads(stem.with_suffix(".json").read_text())
            masks = load_file(str(stem.with_suffix(".safetensors")))
        except (OSError, json.JSONDecodeError) as error:
            raise HeurlensError(f"cannot read weight subnetwork {stem}: {error}") from error
        return cls({name: m.bool() for name, m in masks.items()}, record["description"], record["settings"])
