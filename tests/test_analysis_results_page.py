"""A results page rewritten by its script keeps the reading written by hand at its end."""

from pathlib import Path

from heurlens.analysis.results_page import HAND_WRITTEN, write_results_page


def test_a_rewritten_page_keeps_its_hand_written_end_and_drops_the_old_tables(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    reading = f"{HAND_WRITTEN}: the script keeps it. -->\n\n## Reading\n\n- claim one holds.\n"
    page.write_text("# Old\n\n| a |\n| 1 |\n\n" + reading)
    write_results_page(page, "# New\n\n| a |\n| 2 |\n")
    assert page.read_text() == "# New\n\n| a |\n| 2 |\n\n" + reading
    write_results_page(page, "# Newer\n")
    assert page.read_text() == "# Newer\n\n" + reading


def test_a_page_without_a_hand_written_end_is_replaced_and_a_marker_inside_a_line_does_not_count(
        tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    write_results_page(page, "# First\n")
    assert page.read_text() == "# First\n"
    page.write_text(f"# Old, mentioning `{HAND_WRITTEN}` in a sentence\n")
    write_results_page(page, "# Second\n")
    assert page.read_text() == "# Second\n"
