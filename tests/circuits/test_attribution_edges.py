"""EAP and EAP-IG on edges and units (heurlens.circuits.attribution), against oracles nobody here wrote or a
property that fails when the code is wrong:
- on a GPT-2, EAP equals TransformerLens 4.3's ``attribution_patch`` edge scores (its patch runs corrupted -> clean
  with the gradient on the corrupted run: given the clean and corrupted prompts swapped it is EAP's formula; given them
  as they are, EAP-IG with one step, negated);
- on a GPT-2 whose output is linear in its inputs (linear MLPs, constant attention patterns, layer norms with an
  epsilon that swamps the variance), EAP, EAP-IG and the exact patch of each single edge (edge masks) agree, and
  EAP with mean or zero ablation is each single edge's exact mean or zero ablation;
- on a grouped-query Llama, the edges of its ungrouped copy (MIB's graph) sum to the grouped edge's score, the copy
  computing the same logits;
- a unit's score is the sum of its outgoing edges' scores (two code paths: gradients at the writers, at the readers).
"""

import pandas as pd
import pytest
import torch
from conftest import WORDS, word_level_tokenizer
from planted_edges import planted_edges_task_file

import heurlens
from heurlens.circuits.attribution import attribution_ranking, attribution_scores, edge_attribution_scores
from heurlens.circuits.faithfulness_areas import MIB_GRID
from heurlens.circuits.mib_graph import MibGraph
from heurlens.data.prompt_tasks import PromptExample, tokenize_prompt_task
from heurlens.errors import HeurlensError
from heurlens.interventions.edge_masks import edge_mask_forward
from heurlens.interventions.graph import edge_layout
from heurlens.interventions.nodes import Edge, Node
from heurlens.interventions.units import UnitLayout
from heurlens.models.ungrouped import ungrouped_copy

ANSWER, DISTRACTOR = WORDS.index("dog"), WORDS.index("cat")
PROMPTS = [("the man sees", "a dog runs"), ("a cat sleeps", "the man sees"), ("the dog runs", "a cat sees")]


def metric(scores):
    return (scores[:, ANSWER] - scores[:, DISTRACTOR]).mean()


@pytest.fixture(scope="module")
def task():
    """Three prompts of three words in batches of 2 and 1 (the batches weigh by their rows), each with a corrupted
    prompt as long; the answer " dog" against " cat" for all."""
    examples = [PromptExample(clean, " dog", (" cat",), corrupted) for clean, corrupted in PROMPTS]
    return tokenize_prompt_task("dog or cat", examples, word_level_tokenizer(), n_ctx=8, batch_size=2,
                                add_special_tokens=False)


def tokens(batches):
    return torch.cat([batch["input_ids"] for batch in batches])


def transformer_lens_edge_scores(model, clean, corrupted):
    """TransformerLens 4.3's edge attribution (ig_steps=1, per position, averaged over the prompts), summed over
    positions, by heurlens' edge names."""
    from transformer_lens.tools.analysis.attribution_patching import EdgeAttributionConfig, attribution_patch

    result = attribution_patch(model.bridge, clean, corrupted, lambda logits: logits[0, -1, ANSWER] -
                               logits[0, -1, DISTRACTOR], EdgeAttributionConfig(granularity="edge", ig_steps=1))
    scores: dict[str, float] = {}
    for (writer, reader), score in result.edge_scores.items():
        edge = Edge(Node(writer.kind, None if writer.kind == "embed" else writer.layer, writer.head),
                    Node(reader.kind, None if reader.kind == "logits" else reader.layer, reader.head))
        scores[str(edge)] = scores.get(str(edge), 0.0) + score
    return scores


def test_eap_is_transformer_lens_attribution_patch_and_one_ig_step_its_negation(tiny_gpt2_dirs, task):
    model = heurlens.load_model(tiny_gpt2_dirs["lm"])
    names = [str(edge) for edge in edge_layout(model).edges()]
    clean, corrupted = tokens(task.batches), tokens(task.corrupted.batches)
    for ig_steps, theirs in ((None, transformer_lens_edge_scores(model, corrupted, clean)),
                             (1, transformer_lens_edge_scores(model, clean, corrupted))):
        ours = -attribution_ranking(model, task, metric, level="edge", ig_steps=ig_steps).scores  # delta_m
        expected = torch.tensor([theirs[name] for name in names]) * (1 if ig_steps is None else -1)
        assert sorted(theirs) == sorted(names)  # the same 110 edges
        assert expected.abs().max() > 0.01 and (expected.abs() > 1e-4).sum() > 30  # many edges carry something
        torch.testing.assert_close(ours, expected, atol=1e-6, rtol=1e-4)
    eap, one_step = (attribution_ranking(model, task, metric, level="edge", ig_steps=steps).scores
                     for steps in (None, 1))
    assert (eap - one_step).abs().max() > 1e-3  # the clean run's gradient is not the corrupted run's


@pytest.fixture(scope="module")
def linear_gpt2(tmp_path_factory):
    """A GPT-2 whose logits are linear in its embeddings and in every reader's input: linear MLPs, queries and keys
    of zero (each position attends to the ones before it uniformly, whatever the input), and layer norms whose
    epsilon (1e12) swamps the variance (weights scaled by 1e6 back: LN(x) = x - mean(x)); float64."""
    from transformers import GPT2Config, GPT2LMHeadModel

    epsilon = 1e12
    torch.manual_seed(0)
    config = GPT2Config(vocab_size=len(WORDS), n_positions=32, n_embd=32, n_layer=2, n_head=4, pad_token_id=0,
                        layer_norm_epsilon=epsilon, activation_function="linear")
    model = GPT2LMHeadModel(config).eval()
    with torch.no_grad():
        model.transformer.wte.weight *= 30  # effects of order 0.1
        for block in model.transformer.h:
            block.attn.c_attn.weight[:, :64] = 0  # W_Q and W_K (c_attn's first 2 x 32 columns)
            block.attn.c_attn.bias[:64] = 0
            block.attn.c_attn.weight[:, 64:] *= 30
            block.mlp.c_proj.weight *= 30
            for norm in (block.ln_1, block.ln_2):
                norm.weight *= epsilon ** 0.5
        model.transformer.ln_f.weight *= epsilon ** 0.5
    out = tmp_path_factory.mktemp("linear-gpt2")
    model.save_pretrained(out)
    word_level_tokenizer().save_pretrained(out)
    return heurlens.load_model(out).double()


def test_on_a_linear_model_eap_and_eap_ig_are_each_edges_exact_patch(linear_gpt2, task):
    model = linear_gpt2
    layout = edge_layout(model)

    def m_with(mask):  # the metric over the task with the edges masked (pruned: the corrupted writer's output)
        total = 0.0
        for batch, corrupted in zip(task.batches, task.corrupted.batches):
            with torch.no_grad():
                scores = edge_mask_forward(model, mask, batch, corrupted)
            total += float((scores[:, ANSWER] - scores[:, DISTRACTOR]).sum())
        return total / 3

    kept = torch.ones(layout.n_edges, dtype=torch.float64)
    full = m_with(kept)
    exact = torch.tensor([m_with(kept.index_fill(0, torch.tensor([i]), 0.0)) - full for i in range(layout.n_edges)],
                         dtype=torch.float64)
    assert exact.abs().max() > 0.1 and (exact.abs() > 1e-3).sum() > 30
    for ig_steps in (None, 5):
        scores = -attribution_ranking(model, task, metric, level="edge", ig_steps=ig_steps).scores.double()
        torch.testing.assert_close(scores, exact, atol=1e-6, rtol=1e-5)  # delta_m: the ranking holds -delta_m


def test_on_a_linear_model_eap_with_mean_or_zero_ablation_is_each_edges_exact_ablation(linear_gpt2, task):
    """r = the writer's mean (or 0) in place of its corrupted output: EAP's sum (r - a) . g is, on a model linear in
    every reader's input, the exact change when the edge alone carries r (edge masks with those means)."""
    model = linear_gpt2
    layout = edge_layout(model)
    means = heurlens.compute_means(model, task)
    zeros = heurlens.interventions.means.zero_means(model)
    for method, replacement in (("mean", means), ("zero", zeros)):
        def m_with(mask, replacement=replacement):
            total = 0.0
            for batch in task.batches:
                with torch.no_grad():
                    scores = edge_mask_forward(model, mask, batch, means=replacement)
                total += float((scores[:, ANSWER] - scores[:, DISTRACTOR]).sum())
            return total / 3

        kept = torch.ones(layout.n_edges, dtype=torch.float64)
        full = m_with(kept)
        exact = torch.tensor([m_with(kept.index_fill(0, torch.tensor([i]), 0.0)) - full
                              for i in range(layout.n_edges)], dtype=torch.float64)
        assert exact.abs().max() > 0.1 and (exact.abs() > 1e-3).sum() >= 20, method  # (no query or key edge: W_Q = 0)
        scores = -attribution_ranking(model, task, metric, level="edge", method=method, means=means).scores.double()
        torch.testing.assert_close(scores, exact, atol=1e-6, rtol=1e-5, msg=lambda m, a=method: f"{a}: {m}")
        corrupt = -attribution_ranking(model, task, metric, level="edge").scores.double()
        assert (scores - corrupt).abs().max() > 1e-2  # another ablation, other scores


def test_grouped_edges_are_the_sums_of_their_query_heads_edges_on_the_ungrouped_copy(tiny_decoder_dirs, task):
    model = heurlens.load_model(tiny_decoder_dirs["llama"])  # 4 query heads sharing 2 key-value heads
    twin = ungrouped_copy(model)
    with torch.no_grad():
        torch.testing.assert_close(twin(**task.batches[0]), model(**task.batches[0]), atol=1e-6, rtol=1e-6)
    grouped, ungrouped = edge_layout(model), edge_layout(twin)
    assert (grouped.n_edges, ungrouped.n_edges) == (82, 110)  # issue 65's hand count of both graphs
    on_mib = MibGraph(ungrouped)
    assert on_mib.edge_names == MibGraph(grouped).edge_names  # the copy's edges are MIB's, one for one
    for ig_steps in (None, 3):
        theirs = attribution_ranking(twin, task, metric, level="edge", ig_steps=ig_steps).scores
        ours = attribution_ranking(model, task, metric, level="edge", ig_steps=ig_steps).scores
        summed = MibGraph(grouped).grouped(theirs[on_mib.heurlens_index], "sum").float()
        torch.testing.assert_close(summed, ours, atol=1e-6, rtol=1e-4)
        kv_edges = [i for i, edge in enumerate(grouped.edges()) if edge.reader.grouped]
        assert ours[kv_edges].abs().max() > 1e-3  # the key-value edges are not all zero


def test_eap_igs_points_give_the_same_scores_in_one_pass_as_one_pass_each(tiny_decoder_dirs, task):
    """EAP-IG's points stacked into one pass (the default), one pass each (MIB's code) and two a pass (5 points: 2, 2,
    1) give the same edge and unit scores, on a grouped-query Llama. Broken by giving every stacked copy the first
    point's embeddings: the stacked scores moved off the one-pass-each ones, failed."""
    from heurlens.circuits.settings import AttributionSettings

    model = heurlens.load_model(tiny_decoder_dirs["llama"])
    for level in ("edge", "node"):
        scores = [attribution_ranking(model, task, metric, AttributionSettings(level, 5, ig_points_per_pass=per_pass),
                                      progress=False).scores for per_pass in (1, 2, None)]
        assert scores[0].abs().max() > 1e-3
        for other in scores[1:]:
            torch.testing.assert_close(other, scores[0], atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("family", ["gpt2", "llama"])
def test_a_units_score_is_the_sum_of_its_outgoing_edges(family, tiny_gpt2_dirs, tiny_decoder_dirs, task):
    model = heurlens.load_model({"gpt2": tiny_gpt2_dirs["lm"], "llama": tiny_decoder_dirs["llama"]}[family])
    layout = edge_layout(model)
    units = UnitLayout(model.n_layers, model.n_heads)
    means = heurlens.compute_means(model, task)
    for ig_steps, method in ((None, "corrupt"), (2, "corrupt"), (None, "mean")):
        edges = attribution_ranking(model, task, metric, level="edge", ig_steps=ig_steps, method=method,
                                    means=means).scores
        nodes = attribution_ranking(model, task, metric, level="node", ig_steps=ig_steps, method=method,
                                    means=means).scores
        outgoing = torch.zeros(len(nodes))
        for score, edge in zip(edges, layout.edges()):
            if edge.writer.kind != "embed":
                outgoing[units.units().index(edge.writer.unit)] += score
        assert nodes.abs().max() > 1e-3
        torch.testing.assert_close(outgoing, nodes, atol=1e-6, rtol=1e-4)


def test_the_tables_name_units_and_edges(tiny_gpt2_dirs, task):
    model = heurlens.load_model(tiny_gpt2_dirs["lm"])
    edges = edge_attribution_scores(model, task, metric, ig_steps=2)
    assert list(edges["edge"][:2]) == ["embed->L0.H0.q", "embed->L0.H1.q"] and len(edges) == 110
    units = attribution_scores(model, task, metric, method="corrupt", ig_steps=2)
    assert list(units["unit"][:2]) == ["L0.H0", "L0.H1"]
    torch.testing.assert_close(torch.tensor(units["score"].tolist()),
                               -attribution_ranking(model, task, metric, level="node", ig_steps=2).scores)


def test_what_attribution_cannot_do_is_refused_by_name(tiny_gpt2_dirs, task):
    model = heurlens.load_model(tiny_gpt2_dirs["lm"])
    means = heurlens.compute_means(model, task)
    with pytest.raises(HeurlensError, match="EAP-IG integrates along the inputs.*use corrupt ablation"):
        attribution_ranking(model, task, metric, ig_steps=5, method="mean", means=means)
    with pytest.raises(HeurlensError, match="EAP-IG integrates along the inputs"):
        attribution_ranking(model, task, metric, level="edge", ig_steps=5, method="mean", means=means)
    without_embeddings = heurlens.interventions.means.UnitMeans(means.heads, means.mlps, means.source)
    with pytest.raises(HeurlensError, match="no mean of the embeddings.*compute them again"):
        attribution_ranking(model, task, metric, level="edge", method="mean", means=without_embeddings)
    with pytest.raises(HeurlensError, match="one step or more"):
        attribution_ranking(model, task, metric, ig_steps=0)


def test_the_cli_attributes_the_planted_path_first_and_faithfulness_and_export_read_the_run(tmp_path, capsys):
    """``heurlens attribute --level edge`` on the hand-set Llama whose answer flows along one path of edges
    (tests/planted_edges.py): the three path edges rank first, far above the others (whose exact patch changes
    nothing; their first-order scores are not 0, RMSNorm's gradient sees the change of direction); ``heurlens
    faithfulness RUN`` scores the run's ranking at MIB's sizes (f = 1 from the first size that keeps the path);
    ``export-mib RUN`` writes the scores in MIB's format, read back by ``--mib-file`` to the same curve; the same
    command again reads the scores back, other settings on the folder are refused."""
    import json

    from cli_run import heurlens_in_process
    from planted_edges import N_EDGES, PATH, build_planted_edges_model

    model_dir = str(build_planted_edges_model(tmp_path / "planted"))
    task = planted_edges_task_file(tmp_path / "task.jsonl")
    run = str(tmp_path / "eap-ig")
    common = ["--model", model_dir, "--task", str(task), "--task-examples", "16"]
    status, out, err = heurlens_in_process(capsys, "attribute", *common, "--out", run, "--top", str(N_EDGES), "--json")
    assert status == 0, err
    ranked = json.loads(out)
    assert sorted(row["edge"] for row in ranked[:3]) == sorted(PATH)
    assert min(abs(row["score"]) for row in ranked[:3]) > 5 * abs(ranked[3]["score"])
    status, again, err = heurlens_in_process(capsys, "attribute", *common, "--out", run, "--top", str(N_EDGES),
                                             "--json")
    assert status == 0 and json.loads(again) == ranked  # read back
    status, _, err = heurlens_in_process(capsys, "attribute", *common, "--out", run, "--method", "eap")
    assert status != 0 and "other settings (ig_steps, method)" in err
    status, _, err = heurlens_in_process(capsys, "attribute", "--model", "no-such-model", "--task", str(task), "--out",
                                         str(tmp_path / "refused"), "--ablation", "mean")
    assert status != 0 and "EAP-IG integrates along the inputs" in err  # before the model loads
    status, out, err = heurlens_in_process(capsys, "faithfulness", run, "--task", str(task), "--task-examples", "16",
                                           "--json")
    assert status == 0, err
    rows = [row for row in json.loads(out) if row["method"] == "EAP-IG (5 steps)"]
    assert {row["areas_ranked_by"] for row in rows} == {"CPR by score, CMD by |score|"}
    curve = [row for row in rows if row["ranked_by"] == "score"]  # CPR's circuits: the top edges by score
    assert [row["edges_kept"] for row in curve] == sorted({int(k * N_EDGES) for k in MIB_GRID})
    assert all(row["faithfulness"] == pytest.approx(1.0, abs=1e-5) for row in curve if row["edges_kept"] >= 3)
    assert curve[0]["faithfulness"] == pytest.approx(0.0, abs=1e-5)  # no edge: the corrupted run
    status, out, err = heurlens_in_process(capsys, "export-mib", run, "--out", str(tmp_path / "mib"))
    assert status == 0, err
    # MIB's signed evaluation (its default, absolute=False) keeps the highest scores first: on the export, the path
    # whose edges raise the logit difference (written with delta_m's sign, the three would have come last)
    exported = json.loads((tmp_path / "mib" / "importances.json").read_text())["edges"]
    by_score = sorted(exported, key=lambda name: exported[name]["score"], reverse=True)
    assert set(by_score[:3]) == {"input->a0.h1<v>", "a0.h1->a1.h0<v>", "a1.h0->logits"}
    assert min(exported[name]["score"] for name in by_score[:3]) > 0
    for absolute in ([], ["--absolute"]):  # read back by score and by |score|: the run's two curves
        status, out, err = heurlens_in_process(capsys, "faithfulness", "--mib-file", str(tmp_path / "mib" /
                                               "importances.json"), *absolute, "--model", model_dir, "--task",
                                               str(task), "--task-examples", "16", "--json")
        assert status == 0, err
        from_file = [row for row in json.loads(out) if row["method"].startswith("file")]
        if absolute:
            assert [row["faithfulness"] for row in from_file] == pytest.approx(
                [row["faithfulness"] for row in rows if row["ranked_by"] == "|score|"])
        else:
            assert [row["faithfulness"] for row in from_file] == pytest.approx([row["faithfulness"] for row in rows])
            assert from_file[0]["cpr"] == pytest.approx(rows[0]["cpr"]) and from_file[0]["cmd"] == pytest.approx(
                rows[0]["cmd"])
    # EAP with mean ablation (MIB's "mean"); faithfulness scores the run as it attributed, unless told otherwise
    mean_run = str(tmp_path / "eap-mean")
    status, out, err = heurlens_in_process(capsys, "attribute", *common, "--out", mean_run, "--method", "eap",
                                           "--ablation", "mean", "--top", "3", "--json")
    assert status == 0 and len(json.loads(out)) == 3, err
    empty = {}
    for ablation in (None, "mean", "corrupt"):
        status, out, err = heurlens_in_process(capsys, "faithfulness", mean_run, "--task", str(task),
                                               "--task-examples", "16", "--json", "--random-seeds", "1",
                                               *(["--ablation", ablation] if ablation else []))
        assert status == 0, err
        at_zero = {row["method"]: row["metric"] for row in json.loads(out) if row["edges_kept"] == 0}  # both orders
        assert len(at_zero) == 2 and len(set(at_zero.values())) == 1  # EAP and random: one ablation for both
        empty[ablation] = at_zero["EAP"]
    assert empty[None] == empty["mean"] and abs(empty["mean"] - empty["corrupt"]) > 1e-3


def test_masks_warm_started_from_an_attribution_run_keep_its_ranking_when_they_cannot_move(tmp_path):
    """``prune(warm_start=run.ranking)``: edge masks start at log_alpha_init |s| / max |s| of the run's scores; with a
    learning rate too small to move them they end where they started, so the run's ranking (the planted path first)
    is the record's, whose ``init_from`` names the ranking; ``PruneSettings(init_from=RUN)`` alone reads the folder
    (deprecated) and starts the same; a ranking of other items (node masks from edge scores) is refused by name."""
    import warnings
    from dataclasses import replace

    from planted_edges import PATH, build_planted_edges_model

    from heurlens.circuits.attribution_runs import attribute
    from heurlens.data.run_data import PromptTaskData
    from heurlens.interventions.rankings import ranking_of
    from heurlens.pruning import PruneSettings
    from heurlens.pruning.warm_start import warm_start_log_alpha

    model = heurlens.load_model(build_planted_edges_model(tmp_path / "planted"))
    task = planted_edges_task_file(tmp_path / "task.jsonl")
    data = PromptTaskData(str(task), 16, 0, batch_size=4)
    run = attribute(model, data, tmp_path / "eap", level="edge", method="eap")
    settings = PruneSettings(level="edge", ablation="corrupt", lr_log_alpha=1e-30, total_steps=3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the masks cannot reach the target in 3 steps that move nothing
        [record] = heurlens.prune(model, data.train(model), sparsity=0.9, seeds=[0], config=settings, cache=False,
                                  progress=False, warm_start=run.ranking)
    expected = warm_start_log_alpha(run.ranking.scores, settings.log_alpha_init)
    assert expected.max() == pytest.approx(10.0) and expected.min() >= 0
    torch.testing.assert_close(record.log_alpha_edges.float(), expected, atol=1e-5, rtol=0)
    assert record.hyperparameters["init_from"] == run.ranking.label
    layout = edge_layout(model)
    assert torch.equal(ranking_of(record).top(3), layout.keep_mask(PATH))
    assert torch.equal(run.ranking.top(3), layout.keep_mask(PATH))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        [by_folder] = heurlens.prune(model, data.train(model), sparsity=0.9, seeds=[0], cache=False, progress=False,
                                     config=replace(settings, init_from=str(tmp_path / "eap")))
    assert [w.filename for w in caught if w.category is DeprecationWarning and "warm_start=" in str(w.message)] == [
        __file__]  # pointing at the caller's line, through prune's argument checks
    torch.testing.assert_close(by_folder.log_alpha_edges.float(), expected, atol=1e-5, rtol=0)
    with pytest.raises(HeurlensError, match="ranks 46 edges .* this prune trains 6 masks"):
        heurlens.prune(model, data.train(model), sparsity=0.5, seeds=[0], cache=False, progress=False,
                       config=PruneSettings(ablation="corrupt", total_steps=3), warm_start=run.ranking)


def test_an_attribution_run_on_mibs_graph_is_scored_there_and_its_file_reads_back_as_the_grouped_scores(
        tiny_decoder_dirs, tmp_path):
    """``attribute(..., graph="mib")`` on the grouped-query Llama: 110 scores (its ungrouped copy's edges), scored by
    ``compare_runs`` over those 110 (f = 1 with every edge, 0 with none); written as MIB's file and read back onto the
    grouped model (another tool's scores: the "sum" rule) they are the grouped model's own EAP-IG scores; read back
    onto MIB's graph they are the run's own 110 scores to the bit, and the file's curve is the run's. The random
    baseline beside them is on the same 110 edges."""
    import json
    from dataclasses import replace

    from heurlens.circuits.attribution_runs import attribute, scored_model
    from heurlens.circuits.comparison import compare_runs
    from heurlens.circuits.mib_files import read_mib_file, write_mib_file
    from heurlens.data.prompt_tasks import logit_difference
    from heurlens.data.run_data import PromptTaskData

    model = heurlens.load_model(tiny_decoder_dirs["llama"])
    task = tmp_path / "task.jsonl"
    task.write_text("\n".join(json.dumps({"prompt": clean, "answer": " dog", "distractors": [" cat"],
                                          "corrupted_prompt": corrupted}) for clean, corrupted in PROMPTS * 2) + "\n")
    data = PromptTaskData(str(task), 6, 0, batch_size=4)
    run = attribute(model, data, tmp_path / "mib-graph", level="edge", method="eap-ig", ig_steps=3, graph="mib")
    assert run.ranking.n_items == 110 and run.ranking.label == "EAP-IG (3 steps) on MIB's graph"
    curves = compare_runs(model, {}, data, attributions=[run], random_seeds=1)
    curve = curves[run.ranking.label]
    assert curve.n_items == 110 and curves["random (edges of MIB's graph)"].n_items == 110  # random on its axis
    points = curve.curve.set_index("kept_fraction")["faithfulness"]
    assert points[1.0] == pytest.approx(1.0, abs=1e-5) and points[0.001] == pytest.approx(0.0, abs=1e-5)
    write_mib_file(tmp_path / "scores.json", scored_model(model, "edge", "mib"), run.ranking)
    read_back = read_mib_file(tmp_path / "scores.json", model).ranking
    assert read_back is not None and read_back.n_items == 82
    grouped = attribution_ranking(model, data.train(model), logit_difference, level="edge", ig_steps=3).scores
    torch.testing.assert_close(read_back.scores, grouped, atol=1e-6, rtol=1e-4)
    assert read_back.signed  # heurlens' attribution file: signed scores, as written
    on_mib = read_mib_file(tmp_path / "scores.json", model, graph="mib")
    assert on_mib.graph == "mib" and torch.equal(on_mib.ranking.scores, run.ranking.scores)
    file_curve = compare_runs(model, {}, data, files=[on_mib])["file scores.json on MIB's graph"]
    assert file_curve.n_items == 110 and (file_curve.cpr, file_curve.cmd) == (curve.cpr, curve.cmd)
    pd.testing.assert_frame_equal(file_curve.circuits.drop(columns=["curve", "circuit"]),
                                  curve.circuits.drop(columns=["curve", "circuit"]))
    absolute = replace(on_mib, ranking=replace(on_mib.ranking, absolute=True))  # MIB's --absolute: both by |score|
    file_curve = compare_runs(model, {}, data, files=[absolute])["file scores.json on MIB's graph"]
    by_size = curve.circuits[curve.circuits["ranked_by"] == "|score|"]
    assert file_curve.circuits["faithfulness"].tolist() == by_size["faithfulness"].tolist()
    assert file_curve.cmd == curve.cmd and file_curve.area_rankings == "|score|"
    assert run.ranking.graph == on_mib.ranking.graph == "mib" and read_back.graph == "heurlens"
    mine = replace(run.ranking, label="my method")  # any ranking: scored on the graph it names, as the run's
    own = compare_runs(model, {}, data, rankings=[mine])["my method"]
    assert own.n_items == 110 and (own.cpr, own.cmd) == (curve.cpr, curve.cmd)
    grouped_own = compare_runs(model, {}, data, rankings=[read_back])[read_back.label]
    assert grouped_own.n_items == 82  # the grouped model's edges: its own graph
    with pytest.raises(HeurlensError, match="two curves would be named 'my method'"):
        compare_runs(model, {}, data, rankings=[mine, mine])


def test_padded_batches_score_as_one_prompt_at_a_time(tiny_decoder_dirs):
    """Prompts of different lengths batched together (right padding, attention masks) get the scores they get one
    at a time (no padding): the padded positions carry no gradient into the real ones."""
    examples = [PromptExample(clean, " dog", (" cat",), corrupted) for clean, corrupted in
                [("the man sees", "a dog runs"), ("a cat", "the man"), ("the dog runs .", "a cat sees .")]]
    model = heurlens.load_model(tiny_decoder_dirs["llama"])
    batched, alone = (tokenize_prompt_task("mixed", examples, word_level_tokenizer(), n_ctx=8, batch_size=size,
                                           add_special_tokens=False) for size in (3, 1))
    assert (batched.batches[0]["attention_mask"] == 0).any()  # the batch is padded
    for level in ("edge", "node"):
        together = attribution_ranking(model, batched, metric, level=level, ig_steps=2).scores
        apart = attribution_ranking(model, alone, metric, level=level, ig_steps=2).scores
        assert together.abs().max() > 1e-3
        torch.testing.assert_close(together, apart, atol=1e-6, rtol=1e-4)


def test_a_comparison_with_a_node_runs_old_means_mean_ablates_edges_with_the_embeddings_mean_computed(tmp_path):
    """A node run's means saved before 2026-11-29 have no mean of the embeddings: ``compare_runs`` with an edge
    attribution run and ``ablation="mean"`` takes the run's unit means and the embeddings' mean of the training
    prompts, so the attribution run's curve is its ranking mean-ablated with the means of those prompts."""
    from planted_edges import build_planted_edges_model

    from heurlens.circuits.attribution_runs import attribute
    from heurlens.circuits.comparison import compare_runs
    from heurlens.circuits.faithfulness import ranking_curve
    from heurlens.data.run_data import PromptTaskData
    from heurlens.interventions.means import UnitMeans
    from heurlens.pruning.run_folder import MEANS_FILE, load_run_means, subnetworks_by_sparsity

    model = heurlens.load_model(build_planted_edges_model(tmp_path / "planted"))
    task = planted_edges_task_file(tmp_path / "task.jsonl")
    data = PromptTaskData(str(task), 16, 0, batch_size=4)
    heurlens.prune(model, data.train(model), sparsity=0.5, seeds=[0], out=tmp_path / "nodes", progress=False,
                   cache=False, config=heurlens.PruneSettings(total_steps=2))
    saved = load_run_means(tmp_path / "nodes")
    assert saved.embeddings is not None
    UnitMeans(saved.heads, saved.mlps, saved.source).save(tmp_path / "nodes" / MEANS_FILE)  # as saved before
    run = attribute(model, data, tmp_path / "eap-mean", method="eap", ablation="mean")
    [subnetworks] = subnetworks_by_sparsity([tmp_path / "nodes"]).values()
    curves = compare_runs(model, {str(tmp_path / "nodes"): subnetworks}, data, "mean", attributions=[run])
    [prompts] = data.eval_sets(model)
    expected = ranking_curve(model, run.ranking, prompts, method="mean", means=data.means(model), cache=False)
    assert curves["EAP"].circuits["metric"].tolist() == pytest.approx(expected.circuits["metric"].tolist(), abs=1e-6)
    assert curves["EAP"].empty == pytest.approx(expected.empty, abs=1e-6)


def test_a_warm_start_is_named_in_the_progress_line_and_not_warned_of_as_a_cold_start(tmp_path, capsys):
    """Three steps from log_alpha 10 cannot prune anything (a cold start is warned of: "the masks start at log_alpha
    10"); warm-started, the masks start from the scores, so that warning does not apply, and the bar says whence."""
    import warnings

    from planted_edges import build_planted_edges_model

    from heurlens.circuits.attribution_runs import attribute
    from heurlens.data.run_data import PromptTaskData
    from heurlens.pruning import PruneSettings

    model = heurlens.load_model(build_planted_edges_model(tmp_path / "planted"))
    data = PromptTaskData(str(planted_edges_task_file(tmp_path / "task.jsonl")), 16, 0, batch_size=4)
    run = attribute(model, data, tmp_path / "eap", level="edge", method="eap")
    settings = PruneSettings(level="edge", ablation="corrupt", total_steps=3)
    for warm_start in (None, run.ranking):
        capsys.readouterr()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            heurlens.prune(model, data.train(model), sparsity=0.9, seeds=[0], config=settings, cache=False,
                           warm_start=warm_start)
        cold_warning = [w for w in caught if "the masks start at log_alpha 10" in str(w.message)]
        bar = capsys.readouterr().err
        if warm_start is None:
            assert len(cold_warning) == 1 and "warm-started" not in bar
        else:
            assert not cold_warning and "pruning seed 0 to 90%, warm-started from EAP" in bar
