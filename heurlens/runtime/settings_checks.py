"""The one check every settings dataclass runs when it is made (``PruneSettings``, ``SweepSettings``,
``ShapeBiasSettings``, ``FinetuneSettings``), so a library call refuses what the CLI refuses, before any work:
values not of the field's type (beartype's ``is_bearable``, as ``heurlens.runtime.argument_checks``), NaN and infinite
numbers, numbers outside a field's bounds (``metadata["min"]``, default 0, above it with ``"min_open"``, None for
unbounded; ``metadata["max"]``), and ``Literal`` values that are not among its choices.
"""

from __future__ import annotations

import dataclasses
import math
import typing
from typing import Any, Literal

from beartype import BeartypeConf
from beartype.door import is_bearable

from heurlens.errors import HeurlensError

_NUMBERS_AS_PYTHON_TAKES_THEM = BeartypeConf(is_pep484_tower=True)  # an int where a float goes


def check_settings(settings: Any, kind: str) -> None:
    """Refuse the first field of ``settings`` whose value (or, for a tuple, one of its values) is not allowed."""
    hints = typing.get_type_hints(type(settings))
    for setting in dataclasses.fields(settings):
        value = getattr(settings, setting.name)
        choices = typing.get_args(hints[setting.name]) if typing.get_origin(hints[setting.name]) is Literal else None
        if choices and value not in choices:
            raise HeurlensError(f"{kind} {setting.name} = {value!r} is not one of {', '.join(map(str, choices))}")
        # 2.5 steps, "0.5" for a rate, True for a number: refused here, not deep in training
        if not is_bearable(value, hints[setting.name], conf=_NUMBERS_AS_PYTHON_TAKES_THEM) or _bool_for_number(
                value, hints[setting.name]):
            raise HeurlensError(f"{kind} {setting.name} = {value!r} is not {setting.type}")
        for item in value if isinstance(value, tuple) else (value,):
            _check_number(item, setting, kind)


def _bool_for_number(value: Any, hint: Any) -> bool:
    """Whether ``value`` is True or False where the field takes numbers, not booleans (Python's bool is an int)."""
    items = value if isinstance(value, tuple) else (value,)
    return any(isinstance(item, bool) for item in items) and bool not in (hint, *typing.get_args(hint))


def _check_number(value: Any, setting: dataclasses.Field, kind: str) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return
    if not math.isfinite(value):
        raise HeurlensError(f"{kind} {setting.name} = {value} is not a finite number; give a number")
    low, high = setting.metadata.get("min", 0), setting.metadata.get("max")
    if low is not None and (value < low or (setting.metadata.get("min_open") and value == low)):
        bound = "above" if setting.metadata.get("min_open") else "at least"
        raise HeurlensError(f"{kind} {setting.name} = {value} must be {bound} {low}")
    if high is not None and value > high:
        raise HeurlensError(f"{kind} {setting.name} = {value} must be at most {high}")
