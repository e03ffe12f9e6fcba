"""Tokenised evaluation sets read back from heurlens' cache: the very tokens built before, rebuilt when what
made them changed or the entry is damaged, never stored with the disk cache off."""

import pytest
import torch

import heurlens.data.nli_setup
from heurlens.data.nli_setup import nli_eval_sets
from heurlens.data.tokenised_sets import KIND, content_key
from heurlens.models import load_model
from heurlens.runtime.cache import disk_cache


@pytest.fixture
def builds(monkeypatch, tmp_path):
    """Each test its own cache; counts how often the sets are really built (drawn and tokenised)."""
    monkeypatch.setenv("HEURLENS_CACHE", str(tmp_path / "cache"))
    calls = []
    build = heurlens.data.nli_setup.nli_eval_sets_for

    def counted(*args, **kwargs):
        calls.append(args)
        return build(*args, **kwargs)

    monkeypatch.setattr(heurlens.data.nli_setup, "nli_eval_sets_for", counted)
    return calls


def same_sets(a, b) -> bool:
    return ([(s.name, s.label_names) for s in a] == [(s.name, s.label_names) for s in b]
            and all(torch.equal(x.labels, y.labels) for x, y in zip(a, b))
            and all(x.keys() == y.keys() and all(torch.equal(x[k], y[k]) for k in x)
                    for s, t in zip(a, b) for x, y in zip(s.batches, t.batches)))


def sets_of(model, data, **choices):
    return nli_eval_sets(model, data, per_subcase=5, subcases=["SO-Swap", "sn_NP/Z"], batch_size=2, **choices)


def test_sets_are_built_once_then_read_back_the_same(tiny_bert_dir, pairs_file, builds, tmp_path):
    model = load_model(tiny_bert_dir)
    first = sets_of(model, pairs_file)
    again = sets_of(model, pairs_file)
    assert len(builds) == 1
    assert same_sets(first, again)
    assert [s.name for s in again] == ["pairs.jsonl", "hans/ln_subject/object_swap", "hans/sn_NP/Z"]
    assert [len(s) for s in again] == [3, 5, 5] and len(again[1].batches) == 3  # batches of 2, the last of 1
    assert len(list((tmp_path / "cache" / KIND).iterdir())) == 1
    sets_of(model, pairs_file, seed=1)  # other pairs drawn: another entry
    assert len(builds) == 2


def test_an_edited_pair_file_or_damaged_entry_is_built_again(tiny_bert_dir, pairs_file, builds, tmp_path):
    model = load_model(tiny_bert_dir)
    sets_of(model, pairs_file)
    [entry] = (tmp_path / "cache" / KIND).iterdir()
    entry.write_bytes(entry.read_bytes()[:100])  # cut short
    rebuilt = sets_of(model, pairs_file)
    assert len(builds) == 2 and len(rebuilt[0]) == 3
    edited = tmp_path / "pairs.jsonl"
    edited.write_text(pairs_file.read_text().splitlines()[0] + "\n")  # one pair left
    assert len(sets_of(model, edited)[0]) == 1 and len(builds) == 3


def test_content_key_follows_the_bytes_of_its_files(tmp_path):
    template = tmp_path / "templates.py"
    template.write_text("PREMISE = 'The {noun} saw the {other}.'\n")
    before = content_key(["a", "b"], [template])
    assert content_key(["a", "b"], [template]) == before
    assert content_key(["ab"], [template]) != before  # the parts are kept apart
    template.write_text("PREMISE = 'The {noun} met the {other}.'\n")
    assert content_key(["a", "b"], [template]) != before


def test_nothing_is_stored_with_the_disk_cache_off(tiny_bert_dir, pairs_file, builds, tmp_path):
    model = load_model(tiny_bert_dir)
    with disk_cache(False):
        sets_of(model, pairs_file)
        sets_of(model, pairs_file)
    assert len(builds) == 2
    assert not (tmp_path / "cache" / KIND).exists()
