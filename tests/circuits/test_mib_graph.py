"""MIB's graph beside heurlens' (counts by hand on a tiny grouped-query Llama, names, conversions both ways) and MIB's
circuit files out and in (a round trip, a file written by hand in MIB's schema, the planted path through a file)."""

import json
import re

import pytest
import torch
from planted_edges import N_EDGES, PATH, build_planted_edges_model, planted_edges_task, planted_edges_task_file

import heurlens
from heurlens.circuits.faithfulness import keep_mask_curve, ranking_curve
from heurlens.circuits.mib_files import read_mib_file, write_mib_file
from heurlens.circuits.mib_graph import MibGraph
from heurlens.errors import HeurlensError
from heurlens.interventions.graph import EdgeLayout, edge_layout
from heurlens.interventions.rankings import Ranking


@pytest.fixture(scope="module")
def gqa_llama(tiny_decoder_dirs):
    from transformer_lens.model_bridge import TransformerBridge

    bridge = TransformerBridge.boot_transformers(str(tiny_decoder_dirs["llama"]), device="cpu")
    return heurlens.wrap_bridge(bridge)


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    return heurlens.load_model(build_planted_edges_model(tmp_path_factory.mktemp("planted-edges")))


def test_edge_counts_on_both_graphs_agree_with_a_hand_count(gqa_llama):
    """2 layers of 4 query heads sharing 2 key-value heads (G = 2). A layer-l reader reads 1 + 5 l writers (the
    embeddings, 4 heads and an MLP per layer below), its MLP 4 more. heurlens: per layer 4 q + 2 k + 2 v readers and
    the MLP, so 8 * 1 + 5 = 13 and 8 * 6 + 10 = 58, plus 11 into the logits: 82. MIB: 4 heads * 3 inputs, so
    12 * 1 + 5 = 17 and 12 * 6 + 10 = 82, plus 11: 110. SmolLM2's shape (30 layers, 9 heads, 3 key-value heads):
    70,651 and 123,211 (the issue's counts); GPT-2 small's: 32,491 on both (MIB's released IOI file has 32,491)."""
    layout = edge_layout(gqa_llama)
    assert (layout.n_heads, layout.n_kv_heads) == (4, 2)
    assert layout.n_edges == 82 and MibGraph(layout).n_edges == 110
    assert (EdgeLayout(30, 9, 3).n_edges, MibGraph(EdgeLayout(30, 9, 3)).n_edges) == (70651, 123211)
    assert EdgeLayout(12, 12, 12).n_edges == MibGraph(EdgeLayout(12, 12, 12)).n_edges == 32491


def test_a_key_value_edge_is_each_of_its_query_heads_edges(gqa_llama):
    """L0.H1->L1.KV0.k is MIB's a0.h1->a1.h0<k> and a0.h1->a1.h1<k> (KV0 serves query heads 0 and 1); a query edge
    is one MIB edge. heurlens -> MIB copies; MIB -> heurlens sums, averages, or keeps when any is kept."""
    layout = edge_layout(gqa_llama)
    graph = MibGraph(layout)
    names = [str(edge) for edge in layout.edges()]
    mib = dict(zip(graph.edge_names, graph.heurlens_index.tolist()))
    assert [n for n, i in mib.items() if names[i] == "L0.H1->L1.KV0.k"] == ["a0.h1->a1.h0<k>", "a0.h1->a1.h1<k>"]
    assert [n for n, i in mib.items() if names[i] == "L0.H1->L1.H3.q"] == ["a0.h1->a1.h3<q>"]
    assert names[mib["m1->logits"]] == "L1.MLP->logits" and names[mib["input->a0.h2<v>"]] == "embed->L0.KV1.v"
    assert len(set(graph.edge_names)) == 110 and sorted(set(mib.values())) == list(range(82))
    values = torch.arange(82, dtype=torch.float64)
    assert torch.equal(graph.grouped(graph.ungrouped(values), "mean"), values)
    mib_values = torch.zeros(110, dtype=torch.float64)
    mib_values[graph.edge_names.index("a0.h1->a1.h0<k>")] = 2.0
    mib_values[graph.edge_names.index("a0.h1->a1.h1<k>")] = -0.5
    kv = names.index("L0.H1->L1.KV0.k")
    assert graph.grouped(mib_values, "sum")[kv] == 1.5 and graph.grouped(mib_values, "mean")[kv] == 0.75
    kept = torch.zeros(110)
    kept[graph.edge_names.index("a0.h1->a1.h1<k>")] = 1
    assert graph.grouped(kept, "any").nonzero().flatten().tolist() == [kv]  # a superset: both query heads' edges
    with pytest.raises(HeurlensError, match="one value per edge of MIB's graph"):
        graph.grouped(torch.zeros(82), "sum")


def test_a_runs_ranking_round_trips_through_mibs_file(gqa_llama, tmp_path):
    """An edge ranking of the grouped-query model written as MIB's importance file (scores copied to each query
    head) and read back is the same ranking to the bit, as is a node ranking; a binary circuit comes back as the
    same keep mask, and carries the ranking's score on every edge beside in_graph (EAP-IG's Graph.from_json reads
    ``score`` on every edge)."""
    scores = torch.randn(82, generator=torch.Generator().manual_seed(0))
    write_mib_file(tmp_path / "edges.json", gqa_llama, Ranking("run", "edge", scores))
    document = json.loads((tmp_path / "edges.json").read_text())
    assert len(document["edges"]) == 110 and document["cfg"]["n_heads"] == 4
    assert document["edges"]["a0.h1->a1.h0<k>"]["score"] == document["edges"]["a0.h1->a1.h1<k>"]["score"]
    back = read_mib_file(tmp_path / "edges.json", gqa_llama)
    assert back.level == "edge" and torch.equal(back.ranking.scores, scores) and not back.ranking.signed
    units = torch.randn(10, generator=torch.Generator().manual_seed(1))
    write_mib_file(tmp_path / "nodes.json", gqa_llama, Ranking("run", "node", units))
    assert torch.equal(read_mib_file(tmp_path / "nodes.json", gqa_llama).ranking.scores, units)
    signed = Ranking("EAP-IG", "edge", scores, signed=True)
    write_mib_file(tmp_path / "signed.json", gqa_llama, signed)
    document = json.loads((tmp_path / "signed.json").read_text())
    assert document["edges"]["input->a0.h0<q>"]["score"] == float(scores[0])  # attribution scores as they are
    back = read_mib_file(tmp_path / "signed.json", gqa_llama).ranking
    assert back.signed and torch.equal(back.scores, scores)
    keep = (scores > 0.5).float()
    write_mib_file(tmp_path / "circuit.json", gqa_llama, Ranking("run", "edge", scores), keep)
    document = json.loads((tmp_path / "circuit.json").read_text())
    assert all(isinstance(edge["score"], float) for edge in document["edges"].values())
    assert sum(edge["in_graph"] for edge in document["edges"].values()) > keep.sum()  # a key-value edge: 2 query heads
    assert torch.equal(read_mib_file(tmp_path / "circuit.json", gqa_llama).keep, keep)
    (tmp_path / "bad.json").write_text('{"nodes": {}}')
    with pytest.raises(HeurlensError, match="not a circuit file in MIB's format"):
        read_mib_file(tmp_path / "bad.json", gqa_llama)


def test_a_mask_runs_negative_log_alpha_is_written_so_both_of_mibs_orders_keep_its_highest_first(gqa_llama, tmp_path):
    """log_alpha of both signs (a mask run's: negative means mostly off) is written shifted to 1 and above, so MIB's
    absolute=True order is its absolute=False order is the run's own; the offset in cfg brings back the exact
    log_alpha. Written as it is, |log_alpha| would put the most negative (least kept) edges first."""
    log_alpha = torch.linspace(-6.0, 3.0, 82)[torch.randperm(82, generator=torch.Generator().manual_seed(2))]
    write_mib_file(tmp_path / "mask.json", gqa_llama, Ranking("seed 0", "edge", log_alpha))
    document = json.loads((tmp_path / "mask.json").read_text())
    graph = MibGraph(edge_layout(gqa_llama))
    written = torch.tensor([document["edges"][name]["score"] for name in graph.edge_names])
    assert written.min() == pytest.approx(1.0) and document["cfg"]["heurlens"]["scores"] == "log_alpha"
    by_score, by_size = (torch.argsort(keys, descending=True, stable=True) for keys in (written, written.abs()))
    assert torch.equal(by_score, by_size)
    expected = torch.argsort(graph.ungrouped(log_alpha), descending=True, stable=True)
    assert torch.equal(written[by_score], written[expected])  # the run's order (ties among copies aside)
    back = read_mib_file(tmp_path / "mask.json", gqa_llama).ranking
    assert torch.equal(back.scores, log_alpha) and not back.signed


def test_files_that_are_not_quite_mibs_format_are_refused_by_name(gqa_llama, tmp_path):
    """One edge without a score among scored ones, an edge of no graph of this model, in_graph as a string, nodes
    as a list and an edge as a number: each refused naming what is wrong (before: a binary circuit without a word,
    ignored, read as kept, tracebacks); an unknown graph name too."""
    graph = MibGraph(edge_layout(gqa_llama))
    ungrouped = MibGraph(EdgeLayout(2, 4, 4))
    cfg = {"n_layers": 2, "n_heads": 4, "parallel_attn_mlp": False, "d_model": 32}
    nodes = {"input": {"in_graph": True}, "logits": {"in_graph": True}}
    edges = {name: {"score": 0.1, "in_graph": True} for name in ungrouped.edge_names}

    def refused(document, match, **kwargs):
        (tmp_path / "file.json").write_text(json.dumps(document))
        with pytest.raises(HeurlensError, match=match):
            read_mib_file(tmp_path / "file.json", gqa_llama, **kwargs)

    assert graph.n_edges == ungrouped.n_edges == 110
    first = ungrouped.edge_names[5]
    refused({"cfg": cfg, "nodes": nodes, "edges": {**edges, first: {"in_graph": True}}},
            f"edge '{re.escape(first)}' has no score, while others have")
    refused({"cfg": cfg, "nodes": nodes, "edges": {**edges, "a9.h0->logits": {"score": 1.0}}},
            "has an edge 'a9.h0->logits' that is not of this model's graph")
    refused({"cfg": cfg, "nodes": nodes, "edges": {name: {"in_graph": "false"} for name in edges}},
            "has in_graph 'false'; MIB's format takes true or false")
    refused({"cfg": cfg, "nodes": [], "edges": edges}, "nodes is a list")
    refused({"cfg": cfg, "nodes": nodes, "edges": {**edges, first: 0.5}}, "edge .* is 0.5")
    refused({"cfg": cfg, "nodes": nodes, "edges": edges}, "graph='MIB'", graph="MIB")


def test_a_file_written_by_hand_in_mibs_schema_is_scored_on_the_planted_model(planted, tmp_path):
    """MIB's schema written here by hand for the planted-path model (another tool's file: no heurlens cfg, scores
    on every edge): the three path edges scored highest, every other edge small. Read, its ranking's top 3 is the
    path and every size's f is as the path predicts: 1 from 3 edges up (0.1%-5% of 46 edges keep none, 10% 4,
    20% 9, 50% 23, 100% 46), 0 below. A binary circuit file of the path scores f = 1, and the path without its last
    edge 0."""
    mib_path = {"input->a0.h1<v>", "a0.h1->a1.h0<v>", "a1.h0->logits"}
    graph = MibGraph(edge_layout(planted))
    edges = {name: {"score": (5.0 if name in mib_path else 0.01 * i), "in_graph": name in mib_path}
             for i, name in enumerate(graph.edge_names)}
    nodes = {name: {"in_graph": True} for name in ["input", "a0.h0", "a0.h1", "m0", "a1.h0", "a1.h1", "m1", "logits"]}
    cfg = {"n_layers": 2, "n_heads": 2, "parallel_attn_mlp": False, "d_model": 20}
    (tmp_path / "scores.json").write_text(json.dumps({"cfg": cfg, "nodes": nodes, "edges": edges}))
    task = planted_edges_task()
    file = read_mib_file(tmp_path / "scores.json", planted)
    layout = edge_layout(planted)
    assert sorted(str(edge) for edge, kept in zip(layout.edges(), file.ranking.top(3)) if kept) == sorted(PATH)
    curve = ranking_curve(planted, file.ranking, task, cache=False)
    points = curve.points.set_index("kept_fraction")
    assert points["kept"].tolist() == [0, 0, 0, 0, 0, 2, 4, 9, 23, N_EDGES]
    assert points["faithfulness"].tolist() == pytest.approx([0, 0, 0, 0, 0, 0, 1, 1, 1, 1], abs=1e-5)
    circuit = {name: {"in_graph": edge["in_graph"]} for name, edge in edges.items()}
    (tmp_path / "circuit.json").write_text(json.dumps({"cfg": cfg, "nodes": nodes, "edges": circuit}))
    circuit["a1.h0->logits"] = {"in_graph": False}
    (tmp_path / "cut.json").write_text(json.dumps({"cfg": cfg, "nodes": nodes, "edges": circuit}))
    masks = {path: read_mib_file(tmp_path / path, planted).keep for path in ("circuit.json", "cut.json")}
    scored = keep_mask_curve(planted, "edge", masks, task, cache=False).circuits.set_index("circuit")
    assert scored["faithfulness"].tolist() == pytest.approx([1.0, 0.0], abs=1e-5)
    assert scored["edges_kept"].tolist() == [3, 2]
    (tmp_path / "other.json").write_text(json.dumps({"cfg": {**cfg, "n_layers": 12}, "nodes": nodes, "edges": edges}))
    with pytest.raises(HeurlensError, match="a graph of 12 layers of 2 heads"):
        read_mib_file(tmp_path / "other.json", planted)


def test_export_mib_then_faithfulness_of_the_file_is_the_runs_curve(planted, tmp_path, capsys):
    """``heurlens export-mib RUN --circuits`` writes each record's importance file and its ten binary circuits;
    ``heurlens faithfulness --mib-file`` scores the file exactly as the run's own ranking; a folder holding a file
    export-mib did not write is refused before anything is written."""
    from cli_run import heurlens_in_process

    task = planted_edges_task_file(tmp_path / "task.jsonl")
    common = ["--task", str(task), "--task-examples", "16"]
    status, _, err = heurlens_in_process(capsys, "prune", "--model", str(planted.model_id), *common, "--seeds", "1",
                                         "--ablation", "corrupt", "--batch-size", "4", "--level", "edge",
                                         "--sparsity", f"{1 - 3 / N_EDGES:.4f}", "--out", str(tmp_path / "run"))
    assert status == 0, err
    status, out, err = heurlens_in_process(capsys, "export-mib", str(tmp_path / "run"), "--out",
                                           str(tmp_path / "mib"), "--circuits")
    assert status == 0, err
    [record] = list((tmp_path / "mib").glob("sparsity-*/seed-00"))
    assert sorted(path.name for path in record.iterdir())[:3] == ["circuit-0.1%.json", "circuit-0.2%.json",
                                                                  "circuit-0.5%.json"]
    assert len(list(record.iterdir())) == 11
    circuit = json.loads((record / "circuit-10%.json").read_text())
    assert sum(edge["in_graph"] for edge in circuit["edges"].values()) == int(0.1 * N_EDGES)
    status, out, err = heurlens_in_process(capsys, "faithfulness", str(tmp_path / "run"), *common, "--json")
    assert status == 0, err
    from_run = [row for row in json.loads(out) if row["method"] == "edge pruning"]
    status, out, err = heurlens_in_process(capsys, "faithfulness", "--mib-file", str(record / "importances.json"),
                                           "--model", str(planted.model_id), *common, "--json")
    assert status == 0, err
    from_file = [row for row in json.loads(out) if row["method"] == "file importances.json"]
    assert [row["edges_kept"] for row in from_file] == [row["edges_kept"] for row in from_run]
    assert [row["faithfulness"] for row in from_file] == pytest.approx([row["faithfulness"] for row in from_run])
    assert from_file[0]["cpr"] == pytest.approx(from_run[0]["cpr"])
    for absolute in ([], ["--absolute"]):  # the mask run's export ranks as the run in both of MIB's orders
        status, out, err = heurlens_in_process(capsys, "faithfulness", "--mib-file", str(record / "importances.json"),
                                               "--model", str(planted.model_id), *common, "--json", *absolute)
        assert status == 0, err
        rows = [row for row in json.loads(out) if row["method"] == "file importances.json"]
        assert [row["faithfulness"] for row in rows] == pytest.approx([row["faithfulness"] for row in from_run])
        assert rows[0]["areas_ranked_by"] == "score" and rows[0]["cmd"] == pytest.approx(from_run[0]["cmd"])
    status, out, err = heurlens_in_process(capsys, "export-mib", str(tmp_path / "run"), "--out",
                                           str(tmp_path / "mib"), "--circuits")
    assert status == 0, err  # the folder it wrote: written again
    foreign = tmp_path / "mine" / record.relative_to(tmp_path / "mib") / "importances.json"
    foreign.parent.mkdir(parents=True, exist_ok=True)
    foreign.write_text("my notes")
    status, _, err = heurlens_in_process(capsys, "export-mib", str(tmp_path / "run"), "--out", str(tmp_path / "mine"))
    assert status != 0 and "is not empty and was not written by heurlens" in err
    assert foreign.read_text() == "my notes"
    mine = tmp_path / "mib" / "notes.json"  # a user's file beside heurlens' in its own folder: never overwritten
    heurlens_json = json.dumps({"cfg": {"heurlens": {}}, "nodes": {}, "edges": {}})
    (record / "importances.json").rename(mine)
    (record / "importances.json").write_text(heurlens_json)
    status, _, err = heurlens_in_process(capsys, "export-mib", str(tmp_path / "run"), "--out", str(tmp_path / "mib"))
    assert status == 0, err  # listed in mib-export.json: heurlens' own file
    other = tmp_path / "mib" / "sparsity-user"
    other.mkdir()
    (other / "importances.json").write_text(heurlens_json)
    (tmp_path / "mib" / "mib-export.json").write_text(json.dumps({"written_by": "heurlens export-mib", "files": []}))
    status, _, err = heurlens_in_process(capsys, "export-mib", str(tmp_path / "run"), "--out", str(tmp_path / "mib"))
    assert status != 0 and "heurlens export-mib did not write it" in err
    assert (other / "importances.json").read_text() == heurlens_json and mine.exists()
