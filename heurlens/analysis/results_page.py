"""A results page written by a script that keeps what a person wrote at its end.

A script under ``analyses/`` rewrites its page in ``docs/results`` from the run folders each time it is called;
a reading of the tables written by hand goes after a line starting with ``HAND_WRITTEN`` and survives every
rewrite, so a report of a run still going never erases it.
"""

from __future__ import annotations

from pathlib import Path

from heurlens.cache import atomic_write_bytes

HAND_WRITTEN = "<!-- Written by hand from here on"


def hand_written_part(page: Path) -> str:
    """The end of an existing ``page`` from its line starting with ``HAND_WRITTEN`` on, or ``""``."""
    text = page.read_text() if page.exists() else ""
    start = text.find("\n" + HAND_WRITTEN)
    if start >= 0:
        return text[start + 1:]
    return text if text.startswith(HAND_WRITTEN) else ""


def write_results_page(page: Path, generated: str) -> None:
    """Write ``generated`` to ``page`` (atomically), followed by the page's hand-written end if it has one."""
    kept = hand_written_part(page)
    text = generated.rstrip("\n") + "\n\n" + kept if kept else generated
    atomic_write_bytes(page, text.encode())
