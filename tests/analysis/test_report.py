"""A pruning run's report and the core command on a tiny BERT, with the page rendered by a real
headless browser (Debian's chromium)."""

import re
import shutil
import subprocess
import sys

import pytest

import heurlens
from heurlens.analysis.run_report import build_run_report
from heurlens.evaluate import tokenize_pairs
from heurlens.models import load_model
from heurlens.pruning import PruneSettings, prune

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture(scope="module")
def run_dir(tiny_bert_dir, tmp_path_factory):
    """Two seeds at 30% and 60% sparsity of the 2-layer, 4-head tiny BERT (a few steps each)."""
    model = load_model(tiny_bert_dir)
    train = tokenize_pairs("hans-train", heurlens.generate_hans(8, ["ln_preposition", "cn_embedded_under_if"], seed=1),
                           model.tokenizer, 8)
    out = tmp_path_factory.mktemp("run")
    # 8 steps from a half-on, widely spread start (log_alpha ~ N(0, 3)) so that the subnetworks differ and reach
    # their targets; from 10 nothing is pruned yet
    prune(model, train, sparsity=[0.3, 0.6], seeds=range(2), out=out, config=PruneSettings(total_steps=8, log_alpha_init=0.0,
                                                                  log_alpha_init_std=3.0), progress=False)
    return out


def rendered_dom(path):
    result = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=15000",
                             "--dump-dom", path.as_uri()], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout


def test_run_report_tables_caches_and_page(run_dir, tiny_bert_dir):
    model = load_model(tiny_bert_dir)
    eager = load_model(tiny_bert_dir, attn_implementation="eager")
    eval_sets = [tokenize_pairs("hans/ln_preposition", heurlens.generate_hans(10, ["ln_preposition"]), model.tokenizer),
                 tokenize_pairs("hans/ln_passive", heurlens.generate_hans(10, ["ln_passive"]), model.tokenizer)]
    pattern_data = eval_sets[0]
    report = build_run_report(run_dir, model, eager, eval_sets, pattern_data)
    assert len(list(run_dir.glob("evaluation-*.csv"))) == 1
    page = report.to_html()
    assert "Spearman rho between head frequencies at 30% and 60%" in page
    assert "the core" in page
    assert "src=\"http" not in page  # no external scripts: plotly.js and circuitsvis are inlined
    core_line = re.search(r"\(the core\): ([^<]*)<", page).group(1)
    if core_line != "none":  # the core heads' patterns were scored and cached, and plotted
        assert len(list(run_dir.glob("patterns-*.csv"))) == 1 and "circuits-vis" in page
    path = report.write(run_dir / "report.html")
    if CHROMIUM is None:
        pytest.skip("Debian's chromium is not installed (install.sh installs it when run as root)")
    dom = rendered_dom(path)
    assert dom.count('class="main-svg"') >= 3  # plotly drew the frequency and co-occurrence heatmaps
    if core_line != "none":  # circuitsvis rendered its React tree into its div
        assert re.search(r'id="circuits-vis-[^"]*"[^>]*><div', dom)


def test_core_command(run_dir, tmp_path):
    result = subprocess.run([sys.executable, "-m", "heurlens", "core", str(run_dir), "--out", str(tmp_path)],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert "heads kept by every subnetwork" in result.stdout and "Spearman rho" in result.stdout
    assert (tmp_path / "frequencies.csv").exists() and (tmp_path / "cooccurrence-30%-60%.html").exists()
    empty = subprocess.run([sys.executable, "-m", "heurlens", "core", str(tmp_path)], capture_output=True, text=True)
    assert empty.returncode == 2 and "holds no subnetworks" in empty.stderr


def test_notebook_runs_on_a_run_directory(run_dir, tiny_bert_dir, monkeypatch):
    """Executes the notebook's code cells in order, its parameters cell pointed at the tiny run."""
    import json
    from pathlib import Path

    import plotly.graph_objects as go

    shown = []
    monkeypatch.setattr(go.Figure, "show", lambda figure: shown.append(figure))  # no IPython display here
    notebook = json.loads((Path(__file__).parents[2] / "analyses" / "heuristic_core_figures2_5_table3.ipynb").read_text())
    cells = ["".join(c["source"]) for c in notebook["cells"] if c["cell_type"] == "code"]
    assert cells[0].startswith("# Parameters")
    namespace = {"display": lambda *args: None}
    exec(f"RUN_DIR = {str(run_dir)!r}\nMODEL = {str(tiny_bert_dir)!r}\n"
         "IN_DOMAIN_EXAMPLES, PER_SUBCASE, PATTERN_EXAMPLES = 20, 5, 8", namespace)
    for cell in cells[1:]:
        exec(cell, namespace)
    assert set(namespace["groups"]) == {0.3, 0.6}
    assert len(namespace["scan"]) == len(namespace["core"]) * 5  # every core head on 1 + 4 eval sets
    assert len(shown) == 3  # two frequency heatmaps and the co-occurrence heatmap


def test_a_run_whose_subnetworks_missed_their_target_is_reported_with_a_banner(tiny_bert_dir, tmp_path):
    """Two steps from log_alpha 10 prune nothing, so both seeds miss 60%: the report was refused ("every
    subnetwork ... missed its target"); it now shows the evaluation with the subnetworks marked and a banner that
    says so and why there is no core, in every rendering."""
    import warnings

    model = load_model(tiny_bert_dir)
    train = tokenize_pairs("hans-train", heurlens.generate_hans(8, ["ln_preposition"], seed=1), model.tokenizer, 8)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the missed targets, warned as they are pruned
        records = prune(model, train, sparsity=0.6, seeds=range(2), out=tmp_path, progress=False,
                        config=PruneSettings(total_steps=2))
    assert all(record.missed_target for record in records)
    eval_sets = [tokenize_pairs("hans/ln_passive", heurlens.generate_hans(10, ["ln_passive"]), model.tokenizer)]
    report = build_run_report(tmp_path, model, model, eval_sets, eval_sets[0])
    page, text = report.to_html(), report.to_text()
    assert 'class="banner">2 of 2 subnetworks missed their target sparsity' in page
    assert "no overlap or core to show" in text and text.count("!! ") == 1
    assert "(missed its target)" in page and "the core" not in page
