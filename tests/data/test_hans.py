import re

import pytest

from heurlens.data.hans import FOCUS_SUBCASES, HANS_LABELS, SUBCASES, generate_hans, resolve_subcases
from heurlens.errors import HeurlensError


def words(sentence: str) -> set[str]:
    return set(re.findall(r"[a-z]+", sentence.lower()))


@pytest.fixture(scope="module")
def hans():
    return generate_hans(200, seed=3)


def test_thirty_subcases_five_per_heuristic_and_label():
    assert len(SUBCASES) == 30
    for heuristic in ("lexical_overlap", "subsequence", "constituent"):
        for label in HANS_LABELS:
            assert sum(s.heuristic == heuristic and s.label == label for s in SUBCASES.values()) == 5
    assert set(FOCUS_SUBCASES.values()) <= set(SUBCASES)


def test_sizes_labels_and_distinct_pairs(hans):
    assert len(hans) == 30 * 200
    for name, case in SUBCASES.items():
        rows = hans.filter(lambda r, name=name: r["subcase"] == name)
        assert len(rows) == 200
        assert set(rows["label"]) == {HANS_LABELS.index(case.label)}
        assert set(rows["heuristic"]) == {case.heuristic}
        assert len(set(zip(rows["premise"], rows["hypothesis"]))) == 200


def test_every_hypothesis_word_is_in_its_premise(hans):
    """The defining property: all three heuristics would predict entailment for every pair."""
    for row in hans:
        assert words(row["hypothesis"]) <= words(row["premise"]), row


def test_subsequence_and_constituent_hypotheses_are_contiguous(hans):
    for row in hans:
        if row["heuristic"] in ("subsequence", "constituent"):
            hyp = row["hypothesis"].rstrip(".").lower()
            assert hyp in row["premise"].lower().replace(",", ""), row


def test_same_seed_same_data_other_seed_other_data():
    a = generate_hans(50, ["SO-Swap", "Embed-If"], seed=1)
    assert a["premise"] == generate_hans(50, ["SO-Swap", "Embed-If"], seed=1)["premise"]
    assert a["premise"] != generate_hans(50, ["SO-Swap", "Embed-If"], seed=2)["premise"]


def test_so_swap_swaps_subject_and_object():
    for row in generate_hans(100, ["SO-Swap"], seed=0):
        subj, verb, obj = re.match(r"(The \w+) (\w+) (the \w+)\.", row["premise"]).groups()
        assert row["hypothesis"] == f"{obj.capitalize()} {verb} {subj.lower()}."


def test_abbreviations_and_unknown_subcase():
    assert resolve_subcases(["Prep", "cn_adverb"]) == ["ln_preposition", "cn_adverb"]
    with pytest.raises(HeurlensError, match="unknown HANS subcase 'Nope'"):
        resolve_subcases(["Nope"])
