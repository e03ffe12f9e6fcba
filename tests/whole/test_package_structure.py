"""The package's shape (issue 64): a ground floor of at most 12 modules beside the folders that show its layers, no
module over 300 lines, no import cycle between heurlens' modules (counting imports inside functions and under
TYPE_CHECKING: a cycle there is still two modules that need each other), and the module paths of 0.1.0 that moved
still importing, with a warning."""

from __future__ import annotations

import ast
import importlib
import sys
import warnings
from collections.abc import Iterable
from pathlib import Path

import pytest

from heurlens.runtime.deprecations import MOVED_MODULES

PACKAGE = Path(__file__).resolve().parents[2] / "heurlens"


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(path): path for path in PACKAGE.rglob("*.py")}


def imported_modules(name: str, path: Path, known: Iterable[str]) -> set[str]:
    """The heurlens modules (not packages' ``__init__``) that ``path`` imports anywhere in its text."""
    known = set(known)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[:len(package.split(".")) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names]
        else:
            continue
        for target in targets:
            while target not in known and "." in target:
                target = target.rpartition(".")[0]
            if target in known and target != name and not (PACKAGE.parent / target.replace(".", "/")).is_dir():
                found.add(target)
    return found


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            step = next(edges, None)
            if step is not None:
                if step not in index:
                    index[step] = low[step] = len(index)
                    stack.append(step)
                    on_stack.add(step)
                    work.append((step, iter(sorted(graph.get(step, ())))))
                elif step in on_stack:
                    low[node] = min(low[node], index[step])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_cycle_finder_finds_a_cycle_and_nothing_else():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"d"}}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycle_between_heurlens_modules():
    known = modules()
    graph = {name: imported_modules(name, path, known) for name, path in known.items()}
    assert "heurlens.interventions.means" in graph["heurlens.interventions.ablation"]  # the graph sees imports
    assert cycles(graph) == []


LAYERS = {"runtime": 0, "errors": 0, "protocols": 0, "training_helpers": 0, "trainer": 0, "models": 1, "tasks": 2,
          "evaluate": 2, "metrics": 2, "data": 3, "interventions": 4, "pruning": 5, "circuits": 6, "analysis": 6,
          "subtask": 6, "vision": 6, "cli": 7, "__main__": 8, "": 8}  # docs/design.md, "Package layout", lowest first
# imports that run up the layers, each for a reason docs/design.md states: the default model is fine-tuned on SNLI when
# first loaded (with the NLI set-up's evaluation), and the NLI and prompt-task set-ups decide the unit means a run uses
RUNNING_UP = {("heurlens.models.nli_finetune", "heurlens.data.nli_setup"),
              ("heurlens.models.nli_finetune", "heurlens.data.snli"),
              ("heurlens.models.nli_finetune", "heurlens.evaluate"),
              ("heurlens.data.nli_setup", "heurlens.interventions.means"),
              ("heurlens.data.run_data", "heurlens.interventions.means"),
              # PruneSettings(init_from=DIR) without prune(warm_start=): deprecated, read until 0.3.0
              ("heurlens.pruning.warm_start", "heurlens.circuits.attribution_runs")}


def layer_of(module: str) -> int:
    return LAYERS[module.split(".")[1] if "." in module else ""]


def test_imports_run_down_the_layers_but_for_the_stated_few():
    known = modules()
    up = {(name, target) for name, path in known.items() for target in imported_modules(name, path, known)
          if layer_of(target) > layer_of(name)}
    assert up == RUNNING_UP


def test_the_ground_floor_holds_at_most_12_modules():
    ground = sorted(path.name for path in PACKAGE.glob("*.py"))
    assert len(ground) <= 12, ground


def test_no_module_is_over_300_lines():
    long = {name: n for name, path in modules().items() if (n := len(path.read_text().splitlines())) > 300}
    assert long == {}


@pytest.mark.parametrize("old", sorted(MOVED_MODULES))
def test_a_moved_module_imports_from_its_old_path_with_a_warning(old):
    new = importlib.import_module(MOVED_MODULES[old])
    sys.modules.pop(old, None)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        module = importlib.import_module(old)
    assert module is new and module.__spec__ is not None and module.__spec__.name == MOVED_MODULES[old]
    assert [str(w.message).split(":")[0] for w in caught if w.category is DeprecationWarning] == [
        f"{old} moved to {MOVED_MODULES[old]}"]
    assert not (PACKAGE.parent / (old.replace(".", "/") + ".py")).exists()


def test_the_tests_mirror_the_package():
    """Each folder of tests/ is one of heurlens' folders (its modules' tests), ``ground_floor`` (the modules beside
    them) or ``whole`` (the suites that cross the package: docs, architectures, the main job, the layout itself);
    no test file lies outside them, and none shares a name with another (pytest imports them by name)."""
    tests = PACKAGE.parent / "tests"
    allowed = {path.name for path in PACKAGE.iterdir() if path.is_dir() and (path / "__init__.py").exists()}
    folders = {path.name for path in tests.iterdir() if path.is_dir() and path.name not in ("fixtures", "__pycache__")}
    assert folders - allowed == {"ground_floor", "whole"}, folders - allowed
    assert not list(tests.glob("test_*.py"))
    names = [path.name for path in tests.glob("*/test_*.py")]
    assert len(names) == len(set(names)) and len(names) > 70


def test_every_test_ci_runs_across_versions_exists():
    """``.ci/portable-tests`` (the tests CI runs on 3.10 with the oldest dependencies and on 3.13) names test files
    that exist, once each: a test moved or renamed would otherwise drop out of those runs without a word."""
    listed = [line.strip() for line in (PACKAGE.parent / ".ci" / "portable-tests").read_text().splitlines()
              if line.strip() and not line.startswith("#")]
    missing = [path for path in listed if not (PACKAGE.parent / path).is_file()]
    assert missing == [] and len(listed) == len(set(listed)) and len(listed) > 20
