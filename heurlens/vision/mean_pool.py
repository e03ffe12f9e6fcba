"""Mean-pooled images (Subtask Induction paper, Section 5.1): segment an image into regions and replace every
pixel by its region's mean colour, erasing texture inside regions while keeping their shapes.

    pooled[p] = (1 / |R(p)|) * sum_{q in R(p)} image[q]        R(p): the region of pixel p

A *segmenter* maps one image (``[height, width, channel]``, floats) to an integer label map
(``[height, width]``). ``SLIC`` and ``Felzenszwalb`` (scikit-image) run offline on a CPU;
``SegmentAnything`` follows the paper (a 16x16 point grid, one 2x2 crop layer, masks under 100
pixels dropped) for users who have the ``segment_anything`` package and a checkpoint.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np
import torch
from jaxtyping import Float, Int
from safetensors.torch import load_file
from torch import Tensor

from heurlens.errors import HeurlensError
from heurlens.runtime.cache import atomic_save_tensors, cache_dir, stored
from heurlens.runtime.progress import progress_bar


class Segmenter(Protocol):
    def __call__(self, image: Float[np.ndarray, "height width channel"]) -> Int[np.ndarray, "height width"]: ...


@dataclass(frozen=True)
class SLIC:
    """k-means superpixels in colour and position (Achanta et al. 2012), via scikit-image."""

    n_segments: int = 24
    compactness: float = 0.1

    def __call__(self, image):
        from skimage.segmentation import slic

        return slic(image, n_segments=self.n_segments, compactness=self.compactness, channel_axis=-1,
                    start_label=0, enforce_connectivity=True)


@dataclass(frozen=True)
class Felzenszwalb:
    """Graph-based segmentation (Felzenszwalb & Huttenlocher 2004), via scikit-image."""

    scale: float = 300.0  # larger: fewer, bigger regions (on 28x28 garments: whole texture patches merge)
    sigma: float = 0.8
    min_size: int = 20

    def __call__(self, image):
        from skimage.segmentation import felzenszwalb

        return felzenszwalb(image, scale=self.scale, sigma=self.sigma, min_size=self.min_size, channel_axis=-1)


@dataclass(frozen=True)
class SegmentAnything:
    """Segment Anything as in the paper: automatic masks from a 16x16 point grid plus one layer of
    2x2 crops, masks under 100 pixels dropped, larger masks painted first so smaller ones stay
    visible; pixels no mask covers form one more region."""

    checkpoint: str
    model_type: str = "vit_h"
    min_area: int = 100

    def __call__(self, image):
        try:
            from segment_anything import SamAutomaticMaskGenerator, sam_model_registry
        except ImportError as error:
            raise HeurlensError("SegmentAnything needs the segment_anything package (pip install "
                                "segment-anything) and a checkpoint file; offline, use SLIC() or Felzenszwalb()") from error
        generator = _sam_generator(self.checkpoint, self.model_type, self.min_area,
                                   sam_model_registry, SamAutomaticMaskGenerator)
        pixels = (np.clip(image, 0, 1) * 255).astype(np.uint8)
        if pixels.shape[-1] == 1:
            pixels = np.repeat(pixels, 3, axis=-1)
        masks = [m["segmentation"] for m in generator.generate(pixels) if m["area"] >= self.min_area]
        labels = np.full(image.shape[:2], len(masks), dtype=np.int64)
        for index, mask in sorted(enumerate(masks), key=lambda item: -item[1].sum()):
            labels[mask] = index
        return labels


_SAM_GENERATORS: dict = {}


def _sam_generator(checkpoint: str, model_type: str, min_area: int, registry, generator_class):
    key = (checkpoint, model_type, min_area)
    if key not in _SAM_GENERATORS:
        if not Path(checkpoint).is_file():
            raise HeurlensError(f"Segment Anything checkpoint {checkpoint} does not exist")
        model = registry[model_type](checkpoint=checkpoint)
        _SAM_GENERATORS[key] = generator_class(model, points_per_side=16, crop_n_layers=1,
                                               min_mask_region_area=min_area)
    return _SAM_GENERATORS[key]


def mean_pool(image: Float[np.ndarray, "height width channel"],
              labels: Int[np.ndarray, "height width"]) -> Float[np.ndarray, "height width channel"]:
    """Every pixel replaced by the mean of its region (regions given by ``labels``)."""
    if labels.shape != image.shape[:2]:
        raise HeurlensError(f"label map {labels.shape} does not match the image {image.shape[:2]}")
    _, flat = np.unique(labels, return_inverse=True)
    flat = flat.reshape(-1)
    counts = np.bincount(flat)
    pixels = image.reshape(-1, image.shape[-1]).astype(np.float64)
    means = np.stack([np.bincount(flat, weights=pixels[:, c]) / counts for c in range(pixels.shape[1])], axis=1)
    return means[flat].reshape(image.shape).astype(image.dtype)


def mean_pool_images(images: Float[Tensor, "n channel height width"], segmenter: Segmenter = Felzenszwalb(),
                     cache: bool = True, progress: bool = True) -> Float[Tensor, "n channel height width"]:
    """Mean-pool a batch of images (values as the model sees them, channels first).

    Results are cached under ``<cache>/mean_pooled/`` by a hash of the images and the segmenter, so
    the second call with the same inputs is a file read.
    """
    key = hashlib.sha256(images.contiguous().numpy().tobytes() + repr(segmenter).encode()).hexdigest()[:16]
    path = cache_dir() / "mean_pooled" / f"{key}.safetensors"

    def compute() -> Tensor:
        pooled = np.empty(images.shape, dtype=np.float32)
        array = images.permute(0, 2, 3, 1).numpy()
        for index in progress_bar(range(len(images)), desc="mean-pooling images", unit="image", disable=not progress):
            image = array[index]
            pooled[index] = mean_pool(image, segmenter(image)).transpose(2, 0, 1)
        return torch.from_numpy(pooled)

    if not cache:
        return compute()
    return stored(path, compute,
                  lambda pooled: atomic_save_tensors(path, {"images": pooled}, metadata={"segmenter": repr(segmenter)}),
                  lambda: load_file(str(path))["images"])


def images_of(dataset) -> tuple[Float[Tensor, "n channel height width"], Int[Tensor, " n"]]:
    """Stack a torchvision-style dataset (``dataset[i] == (image, label)``; image a tensor or PIL
    image) or a folder of class sub-folders (a path, read with ``torchvision.datasets.ImageFolder``)
    into one image tensor and one label tensor. Images must share one size."""
    from torchvision.datasets import ImageFolder
    from torchvision.transforms.functional import pil_to_tensor

    if isinstance(dataset, (str, Path)):
        if not Path(dataset).is_dir():
            raise HeurlensError(f"{dataset} is not a folder of class sub-folders of images")
        dataset = ImageFolder(str(dataset))
    images, labels = [], []
    for image, label in progress_bar(dataset, desc="reading images", unit="image", leave=False):
        if not isinstance(image, Tensor):
            image = pil_to_tensor(image.convert("RGB")).float() / 255
        images.append(image)
        labels.append(int(label))
    if len({tuple(i.shape) for i in images}) > 1:
        raise HeurlensError("images of different sizes; resize them first (e.g. a torchvision Resize transform)")
    return torch.stack(images), torch.tensor(labels)
