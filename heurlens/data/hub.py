"""Loaders for the real MNLI, HANS, QQP and PAWS through HF ``datasets``, for users who can reach them.

Each returns a Dataset with columns premise, hypothesis, label (a ClassLabel) and, for HANS, the
subcase, so it drops into the same evaluation code as the offline SNLI and HANS-style data. The
source is either a hub name (default) or local files (``data_files=``, any format ``datasets``
reads: csv, json, parquet). When neither is reachable the error says how to fix it.
"""

from __future__ import annotations

from dataclasses import dataclass

import datasets

from heurlens.data.files import read_local_table
from heurlens.data.hans import HANS_LABELS
from heurlens.data.snli import NLI_LABELS
from heurlens.errors import HeurlensError


@dataclass(frozen=True)
class HubTask:
    hub_name: str
    hub_config: str | None
    premise: str  # column of the first sentence
    hypothesis: str  # column of the second sentence
    labels: tuple[str, ...]


HUB_TASKS = {
    "mnli": HubTask("nyu-mll/glue", "mnli", "premise", "hypothesis", NLI_LABELS),
    "hans": HubTask("jhu-cogsci/hans", None, "premise", "hypothesis", HANS_LABELS),
    "qqp": HubTask("nyu-mll/glue", "qqp", "question1", "question2", ("not_duplicate", "duplicate")),
    "paws": HubTask("google-research-datasets/paws", "labeled_final", "sentence1", "sentence2",
                    ("not_paraphrase", "paraphrase")),
}


def load_pair_task(task: str, split: str, data_files: str | list[str] | None = None) -> datasets.Dataset:
    """MNLI / HANS / QQP / PAWS pairs from the hub or from local ``data_files``.

    Local files need the task's own column names (e.g. premise, hypothesis, label for MNLI).

    Args:
        task: "mnli", "hans", "qqp" or "paws".
        split: the split.
        data_files: local files in the task's format instead of the hub.

    Returns:
        A Dataset of the task's pairs.
    """
    if task not in HUB_TASKS:
        raise HeurlensError(f"unknown task {task!r}; use one of {', '.join(HUB_TASKS)}")
    spec = HUB_TASKS[task]
    try:
        if data_files is not None:
            raw = read_local_table(data_files)
        else:
            raw = datasets.load_dataset(spec.hub_name, spec.hub_config, split=split)
    except HeurlensError:
        raise
    except Exception as error:  # datasets raises many types for "not reachable"
        where = data_files if data_files is not None else f"the hub ({spec.hub_name})"
        raise HeurlensError(
            f"could not load {task} from {where}: {type(error).__name__}. Fix: pass local files with "
            f"data_files=... (columns {spec.premise}, {spec.hypothesis}, label), or use the offline data: "
            f"SNLI (heurlens.load_snli) and the HANS-style generator (heurlens.generate_hans)") from error
    missing = {spec.premise, spec.hypothesis, "label"} - set(raw.column_names)
    if missing:
        raise HeurlensError(f"{task} data lacks column(s) {', '.join(sorted(missing))}; found {raw.column_names}")
    raw = raw.filter(lambda row: row["label"] is not None and 0 <= int(row["label"]) < len(spec.labels))
    keep = ["subcase"] if "subcase" in raw.column_names else []
    features = datasets.Features({"premise": datasets.Value("string"), "hypothesis": datasets.Value("string"),
                                  "label": datasets.ClassLabel(names=list(spec.labels)),
                                  **{k: datasets.Value("string") for k in keep}})
    return raw.map(
        lambda row: {"premise": row[spec.premise], "hypothesis": row[spec.hypothesis], "label": int(row["label"]),
                     **{k: row[k] for k in keep}},
        remove_columns=raw.column_names, features=features)
