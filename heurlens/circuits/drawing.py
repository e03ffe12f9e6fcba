"""A circuit drawn as an interactive graph (plotly), for notebooks and report pages: its strongest edges, each a line
from its writer to the component it reads into, coloured by the input it enters (query, key, value, MLP, logits) as
Edge Pruning's figures draw circuits, placed as ``circuits.drawn_edges`` places them; and the faithfulness curves of
discovery methods side by side (``faithfulness_figure``)."""

from __future__ import annotations

from collections.abc import Mapping

import plotly.colors
import plotly.graph_objects as go

from heurlens.circuits.drawn_edges import DrawnCircuit, node_places, reader_node, record_to_draw
from heurlens.circuits.faithfulness_areas import FaithfulnessCurve, areas_text
from heurlens.interventions.nodes import EMBED, LOGITS
from heurlens.pruning.circuit import EdgeCircuit
from heurlens.runtime.caller_warnings import warn_at_caller
from heurlens.runtime.deprecations import STILL_WORKS

__all__ = ["circuit_figure", "edges_figure", "faithfulness_figure", "reader_node"]

INPUT_COLOURS = {"q": "#1f77b4", "k": "#2ca02c", "v": "#d62728", "MLP": "#9467bd", LOGITS: "#7f7f7f"}
INPUT_DASHES = {"q": "solid", "k": "dash", "v": "dot", "MLP": "dashdot", LOGITS: "solid"}
# a method's curve and its circuits one colour, no two methods alike: plotly's 10 colours, Dark24's 24 past them
METHOD_COLOURS = plotly.colors.qualitative.Dark24
DRAWN_BY_DEFAULT = 50  # edges: legible in a notebook cell or a page; the rest are counted in the title


def edges_figure(circuit: DrawnCircuit, n_heads: int, n_kv_heads: int) -> go.Figure:
    """The drawn edges of ``circuit`` as lines from writer to reader, placed as ``circuits.drawn_edges`` places them
    (the file ``heurlens draw`` writes, the same places): width |score| / max |score|, colour the input entered
    (legend), dash the input too, the score on hover; the title counts the edges not drawn.

    Args:
        circuit: the edges to draw (``circuit_to_draw``).
        n_heads: the model's query heads a layer.
        n_kv_heads: its key-value heads a layer.

    Returns:
        A plotly figure."""
    places = node_places(circuit.edges, n_heads, n_kv_heads)
    largest = max((abs(d.score) for d in circuit.edges), default=1.0) or 1.0
    figure = go.Figure()
    legend: set[str] = set()
    for d in sorted(circuit.edges, key=lambda d: abs(d.score)):  # the strongest on top
        reader, kind = reader_node(d.edge)
        (x0, y0), (x1, y1) = places[str(d.edge.writer)], places[reader]
        name = f"into {kind}" if kind != LOGITS else "into the logits"
        figure.add_trace(go.Scatter(x=[x0, x1], y=[y0, y1], mode="lines", name=name, legendgroup=kind,
                                    showlegend=kind not in legend, hovertext=f"{d.edge}: score {d.score:.4g}",
                                    hoverinfo="text", opacity=0.85,
                                    line={"color": INPUT_COLOURS[kind], "dash": INPUT_DASHES[kind],
                                          "width": 0.8 + 4.2 * abs(d.score) / largest}))
        legend.add(kind)
    nodes = sorted(places, key=lambda name: places[name][::-1])
    figure.add_trace(go.Scatter(x=[places[n][0] for n in nodes], y=[places[n][1] for n in nodes],
                                mode="markers+text", text=nodes, textposition="top center", name="components",
                                marker={"size": 9, "color": "#333"}, hoverinfo="text"))
    rows = max((y for _, y in places.values()), default=0.0) + 1
    figure.update_layout(title=circuit.title, showlegend=True, height=max(320, 70 * rows),
                         xaxis={"visible": False}, yaxis={"visible": False})
    return figure


def circuit_figure(circuit: EdgeCircuit, top: int = DRAWN_BY_DEFAULT) -> go.Figure:
    """An edge circuit's ``top`` strongest kept edges (by log_alpha; a record without it in the layout's order), the
    rest counted in the title (``edges_figure``).

    Args:
        circuit: an edge circuit (``prune(config=PruneSettings(level="edge"))``).
        top: how many of its edges to draw at most.

    Returns:
        A plotly figure."""
    return edges_figure(record_to_draw(circuit, top), circuit.layout.n_heads, circuit.layout.n_kv_heads)


def node_positions(circuit: EdgeCircuit) -> dict[str, tuple[float, float]]:
    """Deprecated (0.2.0's layout of every node the circuit's model has): ``drawn_edges.node_places`` places the
    nodes a drawing uses."""
    warn_at_caller("node_positions(circuit) is replaced by heurlens.circuits.drawn_edges.node_places(drawn.edges, "
                   f"n_heads, n_kv_heads), the places circuit_figure and heurlens draw use; it {STILL_WORKS}",
                   DeprecationWarning)
    middle = (circuit.n_heads - 1) / 2
    positions = {EMBED: (middle, 0.0), LOGITS: (middle, 2.0 * circuit.n_layers + 1)}
    per_kv = circuit.n_heads // circuit.n_kv_heads
    for layer in range(circuit.n_layers):
        positions |= {f"L{layer}.H{h}": (float(h), 2.0 * layer + 1) for h in range(circuit.n_heads)}
        if per_kv > 1:
            positions |= {f"L{layer}.KV{g}": (g * per_kv + (per_kv - 1) / 2, 2.0 * layer + 0.7)
                          for g in range(circuit.n_kv_heads)}
        positions[f"L{layer}.MLP"] = (middle, 2.0 * layer + 2)
    return positions


def faithfulness_figure(curves: Mapping[str, FaithfulnessCurve], task_name: str) -> go.Figure:
    """The curves, one per discovery method: mean f against the size k (MIB's grid, a log axis), each circuit a
    faint point of its method's colour (one legend entry for both), CPR and CMD in the legend (n/a where a size is
    missing).

    Args:
        curves: the curves by method (``compare_runs``' result).
        task_name: the task, for the title.

    Returns:
        A plotly figure."""
    figure = go.Figure()
    palette = METHOD_COLOURS if len(curves) > len(plotly.colors.qualitative.Plotly) else plotly.colors.qualitative.Plotly
    for index, (name, curve) in enumerate(curves.items()):
        means, colour = curve.curve.dropna(), palette[index % len(palette)]
        figure.add_trace(go.Scatter(x=means["kept_fraction"], y=means["faithfulness"], mode="lines+markers",
                                    name=f"{name} ({areas_text(curve)})", legendgroup=name,
                                    line={"color": colour}, marker={"color": colour}))
        figure.add_trace(go.Scatter(x=curve.circuits["kept_fraction"], y=curve.circuits["faithfulness"],
                                    mode="markers", text=curve.circuits["circuit"], name=f"{name}: circuits",
                                    legendgroup=name, showlegend=False, opacity=0.5,
                                    marker={"symbol": "x", "color": colour}))
    figure.add_hline(y=1.0, line_dash="dot")
    figure.update_layout(title=f"Faithfulness on {task_name}", xaxis_title="fraction of units or edges kept (k)",
                         yaxis_title="f(k)", xaxis_type="log")
    return figure
