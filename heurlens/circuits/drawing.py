"""An edge circuit drawn as a graph (plotly): the embeddings at the bottom, each layer's heads and then its MLP on a
row above the last, the logits on top, and each kept edge a line from its writer to the component it reads into,
coloured by the input it enters (query, key, value, MLP, logits), as Edge Pruning's figures draw circuits; and the
faithfulness curves of discovery methods side by side (``faithfulness_figure``)."""

from __future__ import annotations

from collections.abc import Mapping

import plotly.graph_objects as go

from heurlens.circuits.faithfulness_areas import FaithfulnessCurve, areas_text
from heurlens.interventions.nodes import EMBED, LOGITS, Edge
from heurlens.pruning.circuit import EdgeCircuit

INPUT_COLOURS = {"q": "#1f77b4", "k": "#2ca02c", "v": "#d62728", "MLP": "#9467bd", LOGITS: "#7f7f7f"}


def node_positions(circuit: EdgeCircuit) -> dict[str, tuple[float, float]]:
    """(x, y) of every node an edge of the circuit may touch: heads spread over a row per layer, a grouped key-value
    head between the query heads sharing it, MLPs and the embeddings and logits in the middle of their rows."""
    middle = (circuit.n_heads - 1) / 2
    positions = {EMBED: (middle, 0.0), LOGITS: (middle, 2.0 * circuit.n_layers + 1)}
    per_kv = circuit.n_heads // circuit.n_kv_heads
    for layer in range(circuit.n_layers):
        heads_row, mlp_row = 2.0 * layer + 1, 2.0 * layer + 2
        positions |= {f"L{layer}.H{h}": (float(h), heads_row) for h in range(circuit.n_heads)}
        if per_kv > 1:
            positions |= {f"L{layer}.KV{g}": (g * per_kv + (per_kv - 1) / 2, heads_row - 0.3)
                          for g in range(circuit.n_kv_heads)}
        positions[f"L{layer}.MLP"] = (middle, mlp_row)
    return positions


def reader_node(edge: Edge) -> tuple[str, str]:
    """(the node an edge enters, which input): ``L1.H0.v`` -> (``L1.H0``, ``v``), ``L1.MLP`` -> (``L1.MLP``, ``MLP``)."""
    reader = edge.reader
    if reader.kind == "logits":
        return LOGITS, LOGITS
    if reader.kind == "mlp_in":
        return str(reader), "MLP"
    node, _, kind = str(reader).rpartition(".")
    return node, kind


def circuit_figure(circuit: EdgeCircuit) -> go.Figure:
    """The circuit's kept edges as lines between its nodes, one trace per kind of input (a legend entry each), and
    the nodes its edges touch as labelled points.

    Args:
        circuit: an edge circuit (``prune(config=PruneSettings(level="edge"))``).

    Returns:
        A plotly figure."""
    positions = node_positions(circuit)
    figure = go.Figure()
    touched: set[str] = set()
    for kind, colour in INPUT_COLOURS.items():
        xs: list[float | None] = []
        ys: list[float | None] = []
        for edge in circuit.edges:
            node, entered = reader_node(edge)
            if entered != kind:
                continue
            (x0, y0), (x1, y1) = positions[str(edge.writer)], positions[node]
            xs += [x0, x1, None]
            ys += [y0, y1, None]
            touched |= {str(edge.writer), node}
        if xs:
            figure.add_trace(go.Scatter(x=xs, y=ys, mode="lines", line={"color": colour, "width": 1},
                                        name=f"into {kind}" if kind != LOGITS else "into the logits"))
    nodes = sorted(touched, key=lambda name: positions[name][::-1])
    figure.add_trace(go.Scatter(x=[positions[n][0] for n in nodes], y=[positions[n][1] for n in nodes],
                                mode="markers+text", text=nodes, textposition="top center", name="components",
                                marker={"size": 9, "color": "#333"}))
    figure.update_layout(title=f"{circuit.label}: {len(circuit.edges)} edges", showlegend=True,
                         xaxis={"visible": False}, yaxis={"visible": False})
    return figure


def faithfulness_figure(curves: Mapping[str, FaithfulnessCurve], task_name: str) -> go.Figure:
    """The curves, one per discovery method: mean f against the size k (MIB's grid, a log axis), each circuit a
    point, CPR and CMD in the legend (n/a where a size is missing).

    Args:
        curves: the curves by method (``compare_runs``' result).
        task_name: the task, for the title.

    Returns:
        A plotly figure."""
    figure = go.Figure()
    for name, curve in curves.items():
        means = curve.curve.dropna()
        figure.add_trace(go.Scatter(x=means["kept_fraction"], y=means["faithfulness"], mode="lines+markers",
                                    name=f"{name} ({areas_text(curve)})"))
        figure.add_trace(go.Scatter(x=curve.circuits["kept_fraction"], y=curve.circuits["faithfulness"],
                                    mode="markers", text=curve.circuits["circuit"], name=f"{name}: circuits",
                                    marker={"symbol": "x"}))
    figure.add_hline(y=1.0, line_dash="dot")
    figure.update_layout(title=f"Faithfulness on {task_name}", xaxis_title="fraction of units or edges kept (k)",
                         yaxis_title="f(k)", xaxis_type="log")
    return figure
