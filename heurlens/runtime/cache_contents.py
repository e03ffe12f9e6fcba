"""What heurlens' cache folder holds, its size cap, and clearing it (``heurlens cache``).

The cache root (``heurlens.runtime.cache.cache_dir``) has one folder per kind. Entries of the *computed* kinds
(``COMPUTED_KINDS``: activations and logits of full models, unit means, tokenised evaluation sets, mean-pooled
images) are recomputed whenever they are missing, so they live under a size cap: before one is written, the least
recently used ones are evicted until it fits (an entry larger than the cap is not stored at all). Reading an entry
marks it used (its modification time). Models, downloads and datasets are never evicted (rebuilding one can take hours or a
network); ``heurlens cache clear`` removes them on request.
"""

from __future__ import annotations

import math
import os
import shutil
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from heurlens.errors import HeurlensError

LIMIT_ENV_VAR = "HEURLENS_CACHE_LIMIT_GB"
DEFAULT_LIMIT_GB = 4.0
# full-logits: the layout before 2026-11-25
COMPUTED_KINDS = ("activations", "means", "eval_sets", "mean_pooled", "full-logits")
# every folder heurlens writes under the cache root; anything else there is another program's or the user's
HEURLENS_KINDS = (*COMPUTED_KINDS, "models", "downloads", "data", "hf-datasets")


@dataclass(frozen=True)
class CacheEntry:
    """One thing in the cache: a file of a computed kind, or a folder (or file) under any other kind."""

    kind: str
    name: str  # the path below the kind's folder
    model: str  # the fingerprint of the model a computed entry belongs to (the start of its name); "" for others
    size: int  # bytes
    last_use: float  # seconds since the epoch

    @property
    def evictable(self) -> bool:
        return self.kind in COMPUTED_KINDS


def cache_limit() -> int:
    """The cap on the computed entries, in bytes: ``$HEURLENS_CACHE_LIMIT_GB`` GiB (0: store none), default 4."""
    text = os.environ.get(LIMIT_ENV_VAR, "").strip()
    if not text:
        return int(DEFAULT_LIMIT_GB * 2**30)
    try:
        gigabytes = float(text)
    except ValueError:
        gigabytes = math.nan
    if not math.isfinite(gigabytes) or gigabytes < 0:
        raise HeurlensError(f"${LIMIT_ENV_VAR}={text!r} is not a size: give GiB as a number >= 0 (for example 4, "
                            "or 0.5; 0 stores no computed entries)")
    return int(gigabytes * 2**30)


def entries(root: Path, kinds: Iterable[str] | None = None) -> list[CacheEntry]:
    """What heurlens wrote in the cache at ``root`` (only ``kinds``, when given): each file of a computed kind, each
    top-level item of other kinds, as ``written_by_heurlens`` tells them from a user's files placed there."""
    found = []
    for kind_dir in kind_folders(root):
        if kinds is not None and kind_dir.name not in kinds:
            continue
        if kind_dir.name in COMPUTED_KINDS:
            paths = sorted(kind_dir.rglob("*.safetensors"))
        else:
            paths = sorted(kind_dir.iterdir())
        found += [_entry(kind_dir.name, kind_dir, path) for path in paths
                  if written_by_heurlens(kind_dir.name, kind_dir, path)]
    return [entry for entry in found if entry is not None]


def written_by_heurlens(kind: str, kind_dir: Path, path: Path) -> bool:
    """Whether ``path`` in the kind folder ``kind_dir`` is what heurlens writes there: a computed entry's name
    starts with its model's fingerprint (16 hexadecimal digits and "-"), a model or data set is a folder, a download
    a release file (a wheel or an sdist), and the Hugging Face datasets cache is all ``datasets``'. Anything
    else (a user's notes in ``models/``) is listed as not heurlens' and never removed."""
    if kind in COMPUTED_KINDS:
        first = path.relative_to(kind_dir).parts[0]
        return len(first) > 17 and first[16] == "-" and _hexadecimal(first[:16])
    if kind in ("models", "data"):
        return path.is_dir()
    if kind == "downloads":  # the PyPI release files heurlens fetches (runtime.assets): wheels and sdists
        return path.is_file() and path.name.endswith((".whl", ".tar.gz"))
    return True


def _hexadecimal(text: str) -> bool:
    """Whether ``text`` is a (start of a) model fingerprint: one or more lower-case hexadecimal digits."""
    return bool(text) and all(c in "0123456789abcdef" for c in text)


def strangers_in_kinds(root: Path) -> list[Path]:
    """What sits inside heurlens' kind folders that heurlens did not write there (``written_by_heurlens``)."""
    found = []
    for kind_dir in kind_folders(root):
        paths = kind_dir.iterdir() if kind_dir.name not in COMPUTED_KINDS else kind_dir.rglob("*")
        found += [path for path in sorted(paths) if (path.is_file() or kind_dir.name not in COMPUTED_KINDS)
                  and not path.name.startswith(".") and not written_by_heurlens(kind_dir.name, kind_dir, path)]
    return found


def kind_folders(root: Path) -> list[Path]:
    """The cache's kind folders that heurlens writes (activations, means, models...), by name."""
    return sorted(p for p in root.iterdir() if p.is_dir() and p.name in HEURLENS_KINDS) if root.is_dir() else []


def foreign(root: Path) -> list[Path]:
    """What sits in the cache that heurlens did not write (``$HEURLENS_CACHE`` pointed at a shared folder such as
    ~/.cache; a user's file put inside one of heurlens' folders): listed by ``heurlens cache list``, never removed."""
    outside = sorted(p for p in root.iterdir() if p.name not in HEURLENS_KINDS) if root.is_dir() else []
    return outside + strangers_in_kinds(root)


def _entry(kind: str, kind_dir: Path, path: Path) -> CacheEntry | None:
    """The entry at ``path`` (None when it vanished meanwhile: another process evicted or cleared it)."""
    try:
        files = [path] if path.is_file() else [f for f in path.rglob("*") if f.is_file()]
        stats = [f.stat() for f in files]
        last_use = max((s.st_mtime for s in stats), default=path.stat().st_mtime)
    except FileNotFoundError:
        return None
    name = str(path.relative_to(kind_dir))
    model = name.split("-")[0] if kind in COMPUTED_KINDS else ""
    return CacheEntry(kind, name, model, sum(s.st_size for s in stats), last_use)


def make_room(root: Path, path: Path, size: int) -> bool:
    """Evict least recently used computed entries under ``root`` until ``size`` more bytes at ``path`` (which
    replaces what is there) stay within ``cache_limit()``; False, evicting nothing, when ``size`` alone exceeds it."""
    limit = cache_limit()
    if size > limit:
        return False
    computed = entries(root, COMPUTED_KINDS)  # not the models' folders: this runs before every computed write
    target = path.resolve()
    others = [e for e in computed if (root / e.kind / e.name).resolve() != target]
    used = sum(e.size for e in others)
    for entry in sorted(others, key=lambda e: e.last_use):
        if used + size <= limit:
            break
        (root / entry.kind / entry.name).unlink(missing_ok=True)
        used -= entry.size
    return True


def mark_used(path: Path) -> None:
    """Record that a cache entry was just read (its modification time), for least-recently-used eviction."""
    try:
        os.utime(path)
    except OSError:
        pass  # a read-only cache: it still works, only the eviction order ignores this read


def clear(root: Path, kinds: Iterable[str] = COMPUTED_KINDS, models: Iterable[str] = (),
          unused_days: float | None = None) -> list[CacheEntry]:
    """Remove the entries of ``kinds`` (by default the computed ones: models, downloads and datasets only when
    named) whose model fingerprint starts with one of ``models`` (any entry when none is given; only computed
    entries have one) and, with ``unused_days``, that were last used more than that many days ago; returns them.
    An empty or non-hexadecimal fingerprint prefix is refused: an empty one would match every entry."""
    kinds, models = set(kinds), tuple(model.strip().lower() for model in models)
    if unused_days is not None and not (math.isfinite(unused_days) and unused_days >= 0):
        raise HeurlensError(f"unused_days={unused_days!r}: give a number of days >= 0 (or None for any age)")
    strangers = sorted(kinds - set(HEURLENS_KINDS))
    if strangers:
        raise HeurlensError(f"{', '.join(strangers)}: not a kind heurlens writes ({', '.join(HEURLENS_KINDS)}); "
                            "heurlens never removes what it did not write")
    for prefix in models:
        if not _hexadecimal(prefix):
            raise HeurlensError(f"{prefix!r} is not a model fingerprint: give the fingerprint, or its start, as "
                                "`heurlens cache list` shows it (hexadecimal digits, e.g. --model 3fa2)")
    cutoff = None if unused_days is None else time.time() - unused_days * 86400
    removed = []
    for entry in entries(root):
        if (entry.kind not in kinds or (models and not (entry.model and entry.model.startswith(models)))
                or (cutoff is not None and entry.last_use > cutoff)):
            continue
        path = root / entry.kind / entry.name
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
        removed.append(entry)
    for kind_dir in {root / entry.kind for entry in removed if entry.kind in COMPUTED_KINDS}:
        for folder in sorted((p for p in kind_dir.rglob("*") if p.is_dir()), reverse=True):
            if not any(folder.iterdir()):
                folder.rmdir()  # the emptied folders of an activation entry
    return removed
