"""Vision (Subtask Induction paper, Section 5): unit masks and caches on timm classifiers through forward hooks,
mean-pooled images, shape-bias metrics, and the offline textured Fashion-MNIST experiment. Names are imported
on first use (``heurlens.runtime.lazy``). They need the extra ``heurlens[vision]`` (``check_vision_installed``)."""

from typing import TYPE_CHECKING

from heurlens.errors import HeurlensError
from heurlens.runtime.lazy import lazy_exports

VISION_PACKAGES = {"timm": "timm", "torchvision": "torchvision", "skimage": "scikit-image"}  # module: distribution

_EXPORTS = {
    "activation_cache": ".hooks", "mask_sites": ".hooks", "masks_for": ".hooks", "unit_masks": ".hooks",
    "unit_means": ".hooks",
    "SLIC": ".mean_pool", "Felzenszwalb": ".mean_pool", "SegmentAnything": ".mean_pool", "mean_pool": ".mean_pool",
    "mean_pool_images": ".mean_pool",
    "cue_conflict_scores": ".metrics", "prediction_accuracy": ".metrics", "read_cue_conflict_folder": ".metrics",
    "SMALL_ARCHITECTURES": ".settings", "create_classifier": ".models",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)


def check_vision_installed() -> None:
    """Refuse in one line, naming the install command, when a package of the vision extra cannot be imported."""
    import importlib

    missing = []
    for module, distribution in VISION_PACKAGES.items():
        try:
            importlib.import_module(module)
        except ImportError:
            missing.append(distribution)
    if missing:
        raise HeurlensError(f"the vision part of heurlens needs {', '.join(missing)}, which this environment lacks: "
                            "pip install 'heurlens[vision]' (it pins torch 2.15.0 with torchvision 0.29.2), or "
                            "bash install.sh")

if TYPE_CHECKING:  # the lazy names' real types, for type checkers and editors (never run)
    from heurlens.vision.hooks import activation_cache as activation_cache
    from heurlens.vision.hooks import mask_sites as mask_sites
    from heurlens.vision.hooks import masks_for as masks_for
    from heurlens.vision.hooks import unit_masks as unit_masks
    from heurlens.vision.hooks import unit_means as unit_means
    from heurlens.vision.mean_pool import SLIC as SLIC
    from heurlens.vision.mean_pool import Felzenszwalb as Felzenszwalb
    from heurlens.vision.mean_pool import SegmentAnything as SegmentAnything
    from heurlens.vision.mean_pool import mean_pool as mean_pool
    from heurlens.vision.mean_pool import mean_pool_images as mean_pool_images
    from heurlens.vision.metrics import cue_conflict_scores as cue_conflict_scores
    from heurlens.vision.metrics import prediction_accuracy as prediction_accuracy
    from heurlens.vision.metrics import read_cue_conflict_folder as read_cue_conflict_folder
    from heurlens.vision.models import create_classifier as create_classifier
    from heurlens.vision.settings import SMALL_ARCHITECTURES as SMALL_ARCHITECTURES
