"""docs/circuits.md runs as written: its Python snippet, then each of its commands in order, in one fresh folder, on
SmolLM2 (offline), each printing what the page shows it printed (the lines that hold no measured number)."""

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

DOC = Path(__file__).parents[2] / "docs" / "circuits.md"


def steps() -> list[tuple[str, str, str]]:
    """(language, code, the output block after it or "") of each code block of the page, in order."""
    blocks = re.findall(r"```(\w*)\n(.*?)```", DOC.read_text(), re.DOTALL)
    found = []
    for index, (language, code) in enumerate(blocks):
        if language in ("python", "bash"):
            after = blocks[index + 1] if index + 1 < len(blocks) and blocks[index + 1][0] == "" else ("", "")
            found.append((language, code, after[1]))
    return found


def stable_lines(printed: str) -> list[str]:
    """The lines of a printed block that hold no measured number (times, scores) and no '...' elision."""
    return [line.strip() for line in printed.splitlines()
            if line.strip() and "..." not in line and not re.search(r"\d\.\d", line)]


@pytest.mark.slow
def test_every_step_runs_as_written_and_prints_what_the_page_shows(tmp_path):
    found = steps()
    assert [language for language, _, _ in found] == ["python"] + ["bash"] * 5
    heurlens = Path(sys.executable).parent / "heurlens"
    for language, code, printed in found:
        if language == "python":
            subprocess.run([sys.executable, "-c", code], cwd=tmp_path, check=True)
            shown = (tmp_path / "capitals.jsonl").read_text().splitlines()[0]
        else:
            command = shlex.split(code.replace("\\\n", " "))
            assert command[0] == "heurlens"
            result = subprocess.run([str(heurlens), *command[1:]], cwd=tmp_path, capture_output=True, text=True)
            assert result.returncode == 0, (code, result.stderr[-3000:])
            shown = result.stdout + result.stderr
        for line in stable_lines(printed):
            assert line in shown, (code, line, shown[-3000:])
    assert (tmp_path / "eap-ig.png").read_bytes()[:4] == b"\x89PNG"
    assert (tmp_path / "mib" / "eap-ig" / "importances.json").stat().st_size > 1_000_000
