"""heurlens' progress bars: tqdm's (``tqdm.auto``: a widget in a notebook, a line on stderr elsewhere), every one
of them off at once with ``heurlens --quiet`` (or ``set_quiet()`` in a script) as well as by each call's own
``progress=False``; and ``progress_note``, a line on stderr before a long step, off with them."""

from __future__ import annotations

from typing import Any

from tqdm.auto import tqdm

_QUIET = {"on": False}
SHORT_STEP_DELAY_S = 2.0  # a bar of a step that is often short (means over a few prompts) appears past this only


def set_quiet(quiet: bool = True) -> None:
    """Turn every heurlens progress bar off (``quiet``) or back to each call's own choice."""
    _QUIET["on"] = quiet


def progress_bar(*args: Any, disable: bool = False, short: bool = False, **kwargs: Any) -> tqdm:
    """``tqdm(*args, **kwargs)``, disabled when ``disable`` or when heurlens is quiet; ``short``: a step that is often
    over in a moment, whose bar shows only once it has run ``SHORT_STEP_DELAY_S``."""
    if short:
        kwargs.setdefault("delay", SHORT_STEP_DELAY_S)
    return tqdm(*args, disable=disable or _QUIET["on"], **kwargs)


def progress_note(text: str) -> None:
    """``text`` as a line on stderr (``tqdm.write``: above any bar on screen), unless heurlens is quiet."""
    if not _QUIET["on"]:
        import sys

        tqdm.write(f"heurlens: {text}", file=sys.stderr)
