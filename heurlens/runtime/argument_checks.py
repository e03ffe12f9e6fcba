"""The library's arguments checked at its door: a wrong type is one line naming the argument, not a traceback from
deep inside (``sparsity="0.5"`` iterated by character, ``seeds=3``, ``cache="no"`` taken as True).

The checker is beartype, the runtime checker TransformerLens itself uses (with jaxtyping, for its tensor shapes):
it checks the annotations the functions already carry, in constant time per call (one sampled item of a
container), so the signatures stay the one statement of what a function takes. heurlens' protocols (a model, a
task) are structural and not ``runtime_checkable``: they are checked by ``as_model`` / ``as_task`` inside, which
say what to pass, and skipped here. ``PositiveInt`` is a count that must be at least 1.
"""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Callable
from typing import Annotated, Any, ParamSpec, TypeVar

from beartype import BeartypeConf, FrozenDict, beartype
from beartype.roar import BeartypeCallHintParamViolation
from beartype.vale import Is

from heurlens.errors import HeurlensError
from heurlens.protocols import HookedModel, ModelLike, PreparedModel, Task

P = ParamSpec("P")
R = TypeVar("R")

PositiveInt = Annotated[int, Is[lambda number: number > 0]]
"""An int of at least 1 (a batch size, a count)."""

_STRUCTURAL = {Task: object, HookedModel: object, PreparedModel: object, ModelLike: object}
CONF = BeartypeConf(hint_overrides=FrozenDict(_STRUCTURAL), is_pep484_tower=True, is_color=False)


def checked(function: Callable[P, R]) -> Callable[P, R]:
    """``function`` with its arguments checked against its annotations on every call (beartype): a mismatch raises
    a one-line ``HeurlensError`` naming the function, the argument, its value and the type it needs, as the
    signature writes it."""
    signature = inspect.signature(function)  # before beartype resolves the annotations: as the source writes them
    with_checks = beartype(conf=CONF)(function)

    @functools.wraps(function)
    def call(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return with_checks(*args, **kwargs)
        except BeartypeCallHintParamViolation as violation:
            named = re.search(r"parameter (\w+)=", str(violation))
            if named is None:  # not beartype's usual wording: its own message, on one line
                raise HeurlensError(" ".join(str(violation).split())) from None
            name = named.group(1)
            value = signature.bind_partial(*args, **kwargs).arguments.get(name)
            raise HeurlensError(f"{function.__name__}(): {name}={_short(value)} is not "
                                f"{_needed(str(violation), signature.parameters[name].annotation)}") from None

    return call


def _needed(violation: str, written: Any) -> str:
    """What the parameter takes, as its signature ``written`` says it, or its choices where beartype's ``violation``
    names a ``Literal`` (``Method``: one of 'mean', 'zero', 'corrupt')."""
    hint = re.search(r"violates type hint (.*?), as ", violation, re.DOTALL)
    choices = re.search(r"Literal\[(.*?)\]", hint.group(1)) if hint else None
    if choices:
        return f"one of {choices.group(1)}" + (" or None" if "None" in hint.group(1) else "")  # type: ignore[union-attr]
    text = written if isinstance(written, str) else getattr(written, "__name__", repr(written))
    return text.replace("PositiveInt", "int >= 1")


def _short(value: Any) -> str:
    text = " ".join(repr(value).split())  # one line, whatever the value's repr
    return text if len(text) <= 60 else f"{text[:57]}..."
