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


def heurlens_in_process(capsys, *args):
    """``heurlens ARGS`` through ``heurlens.cli.main`` in this process (no 10 s of imports): (status, out, err)."""
    import pytest

    from heurlens.cli import main

    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_info:
        main(list(args))
        raise SystemExit(0)
    captured = capsys.readouterr()
    return exit_info.value.code, captured.out, captured.err


def assert_refused(capsys, fragment, *args):
    """``heurlens ARGS`` in process ends with exit 2 and one ``heurlens: error:`` line containing ``fragment``."""
    status, _, err = heurlens_in_process(capsys, *args)
    lines = [line for line in err.splitlines() if line.strip()]
    assert status == 2 and lines and lines[-1].startswith("heurlens: error:") and fragment in lines[-1], (status, err)
