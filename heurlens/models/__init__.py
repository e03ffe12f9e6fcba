"""Models as TransformerLens bridges: ``load_model`` and the ``HookedClassifier`` it returns. Names are imported
on first use (``heurlens.runtime.lazy``)."""

from typing import TYPE_CHECKING

from heurlens.runtime.lazy import lazy_exports

_EXPORTS = {"HookedClassifier": ".classifier", "load_model": ".loading", "load_native": ".loading",
            "load_pretrained": ".loading", "wrap_bridge": ".classifier"}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

if TYPE_CHECKING:  # the lazy names' real types, for type checkers and editors (never run)
    from heurlens.models.classifier import HookedClassifier as HookedClassifier
    from heurlens.models.classifier import wrap_bridge as wrap_bridge
    from heurlens.models.loading import load_model as load_model
    from heurlens.models.loading import load_native as load_native
    from heurlens.models.loading import load_pretrained as load_pretrained
