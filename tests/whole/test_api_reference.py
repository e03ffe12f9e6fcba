"""The API reference (docs/api.md, built by mkdocs in CI) lists every name heurlens exports, and every object it
lists has a docstring, as do the public methods of its classes."""

import importlib
import inspect
import re
from pathlib import Path

import heurlens

PAGE = Path(__file__).parents[2] / "docs" / "api.md"


def listed() -> dict[str, object]:
    objects = {}
    for path in re.findall(r"^::: ([\w.]+)$", PAGE.read_text(), re.MULTILINE):
        module, name = path.rsplit(".", 1)
        objects[path] = getattr(importlib.import_module(module), name)
    return objects


def test_every_exported_name_is_in_the_reference():
    names = {path.rsplit(".", 1)[1] for path in listed()}
    assert set(heurlens.__all__) - names == set()


def test_everything_in_the_reference_has_a_docstring():
    undocumented = []
    for path, obj in listed().items():
        if isinstance(obj, str) or not (inspect.isclass(obj) or callable(obj)) or hasattr(obj, "__origin__"):
            continue  # a type alias (ModelLike, Metric, Loss): its docstring is the string under it, for mkdocs
        own = obj.__dict__.get("__doc__") if inspect.isclass(obj) else inspect.getdoc(obj)
        if not own or own.startswith(f"{getattr(obj, '__name__', '')}("):  # a dataclass's made-up signature
            undocumented.append(path)
        if inspect.isclass(obj):
            for name, member in vars(obj).items():
                function = getattr(member, "fget", member)
                if not name.startswith("_") and callable(function) and not inspect.getdoc(function):
                    undocumented.append(f"{path}.{name}")
    assert undocumented == []


def args_section(docstring: str) -> list[str]:
    """The parameter names an ``Args:`` section (Google style, as mkdocs reads it) names, in order."""
    found = re.search(r"^Args:\n((?:    .*\n|\n)+)", docstring + "\n", re.MULTILINE)
    return [] if found is None else re.findall(r"^    (\w+):", found.group(1), re.MULTILINE)


def test_every_function_in_the_reference_names_each_parameter_in_an_args_section():
    """Each function docs/api.md lists has an ``Args:`` section naming each of its parameters, in the signature's
    order, so the API reference shows a table of them (mkdocs --strict refuses a name there that the signature
    lacks)."""
    checked, wrong = 0, {}
    for path, obj in listed().items():
        function = inspect.unwrap(obj) if callable(obj) else obj
        if not inspect.isfunction(function):
            continue
        checked += 1
        names = list(inspect.signature(function).parameters)
        if args_section(inspect.getdoc(function) or "") != names:
            wrong[path] = (args_section(inspect.getdoc(function) or ""), names)
    assert wrong == {} and checked >= 66
