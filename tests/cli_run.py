"""Running the ``heurlens`` command as a user does: a real subprocess, its exit code, stdout and stderr."""

import subprocess
import sys


def heurlens(*args, env=None, cwd=None):
    return subprocess.run([sys.executable, "-m", "heurlens", *args], capture_output=True, text=True, env=env,
                          cwd=cwd)


def assert_one_line_error(result, fragment):
    """Exit status 2, no traceback, and a last stderr line ``heurlens: error: ...`` containing ``fragment``."""
    assert result.returncode == 2, (result.returncode, result.stderr[-2000:])
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert lines[-1].startswith("heurlens: error:") and fragment in lines[-1], result.stderr
