"""Premise/hypothesis/label pairs from a user's local file (.jsonl, .json, .csv, .tsv)."""

from __future__ import annotations

import json
from pathlib import Path

import datasets

from heurlens.data.snli import NLI_LABELS
from heurlens.errors import HeurlensError

_SUFFIXES = (".jsonl", ".json", ".csv", ".tsv")


def read_local_table(data_files: str | list[str]) -> datasets.Dataset:
    """Local table file(s) through HF ``datasets``, the reader chosen by the first file's suffix
    (.jsonl/.json -> json, .csv, .tsv -> csv with tabs, anything else by its own name, e.g. parquet)."""
    suffix = Path(data_files if isinstance(data_files, str) else data_files[0]).suffix.lstrip(".")
    builder = {"jsonl": "json", "tsv": "csv"}.get(suffix, suffix)
    extra = {"delimiter": "\t"} if suffix == "tsv" else {}
    return datasets.load_dataset(builder, data_files=data_files, split="train", **extra)


def read_jsonl_objects(path: Path, text: str, fields: str) -> list[dict]:
    """The JSON objects of a JSONL file's non-blank lines (``text``, its contents); a line that is not a JSON
    object is named with its number and the ``fields`` an object should hold."""
    rows = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as error:
            raise HeurlensError(f"{path}, line {number}: not a JSON object ({error.msg} at column {error.colno}); "
                                f"give one object per line with {fields}") from error
        if not isinstance(row, dict):
            raise HeurlensError(f"{path}, line {number}: a JSON {type(row).__name__}, not an object with {fields}")
        rows.append(row)
    return rows


def _check_rows(path: Path) -> None:
    """Name what is wrong with a file that holds no rows or cannot be parsed, by line, before ``datasets`` reads
    it (its own messages for these say only that no data was found or that generation failed)."""
    try:
        text = path.read_text()
    except UnicodeDecodeError as error:
        raise HeurlensError(f"{path} is not text (byte {error.start} is not UTF-8); give a .jsonl/.csv/.tsv file of "
                            "premise, hypothesis, label rows") from error
    if path.suffix in (".csv", ".tsv"):
        if len([line for line in text.splitlines() if line.strip()]) < 2:
            raise HeurlensError(f"data file {path} holds no rows under its header; give premise, hypothesis, label rows")
    elif path.suffix == ".jsonl" and not read_jsonl_objects(path, text, "premise, hypothesis, label"):
        raise HeurlensError(f"data file {path} holds no rows; give one JSON object per line with premise, "
                            "hypothesis, label")


def load_pair_file(path: str | Path, label_names: tuple[str, ...] = NLI_LABELS) -> datasets.Dataset:
    """Read pairs with columns premise, hypothesis, label (a label name or its index in ``label_names``).

    Args:
        path: a .jsonl, .json, .csv or .tsv file.
        label_names: the labels in order (a label may be given by name or by index).

    Returns:
        A Dataset of premise, hypothesis and label."""
    path = Path(path)
    if path.is_dir():
        raise HeurlensError(f"data file {path} is a folder; give a .jsonl/.csv/.tsv file with premise, hypothesis, label")
    if not path.is_file():
        raise HeurlensError(f"data file {path} does not exist; give a .jsonl/.csv/.tsv file with premise, hypothesis, label")
    if path.suffix not in _SUFFIXES:
        raise HeurlensError(f"cannot read {path}: use a .jsonl, .json, .csv or .tsv file")
    if path.stat().st_size == 0:
        raise HeurlensError(f"data file {path} is empty; give premise, hypothesis, label rows")
    _check_rows(path)
    try:
        raw = read_local_table(str(path))
    except Exception as error:
        first_line = (str(error).splitlines() or [""])[0][:200]
        raise HeurlensError(f"cannot read {path} ({type(error).__name__}: {first_line})") from error
    if len(raw) == 0:
        raise HeurlensError(f"data file {path} holds no rows; give premise, hypothesis, label rows")
    missing = {"premise", "hypothesis", "label"} - set(raw.column_names)
    if missing:
        raise HeurlensError(f"{path} lacks column(s) {', '.join(sorted(missing))}; found {', '.join(raw.column_names)}")

    def encode(row, index):
        for column in ("premise", "hypothesis"):
            if not isinstance(row[column], str):
                raise HeurlensError(f"{path}: row {index + 1} has no {column} text")
        label = row["label"]
        if label is None:
            raise HeurlensError(f"{path}: row {index + 1} has no label")
        if isinstance(label, bool) or not isinstance(label, (str, int, float)):  # True would read as 1
            raise HeurlensError(f"{path}: row {index + 1} has label {label!r}; a label is a name "
                                f"({', '.join(label_names)}) or a whole-number index")
        if isinstance(label, float):
            if not label.is_integer():
                raise HeurlensError(f"{path}: row {index + 1} has label {label}; a label is a name "
                                    f"({', '.join(label_names)}) or a whole-number index")
            label = int(label)
        if isinstance(label, str) and not label.isdigit():
            if label not in label_names:
                raise HeurlensError(f"{path}: label {label!r} is not one of {', '.join(label_names)}")
            return {"label": label_names.index(label)}
        if not 0 <= int(label) < len(label_names):
            raise HeurlensError(f"{path}: label {label} is out of range 0-{len(label_names) - 1}")
        return {"label": int(label)}

    features = datasets.Features({"premise": datasets.Value("string"), "hypothesis": datasets.Value("string"),
                                  "label": datasets.ClassLabel(names=list(label_names))})
    return raw.map(encode, with_indices=True, features=features, remove_columns=[c for c in raw.column_names
                                                               if c not in ("premise", "hypothesis", "label")])
