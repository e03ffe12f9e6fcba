"""A static image (SVG, PNG, PDF) of a plotly figure, drawn with matplotlib.

plotly's own ``write_image`` needs kaleido and a browser it downloads; the figures heurlens makes use a few plotly
features only, and matplotlib draws those with nothing else installed. Supported: ``scatter`` traces (lines, markers,
``error_y`` arrays, dash and width, one colour a trace, opacity, ``showlegend``), ``heatmap`` traces (colourscale,
``zmin``/``zmax``, colour bar title), subplots placed by their axes' ``domain``, log axes, titles, straight ``line``
shapes and text annotations. Anything else is refused by name rather than drawn wrong.
"""

from __future__ import annotations

import io
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import plotly.graph_objects as go

from heurlens.errors import HeurlensError
from heurlens.runtime.cache import atomic_write_bytes

IMAGE_SUFFIXES = (".svg", ".png", ".pdf")
_DASHES = {"solid": "-", "dot": ":", "dash": "--", "dashdot": "-.", "longdash": "--", "longdashdot": "-."}
_HEIGHT = 0.74  # of the figure, for the plots; the rest holds the axis labels and the title
_LEGEND_CHARACTERS = 70  # a longer legend entry is wrapped onto more lines (the image has a fixed width)
_MARKERS = {"circle": "o", "x": "x", "square": "s", "diamond": "D", "cross": "P", "triangle-up": "^", "star": "*"}


def _values(value: Any) -> np.ndarray:
    """A trace's array, also when plotly keeps it in its typed-array form ``{"dtype", "bdata", "shape"}``."""
    if isinstance(value, dict) and "bdata" in value:
        import base64

        array = np.frombuffer(base64.b64decode(value["bdata"]), dtype=np.dtype(value["dtype"]))
        shape = value.get("shape")
        return array.reshape([int(n) for n in str(shape).split(",")]) if shape else array
    return np.asarray(value)


def _axis_names(trace: dict[str, Any]) -> tuple[str, str]:
    """The layout keys of a trace's axes: ``xaxis``/``yaxis`` or ``xaxis2``/``yaxis2`` ..."""
    return ("xaxis" + trace.get("xaxis", "x")[1:], "yaxis" + trace.get("yaxis", "y")[1:])


def _title(node: dict[str, Any] | None) -> str:
    title = (node or {}).get("title") or {}
    return str(title.get("text", "") if isinstance(title, dict) else title)


def _colormap(scale: list[list[Any]]) -> Any:
    from matplotlib.colors import LinearSegmentedColormap, to_rgb

    def rgb(colour: str) -> tuple[float, ...]:
        if colour.startswith("rgb"):
            return tuple(float(c) / 255 for c in colour[colour.index("(") + 1:-1].split(",")[:3])
        return to_rgb(colour)

    return LinearSegmentedColormap.from_list("plotly", [(float(at), rgb(colour)) for at, colour in scale])


def _in_legend(trace: dict[str, Any]) -> bool:
    """Whether plotly lists ``trace`` in its legend: it has a name and is not ``showlegend=False``."""
    return bool(trace.get("name")) and trace.get("showlegend", True) is not False


def _draw_scatter(axes: Any, trace: dict[str, Any]) -> None:
    x, y = _values(trace["x"]), _values(trace["y"]).astype(float)
    mode = trace.get("mode", "lines+markers")
    line, marker = trace.get("line") or {}, trace.get("marker") or {}
    style = {"linestyle": _DASHES.get(line.get("dash", "solid"), "-") if "lines" in mode else "none",
             "marker": _MARKERS.get(marker.get("symbol", "circle"), "o") if "markers" in mode else None,
             "linewidth": line.get("width", 2) * 0.75, "markersize": 4, "alpha": trace.get("opacity", 1.0),
             "label": textwrap.fill(trace["name"], _LEGEND_CHARACTERS) if _in_legend(trace) else "_nolegend_"}
    colour = line.get("color") or marker.get("color")
    if isinstance(colour, str):  # one colour for the trace (plotly's per-point colour arrays are not drawn)
        style["color"] = colour
    error = (trace.get("error_y") or {}).get("array")
    if error is not None:
        axes.errorbar(x, y, yerr=_values(error).astype(float), capsize=2, **style)
    else:
        axes.plot(x, y, **style)


def _draw_heatmap(figure: Any, axes: Any, trace: dict[str, Any]) -> None:
    z = _values(trace["z"]).astype(float)
    image = axes.imshow(z, aspect="auto", cmap=_colormap(trace["colorscale"]), vmin=trace.get("zmin"),
                        vmax=trace.get("zmax"), interpolation="nearest", origin="lower")
    for setter, labels in ((axes.set_xticks, trace.get("x")), (axes.set_yticks, trace.get("y"))):
        if labels is not None:
            setter(range(len(labels)), [str(label) for label in labels], fontsize=7)
    axes.grid(False)
    colourbar = figure.colorbar(image, ax=axes)
    colourbar.set_label(_title(trace.get("colorbar")))


def _frame(figure: Any, layout: dict[str, Any], x_key: str, y_key: str, width: float) -> Any:
    """The matplotlib axes at the place plotly's ``x_key``/``y_key`` domains give (in ``width`` of the figure),
    labelled as plotly labels them."""
    x_axis, y_axis = layout.get(x_key) or {}, layout.get(y_key) or {}
    (left, right), (bottom, top) = x_axis.get("domain", (0, 1)), y_axis.get("domain", (0, 1))
    height = _HEIGHT
    axes = figure.add_axes((0.1 + left * width, 0.14 + bottom * height, (right - left) * width,
                            (top - bottom) * height))
    axes.set_xlabel(_title(x_axis))
    axes.set_ylabel(_title(y_axis))
    axes.set_xscale("log" if x_axis.get("type") == "log" else "linear")
    axes.set_yscale("log" if y_axis.get("type") == "log" else "linear")
    axes.grid(alpha=0.3)
    return axes


def _draw_shape(frames: dict[tuple[str, str], Any], shape: dict[str, Any]) -> None:
    if shape.get("type") != "line":
        raise HeurlensError(f"a {shape.get('type')!r} shape cannot be drawn as an image (only straight lines)")
    x_ref, y_ref = shape.get("xref", "x"), shape.get("yref", "y")
    axes = frames.get(("xaxis" + x_ref.split()[0][1:], "yaxis" + y_ref.split()[0][1:])) or next(iter(frames.values()))
    style = {"linestyle": _DASHES.get((shape.get("line") or {}).get("dash", "solid"), "-"), "color": "grey"}
    if x_ref.endswith("domain"):
        axes.axhline(shape["y0"], **style)
    else:
        axes.axvline(shape["x0"], **style)


def _draw_annotation(figure: Any, frames: dict[tuple[str, str], Any], note: dict[str, Any], width: float) -> None:
    align = {"horizontalalignment": note.get("xanchor", "center").replace("auto", "center"),
             "verticalalignment": {"bottom": "bottom", "top": "top"}.get(str(note.get("yanchor")), "center")}
    if note.get("xref") == "paper":
        figure.text(0.1 + note["x"] * width, 0.14 + note["y"] * _HEIGHT + 0.01, note["text"], **align)
        return
    axes = next(iter(frames.values()))
    transform = axes.get_xaxis_transform() if note.get("yref", "").endswith("domain") else axes.transData
    axes.text(note["x"], note["y"], note["text"], transform=transform, fontsize=8, **align)


def matplotlib_figure(figure: go.Figure) -> Any:
    """``figure`` redrawn as a ``matplotlib.figure.Figure`` (its traces, axes, title, lines and notes)."""
    from matplotlib.figure import Figure

    data = figure.to_plotly_json()
    traces, layout = data["data"], data["layout"]
    unknown = sorted({trace.get("type", "scatter") for trace in traces} - {"scatter", "heatmap"})
    if unknown:
        raise HeurlensError(f"cannot draw {', '.join(unknown)} traces as a static image (only scatter and heatmap)")
    named = [trace for trace in traces if _in_legend(trace)]
    legend_outside = len(named) > 6
    width = 0.45 if legend_outside else 0.84
    image = Figure(figsize=(13, 6) if legend_outside else (9, 5.4))
    frames: dict[tuple[str, str], Any] = {}
    for trace in traces:
        key = _axis_names(trace)
        if key not in frames:
            frames[key] = _frame(image, layout, *key, width)
        if trace.get("type") == "heatmap":
            _draw_heatmap(image, frames[key], trace)
        else:
            _draw_scatter(frames[key], trace)
    for axes in frames.values():
        if axes.get_legend_handles_labels()[1]:
            axes.legend(fontsize=7, **({"loc": "upper left", "bbox_to_anchor": (1.02, 1.0)} if legend_outside
                                      else {"loc": "best"}))
    for shape in layout.get("shapes", ()):
        _draw_shape(frames, shape)
    for note in layout.get("annotations", ()):
        _draw_annotation(image, frames, note, width)
    if _title(layout):
        image.suptitle(_title(layout))
    return image


def write_figure_image(figure: go.Figure, path: Path) -> Path:
    """Write ``figure`` as the SVG, PNG or PDF its suffix names (``matplotlib_figure``) and return ``path``."""
    path = Path(path)
    if path.suffix.lower() not in IMAGE_SUFFIXES:
        raise HeurlensError(f"{path}: give an image file ending in {', '.join(IMAGE_SUFFIXES)}")
    atomic_write_bytes(path, image_bytes(matplotlib_figure(figure), path.suffix, dpi=150))
    return path


def image_bytes(figure: Any, suffix: str, **savefig: Any) -> bytes:
    """A matplotlib ``figure`` saved in the format ``suffix`` names (one of ``IMAGE_SUFFIXES``; ``savefig``: more of
    ``Figure.savefig``'s keywords): an SVG's text as text and its ids stable, and no creation date in an SVG or PDF,
    so an image rewritten from the same figure is the same file."""
    import matplotlib

    suffix = suffix.lower()
    metadata = {"Date": None} if suffix == ".svg" else {"CreationDate": None} if suffix == ".pdf" else None
    buffer = io.BytesIO()
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "heurlens"}):
        figure.savefig(buffer, format=suffix[1:], metadata=metadata, **savefig)
    return buffer.getvalue()
