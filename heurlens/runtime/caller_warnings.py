"""Warnings that point at the researcher's own line: the first frame outside heurlens (and outside the argument
checks' generated wrappers, ``<@beartype(...)>``), where a fixed ``stacklevel`` pointed inside the wrapper
(``<@beartype(heurlens.pruning.runs.prune) at 0x...>:295``) or inside heurlens when the call came through another
of its functions. Python 3.12's ``skip_file_prefixes`` does this; heurlens supports 3.10, so the frames are counted
here."""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

_PACKAGE = str(Path(__file__).resolve().parents[1])  # .../heurlens


def _inside_heurlens(filename: str) -> bool:
    return filename.startswith(_PACKAGE) or filename.startswith("<@beartype(")


def warn_at_caller(message: str, category: type[Warning]) -> None:
    """``warnings.warn(message, category)`` attributed to the first caller outside heurlens (the top of the stack
    when heurlens called itself from its command line)."""
    frame, level = sys._getframe(1), 1
    while frame.f_back is not None and _inside_heurlens(frame.f_code.co_filename):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, category, stacklevel=level + 1)
