"""Tokenised evaluation sets kept in heurlens' cache, so a command builds its data once, not on every run.

The NLI evaluation (SNLI test pairs and 30 HANS-style subcases, ``heurlens.data.nli_setup``) takes about 1.5 s to draw and
tokenise on a 2-core CPU, as long as the default ablation's own model loading; read back from one safetensors
file it takes a few milliseconds. An entry is named by everything its tokens depend on: the model's fingerprint
(its tokenizer's vocabulary is part of it), the choice of data (names, counts, seed, batch size), and the bytes of
the code and data files that make the pairs (the HANS-style generator's templates, a local pair file). So an
edited template or pair file gives a new entry instead of stale tokens. Entries are a computed kind
(``heurlens.runtime.cache_contents``): evicted least recently used first, rebuilt when missing or damaged.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable
from pathlib import Path

from safetensors import safe_open

from heurlens.errors import HeurlensError
from heurlens.evaluate import EvalSet
from heurlens.runtime.cache import atomic_save_tensors, cache_dir, disk_cache_enabled, stored

KIND = "eval_sets"


def content_key(parts: Iterable[str], files: Iterable[Path]) -> str:
    """sha256 (16 hex digits) of ``parts`` (the choices that make the data) and of the bytes of ``files``."""
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part.encode() + b"\0")
    for file in files:
        digest.update(Path(file).read_bytes())
    return digest.hexdigest()[:16]


def cached_eval_sets(model_fingerprint: str, key: str, build: Callable[[], list[EvalSet]]) -> list[EvalSet]:
    """``build()``, or the sets it built before for this model and ``key`` (``content_key``), read back from
    the cache; nothing is read or written when the disk cache is off (``heurlens.disk_cache``)."""
    if not disk_cache_enabled():
        return build()
    path = cache_dir() / KIND / f"{model_fingerprint}-{key}.safetensors"
    return stored(path, build, lambda sets: save_eval_sets(path, sets), lambda: load_eval_sets(path))


def save_eval_sets(path: Path, sets: list[EvalSet]) -> bool:
    """Every batch's tensors and every set's labels in one safetensors file; names and label names in its
    metadata."""
    tensors = {}
    about = []
    for s, eval_set in enumerate(sets):
        tensors[f"{s}.labels"] = eval_set.labels
        for b, batch in enumerate(eval_set.batches):
            tensors.update({f"{s}.{b}.{key}": value for key, value in batch.items()})
        about.append({"name": eval_set.name, "label_names": list(eval_set.label_names),
                      "batches": [sorted(batch) for batch in eval_set.batches]})
    return atomic_save_tensors(path, tensors, {"sets": json.dumps(about)})


def load_eval_sets(path: Path) -> list[EvalSet]:
    """What ``save_eval_sets`` wrote (a file missing a tensor raises HeurlensError: computed again)."""
    with safe_open(str(path), "pt") as handle:
        metadata = handle.metadata() or {}
        if "sets" not in metadata:
            raise HeurlensError(f"{path} has no list of sets: not written by heurlens, computed again")
        names = set(handle.keys())

        def tensor(name: str):
            if name not in names:
                raise HeurlensError(f"{path} lacks {name}: damaged, computed again")
            return handle.get_tensor(name)

        return [EvalSet(about["name"], [{key: tensor(f"{s}.{b}.{key}") for key in keys}
                                        for b, keys in enumerate(about["batches"])],
                        tensor(f"{s}.labels"), tuple(about["label_names"]))
                for s, about in enumerate(json.loads(metadata["sets"]))]
