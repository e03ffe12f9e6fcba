"""Every relative link in README.md and docs/ leads to a file of the repository (the pages are read on the
repository's web view, where a link to the code or a notebook works; mkdocs, which sees docs/ only, cannot check
those, so it is told to leave them to this test)."""

import re
from pathlib import Path

ROOT = Path(__file__).parents[2]


def test_every_relative_link_leads_to_a_file():
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    dead, checked = [], 0
    for page in pages:
        for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text()):
            if re.match(r"[a-z]+:|#", target):  # a web address, or an anchor on the same page
                continue
            checked += 1
            if not (page.parent / target.split("#")[0]).exists():
                dead.append(f"{page.relative_to(ROOT)}: {target}")
    assert checked > 50 and dead == []
