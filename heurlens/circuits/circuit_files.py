"""A circuit drawn for a paper: its strongest edges as an SVG, PNG or PDF file (matplotlib, from PyPI: it writes all
three with nothing else installed, where plotly's images need kaleido and graphviz a system binary).

Only the nodes the drawn edges touch appear, a row each for the layers they use, bottom to top: the embeddings
alone at the bottom, per layer its key-value heads (a grouped-query model's, between the query heads sharing them),
its query heads and, in a column of its own on the right, its MLP; the logits alone at the top. An edge is an arrow
from its writer to the component it reads into, its width |score| / max |score|, its colour its sign (blue: the
ranking keeps it first, red: a negative score), its line the input it enters (query solid, key dashed, value
dotted, MLP dash-dot). A ranking with a sign (attribution) is drawn by |score|; a mask run's log_alpha by score.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from heurlens.circuits.drawing import reader_node
from heurlens.errors import HeurlensError
from heurlens.interventions.graph import EdgeLayout
from heurlens.interventions.nodes import EMBED, LOGITS, Edge
from heurlens.interventions.rankings import Ranking
from heurlens.runtime.cache import atomic_write_bytes

LINE_STYLES: dict[str, Any] = {"q": "-", "k": "--", "v": ":", "MLP": "-.", LOGITS: "-"}
POSITIVE, NEGATIVE = "#1f77b4", "#d62728"
SUFFIXES = (".svg", ".png", ".pdf")


@dataclass(frozen=True)
class DrawnEdge:
    """An edge drawn, with its score in the ranking."""

    edge: Edge
    score: float


def strongest_edges(ranking: Ranking, layout: EdgeLayout, count: int) -> list[DrawnEdge]:
    """The edges a drawing shows: the first by |score| for a ranking with a sign, else by score (ties: the layout's
    order); refused by name for a ranking of units or of another model's edges.

    Args:
        ranking: an edge ranking (``load_attribution(dir).ranking``, ``ranking_of(edge circuit)``).
        layout: the edges of the model it ranks (``edge_layout``; MIB's graph: of the ungrouped copy).
        count: how many.

    Returns:
        The edges with their scores, strongest first."""
    if ranking.level != "edge" or ranking.n_items != layout.n_edges:
        raise HeurlensError(f"{ranking.label} ranks {ranking.n_items} {ranking.level}s and this model has "
                            f"{layout.n_edges} edges: draw an edge ranking of this model (heurlens attribute, or "
                            "prune --level edge)")
    if count < 1:
        raise HeurlensError(f"--top {count}: draw one edge or more")
    edges = layout.edges()
    order = ranking.order("|score|" if ranking.signed else None)[:count].tolist()
    return [DrawnEdge(edges[index], float(ranking.scores[index])) for index in order]


def node_places(drawn: list[DrawnEdge], n_heads: int, n_kv_heads: int) -> dict[str, tuple[float, float]]:
    """(x, y) of each node the drawn edges touch: only the layers they use get rows (the module's layout)."""
    names = {str(d.edge.writer) for d in drawn} | {reader_node(d.edge)[0] for d in drawn}
    per_kv = n_heads // n_kv_heads
    middle = (n_heads - 1) / 2
    places = {EMBED: (middle, 0.0)} if EMBED in names else {}
    row = 1.0
    layers = sorted({int(name[1:].split(".")[0]) for name in names if name not in (EMBED, LOGITS)})
    for layer in layers:
        for kind, x_of in (("KV", lambda g: g * per_kv + (per_kv - 1) / 2), ("H", float)):
            used = sorted(int(name.split(".")[1][len(kind):]) for name in names
                          if name.startswith(f"L{layer}.{kind}") and name.split(".")[1][len(kind):].isdigit())
            if used:
                places |= {f"L{layer}.{kind}{index}": (x_of(index), row) for index in used}
                row += 1
        if f"L{layer}.MLP" in names:
            places[f"L{layer}.MLP"] = (n_heads + 1.0, row)
            row += 1
    if LOGITS in names:
        places[LOGITS] = (middle, row)
    return places


def circuit_drawing(drawn: list[DrawnEdge], n_heads: int, n_kv_heads: int, title: str) -> Figure:
    """The drawing of ``drawn`` (the module's conventions).

    Args:
        drawn: the edges (``strongest_edges``).
        n_heads: the model's query heads a layer.
        n_kv_heads: its key-value heads a layer.
        title: the drawing's title.

    Returns:
        A matplotlib figure (no pyplot: ``write_drawing`` saves it)."""
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
    axes.set_title(title, fontsize=10)
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
    if path.suffix not in SUFFIXES:
        raise HeurlensError(f"--out {path}: give a file ending in {', '.join(SUFFIXES)}")
    buffer = io.BytesIO()
    figure.savefig(buffer, format=path.suffix[1:], dpi=200, bbox_inches="tight")
    atomic_write_bytes(path, buffer.getvalue())
