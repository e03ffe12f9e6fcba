"""Vision (Subtask Induction paper, Section 5): unit masks and caches on timm classifiers through forward hooks,
mean-pooled images, shape-bias metrics, and the offline textured Fashion-MNIST experiment."""

from heurlens.vision.hooks import activation_cache, mask_sites, masks_for, unit_masks, unit_means
from heurlens.vision.mean_pool import SLIC, Felzenszwalb, SegmentAnything, mean_pool, mean_pool_images
from heurlens.vision.metrics import cue_conflict_scores, prediction_accuracy, read_cue_conflict_folder
from heurlens.vision.models import SMALL_ARCHITECTURES, create_classifier

__all__ = ["SLIC", "SMALL_ARCHITECTURES", "Felzenszwalb", "SegmentAnything", "prediction_accuracy", "activation_cache",
           "create_classifier", "cue_conflict_scores", "mask_sites", "masks_for", "mean_pool", "mean_pool_images",
           "read_cue_conflict_folder", "unit_masks", "unit_means"]
