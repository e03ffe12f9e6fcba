"""Click options generated from a settings dataclass, so each setting is declared once (in the library).

Every field becomes ``--field-name`` (or the field's ``metadata["option"]``), typed from its
annotation: ``int`` / ``float`` with their range checks, ``str`` (a choice with
``metadata["choices"]``), ``Literal[...]`` as a choice, ``bool`` as a ``--x/--no-x`` pair,
``tuple[X, ...]`` as an option taking several values (``--l0-lambda 1e-7 5e-7``); its help is
``metadata["help"]``, its lower bound ``metadata["min"]``
(None: unbounded) and its upper bound ``metadata["max"]`` (default: none). Every option defaults to
"not given", so a preset (``PruneSettings.released()``,
``SweepSettings.paper()``) supplies what the user left out.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable
from typing import Any, Literal

import click


def _option_name(field: dataclasses.Field) -> str:
    return field.metadata.get("option", "--" + field.name.replace("_", "-"))


def _click_type(annotation, metadata) -> tuple[Any, bool]:
    """(click type, is a flag) of a field annotation (of one element for a tuple); ``X | None`` is X.
    Numbers are at least ``metadata["min"]`` (default 0; above it with ``metadata["min_open"]``)."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        annotation = next(a for a in typing.get_args(annotation) if a is not type(None))
    if typing.get_origin(annotation) is tuple:
        annotation = typing.get_args(annotation)[0]
    if typing.get_origin(annotation) is Literal:
        return click.Choice(typing.get_args(annotation)), False
    if annotation is bool:
        return None, True
    if annotation is str:
        return (click.Choice(metadata["choices"]) if "choices" in metadata else str), False
    low, open_low = metadata.get("min", 0), metadata.get("min_open", False)
    if low is None:
        return annotation, False
    if annotation is int:
        return click.IntRange(min=low + open_low, max=metadata.get("max")), False
    return FiniteFloatRange(min=low, min_open=open_low, max=metadata.get("max")), False


class FiniteFloatRange(click.FloatRange):
    """click's FloatRange, refusing NaN and infinity (which pass its comparisons unnoticed)."""

    name = "finite float range"

    def convert(self, value, param, ctx):
        import math

        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return number


def settings_options(settings_class: type, skip: tuple[str, ...] = ()) -> Callable:
    """Decorator: one click option per field of ``settings_class`` (but ``skip``), in field order."""
    hints = typing.get_type_hints(settings_class)

    def decorate(function):
        for field in reversed(dataclasses.fields(settings_class)):
            if field.name in skip:
                continue
            kind, is_flag = _click_type(hints[field.name], field.metadata)
            several = typing.get_origin(hints[field.name]) is tuple
            default = " ".join(map(str, field.default)) if several else field.default
            help_text = f"{field.metadata.get('help', '')} [default: {default}]"
            name = _option_name(field)
            if is_flag:
                option = click.option(f"{name}/--no-{name[2:]}", field.name, default=None, help=help_text)
            else:
                option = click.option(name, field.name, type=kind, default=None, multiple=several, help=help_text)
            function = option(function)
        return function
    return decorate


def settings_from_options(base, given: dict[str, Any]):
    """``base`` (a settings instance or preset) with the options the user gave (not None, not empty) put in."""
    names = {f.name for f in dataclasses.fields(base)}
    return dataclasses.replace(base, **{k: tuple(v) if isinstance(v, list | tuple) else v for k, v in given.items()
                                        if k in names and v is not None and v != ()})
