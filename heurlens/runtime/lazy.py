"""Package namespaces that import their members on first use (PEP 562), so that ``import heurlens`` and the
CLI's start-up do not load torch, TransformerLens, transformers and datasets before a command needs them."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


def lazy_exports(package: str, exports: dict[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for ``package``: ``exports`` maps each public name to the module (relative
    to ``package`` when it starts with a dot) that defines it; the module is imported when the name is
    first read."""

    def __getattr__(name: str) -> Any:
        if name not in exports:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(exports[name], package), name)

    def __dir__() -> list[str]:
        return sorted(exports)

    return __getattr__, __dir__
