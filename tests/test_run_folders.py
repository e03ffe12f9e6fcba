"""RunFolder: the one way a run folder is checked, locked, resumed and reported."""

import json

import pytest

from heurlens.analysis.results_page import GENERATED_LINE, HAND_WRITTEN
from heurlens.errors import HeurlensError
from heurlens.run_folders import RunFolder


def test_a_finished_stage_is_read_back_and_a_cut_one_is_computed_again(tmp_path):
    folder = RunFolder(tmp_path / "run", "test run", ("*.json",)).opened()
    calls = []

    def compute():
        calls.append(1)
        return {"value": len(calls)}

    assert not folder.finished("a.json")
    assert folder.result("a.json", compute) == {"value": 1} and folder.finished("a.json")
    assert folder.result("a.json", compute) == {"value": 1} and len(calls) == 1  # read back, not computed
    (tmp_path / "run" / "a.json").write_text('{"val')  # cut short (a writer killed by hand-made means)
    assert folder.result("a.json", compute) == {"value": 2}
    assert json.loads((tmp_path / "run" / "a.json").read_text()) == {"value": 2}


def test_a_folder_of_someone_elses_files_is_refused_and_left_as_it_was(tmp_path):
    foreign = tmp_path / "notes"
    foreign.mkdir()
    (foreign / "mine.txt").write_text("mine")
    with pytest.raises(HeurlensError, match=f"the test run folder {foreign} is not empty and was not written by heurlens"):
        RunFolder(foreign, "test run", ("*.json",)).opened()
    assert [p.name for p in foreign.iterdir()] == ["mine.txt"]


def test_the_page_keeps_its_reading_and_the_lock_is_reentrant_in_one_process(tmp_path):
    folder = RunFolder(tmp_path / "run", "test run").opened()
    page = tmp_path / "page.md"
    page.write_text(f"{GENERATED_LINE}# old table\n\n{HAND_WRITTEN} -->\nWhat the table means.\n")
    folder.write_results_page(page, "# new table\n")
    assert page.read_text() == f"{GENERATED_LINE}# new table\n\n{HAND_WRITTEN} -->\nWhat the table means.\n"
    with folder.writing(), folder.writing():  # (a second process is refused: test_reliability)
        pass
