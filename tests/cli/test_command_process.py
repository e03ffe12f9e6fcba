"""The heurlens command's process (``heurlens.cli.process``): its exit status and everything it printed survive
ending without teardown, and exit handlers registered during the command still run first."""

import os
import subprocess
import sys

import pytest

SCRIPT = """
import atexit, gc, sys
from heurlens.cli.process import run_as_command

def main():
    atexit.register(lambda: print("handler ran", flush=False))
    print("threshold", gc.get_threshold()[0], end=" ")
    sys.stdout.write("unflushed " * 1000)
    {ending}

run_as_command(main)
"""


@pytest.mark.parametrize(("ending", "status"), [("pass", 0), ("sys.exit(3)", 3), ("sys.exit(None)", 0),
                                                ("sys.exit('stopped')", 1), ("raise RuntimeError('boom')", 1)])
def test_status_output_and_exit_handlers_survive(ending, status):
    buffered = {name: value for name, value in os.environ.items() if name != "PYTHONUNBUFFERED"}  # as most shells
    result = subprocess.run([sys.executable, "-c", SCRIPT.format(ending=ending)], capture_output=True, text=True,
                            env=buffered)
    assert result.returncode == status, result.stderr
    assert result.stdout == "threshold 10000 " + "unflushed " * 1000 + "handler ran\n"
    if "Error" in ending:
        assert "RuntimeError: boom" in result.stderr  # the traceback is printed before the exit handlers
    if "stopped" in ending:
        assert result.stderr.strip() == "stopped"
