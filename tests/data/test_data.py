"""Offline data: real SNLI from its pinned archive, local pair files, and clear errors."""

import json

import pytest

from heurlens.data.files import load_pair_file
from heurlens.data.hub import load_pair_task
from heurlens.data.snli import NLI_LABELS, load_snli
from heurlens.errors import HeurlensError


def test_snli_test_set_drops_unlabelled_pairs():
    test = load_snli("test")
    assert len(test) == 9824  # 10,000 pairs minus 176 with gold label '-'
    assert test.features["label"].names == list(NLI_LABELS)
    assert set(test["label"]) == {0, 1, 2}
    first = test[0]
    assert first["premise"].startswith("This church choir sings to the masses")
    assert first["label"] == NLI_LABELS.index("neutral")


def test_snli_subset_is_seeded():
    a = load_snli("train", limit=100, seed=4)
    assert len(a) == 100 and a["premise"] == load_snli("train", limit=100, seed=4)["premise"]
    assert a["premise"] != load_snli("train", limit=100, seed=5)["premise"]
    with pytest.raises(HeurlensError, match="unknown SNLI split 'dev'"):
        load_snli("dev")


def test_pair_file_label_names_and_indices(tmp_path):
    path = tmp_path / "p.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in [
        {"premise": "a", "hypothesis": "b", "label": "contradiction", "extra": 1},
        {"premise": "c", "hypothesis": "d", "label": 0}]) + "\n")
    data = load_pair_file(path)
    assert data["label"] == [2, 0] and data.column_names == ["premise", "hypothesis", "label"]
    path.write_text(json.dumps({"premise": "a", "hypothesis": "b", "label": "maybe"}) + "\n")
    with pytest.raises(HeurlensError, match="label 'maybe' is not one of entailment, neutral, contradiction"):
        load_pair_file(path)
    text_file = path.rename(tmp_path / "x.txt")
    with pytest.raises(HeurlensError, match="use a .jsonl"):
        load_pair_file(text_file)


def test_real_task_loaders_read_local_files(tmp_path):
    path = tmp_path / "mnli.tsv"
    path.write_text("premise\thypothesis\tlabel\nA man sleeps.\tA person rests.\t0\nx\ty\t-1\n")
    data = load_pair_task("mnli", "validation_matched", data_files=str(path))
    assert len(data) == 1 and data.features["label"].names == list(NLI_LABELS)
    qqp = tmp_path / "qqp.csv"
    qqp.write_text("question1,question2,label\nWhy?,How?,0\n")
    assert load_pair_task("qqp", "validation", data_files=str(qqp)).features["label"].names[0] == "not_duplicate"


def test_real_task_unreachable_names_the_fix(monkeypatch):
    import datasets

    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)  # fail at once instead of retrying
    with pytest.raises(HeurlensError, match="could not load hans from the hub .*data_files="):
        load_pair_task("hans", "validation")
    with pytest.raises(HeurlensError, match="unknown task 'mnlii'"):
        load_pair_task("mnlii", "train")
