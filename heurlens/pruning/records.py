"""Reading a stored circuit record by its kind: a unit subnetwork (``Subnetwork``) or an edge circuit
(``EdgeCircuit``), the way SAELens registers its architectures. ``RECORD_KINDS`` names, for each kind, the class
that reads it (``cls.from_record(record, tensors)``); the class is imported when a record of its kind is read, so
this module imports neither (and neither imports the other to be read). A record's kind is what it holds: a
record with ``edges`` is an edge circuit; every record written so far reads as before, its ablation "interchange"
(heurlens 0.1.0's name) as "corrupt", so a run of 0.1.0 resumes with ``PruneSettings(ablation="corrupt")``."""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import Any

from safetensors.torch import load_file

from heurlens.errors import HeurlensError

RECORD_KINDS = {"units": "heurlens.pruning.subnetwork:Subnetwork", "edges": "heurlens.pruning.circuit:EdgeCircuit"}


def register_record_kind(kind: str, reader: str) -> None:
    """Read records of ``kind`` with the class ``reader`` names (``"package.module:Class"``, which has a
    ``from_record(record, tensors)`` classmethod)."""
    RECORD_KINDS[kind] = reader


def kind_of(record: dict[str, Any]) -> str:
    """A record's kind: "edges" when it lists edges, else "units"."""
    return "edges" if "edges" in record else "units"


def load_record(path: Path) -> Any:
    """The circuit stored at ``stem.json`` (+ ``stem.safetensors``), read by the class of its kind (a ``Subnetwork``
    or a subclass); a file that
    cannot be read whole is refused with a HeurlensError naming it and how to train that seed again.

    Args:
        path: the record's ``.json`` file.

    Returns:
        The record, by its kind."""
    path = Path(path)
    stem = path.with_suffix("") if path.suffix in (".json", ".safetensors") else path
    repair = (f"delete {stem}.json and {stem}.safetensors, then run the heurlens prune command that made it "
              "again: it trains that seed afresh and keeps the others")
    try:
        record = json.loads(stem.with_suffix(".json").read_text())
        record.pop("pruned", None)
        if record.get("hyperparameters", {}).get("ablation") == "interchange":  # heurlens 0.1.0's name of "corrupt"
            record["hyperparameters"] = {**record["hyperparameters"], "ablation": "corrupt"}
        tensors_path = stem.with_suffix(".safetensors")
        tensors = load_file(str(tensors_path)) if tensors_path.exists() else None
        module, name = RECORD_KINDS[kind_of(record)].split(":")
        return getattr(importlib.import_module(module), name).from_record(record, tensors)
    except Exception as error:  # unreadable, truncated, or a JSON without the fields (e.g. {})
        raise HeurlensError(f"subnetwork {stem} cannot be read ({type(error).__name__}: "
                            f"{str(error).splitlines()[0][:120] if str(error) else ''}); {repair}") from error
