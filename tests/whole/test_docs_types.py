"""The library's calls as the docs show them pass a user's type checker: every Python snippet of README.md,
docs/own-model.md and docs/tour.md's library section, checked by mypy with the project's settings (heurlens ships
``py.typed``, so this is what a user's mypy sees). The names the snippets leave to the reader (``prompts``, the
answer ids ``a`` and ``b``...) are declared with the types the pages give them."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
PAGES = {"README.md": None, "docs/own-model.md": None, "docs/tour.md": "## Library"}  # page: its section, or all
READER_NAMES = '''
import torch
from transformer_lens.model_bridge import TransformerBridge

import heurlens

MODEL_DIR: str
prompts: list[str]
a: int
b: int
tokens: torch.Tensor
my_loss: heurlens.Loss
'''


def snippets(page: str, section: str | None) -> str:
    text = (ROOT / page).read_text()
    if section is not None:
        text = text.split(section, 1)[1].split("\n## ", 1)[0]
    return "\n".join(re.findall(r"```python\n(.*?)```", text, re.DOTALL))


def mypy_errors(code: str, path: Path) -> list[str]:
    api = pytest.importorskip("mypy.api")
    path.write_text(READER_NAMES + code)
    stdout, _, _ = api.run([str(path), "--config-file", str(ROOT / "pyproject.toml"), "--no-error-summary"])
    return [line for line in stdout.splitlines() if ": error:" in line]


@pytest.mark.parametrize("page", PAGES)
def test_the_docs_calls_pass_a_type_checker(page, tmp_path):
    code = snippets(page, PAGES[page])
    assert "heurlens." in code
    assert mypy_errors(code, tmp_path / "snippets.py") == []


def test_the_type_checker_sees_heurlens_types(tmp_path):
    """The control: a call that is wrong by type is caught (so the check above is not vacuous)."""
    errors = mypy_errors("heurlens.compute_means(torch.nn.Linear(2, 2), prompts)\n"
                         "heurlens.ablate(TransformerBridge.boot_transformers(MODEL_DIR), 3, [prompts])\n",
                         tmp_path / "wrong.py")
    assert len(errors) == 2 and "compute_means" in errors[0] and "ablate" in errors[1]
