"""Figures that read offline: plotly figures redrawn by matplotlib (the values, axes and places plotly gives them), the
HTML that loads plotly.js from its folder, and docs/results as shipped (nothing from the network, every figure also
an image on its page)."""

import re
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import numpy as np
import plotly.graph_objects as go
import pytest
from plotly.subplots import make_subplots

from heurlens.errors import HeurlensError
from heurlens.runtime.figure_files import PLOTLY_BUNDLE, figure_markdown, write_figure_files
from heurlens.runtime.figure_images import matplotlib_figure, write_figure_image

RESULTS = Path(__file__).parents[2] / "docs" / "results"


def test_scatter_traces_are_drawn_with_their_values_errors_and_axes():
    figure = go.Figure([go.Scatter(x=[0.001, 0.1, 1.0], y=[0.2, 0.7, 1.0], name="EAP-IG", mode="lines+markers"),
                        go.Scatter(x=[0.001, 1.0], y=[0.1, 1.0], name="masks", mode="markers",
                                   error_y={"array": [0.05, 0.0]})])
    figure.update_layout(title="f(k)", xaxis={"type": "log", "title": "k"}, yaxis_title="f")
    figure.add_hline(y=1.0, line_dash="dot")
    image = matplotlib_figure(figure)
    axes = image.axes[0]
    lines = {line.get_label(): line for line in axes.get_lines()}
    np.testing.assert_allclose(lines["EAP-IG"].get_ydata(), [0.2, 0.7, 1.0])
    np.testing.assert_allclose(lines["EAP-IG"].get_xdata(), [0.001, 0.1, 1.0])
    masks = axes.containers[0]  # drawn with its error bars
    assert masks.get_label() == "masks" and masks.lines[0].get_linestyle() == "None"  # markers only
    assert lines["EAP-IG"].get_linestyle() == "-"
    error_bar = masks.lines[2][0].get_segments()[0]  # the first point's bar: y 0.1 +- 0.05
    np.testing.assert_allclose(error_bar[:, 1], [0.05, 0.15])
    assert axes.get_xscale() == "log" and axes.get_yscale() == "linear"
    assert axes.get_xlabel() == "k" and axes.get_ylabel() == "f" and image._suptitle.get_text() == "f(k)"
    dotted = [line for line in axes.get_lines() if line.get_linestyle() == ":"]
    assert len(dotted) == 1 and list(dotted[0].get_ydata()) == [1.0, 1.0]  # the hline at y = 1, across the axes


def test_a_traces_colour_opacity_and_legend_entry_carry_into_the_image():
    """A long name wraps (the image has a fixed width: it was cut at the edge), a trace out of the legend stays out."""
    long_name = "edge masks, KL, node masks beside them (target 0.72), trained for a ranking, warm-started from EAP-IG"
    figure = go.Figure([go.Scatter(x=[1, 2], y=[3, 4], name=long_name, line={"color": "#E15F99"}),
                        go.Scatter(x=[1, 2], y=[3.5, 4.5], name="its circuits", mode="markers", showlegend=False,
                                   opacity=0.5, marker={"symbol": "x", "color": "#E15F99"})])
    axes = matplotlib_figure(figure).axes[0]
    curve, circuits = axes.get_lines()
    assert curve.get_color() == circuits.get_color() == "#E15F99" and circuits.get_alpha() == 0.5
    [label] = axes.get_legend_handles_labels()[1]
    assert label.replace("\n", " ") == long_name and max(len(line) for line in label.splitlines()) <= 70


def test_subplots_keep_their_places_and_heatmaps_their_rows():
    figure = make_subplots(rows=1, cols=2, subplot_titles=("left", "right"))
    figure.add_trace(go.Scatter(x=[1, 2], y=[3, 4], name="a"), row=1, col=1)
    figure.add_trace(go.Heatmap(z=[[0.0, 1.0], [0.5, 0.25]], x=["s1", "s2"], y=["L0.H1", "L1.H0"], zmin=0, zmax=1,
                                colorscale="Blues"), row=1, col=2)
    image = matplotlib_figure(figure)
    left, right = image.axes[0], image.axes[1]
    assert left.get_position().x1 < right.get_position().x0  # plotly's domains [0, 0.45] and [0.55, 1]
    heat = right.images[0]
    np.testing.assert_allclose(heat.get_array(), [[0.0, 1.0], [0.5, 0.25]])
    assert heat.origin == "lower"  # plotly puts y[0] at the bottom, as the labels below say
    assert [t.get_text() for t in right.get_yticklabels()] == ["L0.H1", "L1.H0"]
    assert heat.get_clim() == (0, 1)
    assert {"left", "right"} <= {text.get_text() for text in image.texts}  # the subplot titles


def test_traces_it_cannot_draw_are_refused_by_name(tmp_path):
    with pytest.raises(HeurlensError, match="cannot draw bar traces"):
        matplotlib_figure(go.Figure(go.Bar(x=[1], y=[2])))
    with pytest.raises(HeurlensError, match="ending in .svg"):
        write_figure_image(go.Figure(go.Scatter(x=[1], y=[2])), tmp_path / "f.jpg")


def test_figure_files_load_plotly_from_the_folder_and_write_an_svg_twice_alike(tmp_path):
    figure = go.Figure(go.Scatter(x=[1, 2, 3], y=[1, 4, 9], name="squares"))
    html, svg = write_figure_files(figure, tmp_path / "curve.html")
    page = html.read_text()
    assert '<script charset="utf-8" src="plotly.min.js"></script>' in page and "src=\"http" not in page
    assert (tmp_path / PLOTLY_BUNDLE).stat().st_size > 1_000_000  # plotly.js itself
    root = ElementTree.parse(svg).getroot()
    assert root.tag.endswith("svg") and "squares" in svg.read_text()  # the legend, as text
    first = svg.read_bytes()
    (tmp_path / PLOTLY_BUNDLE).write_text("// the folder's own copy")
    write_figure_files(figure, tmp_path / "curve.html")
    assert svg.read_bytes() == first  # no date inside: rewriting the same figure leaves the file as it was
    assert (tmp_path / PLOTLY_BUNDLE).read_text() == "// the folder's own copy"  # an existing copy is kept
    assert figure_markdown(html, "a curve") == "![a curve](curve.svg)\n"


def test_docs_results_load_nothing_from_the_network_and_show_every_figure_as_an_image():
    files = [path for path in RESULTS.rglob("*") if path.suffix in (".html", ".md", ".svg")]
    assert files
    for path in files:
        assert not re.search(r"""(src|href)=["']?https?://""", path.read_text()), f"{path} loads from the network"
    figures = sorted(RESULTS.glob("*.html"))
    assert figures and (RESULTS / PLOTLY_BUNDLE).exists()
    pages = {page: page.read_text() for page in RESULTS.glob("*.md")}
    for html in figures:
        assert 'src="plotly.min.js"' in html.read_text(), f"{html} does not load the folder's plotly.js"
        assert html.with_suffix(".svg").exists(), f"{html} has no image"
        linking = [page for page, text in pages.items() if f"]({html.name})" in text]
        assert linking, f"no results page links {html.name}"
        for page in linking:
            assert f"]({html.with_suffix('.svg').name})" in pages[page], f"{page.name} links {html.name} only"


def test_a_results_figure_draws_in_a_browser_with_the_network_cut_off():
    import shutil
    import subprocess

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("Debian's chromium is not installed (install.sh installs it when run as root)")
    page = RESULTS / "circuits-ioi-smollm2-ioi.html"
    result = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=15000",
                             "--proxy-server=127.0.0.1:9", "--dump-dom", page.as_uri()],  # every request fails
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert 'class="main-svg"' in result.stdout and "Faithfulness on IOI" in result.stdout  # plotly drew it
