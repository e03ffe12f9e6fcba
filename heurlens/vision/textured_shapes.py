"""Textured Fashion-MNIST: the offline stand-in for ImageNet's shape and texture cues.

Each image is a Fashion-MNIST garment (its shape, 10 classes) painted with one of 10 textures made
from scikit-image's bundled photographs (brick, grass, gravel at several scales and orientations):

    image = (b + (1 - b) * garment intensity) * texture crop      (1 channel, 28x28; b = 0.35)

so the texture covers the background too, dimmer, and the garment stands out by brightness.

Every texture is normalised to the same mean and spread, so after mean-pooling an image no longer
tells its texture; the garment's outline and inner regions remain. Texture ``k`` is "the texture of
class k": with ``texture_agreement`` p an image gets its own class's texture with probability p and
another class's otherwise. Cue-conflict images always get another class's texture.

Fashion-MNIST (Xiao et al. 2017, MIT licence) comes from Debian's ``dataset-fashion-mnist`` package
(``install.sh`` installs it when run as root), or from the folder in ``$HEURLENS_FASHION_MNIST``
holding the four ``*-ubyte.gz`` files; each file is checked against its sha256.
"""

from __future__ import annotations

import gzip
import os
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np
import torch
from jaxtyping import Float, Int
from torch import Tensor

from heurlens.errors import HeurlensError
from heurlens.runtime.assets import sha256_of

FASHION_MNIST_ENV_VAR = "HEURLENS_FASHION_MNIST"
DEBIAN_FASHION_MNIST = Path("/usr/share/datasets/fashion-mnist")
FASHION_MNIST_SHA256 = {
    "train-images-idx3-ubyte.gz": "b0564c3eedabfbf835052cff8503ea422014ce006caf5b757f851416ee8300c7",
    "train-labels-idx1-ubyte.gz": "0ae29f65d86684f32d1b9c85147786c547b9c6aebcaf235f0400a0cce308b056",
    "t10k-images-idx3-ubyte.gz": "cc1d090a38ace84dfa1aa66e3ada7c336ef481a96936906477e6dd344da56eaa",
    "t10k-labels-idx1-ubyte.gz": "8d3605d196f4be44669e46906da9733c8131fef761fdbfec72c424d5222f1a05",
}
FASHION_CLASSES = ["t-shirt", "trouser", "pullover", "dress", "coat", "sandal", "shirt", "sneaker", "bag", "ankle-boot"]

# (bundled scikit-image photograph, downscaling factor, quarter turns): the texture of class k.
# Fine scales only: at 28x28 pixels, coarser bricks read as stripes that survive mean-pooling.
TEXTURES = [("brick", 6, 0), ("brick", 6, 1), ("brick", 8, 0), ("brick", 8, 1), ("grass", 4, 0),
            ("grass", 4, 1), ("grass", 8, 0), ("gravel", 3, 0), ("gravel", 5, 0), ("gravel", 8, 0)]
TEXTURE_MEAN, TEXTURE_STD = 0.5, 0.2
BACKGROUND = 0.35  # brightness of the texture outside the garment


def fashion_mnist_dir() -> Path:
    folder = Path(os.environ.get(FASHION_MNIST_ENV_VAR, DEBIAN_FASHION_MNIST))
    missing = [name for name in FASHION_MNIST_SHA256 if not (folder / name).is_file()]
    if missing:
        raise HeurlensError(f"Fashion-MNIST not found in {folder} (missing {', '.join(missing)}): install Debian's "
                            f"package (sudo apt-get install dataset-fashion-mnist; install.sh does it as root) or set "
                            f"{FASHION_MNIST_ENV_VAR} to a folder with the four *-ubyte.gz files")
    return folder


@cache
def load_fashion_mnist(split: str) -> tuple[Float[Tensor, "n 28 28"], Int[Tensor, " n"]]:
    """Garment intensities in [0, 1] and labels of the ``train`` (60k) or ``test`` (10k) split."""
    if split not in ("train", "test"):
        raise HeurlensError(f"split must be 'train' or 'test', not {split!r}")
    folder, prefix = fashion_mnist_dir(), "train" if split == "train" else "t10k"
    arrays = []
    for kind, offset in (("images-idx3", 16), ("labels-idx1", 8)):
        path = folder / f"{prefix}-{kind}-ubyte.gz"
        if sha256_of(path) != FASHION_MNIST_SHA256[path.name]:
            raise HeurlensError(f"{path} does not have the expected sha256; reinstall dataset-fashion-mnist")
        arrays.append(np.frombuffer(gzip.decompress(path.read_bytes()), dtype=np.uint8, offset=offset))
    images = torch.from_numpy(arrays[0].copy()).view(-1, 28, 28).float() / 255
    return images, torch.from_numpy(arrays[1].copy()).long()


@cache
def texture_bank() -> list[Float[Tensor, "h w"]]:
    """The 10 class textures, each normalised to mean 0.5 and standard deviation 0.2, clipped to [0, 1]."""
    import skimage.data
    from skimage.transform import downscale_local_mean

    bank = []
    for source, factor, turns in TEXTURES:
        texture = downscale_local_mean(getattr(skimage.data, source)().astype(np.float64), factor)
        texture = np.rot90(texture, turns)
        texture = (texture - texture.mean()) / texture.std() * TEXTURE_STD + TEXTURE_MEAN
        bank.append(torch.from_numpy(np.clip(texture, 0, 1).copy()).float())
    return bank


def paint(shapes: Float[Tensor, "n 28 28"], textures: Int[Tensor, " n"],
          generator: torch.Generator) -> Float[Tensor, "n 1 28 28"]:
    """Each garment, lifted to the background level, times a random 28x28 crop of its texture."""
    bank = texture_bank()
    out = torch.empty(len(shapes), 1, 28, 28, device="cpu")  # data lives on the CPU
    for i, (shape, texture) in enumerate(zip(shapes, textures.tolist(), strict=True)):
        source = bank[texture]
        top = int(torch.randint(source.shape[0] - 28, (), generator=generator, device="cpu"))
        left = int(torch.randint(source.shape[1] - 28, (), generator=generator, device="cpu"))
        out[i, 0] = (BACKGROUND + (1 - BACKGROUND) * shape) * source[top:top + 28, left:left + 28]
    return out


@dataclass
class TexturedSet:
    """Images with their shape class (the label) and texture class."""

    images: Float[Tensor, "n 1 28 28"]
    shapes: Int[Tensor, " n"]
    textures: Int[Tensor, " n"]

    def __len__(self) -> int:
        return len(self.shapes)


def textured_set(split: str, indices: Int[Tensor, " n"], texture_agreement: float, seed: int) -> TexturedSet:
    """The garments ``indices`` of ``split`` painted with their own class's texture with probability
    ``texture_agreement`` and with another class's (uniformly) otherwise; 0 gives a cue-conflict set."""
    if not 0 <= texture_agreement <= 1:
        raise HeurlensError(f"texture_agreement must lie in [0, 1], not {texture_agreement}")
    garments, labels = load_fashion_mnist(split)
    generator = torch.Generator().manual_seed(seed)
    shapes = labels[indices]
    other = (shapes + torch.randint(1, len(TEXTURES), shapes.shape, generator=generator, device="cpu")) % len(TEXTURES)
    agree = torch.rand(shapes.shape, generator=generator, device="cpu") < texture_agreement
    textures = torch.where(agree, shapes, other)
    return TexturedSet(paint(garments[indices], textures, generator), shapes, textures)
