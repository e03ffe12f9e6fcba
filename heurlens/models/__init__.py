"""Models as TransformerLens bridges: ``load_model`` and the ``HookedClassifier`` it returns."""

from heurlens.models.classifier import HookedClassifier
from heurlens.models.loading import load_model, load_native, load_pretrained

__all__ = ["HookedClassifier", "load_model", "load_native", "load_pretrained"]
