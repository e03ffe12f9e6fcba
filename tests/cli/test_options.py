"""The shared command options: --json / --csv keep a command's stdout for its table."""

import json
import threading

import click
import pandas as pd
from click.testing import CliRunner

from heurlens.cli.options import print_table, table_output_options


@click.command()
@table_output_options
def _noisy(as_json: bool, as_csv: bool) -> None:
    """Prints on stdout before its table, from this thread and another (as Ray's driver threads do, at any time)."""
    print("a library's news")
    news = threading.Thread(target=print, args=("A worker died or was killed while executing a task",))
    news.start()
    news.join()
    print_table(pd.DataFrame({"unit": ["L0.H0"], "accuracy": [0.5]}), as_json, as_csv, lambda table: "pretty")


def test_json_and_csv_put_everything_but_the_table_on_stderr():
    """A ``--json`` table read by a program: Ray printed a dead worker's news on stdout ahead of it, after run_each's
    own redirect had ended, and json.loads of the command's stdout failed."""
    as_json = CliRunner().invoke(_noisy, ["--json"])
    assert as_json.exit_code == 0, as_json.output
    assert json.loads(as_json.stdout) == [{"unit": "L0.H0", "accuracy": 0.5}]
    assert "a library's news" in as_json.stderr and "A worker died" in as_json.stderr

    as_csv = CliRunner().invoke(_noisy, ["--csv"])
    assert as_csv.stdout == "unit,accuracy\nL0.H0,0.5\n"
    assert "A worker died" in as_csv.stderr


def test_a_readers_table_leaves_stdout_as_it_is_and_both_formats_are_refused():
    plain = CliRunner().invoke(_noisy, [])
    assert plain.stdout.splitlines() == ["a library's news", "A worker died or was killed while executing a task",
                                         "pretty"]
    both = CliRunner().invoke(_noisy, ["--json", "--csv"])
    assert both.exit_code != 0 and "choose one of --json and --csv" in str(both.exception)
