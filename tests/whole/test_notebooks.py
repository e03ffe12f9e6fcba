"""The notebooks under analyses/ run top to bottom as shipped (a Jupyter kernel, nbclient, in a fresh folder, with
``HEURLENS_NOTEBOOK_SMALL=1``: fewer prompts, as TransformerLens' notebook CI shrinks its notebooks), show what
they say they show, and keep their plotly figures when exported to HTML (nbconvert)."""

import os
import sys
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient
from nbconvert import HTMLExporter

ANALYSES = Path(__file__).parents[2] / "analyses"


def run_notebook(name, folder, monkeypatch, check=None):
    """The notebook executed as shipped in ``folder`` (its working directory), and its HTML export; ``check``: code
    run after its last cell in the same kernel (a cell the test adds; its output is the last cell's)."""
    monkeypatch.setenv("HEURLENS_NOTEBOOK_SMALL", "1")
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")  # this venv's kernel
    notebook = nbformat.read(ANALYSES / name, as_version=4)
    assert not any(cell.get("outputs") for cell in notebook.cells if cell.cell_type == "code")  # shipped clean
    if check is not None:
        notebook.cells.append(nbformat.v4.new_code_cell(check))
    NotebookClient(notebook, timeout=900, kernel_name="python3", resources={"metadata": {"path": str(folder)}}).execute()
    html, _ = HTMLExporter().from_notebook_node(notebook)
    return notebook, html


def text_of(notebook):
    """Everything the cells printed or displayed as text."""
    parts = []
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            parts.append(output.get("text", ""))
            parts.append(output.get("data", {}).get("text/plain", ""))
            parts.append(output.get("data", {}).get("text/html", ""))
    return "\n".join(parts)


def plotly_figures(html):
    """The plotly figures an HTML export draws (each one a ``Plotly.newPlot`` call of its own div)."""
    return html.count("Plotly.newPlot(")


@pytest.mark.slow
def test_the_circuits_notebook_walks_from_a_task_file_to_a_mib_export(tmp_path, monkeypatch):
    notebook, html = run_notebook("circuits_own_task.ipynb", tmp_path, monkeypatch)
    shown = text_of(notebook)
    work = tmp_path / "runs" / "circuits-notebook"
    assert (work / "capitals.jsonl").read_text().count("\n") == 36
    assert "embed->L0.MLP" in shown  # EAP-IG's strongest edge on this task (docs/circuits.md)
    assert "EAP-IG (5 steps)" in shown and "random (edges)" in shown and "edge pruning" in shown
    assert "read back in the same order: True" in shown
    assert (work / "eap-ig.svg").read_text().count("<svg") == 1 and "<svg" in html  # the drawing, inline
    assert plotly_figures(html) == 3  # the curves, the interactive drawing, the warm circuit's drawing
    assert "the 30 strongest of 70,651 edges, 70,621 more not drawn" in html


@pytest.mark.slow
def test_the_ioi_notebook_shows_the_ioi_head_classes_and_their_logit_difference_effect(tmp_path, monkeypatch):
    import json

    notebook, html = run_notebook("ioi_smollm2.ipynb", tmp_path, monkeypatch, check=(
        "import json, math\n"
        "print(json.dumps({'classes': sorted(set(effects['looks_like'])), 'changes': effects['logit_diff_change'].tolist(),"
        " 'grid': [[None if math.isnan(v) else v for v in row] for row in grid.tolist()]}))"))
    shown = json.loads(notebook.cells[-1].outputs[0]["text"])
    assert shown["classes"] == ["duplicate_token", "induction", "name_mover", "s_inhibition"]
    changes = shown["changes"]
    assert len(changes) == 8 and max(abs(change) for change in changes) > 0.5  # heads that move the logit difference
    on_grid = sorted(v for row in shown["grid"] for v in row if v is not None)
    assert on_grid == pytest.approx(sorted(changes))  # the [layer, head] tensor holds the same effects
    assert plotly_figures(html) == 2 and "circuits-vis" in html  # name-mover scores, the effects grid; circuitsvis


@pytest.mark.slow
def test_the_heuristic_core_notebook_makes_a_small_run_when_it_finds_none(tmp_path, monkeypatch):
    notebook, html = run_notebook("heuristic_core_figures2_5_table3.ipynb", tmp_path, monkeypatch)
    shown = text_of(notebook)
    assert "holds no subnetworks: making a small run" in shown
    assert len(list((tmp_path / "runs" / "heuristic-core-small").glob("sparsity-*/seed-*.json"))) == 6
    assert "core:" in shown and "snli-test" in shown
    assert plotly_figures(html) >= 1  # a frequency heatmap at least (one per sparsity with a subnetwork on target)
