"""Unit masks and activation caches for timm image classifiers, attached with forward hooks (the module
adapters of ``heurlens.interventions.mask_sites``, whose one formula they apply).

The mask sites of timm models:

* ViT (``timm`` ``Attention`` modules): ``blocks.{l}.attn`` holds the layer's heads. The mask acts on
  the input of ``attn.proj``, reshaped to ``[batch, token, head, d_head]``, so head h's contribution
  ``proj.weight[:, h*d:(h+1)*d] @ z_h`` is the only thing a mask entry changes. ``blocks.{l}.mlp``
  is one unit (the MLP output). Units are addressed like text models: ``L3.H1``, ``L3.*``, ``L3.MLP``.
* ResNet (``BasicBlock`` / ``Bottleneck``): ``layer{s}.{b}.residual`` is one unit, the block's
  residual branch just before it is added to the shortcut; ``layer{s}.{b}`` holds one unit per
  output channel of the block. Addressed as ``layer2.1`` (the branch) and ``layer2.1.C5`` (a channel).

With mask m and replacement c (a unit's mean activation, per token or pixel position, or zero)
the unit's activation x becomes ``m * x + (1 - m) * c``, as for text models (Heuristic Core paper, Section 2).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from functools import partial
from typing import cast

import torch
from jaxtyping import Float
from torch import Tensor, nn

from heurlens.errors import HeurlensError
from heurlens.interventions.mask_sites import MaskSite, SiteMeans, attached
from heurlens.interventions.units import UnitLayout, parse_units
from heurlens.runtime.devices import device_of


def _residual_end(block: nn.Module) -> str:
    """The last module of a timm ResNet block's residual branch (se and drop_path come after bn2/bn3)."""
    for name in ("drop_path", "se", "bn3", "bn2"):
        if isinstance(getattr(block, name, None), nn.Module):
            return name
    raise HeurlensError(f"cannot find the residual branch of {type(block).__name__}")


def mask_sites(model: nn.Module) -> dict[str, MaskSite]:
    """Every mask site of a timm ViT or ResNet, by name (see the module docstring)."""
    from timm.models.resnet import BasicBlock, Bottleneck
    from timm.models.vision_transformer import Attention, Block

    sites: dict[str, MaskSite] = {}
    for name, module in model.named_modules():
        if isinstance(module, Block) and isinstance(module.attn, Attention):
            sites[f"{name}.attn"] = MaskSite(f"{name}.attn.proj", module.attn.num_heads, "packed heads", "module input")
            sites[f"{name}.mlp"] = MaskSite(f"{name}.mlp", 1, "mlp", "module output")
        elif isinstance(module, (BasicBlock, Bottleneck)):
            out_channels = cast(nn.BatchNorm2d, module.bn3 if isinstance(module, Bottleneck) else module.bn2).num_features
            sites[f"{name}.residual"] = MaskSite(f"{name}.{_residual_end(module)}", 1, "residual", "module output")
            sites[name] = MaskSite(name, out_channels, "channels", "module output")
    if not sites:
        raise HeurlensError(f"{type(model).__name__} has no timm ViT attention block or ResNet block to mask; "
                            "heurlens masks timm VisionTransformer and ResNet models")
    return sites


def vit_layers(model: nn.Module) -> tuple[int, int]:
    """(n_layers, n_heads) of a timm ViT."""
    heads = [site for site in mask_sites(model).values() if site.kind == "packed heads"]
    if not heads:
        raise HeurlensError("this model has no ViT attention heads; L<layer>.H<head> addresses only ViT models")
    return len(heads), heads[0].n_units


def masks_for(model: nn.Module, spec: str) -> dict[str, Float[Tensor, " unit"]]:
    """All-ones masks for every site with the units named in ``spec`` set to 0.

    ViT units: ``L3.H1``, ``L3.*``, ``L3.MLP``; ResNet units: ``layer2.1`` (residual branch),
    ``layer2.1.C5`` (output channel 5 of that block); comma-separated.
    """
    sites = mask_sites(model)
    device = device_of(model)
    masks = {name: torch.ones(site.n_units, device=device) for name, site in sites.items()}
    if any(site.kind == "packed heads" for site in sites.values()):  # ViT units in the text models' layout
        n_layers, n_heads = vit_layers(model)
        block_prefix = next(name for name, site in sites.items() if site.kind == "packed heads").split(".")[0]
        heads, mlps = UnitLayout(n_layers, n_heads).mask(parse_units(spec, n_layers, n_heads), device)
        for layer in range(n_layers):
            masks[f"{block_prefix}.{layer}.attn"] = heads[layer].clone()
            masks[f"{block_prefix}.{layer}.mlp"] = mlps[layer:layer + 1].clone()
        return masks
    blocks = [name for name, site in sites.items() if site.kind == "channels"]
    for item in (part.strip() for part in spec.split(",")):
        match = re.fullmatch(r"(.+?)(?:\.C(\d+))?", item)
        block, channel = (match.group(1), match.group(2)) if match else (item, None)  # no match: empty item
        if block not in blocks:
            raise HeurlensError(f"{item!r}: no block {block!r}; this model's blocks are {', '.join(blocks)} "
                                "(address a residual branch as layer2.1 and a channel as layer2.1.C5)")
        if channel is None:
            masks[f"{block}.residual"][0] = 0
        elif int(channel) >= sites[block].n_units:
            raise HeurlensError(f"{item!r}: block {block} has channels C0-C{sites[block].n_units - 1}")
        else:
            masks[block][int(channel)] = 0
    return masks


@contextmanager
def unit_masks(model: nn.Module, masks: dict[str, Tensor],
               replacements: dict[str, Tensor] | None = None) -> Iterator[None]:
    """Inside the block, every named site's units are masked: ``m * x + (1 - m) * c`` with c from
    ``replacements`` (e.g. ``unit_means``; shaped like one example's activation) or zero.

    The mask tensors are read when the hooks fire, so a training loop may change them in place.
    """
    sites = mask_sites(model)
    unknown = sorted(set(masks) - set(sites))
    if unknown:
        raise HeurlensError(f"no mask site {unknown[0]!r} in this model; its sites are {', '.join(sites)}")
    edits = [(sites[name], partial(sites[name].masked, mask=mask,
                                   replacement=None if replacements is None else replacements[name]))
             for name, mask in masks.items()]
    with attached(model, edits):
        yield


def record(calls: list[Tensor], activation: Tensor) -> None:
    """Keep a detached copy of one activation."""
    calls.append(activation.detach().clone())


@contextmanager
def activation_cache(model: nn.Module, sites: Iterable[str] | None = None) -> Iterator[dict[str, list[Tensor]]]:
    """Record the activation at each mask site (what a mask would act on) for every forward pass
    inside the block: ``cache[name]`` is a list with one tensor per call, detached."""
    all_sites = mask_sites(model)
    names = list(all_sites) if sites is None else list(sites)
    cache: dict[str, list[Tensor]] = {name: [] for name in names}
    # copies: ResNet blocks add the shortcut to bn2's output in place
    with attached(model, [(all_sites[name], partial(record, cache[name])) for name in names]):
        yield cache


@torch.no_grad()
def unit_means(model: nn.Module, images: Float[Tensor, "n channel height width"],
               batch_size: int = 256) -> dict[str, Tensor]:
    """Mean activation at every mask site over ``images``, per token (ViT) or pixel (ResNet)
    position: the replacement for mean ablation."""
    was_training = model.training
    model.eval()
    running = SiteMeans(per_position=True)
    try:
        with activation_cache(model) as cache:
            for start in range(0, len(images), batch_size):
                model(images[start:start + batch_size])
                for name, seen in cache.items():
                    running.add(name, seen.pop())
    finally:
        model.train(was_training)
    return running.means()
