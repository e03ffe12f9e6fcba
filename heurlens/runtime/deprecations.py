"""Names that changed in heurlens 0.2.0, still accepted until 0.3.0 with a ``DeprecationWarning`` that says what
to write instead (docs/design.md, "Public names"; CHANGELOG.md):

- module paths that moved into folders (``heurlens.units`` is now ``heurlens.interventions.units``), those the
  documentation showed (internal ones moved without a shim: CHANGELOG.md, 0.2.0): importing an old path gives the
  module at its new one; a finder on ``sys.meta_path`` answers for the old names
  only, so nothing else is imported differently;
- the corrupted-prompt ablation, "interchange", is "corrupt" (TransformerLens 4.3's ``ablation="corrupt"``;
  TransformerLens' own ``interchange`` is subspace interchange, something else): ``ablation_name``.

Every message ends with ``STILL_WORKS``, which the CLI shows (Python hides DeprecationWarnings outside
``__main__``)."""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import warnings
from types import ModuleType
from typing import Literal

MOVED_MODULES = {  # path before 0.2.0 -> path now, for the paths docs/api.md, README or docs/ showed (until 0.3.0)
    **{f"heurlens.{name}": f"heurlens.runtime.{name}" for name in ("cache", "distributed", "run_folders")},
    **{f"heurlens.{name}": f"heurlens.interventions.{name}" for name in ("ablation", "edge_masks", "means", "units")},
    "heurlens.edges": "heurlens.interventions.graph",
    "heurlens.interchange": "heurlens.interventions.corruption",
    "heurlens.nli": "heurlens.data.nli_setup",
    **{f"heurlens.analysis.{name}": f"heurlens.circuits.{name}" for name in (
        "attribution", "attribution_runs", "faithfulness", "faithfulness_areas", "mib_files")},
    "heurlens.analysis.circuit_comparison": "heurlens.circuits.comparison",
    "heurlens.analysis.circuit_graph": "heurlens.circuits.drawing",
    "heurlens.interventions.mib_graph": "heurlens.circuits.mib_graph",
}


STILL_WORKS = "works until heurlens 0.3.0"
DeprecatedMethod = Literal["interchange"]  # "corrupt" before 0.2.0: taken at the doors (``ablation_name``) until 0.3.0


def ablation_name(method: str) -> str:
    """``method`` with "interchange" read as "corrupt", warning that it was renamed; any other name as it is."""
    if method != "interchange":
        return method
    warnings.warn("the ablation 'interchange' is now called 'corrupt' (TransformerLens' name, ablation=\"corrupt\"): "
                  f"use 'corrupt'; 'interchange' {STILL_WORKS}", DeprecationWarning, stacklevel=3)
    return "corrupt"


class _MovedModuleLoader(importlib.abc.Loader):
    """Loads an old path as the module at its new path (the same module object, so its classes and functions are the
    same objects), with a warning naming both paths."""

    def __init__(self, old_name: str, new_name: str) -> None:
        self.old_name, self.new_name = old_name, new_name

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        module = importlib.import_module(self.new_name)
        self.own_spec = module.__spec__
        return module

    def exec_module(self, module: ModuleType) -> None:
        module.__spec__ = self.own_spec  # the import machinery set the old path's spec on the shared module
        warnings.warn(f"{self.old_name} moved to {self.new_name}: import it from there (the old path {STILL_WORKS})",
                      DeprecationWarning, stacklevel=2)


class _MovedModuleFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname: str, path: object = None, target: object = None
                  ) -> importlib.machinery.ModuleSpec | None:
        new_name = MOVED_MODULES.get(fullname)
        return None if new_name is None else importlib.machinery.ModuleSpec(fullname,
                                                                            _MovedModuleLoader(fullname, new_name))


def redirect_moved_modules() -> None:
    """Put the finder for the old paths on ``sys.meta_path`` (once)."""
    if not any(isinstance(finder, _MovedModuleFinder) for finder in sys.meta_path):
        sys.meta_path.append(_MovedModuleFinder())
