"""The ``heurlens`` command line. Every command works on the embedded default model and data.

User mistakes, click's usage errors included, print one line on stderr and exit 2 (``main``), never a
traceback.
"""

from __future__ import annotations

import signal
import sys
from pathlib import Path

import click

from heurlens.cli import (  # noqa: F401  (registers the commands)
    commands_ablate,
    commands_analysis,
    commands_cache,
    commands_circuits,
    commands_drawing,
    commands_nli,
    commands_subtask,
)
from heurlens.cli.group import cli
from heurlens.errors import HeurlensError, for_command_line


class Terminated(Exception):
    """The process was asked to stop (SIGTERM): raised in the main thread so ``finally`` blocks run."""


def _terminated(signum, frame) -> None:
    raise Terminated()


def _is_number(token: str) -> bool:
    try:
        float(token)
    except ValueError:
        return False
    return True


def command_options(argv: list[str], multiple: bool) -> set[str]:
    """The option names of the command in ``argv`` that take several values (declared ``multiple=True``)
    or, with ``multiple=False``, one value; empty for an unknown or missing command."""
    command = cli.commands.get(argv[0]) if argv else None
    if command is None:
        return set()
    return {opt for param in command.params if isinstance(param, click.Option) and param.multiple == multiple
            for opt in (*param.opts, *param.secondary_opts)}


def expand_multi_value_options(argv: list[str]) -> list[str]:
    """Rewrite ``--sparsity 0.5 0.7`` as ``--sparsity 0.5 --sparsity 0.7`` (click takes one value per use).
    Only numbers continue the list: in ``--sparsity 0.5 0.7 runs/ft/step-50`` the path is an argument."""
    multi = command_options(argv, multiple=True)
    expanded: list[str] = []
    current = None
    for token in argv:
        if token.startswith("-") and not _is_number(token):
            name = token.split("=", 1)[0]  # --sparsity=0.5 0.7 continues like --sparsity 0.5 0.7
            current = name if name in multi else None
            expanded.append(token)
        elif current is not None and expanded[-1] != current and _is_number(token):
            expanded += [current, token]
        else:
            current = None if not _is_number(token) else current
            expanded.append(token)
    return expanded


def refuse_repeated_options(argv: list[str]) -> None:
    """An option given twice (other than the multi-value ones) is a mistake click would settle silently
    by keeping the last; say so instead."""
    single = command_options(argv, multiple=False)
    seen: set[str] = set()
    for token in argv[1:]:
        if token == "--":
            break
        name = token.split("=", 1)[0]
        if name in single:
            if name in seen:
                raise HeurlensError(f"{name} is given twice; give it once")
            seen.add(name)


def _warnings_in_command_line_terms() -> None:
    """Warnings (a subnetwork that missed its target) name what to change as flags, as errors do; heurlens' own
    deprecations (a renamed choice such as ``--ablation interchange``) are shown, which Python would hide."""
    import warnings

    from heurlens.runtime.deprecations import STILL_WORKS

    warnings.filterwarnings("default", message=f".*{STILL_WORKS}", category=DeprecationWarning)
    shown = warnings.showwarning
    if getattr(shown, "command_line_terms", False):
        return

    def show(message, category, filename, lineno, file=None, line=None):  # warnings.showwarning's signature
        shown(for_command_line(str(message)), category, filename, lineno, file, line)

    show.command_line_terms = True  # type: ignore[attr-defined]
    warnings.showwarning = show


def main(argv: list[str] | None = None) -> None:
    """Entry point: user mistakes print one line on stderr and exit 2, never a traceback."""
    argv = sys.argv[1:] if argv is None else argv
    signal.signal(signal.SIGTERM, _terminated)
    _warnings_in_command_line_terms()
    try:
        refuse_repeated_options(argv)
        cli(expand_multi_value_options(argv), standalone_mode=False)
    except HeurlensError as error:
        click.echo(f"heurlens: error: {for_command_line(str(error))}", err=True)
        sys.exit(2)
    except click.exceptions.Abort:
        click.echo("heurlens: aborted; what was finished is kept: the same command resumes", err=True)
        sys.exit(130)
    except Terminated:
        click.echo("heurlens: aborted (SIGTERM); what was finished is kept: the same command resumes", err=True)
        sys.exit(143)
    except click.ClickException as error:  # click's own usage errors, in heurlens' one-line form
        click.echo(f"heurlens: error: {error.format_message()}", err=True)
        sys.exit(2)
    except OSError as error:  # a write refused anywhere (a cache folder made read-only, an --out on a read-only disk)
        from heurlens.runtime.cache import FULL, UNWRITABLE, full_disk_error, unwritable_error

        if error.errno in FULL:  # a write outside heurlens' atomic files (a library's own file)
            where = Path(error.filename or "a file")
            click.echo(f"heurlens: error: {full_disk_error(where, error)}", err=True)
            sys.exit(2)
        if error.errno not in UNWRITABLE or error.filename is None:
            raise
        click.echo(f"heurlens: error: {unwritable_error(Path(error.filename), error)}", err=True)
        sys.exit(2)


def command_line() -> None:
    """The ``heurlens`` command (and ``python -m heurlens``): ``main`` as a whole process
    (``heurlens.cli.process``: fewer garbage collections, no interpreter teardown)."""
    from heurlens.cli.process import run_as_command

    run_as_command(main)
