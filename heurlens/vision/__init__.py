"""Vision (Subtask Induction paper, Section 5): unit masks and caches on timm classifiers through forward hooks,
mean-pooled images, shape-bias metrics, and the offline textured Fashion-MNIST experiment. Names are imported
on first use (``heurlens.lazy``)."""

from heurlens.lazy import lazy_exports

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
