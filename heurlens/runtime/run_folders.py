"""Where heurlens may write: the one place that decides whether an output path can be used, and ``RunFolder``,
the one way a run folder says what it holds.

Rules, checked before any work is done:
- a path that must be a directory but is a file, or that cannot be created or written, is refused;
- a non-empty directory is written into only if heurlens made it: it holds one of the marker files
  that heurlens writes into its run folders (``markers``). Anything else there is the user's, and
  heurlens refuses rather than mixing its files in or deleting anything;
- one process at a time writes into a run folder (``exclusive``);
- a run folder records its run's settings in ``settings.json`` and refuses a run with other ones
  (``RunFolder``).
"""

from __future__ import annotations

import fcntl
import json
import os
import tempfile
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from heurlens.errors import HeurlensError
from heurlens.runtime.cache import atomic_write_json, stored


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
    """Refuse a non-empty ``path`` that holds none of heurlens' ``markers`` (file names or glob patterns). A folder
    holding only heurlens' lock (a refused run's) is empty; a lock beside other files marks nothing: only what a run
    writes does."""
    path = Path(path)
    if not path.is_dir() or all(entry.name == LOCK_FILE for entry in path.iterdir()):
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


SETTINGS_FILE = "settings.json"
T = TypeVar("T")


@dataclass(frozen=True)
class RunFolder:
    """A folder one kind of heurlens run writes into (a prune, a transfer sweep, a shape-bias run, an
    effective-size search, a fine-tuning, an analysis), and the one way to use it:

    - ``opened()``: the folder check before any work (``refuse_foreign_dir``: ``markers`` are the files, or glob
      patterns, that show a non-empty folder is one of heurlens'; then ``check_writable_dir``);
    - ``writing()``: its lock (``exclusive``), held while the run writes;
    - ``settings.json``: ``record_settings`` refuses a run with other settings, ``settings`` reads them back;
    - ``stored(name, ...)``: one resumable stage (``heurlens.runtime.cache.stored``): finished stages are read back,
      the others computed and written atomically; ``finished(name)`` / ``result(name, compute)`` for a stage
      kept as JSON, so a run cut short says which of its parts are done;
    - ``write_results_page``: the page that reports the folder, written atomically, keeping its hand-written
      reading (``heurlens.runtime.results_page``).
    """

    path: Path
    kind: str
    markers: tuple[str, ...] = (SETTINGS_FILE,)

    @property
    def what(self) -> str:
        """How messages name the folder: ``the sweep folder``."""
        return f"the {self.kind} folder"

    def opened(self) -> RunFolder:
        """The folder, checked before any work: refused when it holds files heurlens did not make there or
        cannot be written; created when missing."""
        refuse_foreign_dir(Path(self.path), self.markers, self.what)
        check_writable_dir(Path(self.path), self.what)
        return self

    def writing(self, wait: bool = False) -> AbstractContextManager[None]:
        """Hold the folder's lock (``exclusive``): a second process writing here is refused, or waits (``wait``)."""
        return exclusive(Path(self.path), self.what, wait)

    def stored(self, name: str, compute: Callable[[], T], save: Callable[[T], object], load: Callable[[], T]) -> T:
        """The stage kept in the file ``name`` of the folder: read back when finished, else computed and saved."""
        return stored(Path(self.path) / name, compute, save, load)

    def finished(self, name: str) -> bool:
        """Whether the stage kept in ``name`` was written (a stage is written whole or not at all)."""
        return (Path(self.path) / name).exists()

    def result(self, name: str, compute: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        """A stage whose result is a JSON object (one run of an analysis), stored in ``name``."""
        path = Path(self.path) / name
        return self.stored(name, compute, partial(atomic_write_json, path), lambda: json.loads(path.read_text()))

    def write_results_page(self, page: Path, generated: str) -> None:
        """Write the page that reports this folder (``generated``), keeping what a person wrote at its end."""
        from heurlens.runtime.results_page import write_results_page

        write_results_page(Path(page), generated)

    def has_settings(self) -> bool:
        """Whether a run recorded its settings here."""
        return self.finished(SETTINGS_FILE)

    def settings(self, missing: str = "") -> dict[str, Any]:
        """The settings the run recorded; refused by name when there are none (``missing``: what to do then)
        or they cannot be read."""
        path = Path(self.path) / SETTINGS_FILE
        try:
            settings = json.loads(path.read_text())
        except FileNotFoundError as error:
            raise HeurlensError(f"{self.path} holds no {self.kind} (no {SETTINGS_FILE})"
                                + (f"; {missing}" if missing else "")) from error
        except (OSError, ValueError) as error:
            raise HeurlensError(f"{path} cannot be read ({type(error).__name__}); it records the settings of the "
                                f"{self.kind} in {self.path}: restore it, or run it again with the same options") from error
        if not isinstance(settings, dict):
            raise HeurlensError(f"{path} does not hold the settings of a {self.kind}: restore it, or use another folder")
        return settings

    def record_settings(self, settings: dict[str, Any], may_grow: Iterable[str] = ()) -> None:
        """Record ``settings``, refusing a folder that holds a run with other settings; the keys in ``may_grow``
        (more seeds, conditions...) may differ, so a run can be resumed with more of them, and the file keeps
        what earlier calls asked for too (``grown``): a call for fewer of them does not drop the others from the
        folder's plan. Nothing is overwritten when it refuses."""
        folder = Path(self.opened().path)
        previous = self.settings() if self.has_settings() else None
        if previous is None:
            made = sorted(entry.name for entry in folder.iterdir() if entry.name not in (LOCK_FILE, SETTINGS_FILE))
            if made:
                raise HeurlensError(f"{folder} holds a {self.kind}'s files ({', '.join(made[:3])}"
                                    f"{', ...' if len(made) > 3 else ''}) but no {SETTINGS_FILE}: the settings they "
                                    "were made with are unknown, so they cannot be resumed or reused; nothing was "
                                    f"changed. Restore {SETTINGS_FILE}, or use another out=")
        else:
            changed = sorted(k for k in previous.keys() | settings.keys()
                             if previous.get(k) != settings.get(k) and k not in set(may_grow))
            if changed:
                raise HeurlensError(f"{folder} holds a {self.kind} with other settings ({', '.join(changed)}); nothing "
                                    "was overwritten. Use another out=, or the same settings to resume")
            settings = {**settings, **{k: grown(previous[k], settings[k]) for k in may_grow
                                       if k in previous and k in settings}}
        if previous != settings:
            atomic_write_json(folder / SETTINGS_FILE, settings)


def grown(previous: Any, asked: Any) -> Any:
    """A may-grow setting after one more call: a list keeps its earlier entries and adds the new ones in
    the order asked (``[1000, 10]`` then ``[10000]``: ``[1000, 10, 10000]``), a count the larger one."""
    if isinstance(previous, list) and isinstance(asked, list | tuple):
        return previous + [x for x in asked if x not in previous]
    if isinstance(previous, int) and isinstance(asked, int):
        return max(previous, asked)
    return asked
