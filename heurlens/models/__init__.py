"""Models as TransformerLens bridges: ``load_model`` and the ``HookedClassifier`` it returns. Names are imported
on first use (``heurlens.lazy``)."""

from heurlens.lazy import lazy_exports

_EXPORTS = {"HookedClassifier": ".classifier", "load_model": ".loading", "load_native": ".loading",
            "load_pretrained": ".loading", "wrap_bridge": ".classifier"}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
