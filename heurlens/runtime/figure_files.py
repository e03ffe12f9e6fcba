"""A results figure as files that read offline: an HTML page that loads plotly.js from its own folder, and a static
image beside it for readers without a browser (markdown pages, GitHub, papers).

Every HTML figure in a folder shares one ``plotly.min.js`` (plotly's ``include_plotlyjs="directory"``), written from
the installed plotly when the folder has none, so nothing loads from the network; the SVG is drawn by
``heurlens.runtime.figure_images``.
"""

from __future__ import annotations

from pathlib import Path

import plotly.graph_objects as go

from heurlens.runtime.cache import atomic_write_bytes
from heurlens.runtime.figure_images import write_figure_image

PLOTLY_BUNDLE = "plotly.min.js"


def write_plotly_bundle(folder: Path) -> Path:
    """The folder's one copy of plotly.js, written from the installed plotly if it has none (an existing copy is
    kept: it is what the folder's other figures were written against)."""
    from plotly.offline import get_plotlyjs

    bundle = Path(folder) / PLOTLY_BUNDLE
    if not bundle.exists():
        atomic_write_bytes(bundle, get_plotlyjs().encode())
    return bundle


def write_figure_files(figure: go.Figure, html_path: Path) -> tuple[Path, Path]:
    """Write ``figure`` as ``html_path`` (plotly.js from the folder's ``plotly.min.js``) and as the SVG of the same
    name beside it; return both paths."""
    html_path = Path(html_path)
    html_path.parent.mkdir(parents=True, exist_ok=True)
    write_plotly_bundle(html_path.parent)
    atomic_write_bytes(html_path, figure.to_html(include_plotlyjs="directory").encode())
    return html_path, write_figure_image(figure, html_path.with_suffix(".svg"))


def figure_markdown(html_path: Path, caption: str) -> str:
    """A markdown paragraph showing the SVG ``write_figure_files`` wrote beside ``html_path`` (named relative to a
    page in the same folder)."""
    return f"![{caption}]({Path(html_path).with_suffix('.svg').name})\n"
