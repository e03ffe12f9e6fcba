"""``python -m heurlens`` is the ``heurlens`` command."""

from heurlens.cli import main

main()
