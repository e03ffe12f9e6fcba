"""Rewrite the figures already in docs/results so they read offline: each HTML figure with plotly.js from the folder's
one ``plotly.min.js`` instead of plotly's CDN, an SVG of it beside it, and that SVG shown on every results page that
links the figure.

The scripts under analyses/ now write their figures this way (``heurlens.runtime.figure_files``); this script converts
the figures they wrote before, from the figure each HTML file holds (no run folder needed). Safe to run again: a page
that already shows a figure's SVG is left as it is.

Run: .venv/bin/python analyses/results_figures_offline.py [--folder docs/results]
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import plotly.graph_objects as go

from heurlens.runtime.cache import atomic_write_bytes
from heurlens.runtime.figure_files import figure_markdown, write_figure_files

FIGURE_CALL = re.compile(r'Plotly\.newPlot\(\s*"[^"]+",\s*(\[.*?\]),\s*(\{.*?\}),\s*\{"responsive', re.S)


def figure_in_page(html: Path) -> go.Figure:
    """The plotly figure a page written by plotly's ``to_html`` draws."""
    found = FIGURE_CALL.search(html.read_text())
    if found is None:
        raise SystemExit(f"{html}: no plotly figure found in it")
    return go.Figure(data=json.loads(found.group(1)), layout=json.loads(found.group(2)))


def show_images(page: Path, figures: dict[str, go.Figure]) -> bool:
    """Put each linked figure's SVG on ``page`` after the line that links it; True if the page changed."""
    lines = page.read_text().split("\n")
    changed = False
    for name, figure in figures.items():
        svg = Path(name).with_suffix(".svg").name
        if f"]({name})" not in "\n".join(lines) or f"]({svg})" in "\n".join(lines):
            continue
        at = next(i for i, line in enumerate(lines) if f"]({name})" in line)
        caption = figure.layout.title.text or Path(name).stem.replace("-", " ")
        lines[at + 1:at + 1] = ["", figure_markdown(Path(name), caption).rstrip("\n")]
        changed = True
    if changed:
        atomic_write_bytes(page, "\n".join(lines).encode())
    return changed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--folder", type=Path, default=Path("docs/results"))
    args = parser.parse_args()
    figures = {html.name: figure_in_page(html) for html in sorted(args.folder.glob("*.html"))}
    for name, figure in figures.items():
        write_figure_files(figure, args.folder / name)
        print(f"{args.folder / name}: plotly.js from the folder, SVG beside it")
    for page in sorted(args.folder.glob("*.md")):
        if show_images(page, figures):
            print(f"{page}: shows its figures' SVGs")


if __name__ == "__main__":
    main()
