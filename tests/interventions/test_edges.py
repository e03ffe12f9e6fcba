"""Edge-level pruning (heurlens.interventions.graph, heurlens.interventions.edge_masks: Edge Pruning's masks between
components). Known answers:
with every edge kept the masked model is the model and with every edge pruned its run on the corrupted input; on a
hand-set Llama whose answer flows along one path of edges, edge pruning keeps exactly that path where node pruning
keeps both heads."""

import pytest
import torch
from planted_edges import N_EDGES, PATH, build_planted_edges_model, planted_edges_task, planted_edges_task_file

import heurlens
from heurlens.circuits.faithfulness_areas import MIB_GRID
from heurlens.errors import HeurlensError
from heurlens.interventions.edge_masks import LAYERS_A_GROUP, edge_mask_forward
from heurlens.interventions.graph import edge_layout, parse_edges
from heurlens.pruning import PruneSettings, Subnetwork
from heurlens.pruning.circuit import EdgeCircuit
from heurlens.tasks import as_task

EDGE_LEVEL = PruneSettings(level="edge", ablation="corrupt")
CLEAN = torch.tensor([[2, 4, 10, 5, 6], [3, 5, 10, 9, 7]])  # word-level tokens, no padding
CORRUPTED = torch.tensor([[3, 9, 10, 4, 6], [2, 4, 10, 9, 8]])


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    return heurlens.load_model(build_planted_edges_model(tmp_path_factory.mktemp("planted-edges")))


def batch(ids):
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids)}


@pytest.fixture(scope="module")
def deep_llama_dir(tmp_path_factory):
    """A random Llama of more layers than ``LAYERS_A_GROUP``, so the writers' blocks are joined in groups."""
    from conftest import WORDS, word_level_tokenizer
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(WORDS), hidden_size=16, intermediate_size=32, num_hidden_layers=LAYERS_A_GROUP + 2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32, pad_token_id=0,
                         eos_token_id=0, bos_token_id=0, architectures=["LlamaForCausalLM"])
    out = tmp_path_factory.mktemp("deep-llama")
    LlamaForCausalLM(config).eval().save_pretrained(out)
    word_level_tokenizer().save_pretrained(out)
    return out


@pytest.mark.parametrize("family", ["llama", "gpt2", "deep llama"])
def test_every_edge_kept_is_the_model_and_every_edge_pruned_is_its_run_on_the_corrupted_input(
        family, tiny_decoder_dirs, tiny_gpt2_dirs, deep_llama_dir):
    model = heurlens.load_model({"llama": tiny_decoder_dirs["llama"], "gpt2": tiny_gpt2_dirs["lm"],
                                 "deep llama": deep_llama_dir}[family])
    layout = edge_layout(model)
    clean, corrupted = batch(CLEAN), batch(CORRUPTED)
    with torch.no_grad():
        full, on_corrupted = model(**clean), model(**corrupted)
        kept = edge_mask_forward(model, torch.ones(layout.n_edges), clean, corrupted)
        pruned = edge_mask_forward(model, torch.zeros(layout.n_edges), clean, corrupted)
        per_example = edge_mask_forward(model, torch.stack([torch.ones(layout.n_edges), torch.zeros(layout.n_edges)]),
                                        clean, corrupted)
        after = model(**clean)
    torch.testing.assert_close(kept, full, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(pruned, on_corrupted, atol=1e-5, rtol=1e-5)
    assert (full - on_corrupted).abs().max() > 0.05  # the two runs differ, so the masks did act
    torch.testing.assert_close(per_example, torch.stack([full[0], on_corrupted[1]]), atol=1e-5, rtol=1e-5)
    assert torch.equal(after, full)  # the split inputs and hooks are gone, the model as it was
    assert not model.bridge.cfg.use_split_qkv_input and not model.bridge.cfg.use_hook_mlp_in


def test_the_edge_masks_gradient_is_the_derivative_of_the_masked_forward(deep_llama_dir):
    """Along random directions (one mask vector per example, on a model deep enough for grouped writer blocks), the
    masks' gradient times the direction equals the central difference of the masked forward pass (float64 weights;
    TransformerLens computes some steps in float32, hence a step of 1e-3)."""
    model = heurlens.load_model(deep_llama_dir).double()
    layout = edge_layout(model)
    clean, corrupted = batch(CLEAN), batch(CORRUPTED)
    torch.manual_seed(0)
    weights = torch.randn(2, model(**clean).shape[-1], dtype=torch.float64)

    def weighted_scores(masks):
        return (edge_mask_forward(model, masks, clean, corrupted) * weights).sum()

    masks = torch.rand(2, layout.n_edges, dtype=torch.float64, requires_grad=True)
    weighted_scores(masks).backward()
    assert masks.grad is not None
    for _ in range(3):
        direction = torch.randn_like(masks)
        with torch.no_grad():
            difference = (weighted_scores(masks + 1e-3 * direction) - weighted_scores(masks - 1e-3 * direction)) / 2e-3
        torch.testing.assert_close((masks.grad * direction).sum(), difference, rtol=1e-3, atol=1e-4)


def test_the_edge_masks_gradient_under_bfloat16_autocast_is_float32s_to_its_precision(deep_llama_dir):
    """PruneSettings(dtype="bfloat16") trains the masks under autocast, where the embeddings' block stays float32 and
    the heads' are bfloat16: the forward and backward run, and the gradient is float32's to bfloat16's precision."""
    model = heurlens.load_model(deep_llama_dir)
    masks = torch.rand(2, edge_layout(model).n_edges, generator=torch.Generator().manual_seed(0))
    gradients = []
    for dtype in (torch.float32, torch.bfloat16):
        leaf = masks.clone().requires_grad_()
        with torch.autocast("cpu", dtype=dtype, enabled=dtype != torch.float32):  # the forward pass, as prune runs it
            scores = edge_mask_forward(model, leaf, batch(CLEAN), batch(CORRUPTED)).float()
        scores.logsumexp(-1).sum().backward()
        gradients.append(leaf.grad)
    float32, bfloat16 = gradients
    assert bfloat16 is not None and float32 is not None and bool(bfloat16.isfinite().all())
    assert float((bfloat16 - float32).norm() / float32.norm()) < 0.05


def test_a_grouped_query_models_key_and_value_edges_go_into_its_key_value_heads(tiny_decoder_dirs):
    layout = edge_layout(heurlens.load_model(tiny_decoder_dirs["llama"]))  # 4 query heads share 2 key-value heads
    readers = {str(edge.reader) for edge in layout.edges()}
    assert {"L1.H3.q", "L1.KV1.k", "L1.KV1.v"} <= readers and "L1.KV2.k" not in readers and "L1.H3.k" not in readers
    # per layer: 4 query, 2 key and 2 value inputs read the writers below, the MLP those and the layer's heads
    assert layout.n_edges == 8 * 1 + 5 + 8 * 6 + 10 + 11


def test_the_planted_path_is_exactly_what_reaches_the_logits(planted):
    layout = edge_layout(planted)
    task = planted_edges_task(1)
    clean, corrupted = task.batches[0], task.corrupted.batches[0]
    with torch.no_grad():
        full, on_corrupted = planted(**clean), planted(**corrupted)
        assert torch.equal(edge_mask_forward(planted, layout.keep_mask(PATH), clean, corrupted), full)
        for edge in PATH:  # any one edge of the path pruned: the logits move as far as the corrupted run's
            without = edge_mask_forward(planted, layout.keep_mask([e for e in PATH if e != edge]), clean, corrupted)
            torch.testing.assert_close(without, on_corrupted, atol=1e-5, rtol=1e-5)
    assert layout.n_edges == N_EDGES


def test_edge_pruning_keeps_the_path_where_node_pruning_keeps_both_heads(planted, tmp_path):
    task = planted_edges_task()
    [circuit] = heurlens.prune(planted, task, sparsity=1 - len(PATH) / N_EDGES, seeds=[0], config=EDGE_LEVEL,
                               out=tmp_path / "edges", progress=False, cache=False)
    [subnetwork] = heurlens.prune(planted, task, sparsity=4 / 6, seeds=[0], config=PruneSettings(ablation="corrupt"),
                                  progress=False, cache=False)
    assert isinstance(circuit, EdgeCircuit) and sorted(map(str, circuit.edges)) == sorted(PATH)
    assert circuit.metrics["subnetwork_train_kl"] < 1e-6 and circuit.achieved_sparsity == 1 - 3 / N_EDGES
    assert list(map(str, subnetwork.kept)) == list(map(str, circuit.kept)) == ["L0.H1", "L1.H0"]
    # the node subnetwork keeps every edge between its two heads (their query and key inputs, L0.H1 -> logits, ...)
    between = [e for e in edge_layout(planted).edges() if str(e.writer) in ("embed", "L0.H1", "L1.H0")
               and (str(e.reader) == "logits" or str(e.reader).startswith(("L0.H1.", "L1.H0.")))]
    assert len(between) == 12 and set(map(str, between)) > set(PATH)
    loaded = Subnetwork.load(tmp_path / "edges" / "sparsity-0.934783" / "seed-00")  # 1 - 3/46
    assert isinstance(loaded, EdgeCircuit) and loaded.edges == circuit.edges
    assert torch.equal(loaded.log_alpha_edges, circuit.log_alpha_edges)
    [again] = heurlens.prune(planted, task, sparsity=1 - len(PATH) / N_EDGES, seeds=[0], config=EDGE_LEVEL,
                             out=tmp_path / "edges", progress=False, cache=False)  # resumed: loaded, not trained
    assert again.edges == circuit.edges and again.metrics["train_seconds"] == circuit.metrics["train_seconds"]


def test_edge_pruning_is_refused_by_name_where_it_cannot_run(tiny_bert_dir, tiny_decoder_dirs, planted):
    with pytest.raises(HeurlensError, match="--level node"):
        edge_layout(heurlens.load_model(tiny_bert_dir))  # an encoder: no split query/key/value inputs
    with pytest.raises(HeurlensError, match="in parallel"):
        edge_layout(heurlens.load_model(tiny_decoder_dirs["gpt_neox"]))  # its MLP does not read the layer's heads
    with pytest.raises(HeurlensError, match="discretization='top-k'"):
        PruneSettings(level="edge", ablation="corrupt", discretization="per-layer")  # edges: top-k over every edge
    no_corruption = as_task(planted, torch.tensor([[2], [3]]))
    with pytest.raises(HeurlensError, match="corrupted"):
        heurlens.prune(planted, no_corruption, sparsity=0.5, seeds=[0], config=EDGE_LEVEL, progress=False, cache=False)
    with pytest.raises(HeurlensError, match="not an edge of this model"):
        parse_edges("L1.H0->L0.H1.v", edge_layout(planted))  # edges go forward only


@pytest.mark.parametrize("deep", [False, True])
def test_a_node_circuit_as_edges_is_the_same_model_as_its_units_corrupt_ablated(tiny_decoder_dirs, deep_llama_dir,
                                                                                    deep):
    """Two computations of one model: the units outside the circuit corrupt-ablated at their outputs, and only the
    edges between the circuit's units (and the embeddings and logits) kept (``edges_between``); on a model deep enough
    for the writers' blocks to be joined in groups too."""
    from conftest import word_level_tokenizer
    from test_corruption import EXAMPLES

    from heurlens.data.prompt_tasks import tokenize_prompt_task
    from heurlens.interventions.scoring import scores_with_masks
    from heurlens.interventions.units import UnitLayout, parse_units
    from heurlens.runtime.call_context import call_context

    model = heurlens.load_model(deep_llama_dir if deep else tiny_decoder_dirs["llama"])  # heads 2, 3 share KV head 1
    task = tokenize_prompt_task("toy", EXAMPLES, word_level_tokenizer(), n_ctx=32, add_special_tokens=False)
    context = call_context(model, cache=False)
    last = model.n_layers - 1
    kept = parse_units(f"L0.H1,L0.MLP,L1.H3,L{last}.H0,L{last}.MLP", model.n_layers, 4)
    [by_units] = scores_with_masks(model, "node", [UnitLayout(model.n_layers, 4).keep_mask(kept)], task, "corrupt",
                                   None, context)
    layout = edge_layout(model)
    [by_edges] = scores_with_masks(model, "edge", [layout.keep_mask(layout.edges_between(kept))], task, "corrupt",
                                   None, context)
    torch.testing.assert_close(by_edges, by_units, atol=1e-5, rtol=1e-5)
    [full] = scores_with_masks(model, "edge", [torch.ones(layout.n_edges)], task, "corrupt", None, context)
    assert (by_edges - full).abs().max() > 1e-3  # the circuit is not the whole model
    assert "L0.H1->L1.KV1.v" in map(str, layout.edges_between(kept))  # L1.H3 reads key-value head 1


def test_faithfulness_of_edge_circuits_is_over_the_fraction_of_edges_kept(planted):
    from heurlens.circuits.faithfulness import faithfulness_curve

    task = planted_edges_task()
    [circuit] = heurlens.prune(planted, task, sparsity=1 - len(PATH) / N_EDGES, seeds=[0], config=EDGE_LEVEL,
                               progress=False, cache=False)
    edges = faithfulness_curve(planted, [circuit], task)
    nodes = faithfulness_curve(planted, {"path heads": "L0.H1,L1.H0", "other heads": "L0.H0,L1.H1"}, task, edges=True)
    assert edges.circuits[["kept_fraction", "edges_kept"]].values.tolist() == [[3 / N_EDGES, 3]]
    assert edges.circuits["faithfulness"].tolist() == pytest.approx([1.0])
    assert nodes.circuits["edges_kept"].tolist() == [12, 12]
    assert nodes.circuits["faithfulness"].tolist() == pytest.approx([1.0, 0.0], abs=1e-6)
    assert edges.empty == pytest.approx(nodes.empty) and edges.empty < 0 < edges.full  # the corrupted prompts' answer


def test_the_cli_prunes_edges_and_scores_them_beside_a_node_run(planted, tmp_path, capsys):
    """``heurlens prune --level edge`` then ``heurlens faithfulness EDGE_RUN NODE_RUN``: each run's ranking at MIB's
    sizes on its own axis; with ``--circuits targets`` both runs' circuits over the fraction of edges kept, the edge
    circuit the planted path."""
    import json

    from cli_run import heurlens_in_process

    task = planted_edges_task_file(tmp_path / "task.jsonl")
    model_dir = str(planted.model_id)
    common = ["--model", model_dir, "--task", str(task), "--task-examples", "16", "--seeds", "1", "--ablation",
              "corrupt", "--batch-size", "4"]
    status, out, err = heurlens_in_process(capsys, "prune", *common, "--level", "edge", "--sparsity",
                                           f"{1 - 3 / N_EDGES:.4f}", "--out", str(tmp_path / "edges"))
    assert status == 0, err
    assert "edge circuits (pruned edges carrying" in out
    circuit = Subnetwork.load(next((tmp_path / "edges").glob("sparsity-*/seed-00.json")))
    assert sorted(map(str, circuit.edges)) == sorted(PATH)
    status, _, err = heurlens_in_process(capsys, "prune", *common, "--sparsity", f"{4 / 6:.4f}", "--out",
                                         str(tmp_path / "nodes"))
    assert status == 0, err
    status, out, err = heurlens_in_process(capsys, "faithfulness", str(tmp_path / "edges"), str(tmp_path / "nodes"),
                                           "--task", str(task), "--task-examples", "16", "--json")
    assert status == 0, err
    rows = json.loads(out)  # each run's ranking on its own axis, at MIB's ten sizes
    edge_rows = [row for row in rows if row["method"].startswith("edge pruning")]
    assert [row["edges_kept"] for row in edge_rows] == sorted({int(k * N_EDGES) for k in MIB_GRID})
    assert edge_rows[-1]["faithfulness"] == pytest.approx(1.0, abs=1e-5)  # every edge: the model
    assert {row["units_kept"] for row in rows if row["method"].startswith("mask optimisation")} == {0, 1, 3, 6}
    status, out, err = heurlens_in_process(capsys, "faithfulness", str(tmp_path / "edges"), str(tmp_path / "nodes"),
                                           "--task", str(task), "--task-examples", "16", "--circuits", "targets",
                                           "--json")
    assert status == 0, err
    shown = {row["method"].split(" (")[0]: row for row in json.loads(out)}
    assert shown["edge pruning"]["edges_kept"] == 3 and shown["edge pruning"]["faithfulness"] == pytest.approx(1.0)
    assert shown["mask optimisation"]["edges_kept"] == 12  # L0.H1 and L1.H0 with every edge between them
    assert shown["mask optimisation"]["faithfulness"] == pytest.approx(1.0)
    status, out, err = heurlens_in_process(capsys, "report", str(tmp_path / "edges"), "--task", str(task),
                                           "--task-examples", "16")
    assert status == 0, err
    page = (tmp_path / "edges" / "report.html").read_text()
    assert "Edge circuits" in page and f"{circuit.label} of " not in page and f"{circuit.label}: its 3 edges (of 46)" in page
    assert "the core" not in page and "Attention patterns" not in page  # no node core of one edge circuit


def test_the_circuit_graph_draws_each_kept_edge_from_its_writer_to_the_input_it_enters(planted):
    from heurlens.circuits.drawing import circuit_figure
    from heurlens.circuits.drawn_edges import circuit_to_draw, node_places, uniform_ranking

    layout = edge_layout(planted)
    circuit = EdgeCircuit(kept=[], n_layers=2, n_heads=2, target_sparsity=0.9, achieved_sparsity=0.9, threshold=0.5,
                          seed=0, model_id="planted", model_fingerprint="", data_id="", n_kv_heads=2,
                          edges=parse_edges(",".join(PATH + ["embed->L1.MLP"]), layout))
    figure = circuit_figure(circuit)
    lines = {trace.hovertext.split(":")[0]: (trace.name, list(zip(trace.x, trace.y)))
             for trace in figure.data if trace.mode == "lines"}
    at = node_places(circuit_to_draw(uniform_ranking(layout, ""), layout, 50, keep=circuit.keep_mask()).edges, 2, 2)
    assert lines == {"embed->L0.H1.v": ("into v", [at["embed"], at["L0.H1"]]),
                     "L0.H1->L1.H0.v": ("into v", [at["L0.H1"], at["L1.H0"]]),
                     "L1.H0->logits": ("into the logits", [at["L1.H0"], at["logits"]]),
                     "embed->L1.MLP": ("into MLP", [at["embed"], at["L1.MLP"]])}
    assert at["embed"][1] < at["L0.H1"][1] < at["L1.H0"][1] < at["L1.MLP"][1] < at["logits"][1]
    assert figure.layout.title.text.endswith(": its 4 edges (of 46)")
    assert circuit_figure(circuit, top=2).layout.title.text.endswith(": the 2 strongest of its 4 edges (of 46), 2 "
                                                                      "more not drawn")


def test_stacked_seeds_train_the_edge_masks_each_seed_trains_alone(planted):
    """Two seeds in one forward pass (each example masked by its seed's draw: per-example edge masks) against each
    seed alone: the same log_alphas to float rounding."""
    task = planted_edges_task()
    settings = PruneSettings(level="edge", ablation="corrupt", total_steps=40, warmup_steps=20,
                             log_alpha_init=1.0, lr_log_alpha=0.3)
    stacked = heurlens.prune(planted, task, sparsity=0.9, seeds=[0, 1], config=settings, progress=False, cache=False,
                             stack_seeds=True)
    for seed, together in zip([0, 1], stacked):
        [alone] = heurlens.prune(planted, task, sparsity=0.9, seeds=[seed], config=settings, progress=False,
                                 cache=False)
        torch.testing.assert_close(together.log_alpha_edges, alone.log_alpha_edges, atol=1e-4, rtol=0)
    assert not torch.allclose(stacked[0].log_alpha_edges, stacked[1].log_alpha_edges, atol=1e-2)  # seeds differ


def test_a_circuit_whose_masks_did_not_reach_the_target_is_flagged(planted):
    """Two steps leave every mask on: the top-k cut still keeps the target's count, but the masks' expected sparsity is
    0, and the circuit says so (the grid would not: its threshold 1.0 drops every edge, within 0.05 of 0.98)."""
    from heurlens.pruning.run_folder import SparsityTargetMissed

    with pytest.warns(SparsityTargetMissed, match="expected sparsity ended at 0.00, not 0.98"):
        [circuit] = heurlens.prune(planted, planted_edges_task(), sparsity=0.98, seeds=[0], progress=False, cache=False,
                                   config=PruneSettings(level="edge", ablation="corrupt", total_steps=2))
    assert circuit.missed_target and circuit.achieved_sparsity == pytest.approx(1 - round(0.02 * N_EDGES) / N_EDGES)


def test_a_model_pickled_after_a_forward_pass_prunes_to_the_same_edges(planted):
    """Ray hands workers a cloudpickled model. TransformerLens wires its blocks' capture hooks (``hook_mlp_in``) on the
    first forward pass through a weakref proxy that pickles as a copy of the block, so in the copy ``hook_mlp_in`` fell
    silent and every MLP input kept all its edges (issue 63): the copy now prunes to the same bytes, and a pass in
    which a reader's hook point stays silent is refused."""
    cloudpickle = pytest.importorskip("ray.cloudpickle")
    from heurlens.interventions.edge_masks import EdgeMaskHooks

    task = planted_edges_task()
    settings = PruneSettings(level="edge", ablation="corrupt", total_steps=40, warmup_steps=20)
    with torch.no_grad():
        planted(**task.batches[0])  # the capture hooks are wired now
    copy = cloudpickle.loads(cloudpickle.dumps(planted))
    [here], [there] = (heurlens.prune(model, task, sparsity=0.8, seeds=[0], config=settings, progress=False,
                                      cache=False) for model in (planted, copy))
    assert torch.equal(here.log_alpha_edges, there.log_alpha_edges) and here.edges == there.edges

    layout = edge_layout(planted)
    hooks = EdgeMaskHooks(layout, torch.zeros(layout.n_edges))
    clean, corrupted = task.batches[0], task.corrupted.batches[0]
    with hooks.attached(planted), torch.no_grad():
        hooks.use_corrupted(planted, corrupted)
        planted.bridge.set_use_hook_mlp_in(False)  # as in the broken copy: the MLP inputs' hook points stay silent
        with pytest.raises(HeurlensError, match=r"blocks.0.hook_mlp_in, blocks.1.hook_mlp_in did not fire"):
            planted(**clean)


def test_an_edge_circuit_asked_for_another_ablation_is_scored_with_it(planted, tmp_path):
    """Issue 63: ``evaluate_subnetworks(method="mean")`` on edge circuits returned the corrupt ablation's numbers. Edges
    now take mean and zero ablation (MIB's "mean", 2026-11-29): each method is scored as asked, the circuit's metric
    and KL those of ``edge_mask_forward`` with the pruned edges carrying the writers' means, zeros or corrupted
    outputs, in ``faithfulness_curve`` and ``evaluate_subnetworks`` alike."""
    from heurlens.circuits.faithfulness import faithfulness_curve
    from heurlens.data.prompt_tasks import logit_difference
    from heurlens.evaluate import mean_kl
    from heurlens.interventions.means import zero_means

    task = planted_edges_task()
    [circuit] = heurlens.prune(planted, task, sparsity=0.8, seeds=[0], out=tmp_path / "edges", progress=False,
                               cache=False, config=PruneSettings(level="edge", ablation="corrupt", total_steps=4))
    means = heurlens.compute_means(planted, task)
    with torch.no_grad():
        full = torch.cat([planted(**b) for b in task.batches])
    metrics = {}
    for method, replacement in (("mean", means), ("zero", zero_means(planted)), ("corrupt", None)):
        with torch.no_grad():
            scores = torch.cat([edge_mask_forward(planted, circuit.keep_mask(), b, None if replacement else c,
                                                  replacement) for b, c in zip(task.batches, task.corrupted.batches)])
        metrics[method] = float(logit_difference(scores, task))
        curve = faithfulness_curve(planted, [circuit], task, method=method, means=means, cache=False)
        assert curve.circuits["metric"].item() == pytest.approx(metrics[method], abs=1e-5), method
        table = heurlens.evaluate_subnetworks(planted, [circuit], [task], means=means, method=method, cache=False)
        assert table["kl"].iloc[-1] == pytest.approx(mean_kl(full, scores), abs=1e-6), method  # after the full model
    assert abs(metrics["mean"] - metrics["corrupt"]) > 1e-3  # the methods differ: the comparison can tell


def test_edge_masks_trained_with_mean_ablation_keep_the_planted_path_and_score_as_mean_ablated(planted):
    """``PruneSettings(level="edge", ablation="mean")``: a pruned edge carries its writer's mean output over the data
    (no corrupted prompts needed). On the planted path the circuit of 3 edges is ``PATH``, and its recorded KL is the
    KL of ``PATH`` with every other edge mean-ablated, computed here through ``edge_mask_forward`` with the means
    (trained with zero means instead, by hand: another circuit was kept and the test failed)."""
    import torch.nn.functional as F

    data = planted_edges_task()
    means = heurlens.compute_means(planted, data, progress=False)
    circuits = heurlens.prune(planted, data, sparsity=1 - 3 / N_EDGES, seeds=[0, 1], means=means, progress=False,
                              cache=False, config=PruneSettings(level="edge", ablation="mean", total_steps=300))
    keep = edge_layout(planted).keep_mask(PATH).float()
    kl, rows = 0.0, 0
    for one in data.batches:
        with torch.no_grad():
            full = planted(**one)
            masked = edge_mask_forward(planted, keep, one, means=means)
        kl += float(F.kl_div(F.log_softmax(masked, -1), F.log_softmax(full, -1), log_target=True,
                             reduction="sum"))
        rows += full.shape[0]
    for circuit in circuits:
        assert sorted(map(str, circuit.edges)) == sorted(PATH) and not circuit.missed_target
        assert "ablation" not in circuit.hyperparameters  # mean, as recorded for node runs
        assert circuit.metrics["subnetwork_train_kl"] == pytest.approx(kl / rows, rel=1e-4)
    assert kl / rows > 0.01  # the means are not the corrupted prompts' outputs: the path alone still moves the KL
    with pytest.raises(HeurlensError, match="need the writers' means"):
        from heurlens.pruning.train import train_edge_masks

        train_edge_masks(planted, data, torch.zeros(16, 11), 0.9, [0], PruneSettings(level="edge"), progress=False)
