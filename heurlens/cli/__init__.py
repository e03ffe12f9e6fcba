"""The ``heurlens`` command line. Every command works on the embedded default model and data.

User mistakes print one line on stderr and exit 2 (``main``), never a traceback.
"""

from __future__ import annotations

import sys

import click

from heurlens.cli import commands_analysis, commands_nli, commands_subtask  # noqa: F401  (registers the commands)
from heurlens.cli.group import cli
from heurlens.errors import HeurlensError

MULTI_VALUE_OPTIONS = {"--sparsity", "--disambiguation"}  # options that take several values: --sparsity 0.5 0.7


def expand_multi_value_options(argv: list[str]) -> list[str]:
    """Rewrite ``--sparsity 0.5 0.7`` as ``--sparsity 0.5 --sparsity 0.7`` (click takes one value per use)."""
    expanded: list[str] = []
    current = None
    for token in argv:
        if token.startswith("-"):
            current = token if token in MULTI_VALUE_OPTIONS else None
            expanded.append(token)
        elif current is not None and expanded[-1] != current:
            expanded += [current, token]
        else:
            expanded.append(token)
    return expanded


def main(argv: list[str] | None = None) -> None:
    """Entry point: user mistakes print one line on stderr and exit 2, never a traceback."""
    try:
        cli(expand_multi_value_options(sys.argv[1:] if argv is None else argv), standalone_mode=False)
    except HeurlensError as error:
        click.echo(f"heurlens: error: {error}", err=True)
        sys.exit(2)
    except click.exceptions.Abort:
        click.echo("heurlens: aborted", err=True)
        sys.exit(130)
    except click.ClickException as error:
        error.show()
        sys.exit(error.exit_code)
