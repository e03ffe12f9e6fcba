"""A circuit drawn for a paper: its strongest edges as an SVG, PNG or PDF file (matplotlib, from PyPI: it writes all
three with nothing else installed, where plotly's images need kaleido and graphviz a system binary).

Which edges and where their nodes go: ``circuits.drawn_edges`` (only the nodes the drawn edges touch, a row per layer
used; the edges not drawn counted under the drawing). An edge is an arrow from its writer to the component it reads
into, its width |score| / max |score|, its colour its sign (blue: the ranking keeps it first, red: a negative
score), its line the input it enters (query solid, key dashed, value dotted, MLP dash-dot).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from heurlens.circuits.drawn_edges import DrawnCircuit, node_places, reader_node
from heurlens.errors import HeurlensError
from heurlens.interventions.nodes import LOGITS
from heurlens.runtime.cache import atomic_write_bytes
from heurlens.runtime.figure_images import IMAGE_SUFFIXES, image_bytes

LINE_STYLES: dict[str, Any] = {"q": "-", "k": "--", "v": ":", "MLP": "-.", LOGITS: "-"}
POSITIVE, NEGATIVE = "#1f77b4", "#d62728"


def circuit_drawing(circuit: DrawnCircuit, n_heads: int, n_kv_heads: int) -> Figure:
    """The drawing of ``circuit``'s drawn edges (the module's conventions), titled with what it shows and how many
    of the circuit's edges it leaves out.

    Args:
        circuit: the edges to draw (``circuit_to_draw``).
        n_heads: the model's query heads a layer.
        n_kv_heads: its key-value heads a layer.

    Returns:
        A matplotlib figure (no pyplot: ``write_drawing`` saves it)."""
    drawn = circuit.edges
    if not drawn:
        raise HeurlensError(f"{circuit.label} keeps no edges: there is nothing to draw")
    places = node_places(drawn, n_heads, n_kv_heads)
    rows = max(y for _, y in places.values()) + 1
    figure = Figure(figsize=(max(6.0, 0.9 * (n_heads + 3)), max(3.0, 0.75 * rows)))  # no pyplot: files only
    axes = figure.subplots()
    largest = max(abs(d.score) for d in drawn) or 1.0
    for d in sorted(drawn, key=lambda d: abs(d.score)):  # the strongest on top
        reader, kind = reader_node(d.edge)
        axes.annotate("", xy=places[reader], xytext=places[str(d.edge.writer)],
                      arrowprops={"arrowstyle": "-|>", "color": POSITIVE if d.score >= 0 else NEGATIVE,
                                  "linewidth": 0.6 + 3.4 * abs(d.score) / largest, "linestyle": LINE_STYLES[kind],
                                  "shrinkA": 9, "shrinkB": 9, "alpha": 0.85})
    for name, (x, y) in places.items():
        axes.text(x, y, name, ha="center", va="center", fontsize=8,
                  bbox={"boxstyle": "round,pad=0.25", "facecolor": "#f4f4f4", "edgecolor": "#888"})
    axes.set_xlim(-1, n_heads + 2)
    axes.set_ylim(-0.7, rows - 0.3)
    axes.axis("off")
    axes.set_title(circuit.title, fontsize=10, wrap=True)
    legend = [Line2D([], [], color=POSITIVE, label="positive score"), Line2D([], [], color=NEGATIVE, label="negative")]
    legend += [Line2D([], [], color="#444", linestyle=style, label=f"into {kind}")
               for kind, style in LINE_STYLES.items() if kind != LOGITS]
    axes.legend(handles=legend, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=7, frameon=False)
    figure.tight_layout()
    return figure


def write_drawing(figure: Figure, path: Path) -> None:
    """Save ``figure``, atomically.

    Args:
        figure: ``circuit_drawing``'s.
        path: a .svg, .png or .pdf file."""
    if path.suffix not in IMAGE_SUFFIXES:
        raise HeurlensError(f"--out {path}: give a file ending in {', '.join(IMAGE_SUFFIXES)}")
    atomic_write_bytes(path, image_bytes(figure, path.suffix, dpi=200, bbox_inches="tight"))
