"""What the before/now benchmarks share: the heurlens source of an earlier git revision, and a measurement run as
a script in a fresh Python process against either source."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


@contextmanager
def heurlens_source(revision: str) -> Iterator[Path]:
    """A temporary folder holding ``heurlens/`` as it was at git ``revision``: a process started there (cwd) imports
    that heurlens instead of this checkout's (the current folder comes first on ``sys.path``)."""
    with tempfile.TemporaryDirectory() as folder:
        archive = subprocess.run(["git", "archive", revision, "heurlens"], cwd=REPO, capture_output=True, check=True)
        subprocess.run(["tar", "-x", "-C", folder], input=archive.stdout, check=True)
        yield Path(folder)


def measured_in(source: Path, script: str, args: list[str], env: dict[str, str]) -> dict:
    """The JSON object the last line of ``python -c script args`` prints, run in ``source`` with only ``env`` (and
    PATH, HOME) set; the benchmark stops with the script's error when it fails."""
    result = subprocess.run([sys.executable, "-c", script, *args], cwd=source, capture_output=True, text=True,
                            env={"PATH": "/usr/bin:/bin", "HOME": str(Path.home()), **env})
    if result.returncode != 0:
        sys.exit(f"the measurement failed in {source}:\n{result.stderr[-3000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def measured_in_fresh_cache(source: Path, script: str, args: list[str]) -> dict:
    """``measured_in`` with heurlens' cache in a new temporary folder ($HEURLENS_CACHE), removed afterwards: what the
    script's calls compute and store is its own, and the bytes it leaves there can be counted."""
    with tempfile.TemporaryDirectory() as cache:
        return measured_in(source, script, args, {"HEURLENS_CACHE": cache})
