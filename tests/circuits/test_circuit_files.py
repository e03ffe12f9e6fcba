"""A circuit drawn as a file (``circuits.circuit_files``, ``heurlens draw``): on the planted-edges model, whose
attribution ranks its three path edges first, a drawing of the top 3 shows exactly the path's nodes, one row each,
the arrows' widths in the order of their scores; the SVG and PNG files are real ones; node runs and a suffix it
cannot write are refused by name."""

import re
import xml.etree.ElementTree as ElementTree

import pytest
from cli_run import heurlens_in_process
from planted_edges import PATH, build_planted_edges_model, planted_edges_task_file

import heurlens
from heurlens.circuits.attribution_runs import attribute
from heurlens.circuits.circuit_files import circuit_drawing, node_places, strongest_edges
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
    figure = circuit_drawing(drawn, layout.n_heads, layout.n_kv_heads, "planted path")
    arrows = [text.arrow_patch for text in figure.axes[0].texts if getattr(text, "arrow_patch", None) is not None]
    assert len(arrows) == 3
    by_score = sorted(drawn, key=lambda d: abs(d.score))  # drawn weakest first, so the strongest lies on top
    assert [arrow.get_linewidth() for arrow in arrows] == sorted(arrow.get_linewidth() for arrow in arrows)
    assert arrows[-1].get_linewidth() == pytest.approx(4.0) and abs(by_score[-1].score) > abs(by_score[0].score)


def test_the_command_writes_svg_and_png_and_refuses_what_it_cannot_draw(planted_run, capsys, tmp_path):
    model, run, folder = planted_run
    status, out, err = heurlens_in_process(capsys, "draw", str(run.path), "--top", "3", "--out",
                                           str(tmp_path / "path.svg"), "--model", str(model.model_id))
    assert status == 0 and "drew 3 edges" in out, err
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
