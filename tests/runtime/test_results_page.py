"""A results page rewritten by its script keeps the reading written by hand at its end, and a page heurlens did not
write is never overwritten (issue 63: ``transfer-changes --page notes.md`` replaced a user's notes)."""

from pathlib import Path

import pytest

from heurlens.errors import HeurlensError
from heurlens.runtime.results_page import GENERATED_LINE, HAND_WRITTEN, write_results_page


def test_a_rewritten_page_keeps_its_hand_written_end_and_drops_the_old_tables(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    reading = f"{HAND_WRITTEN}: the script keeps it. -->\n\n## Reading\n\n- claim one holds.\n"
    page.write_text(GENERATED_LINE + "# Old\n\n| a |\n| 1 |\n\n" + reading)
    write_results_page(page, "# New\n\n| a |\n| 2 |\n")
    assert page.read_text() == GENERATED_LINE + "# New\n\n| a |\n| 2 |\n\n" + reading
    write_results_page(page, "# Newer\n")
    assert page.read_text() == GENERATED_LINE + "# Newer\n\n" + reading


def test_a_page_without_a_hand_written_end_is_replaced_and_a_marker_inside_a_line_does_not_count(
        tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    write_results_page(page, "# First\n")
    assert page.read_text() == GENERATED_LINE + "# First\n"
    page.write_text(f"{GENERATED_LINE}# Old, mentioning `{HAND_WRITTEN}` in a sentence\n")
    write_results_page(page, "# Second\n")
    assert page.read_text() == GENERATED_LINE + "# Second\n"


def test_a_page_heurlens_did_not_write_is_refused_untouched_unless_it_opens_with_the_hand_written_line(
        tmp_path: Path) -> None:
    notes = tmp_path / "notes.md"
    notes.write_text("# notes\nDo not lose this.\n")
    with pytest.raises(HeurlensError, match="notes.md exists and heurlens did not write it"):
        write_results_page(notes, "# Table\n")
    assert notes.read_text() == "# notes\nDo not lose this.\n"
    mine = f"{HAND_WRITTEN} -->\n# notes\nDo not lose this.\n"
    notes.write_text(mine)
    write_results_page(notes, "# Table\n")
    assert notes.read_text() == GENERATED_LINE + "# Table\n\n" + mine
    (tmp_path / "empty.md").write_text("")
    write_results_page(tmp_path / "empty.md", "# Table\n")  # an empty file holds nothing to lose
    with pytest.raises(HeurlensError, match="is a folder"):
        write_results_page(tmp_path, "# Table\n")


def test_transfer_changes_refuses_a_page_it_did_not_write_before_any_training(tmp_path: Path, capsys) -> None:
    from cli_run import assert_refused

    notes = tmp_path / "notes.md"
    notes.write_text("# notes\nDo not lose this.\n")
    assert_refused(capsys, "notes.md exists and heurlens did not write it", "transfer-changes", "--from",
                   str(tmp_path / "no-sweep"), "--out", str(tmp_path / "out"), "--page", str(notes))
    assert notes.read_text() == "# notes\nDo not lose this.\n" and not (tmp_path / "out").exists()
