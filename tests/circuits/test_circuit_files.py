"""A circuit drawn (``circuits.drawn_edges``, ``circuits.circuit_files``, ``circuits.drawing``, ``heurlens draw``): on
the planted-edges model, whose attribution ranks its three path edges first, a drawing of the top 3 shows exactly
the path's nodes, one row each, the arrows' widths in the order of their scores; a circuit cut at a size or given by
a keep mask is drawn as its strongest edges with the rest counted; MIB files are drawn as read; the SVG and PNG files
are real ones; node runs and a suffix it cannot write are refused by name."""

import re
import xml.etree.ElementTree as ElementTree

import pytest
from cli_run import heurlens_in_process
from planted_edges import PATH, build_planted_edges_model, planted_edges_task_file

import heurlens
from heurlens.circuits.attribution_runs import attribute
from heurlens.circuits.circuit_files import circuit_drawing
from heurlens.circuits.drawing import edges_figure
from heurlens.circuits.drawn_edges import DrawnCircuit, circuit_to_draw, node_places, strongest_edges
from heurlens.data.run_data import PromptTaskData
from heurlens.errors import HeurlensError
from heurlens.interventions.graph import edge_layout


@pytest.fixture(scope="module")
def planted_run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("planted")
    model = heurlens.load_model(build_planted_edges_model(folder / "model"))
    task = planted_edges_task_file(folder / "task.jsonl")
    run = attribute(model, PromptTaskData(str(task), 16, 0, batch_size=4), folder / "eap", level="edge", method="eap")
    return model, run, folder


def test_the_top_edges_of_the_planted_model_are_its_path_drawn_on_their_own_rows(planted_run):
    model, run, _ = planted_run
    layout = edge_layout(model)
    drawn = strongest_edges(run.ranking, layout, 3)
    assert {str(d.edge) for d in drawn} == set(PATH)
    assert [abs(d.score) for d in drawn] == sorted((abs(d.score) for d in drawn), reverse=True)
    places = node_places(drawn, layout.n_heads, layout.n_kv_heads)
    assert places == {"embed": (0.5, 0.0), "L0.H1": (1.0, 1.0), "L1.H0": (0.0, 2.0), "logits": (0.5, 3.0)}
    figure = circuit_drawing(DrawnCircuit(drawn, 3, layout.n_edges, "planted path"), layout.n_heads,
                             layout.n_kv_heads)
    arrows = [text.arrow_patch for text in figure.axes[0].texts if getattr(text, "arrow_patch", None) is not None]
    assert len(arrows) == 3
    by_score = sorted(drawn, key=lambda d: abs(d.score))  # drawn weakest first, so the strongest lies on top
    assert [arrow.get_linewidth() for arrow in arrows] == sorted(arrow.get_linewidth() for arrow in arrows)
    assert arrows[-1].get_linewidth() == pytest.approx(4.0) and abs(by_score[-1].score) > abs(by_score[0].score)


def test_the_command_writes_svg_and_png_and_refuses_what_it_cannot_draw(planted_run, capsys, tmp_path):
    model, run, folder = planted_run
    status, out, err = heurlens_in_process(capsys, "draw", str(run.path), "--top", "3", "--out",
                                           str(tmp_path / "path.svg"), "--model", str(model.model_id))
    assert status == 0 and "drew 3 edges" in out and "(43 more in the circuit, not drawn)" in out, err
    svg = ElementTree.parse(tmp_path / "path.svg").getroot()
    assert svg.tag.endswith("svg")
    status, _, err = heurlens_in_process(capsys, "draw", str(run.path), "--top", "3", "--out",
                                         str(tmp_path / "path.png"), "--model", str(model.model_id))
    assert status == 0 and (tmp_path / "path.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", err
    status, _, err = heurlens_in_process(capsys, "draw", str(run.path), "--out", str(tmp_path / "path.gif"),
                                         "--model", str(model.model_id))
    assert status == 2 and re.search(r"give a file ending in \.svg, \.png, \.pdf", err)
    nodes = attribute(model, PromptTaskData(str(folder / "task.jsonl"), 16, 0, batch_size=4), tmp_path / "nodes",
                      level="node", method="eap")
    status, _, err = heurlens_in_process(capsys, "draw", str(nodes.path), "--out", str(tmp_path / "n.svg"),
                                         "--model", str(model.model_id))
    assert status == 2 and "ranks heads and MLPs, not edges" in err and not (tmp_path / "n.svg").exists()
    with pytest.raises(HeurlensError, match="draw one edge or more"):
        strongest_edges(run.ranking, edge_layout(model), 0)


def test_a_circuit_is_its_size_or_its_keep_mask_and_the_edges_not_drawn_are_counted(planted_run):
    model, run, _ = planted_run
    layout = edge_layout(model)  # 46 edges
    cut = circuit_to_draw(run.ranking, layout, top=2, size=0.1)  # ceil(4.6) = 5 edges, the 2 strongest drawn
    assert (cut.in_circuit, cut.not_drawn, len(cut.edges)) == (5, 3, 2)
    assert [d.edge for d in cut.edges] == [d.edge for d in strongest_edges(run.ranking, layout, 2)]
    assert cut.title == f"{run.ranking.label}: the 2 strongest of its 5 edges (of 46), 3 more not drawn"
    keep = layout.keep_mask(layout.edges()[:4])  # four edges the ranking does not put first
    kept = circuit_to_draw(run.ranking, layout, top=50, keep=keep)
    assert {d.edge for d in kept.edges} == set(layout.edges()[:4]) and kept.not_drawn == 0  # only the circuit's
    assert kept.title.endswith(": its 4 edges (of 46)")
    whole = circuit_to_draw(run.ranking, layout, top=3)
    assert whole.title.endswith(": the 3 strongest of 46 edges, 43 more not drawn")
    with pytest.raises(HeurlensError, match="above 0 and at most 1"):
        circuit_to_draw(run.ranking, layout, top=3, size=1.5)


def test_the_interactive_figure_draws_the_same_edges_in_the_same_places(planted_run):
    model, run, _ = planted_run
    layout = edge_layout(model)
    drawn = circuit_to_draw(run.ranking, layout, top=3)
    figure = edges_figure(drawn, layout.n_heads, layout.n_kv_heads)
    places = node_places(drawn.edges, layout.n_heads, layout.n_kv_heads)
    lines = [trace for trace in figure.data if trace.mode == "lines"]
    assert len(lines) == 3 and figure.layout.title.text == drawn.title
    by_edge = {trace.hovertext.split(":")[0]: trace for trace in lines}
    assert set(by_edge) == set(PATH)
    assert list(zip(by_edge["L0.H1->L1.H0.v"].x, by_edge["L0.H1->L1.H0.v"].y)) == [places["L0.H1"], places["L1.H0"]]
    widths = [trace.line.width for trace in lines]  # drawn weakest first
    assert widths == sorted(widths) and widths[-1] == pytest.approx(5.0)


def test_mib_files_are_drawn_as_read(planted_run, capsys, tmp_path):
    model, run, _ = planted_run
    status, _, err = heurlens_in_process(capsys, "export-mib", str(run.path), "--out", str(tmp_path / "mib"),
                                         "--circuits", "--model", str(model.model_id))
    assert status == 0, err
    importance = next(path for path in (tmp_path / "mib").glob("*.json") if not path.name.startswith(("circuit",
                                                                                                     "mib-export")))
    status, out, err = heurlens_in_process(capsys, "draw", str(importance), "--top", "3", "--out",
                                           str(tmp_path / "file.svg"), "--model", str(model.model_id))
    assert status == 0 and "drew 3 edges" in out, err
    svg = (tmp_path / "file.svg").read_text()
    assert all(f">{node}<" in svg for node in ("L0.H1", "L1.H0")) and ">L1.H1<" not in svg  # the path's nodes only
    circuit = tmp_path / "mib" / "circuit-5%.json"  # MIB's 5% circuit: its in_graph edges, the path's first two
    status, out, err = heurlens_in_process(capsys, "draw", str(circuit), "--out", str(tmp_path / "circuit.svg"),
                                           "--model", str(model.model_id))
    assert status == 0 and "drew 2 edges of circuit-5%" in out and "not drawn" not in out, err
    assert "its 2 edges (of 46)" in (tmp_path / "circuit.svg").read_text()
    status, _, err = heurlens_in_process(capsys, "draw", str(importance), "--out", str(tmp_path / "f.svg"))
    assert status == 2 and "names no model: give the one it scores with --model" in err


def test_node_positions_still_works_with_a_warning_at_the_callers_line():
    from heurlens.circuits.drawing import node_positions
    from heurlens.pruning.circuit import EdgeCircuit

    circuit = EdgeCircuit(kept=[], n_layers=2, n_heads=2, target_sparsity=0.9, achieved_sparsity=0.9, threshold=0.5,
                          seed=0, model_id="planted", model_fingerprint="", data_id="", n_kv_heads=2, edges=[])
    with pytest.warns(DeprecationWarning, match="drawn_edges.node_places") as caught:
        positions = node_positions(circuit)
    assert caught[0].filename == __file__
    assert positions["embed"] == (0.5, 0.0) and positions["logits"] == (0.5, 5.0) and positions["L1.MLP"] == (0.5, 4.0)


def test_a_file_that_is_not_mibs_json_is_refused_by_name(capsys, tmp_path):
    notes = tmp_path / "circuit.txt"
    notes.write_text("L0.H1->L1.H0.v")
    status, _, err = heurlens_in_process(capsys, "draw", str(notes), "--out", str(tmp_path / "c.svg"))
    assert status == 2 and "draw takes a run folder or a circuit file in MIB's format (.json)" in err
    assert not (tmp_path / "c.svg").exists()


def test_each_methods_curve_and_circuits_share_one_colour_no_other_method_has():
    """Eleven methods on one page: past plotly's ten colours they repeated, two methods alike, and every method's
    circuits took a legend entry and a colour of their own (the SmolLM2 page's edge figure)."""
    import pandas as pd

    from heurlens.circuits.drawing import faithfulness_figure
    from heurlens.circuits.faithfulness_areas import MIB_GRID, FaithfulnessCurve, grid_count

    curves = {f"method {m}": FaithfulnessCurve(pd.DataFrame(
        [{"curve": "seed 0", "circuit": f"top {grid_count(size, 1000)}", "units_kept": grid_count(size, 1000),
          "kept_fraction": size, "faithfulness": min(1.0, size * (m + 1))} for size in MIB_GRID]), 2.0, 0.0, 1000)
        for m in range(11)}
    figure = faithfulness_figure(curves, "a task")
    lines = [trace for trace in figure.data if trace.mode == "lines+markers"]
    points = [trace for trace in figure.data if trace.mode == "markers"]
    assert len({trace.line.color for trace in lines}) == 11
    for line, circuits in zip(lines, points, strict=True):
        assert circuits.marker.color == line.line.color and circuits.legendgroup == line.legendgroup
        assert circuits.showlegend is False and line.showlegend is not False
    assert [trace.name.split(" (")[0] for trace in lines] == list(curves)
