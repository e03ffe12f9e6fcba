"""Shape-bias metrics (Subtask Induction paper, Section 5.4; Geirhos et al. 2019).

On cue-conflict images (the shape of one class, the texture of another):

* accuracy   = fraction classified as their *shape* class,
* robustness = fraction *not* classified as their *texture* class,
* shape bias = shape decisions / (shape + texture decisions)   (Geirhos et al.'s summary number).

Images whose shape and texture class coincide carry no conflict and are left out, as Geirhos et al. do.
"""

from __future__ import annotations

import re
from pathlib import Path

import torch
from jaxtyping import Int
from torch import Tensor

from heurlens.errors import HeurlensError

_CUE_CONFLICT_NAME = re.compile(r"^([a-z_]+?)\d+-([a-z_]+?)\d+\.\w+$")


def prediction_accuracy(predictions: Int[Tensor, " n"], labels: Int[Tensor, " n"]) -> float:
    if predictions.shape != labels.shape:
        raise HeurlensError(f"{len(predictions)} predictions for {len(labels)} labels")
    return int((predictions == labels).sum()) / len(labels)  # exact: no float32 rounding


def cue_conflict_scores(predictions: Int[Tensor, " n"], shape_labels: Int[Tensor, " n"],
                        texture_labels: Int[Tensor, " n"]) -> dict[str, float]:
    """accuracy, robustness and shape_bias over the images whose two cues disagree."""
    conflict = shape_labels != texture_labels
    if not conflict.any():
        raise HeurlensError("no image has a shape class different from its texture class: not a cue-conflict set")
    predictions, shapes, textures = predictions[conflict], shape_labels[conflict], texture_labels[conflict]
    by_shape = (predictions == shapes).float()
    by_texture = (predictions == textures).float()
    decided = by_shape.sum() + by_texture.sum()
    return {"accuracy": by_shape.mean().item(), "robustness": 1 - by_texture.mean().item(),
            "shape_bias": (by_shape.sum() / decided).item() if decided > 0 else float("nan")}


def read_cue_conflict_folder(root: str | Path, classes: list[str]) -> tuple[list[Path], Tensor, Tensor]:
    """Files and (shape, texture) class indices of a cue-conflict set in Geirhos et al.'s layout:
    ``root/<shape class>/<shape class><i>-<texture class><j>.png``, classes named as in ``classes``."""
    root = Path(root)
    index = {name: i for i, name in enumerate(classes)}
    files, shapes, textures = [], [], []
    for path in sorted(root.glob("*/*")):
        match = _CUE_CONFLICT_NAME.match(path.name)
        if match is None or match.group(1) not in index or match.group(2) not in index:
            raise HeurlensError(f"{path}: expected <shape><i>-<texture><j>.png with both classes among "
                                f"{', '.join(classes)} (Geirhos et al.'s cue-conflict layout)")
        if match.group(1) != path.parent.name:
            raise HeurlensError(f"{path}: its shape class {match.group(1)!r} differs from its folder")
        files.append(path)
        shapes.append(index[match.group(1)])
        textures.append(index[match.group(2)])
    if not files:
        raise HeurlensError(f"no images under {root}/<class>/ (Geirhos et al.'s cue-conflict layout)")
    return files, torch.tensor(shapes), torch.tensor(textures)
