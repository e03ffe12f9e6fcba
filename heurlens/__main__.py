"""``python -m heurlens`` is the ``heurlens`` command."""

from heurlens.cli import command_line

command_line()
