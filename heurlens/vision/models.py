"""timm image classifiers: by hub name (pretrained when the hub is reachable), from a local weights
file, or random; plus the two small architectures the offline experiment trains on this CPU."""

from __future__ import annotations

from pathlib import Path
from typing import cast

from torch import nn

from heurlens.errors import HeurlensError
from heurlens.vision.settings import SMALL_ARCHITECTURES

# Small versions of the paper's two architectures, for 28x28 images on a CPU: a ResNet18 at a
# quarter of its block width with a CIFAR-style stem (one 64-channel 3x3 stride-1 convolution, no max-pooling, so
# fine texture survives the first layer), and a 4-layer ViT-Tiny with 4x4 patches.
SMALL_IMAGE_STEM = {"resnet18-quarter"}


def _small_image_stem(model: nn.Module, in_chans: int) -> None:
    """Replace a timm ResNet's 7x7 stride-2 stem and max-pool by a 3x3 stride-1 convolution."""
    width = cast(nn.Conv2d, model.conv1).out_channels
    model.conv1 = nn.Conv2d(in_chans, width, kernel_size=3, stride=1, padding=1, bias=False)
    model.maxpool = nn.Identity()


def create_classifier(name: str, num_classes: int, in_chans: int = 3, img_size: int | None = None,
                      pretrained: bool = False, weights_file: str | Path | None = None, seed: int = 0) -> nn.Module:
    """A timm classifier with a fresh ``num_classes`` head.

    ``name`` is a timm model name (``resnet18``, ``vit_base_patch16_224``...) or one of
    ``SMALL_ARCHITECTURES``. ``pretrained`` loads the hub's weights (needs the hub), ``weights_file``
    a local checkpoint (.safetensors / .pth / .bin) of the same architecture; with neither the model
    starts from random weights drawn with ``seed``.
    """
    import timm
    import torch

    base, kwargs = SMALL_ARCHITECTURES.get(name, (name, {}))
    if base not in timm.list_models():
        raise HeurlensError(f"unknown model {name!r}: give a timm model name (see timm.list_models()) or one of "
                            f"{', '.join(SMALL_ARCHITECTURES)}")
    if img_size is not None and base.startswith("vit"):
        kwargs = kwargs | {"img_size": img_size}
    if weights_file is not None:
        if not Path(weights_file).is_file():
            raise HeurlensError(f"weights file {weights_file} does not exist")
        if name in SMALL_IMAGE_STEM:  # the file holds the changed stem: load it after the change
            model = create_classifier(name, num_classes, in_chans, img_size, seed=seed)
            try:
                timm.models.load_checkpoint(model, str(weights_file))
            except (OSError, RuntimeError) as error:
                raise HeurlensError(f"cannot load {weights_file} into {name}: {error}") from error
            return model
        kwargs = kwargs | {"pretrained_cfg_overlay": {"file": str(weights_file)}}
        pretrained = True
    torch.manual_seed(seed)
    try:
        model = timm.create_model(base, pretrained=pretrained, num_classes=num_classes, in_chans=in_chans, **kwargs)
    except (OSError, RuntimeError) as error:
        if weights_file is not None:
            raise HeurlensError(f"cannot load {weights_file} into {name}: {error}") from error
        raise HeurlensError(f"cannot fetch pretrained weights for {name} ({error}); without the model hub pass "
                            "weights_file= (a local checkpoint), or pretrained=False for random weights") from error
    if name in SMALL_IMAGE_STEM:
        _small_image_stem(model, in_chans)
    return model
