"""Where heurlens keeps what it downloads or trains, and how it writes there safely."""

from __future__ import annotations

import errno
import json
import os
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any, BinaryIO, TypeVar

from safetensors import SafetensorError

from heurlens.errors import HeurlensError
from heurlens.runtime.cache_contents import COMPUTED_KINDS, make_room, mark_used

CACHE_ENV_VAR = "HEURLENS_CACHE"
# what reading back a damaged file of heurlens' own raises: such an entry is computed again, never trusted
UNREADABLE = (HeurlensError, OSError, ValueError, SafetensorError)
T = TypeVar("T")


_DISK_CACHE: ContextVar[bool] = ContextVar("heurlens_disk_cache", default=True)


@contextmanager
def disk_cache(enabled: bool | None = True) -> Iterator[None]:
    """Inside the block heurlens reads and writes its computed cache entries (the full model's logits and residual
    streams, the NLI reference means) when ``enabled``, and neither when not: everything is computed in memory and
    nothing is written under the cache folder. None leaves the surrounding setting as it is. The library's
    ``cache=`` arguments set it for one call (their default None: as around the call, True unless set).

    Args:
        enabled: True: read and write the cache; False: neither; None: as around the block.

    Returns:
        A context manager."""
    if enabled is None:
        yield
        return
    token = _DISK_CACHE.set(enabled)
    try:
        yield
    finally:
        _DISK_CACHE.reset(token)


def disk_cache_enabled() -> bool:
    """Whether the computed cache entries are read and written here (``disk_cache``; default True)."""
    return _DISK_CACHE.get()


def cache_dir() -> Path:
    """The cache root: ``$HEURLENS_CACHE``, else ``$XDG_CACHE_HOME/heurlens``, else ``~/.cache/heurlens``."""
    if os.environ.get(CACHE_ENV_VAR):
        root = Path(os.environ[CACHE_ENV_VAR])
    else:
        root = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "heurlens"
    try:
        root.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError) as error:
        raise HeurlensError(f"the heurlens cache {root} is a file, not a folder; point ${CACHE_ENV_VAR} at a "
                            "folder (or unset it)") from error
    except OSError as error:
        raise HeurlensError(f"the heurlens cache {root} cannot be created ({error.strerror}); point "
                            f"${CACHE_ENV_VAR} at a folder you can write to") from error
    return root


def atomic_write_bytes(path: Path, data: bytes) -> bool:
    """Write ``data`` to ``path`` so that a reader sees the old file or the new one, never half of one. A folder
    that cannot be written (read-only, immutable, another user's) is refused naming it. A computed cache entry
    is written within the cache's size cap (``heurlens.runtime.cache_contents``): least recently used entries make room,
    and one larger than the cap is not written (False; True when written)."""
    root = cache_root_of(path)
    if root is not None and _kind_in(root, path) in COMPUTED_KINDS and not make_room(root, path, len(data)):
        return False
    with atomic_file(path) as handle:
        handle.write(data)
    return True


@contextmanager
def atomic_file(path: Path) -> Iterator[BinaryIO]:
    """A binary file to write that replaces ``path`` whole when the block ends (a temporary file of this call's own
    until then, removed on an error): a reader, or another process writing the same path at once, never sees half of
    one. A folder that cannot be written is refused naming it."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as error:
        if error.errno not in UNWRITABLE:
            raise
        raise unwritable_error(path, error) from error
    try:
        with os.fdopen(fd, "wb") as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes the file private; give it the usual permissions
        os.replace(tmp, path)
    except OSError as error:
        Path(tmp).unlink(missing_ok=True)
        if error.errno in FULL:
            raise full_disk_error(path, error) from error
        raise
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


UNWRITABLE = (errno.EACCES, errno.EPERM, errno.EROFS)  # what the operating system says of a read-only folder
FULL = (errno.ENOSPC, errno.EFBIG, errno.EDQUOT)  # a full disk, a file-size limit (ulimit -f), a full quota


def full_disk_error(path: Path, error: OSError) -> HeurlensError:
    """A write of ``path`` cut short by a full disk, quota or file-size limit, as one line with the fix (the file it
    would have replaced is left as it was)."""
    return HeurlensError(f"cannot write {path} ({error.strerror}): the disk, your quota or the file-size limit (ulimit "
                         f"-f) is full; {path.name} was left as it was. Free some space"
                         + (f" (heurlens cache clear, or ${CACHE_ENV_VAR} on a larger disk)" if cache_root_of(path)
                            is not None else "") + " and run the same command again")


def unwritable_error(path: Path, error: OSError) -> HeurlensError:
    """A write under ``path`` that the operating system refused (``UNWRITABLE``: a read-only, immutable or another
    user's folder), as one line with the fix: in heurlens' cache, point $HEURLENS_CACHE elsewhere."""
    return HeurlensError(f"cannot write {path} ({error.strerror}): its folder is read-only; "
                         + (f"point ${CACHE_ENV_VAR} at a folder you can write to" if cache_root_of(path) is not None
                            else "choose a folder you can write to"))


def _kind_in(root: Path, path: Path) -> str:
    """The kind folder of the cache at ``root`` that ``path`` lies in (its first component below the root)."""
    parts = Path(path).resolve().relative_to(root.resolve()).parts
    return parts[0] if parts else ""


def cache_root_of(path: Path) -> Path | None:
    """The heurlens cache folder that ``path`` lies in, or None when it lies outside it."""
    root = Path(os.environ[CACHE_ENV_VAR]) if os.environ.get(CACHE_ENV_VAR) else (
        Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "heurlens")
    try:
        Path(path).resolve().relative_to(root.resolve())
        return root
    except ValueError:
        return None


def atomic_save_tensors(path: Path, tensors: dict, metadata: dict[str, str] | None = None) -> bool:
    """``atomic_write_bytes`` for a safetensors file of ``tensors`` (from the CPU, made contiguous)."""
    from safetensors.torch import save

    return atomic_write_bytes(path, save({k: v.detach().cpu().contiguous() for k, v in tensors.items()}, metadata=metadata))


def atomic_write_csv(path: Path, table: Any) -> None:
    """A pandas table as CSV (no index), written atomically."""
    atomic_write_bytes(path, table.to_csv(index=False).encode())


def atomic_write_json(path: Path, obj: Any) -> None:
    """``atomic_write_bytes`` for a JSON document (indented, keys in insertion order)."""
    atomic_write_bytes(path, (json.dumps(obj, indent=2) + "\n").encode())


def stored(path: Path, compute: Callable[[], T], save: Callable[[T], object], load: Callable[[], T]) -> T:
    """One resumable stage of a run or one cache entry: what is stored at ``path`` (``load()``), or, when
    nothing is or it cannot be read back whole (``load`` raises HeurlensError, OSError, ValueError or a
    safetensors error: a damaged file of heurlens' own), ``compute()``, stored by ``save(result)`` (atomically) before it is
    returned. A run resumed after an interruption so redoes only the stages that never finished."""
    if path.exists():
        try:
            result = load()
        except UNREADABLE:
            pass  # computed again below
        else:
            if cache_root_of(path) is not None:
                mark_used(path)
            return result
    result = compute()
    save(result)
    return result
