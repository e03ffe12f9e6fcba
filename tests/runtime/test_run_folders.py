"""RunFolder: the one way a run folder is checked, locked, resumed and reported."""

import json

import pytest

from heurlens.errors import HeurlensError
from heurlens.runtime.results_page import GENERATED_LINE, HAND_WRITTEN
from heurlens.runtime.run_folders import RunFolder


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


def test_a_lock_beside_someone_elses_file_marks_nothing_and_a_lock_alone_is_an_empty_folder(tmp_path):
    """A refused run leaves heurlens' lock behind: beside a user's file it made the folder look like heurlens' (issue
    63); alone, the folder is as good as empty."""
    from heurlens.runtime.run_folders import LOCK_FILE

    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "mine.txt").write_text("mine")
    (theirs / LOCK_FILE).touch()
    with pytest.raises(HeurlensError, match="is not empty and was not written by heurlens"):
        RunFolder(theirs, "test run").opened()
    assert (theirs / "mine.txt").read_text() == "mine"
    refused = tmp_path / "refused"
    refused.mkdir()
    (refused / LOCK_FILE).touch()
    RunFolder(refused, "test run").record_settings({"a": 1})
    assert json.loads((refused / "settings.json").read_text()) == {"a": 1}


def test_a_run_folder_whose_settings_were_removed_is_refused_not_taken_for_a_new_run(tmp_path):
    """``cp -a A B; rm B/settings.json`` then a run with other settings into B printed A's results as the new
    settings' (issue 63): results without their settings cannot be reused."""
    folder = RunFolder(tmp_path / "run", "one-change analysis", ("settings.json", "*/*-s*.json"))
    folder.record_settings({"epochs": 50})
    (tmp_path / "run" / "row-0").mkdir()
    (tmp_path / "run" / "row-0" / "full-s0.json").write_text("{}")
    (tmp_path / "run" / "settings.json").unlink()
    with pytest.raises(HeurlensError, match=r"holds a one-change analysis's files \(row-0\) but no settings.json"):
        folder.record_settings({"epochs": 5})
    assert not (tmp_path / "run" / "settings.json").exists()
