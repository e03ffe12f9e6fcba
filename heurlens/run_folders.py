"""Where heurlens may write: the one place that decides whether an output path can be used.

Rules, checked before any work is done:
- a path that must be a directory but is a file, or that cannot be created or written, is refused;
- a non-empty directory is written into only if heurlens made it: it holds one of the marker files
  that heurlens writes into its run folders (``markers``). Anything else there is the user's, and
  heurlens refuses rather than mixing its files in or deleting anything;
- one process at a time writes into a run folder (``exclusive``).
"""

from __future__ import annotations

import fcntl
import os
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from heurlens.errors import HeurlensError


def check_writable_dir(path: Path, what: str) -> Path:
    """Create ``path`` (and its parents) if needed and prove it is a writable directory."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise HeurlensError(f"{what} {path} is a file, not a directory; give a directory path")
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=path):
            pass
    except OSError as error:
        raise HeurlensError(f"{what} {path} cannot be written ({error.strerror}); choose a directory you can "
                            "write to") from error
    return path


def check_writable_file(path: Path, what: str) -> Path:
    """Prove that the file ``path`` can be written (its folder is created if needed), before any work."""
    path = Path(path)
    if path.is_dir():
        raise HeurlensError(f"{what} {path} is a directory; give a file path")
    check_writable_dir(path.parent, f"the folder of {what}")
    if path.exists() and not os.access(path, os.W_OK):
        raise HeurlensError(f"{what} {path} is read-only; choose another file or make it writable")
    return path


def refuse_foreign_dir(path: Path, markers: Iterable[str], what: str) -> None:
    """Refuse a non-empty ``path`` that holds none of heurlens' ``markers`` (file names or glob patterns)."""
    path = Path(path)
    if not path.is_dir() or not any(path.iterdir()):
        return
    if any(next(path.glob(marker), None) is not None for marker in markers):
        return
    raise HeurlensError(f"{what} {path} is not empty and was not written by heurlens; nothing was changed. "
                        "Give a new or empty directory")


LOCK_FILE = ".heurlens.lock"
_HELD: dict[Path, int] = {}  # folders whose lock this process holds, and how many nested holds


@contextmanager
def exclusive(folder: Path, what: str, wait: bool = False) -> Iterator[None]:
    """Hold ``folder``'s lock while writing into it: a second heurlens process that tries to write into the
    same folder at the same time is refused at once instead of doing the same work twice (with ``wait``, it
    waits for the first to finish instead). The lock is an OS file lock, so a killed process never leaves it
    held. Re-entrant within a process: a command may take it before loading its model (so a second process is
    refused at once) and the library call inside takes it again without blocking itself."""
    key = Path(folder).resolve()
    if key in _HELD:
        _HELD[key] += 1
        try:
            yield
        finally:
            _HELD[key] -= 1
        return
    handle = open(Path(folder) / LOCK_FILE, "a")
    try:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError as error:
            raise HeurlensError(f"another heurlens process is writing to {what} {folder} now; wait for it to "
                                "finish (then run this again to pick up what it wrote), or use another folder") from error
        _HELD[key] = 1
        try:
            yield
        finally:
            del _HELD[key]
    finally:
        handle.close()
