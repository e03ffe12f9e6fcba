"""Faithfulness curves, CPR and CMD (MIB's definitions) with known answers: the planted model's circuit is as good
as the model (f = 1), a circuit without a planted unit is not, and the areas of a hand-made curve."""

import math

import pandas as pd
import pytest
import torch
from planted import PLANTED, build_planted_model

import heurlens
from heurlens.circuits.faithfulness import FaithfulnessCurve, faithfulness_curve, ranking_curve
from heurlens.circuits.faithfulness_areas import MIB_GRID, cpr_and_cmd
from heurlens.errors import HeurlensError
from heurlens.interventions.rankings import Ranking, random_ranking, ranking_of
from heurlens.interventions.units import UnitLayout
from heurlens.models.classifier import as_model
from heurlens.pruning.subnetwork import Subnetwork
from heurlens.tasks import token_batches


def test_cpr_and_cmd_are_mibs_trapezoids_over_its_ten_sizes():
    """A full ten-point curve on MIB's grid, two seeds' curves: CPR and CMD are the mean over the seeds of MIB's
    trapezoid sum_i (k_{i+1} - k_i) (f_i + f_{i+1}) / 2 on linear k from 0.001 to 1, written out here by hand for
    1000 units (a size's circuit keeps int(k * 1000) of them)."""
    grid = [0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0]
    f = {0: [0.0, 0.1, -0.2, 0.3, 0.5, 0.4, 0.9, 1.3, 1.1, 1.0], 1: [0.05, 0.0, 0.2, 0.2, 0.6, 0.7, 0.8, 0.95, 1.2, 1.0]}
    circuits = pd.DataFrame([{"curve": f"seed {seed}", "circuit": f"{k} seed {seed}", "kept_fraction": k,
                              "units_kept": int(k * 1000), "metric": 0.0, "faithfulness": value}
                             for seed, values in f.items() for k, value in zip(grid, values)])
    curve = FaithfulnessCurve(circuits, full=1.0, empty=0.0, n_items=1000)

    def by_hand(values, height):
        return sum((grid[i + 1] - grid[i]) * (height(values[i]) + height(values[i + 1])) / 2 for i in range(9))

    cpr = [by_hand(f[seed], lambda v: v) for seed in f]
    cmd = [by_hand(f[seed], lambda v: abs(1 - v)) for seed in f]
    assert curve.missing == []
    assert abs(curve.cpr - sum(cpr) / 2) < 1e-9 and abs(curve.cmd - sum(cmd) / 2) < 1e-9
    assert curve.areas["cpr"].tolist() == pytest.approx(cpr, abs=1e-12)
    assert curve.cpr > 1.0 - 0.2  # f above 1 counts (CPR may exceed 1); f(50%) = 1.1 and 1.2 weigh 0.3 of it
    # the first point: 0.1% of 1000 units is one unit
    assert curve.points["kept"].tolist()[:3] == [1, 2, 5]


def test_a_curve_missing_a_size_has_no_cpr_nothing_assumed():
    """Circuits at 10%, 20% and 50% only (a sweep's sizes): no f(0) = 0 or f(1) = 1 is made up, so no CPR or CMD;
    ``missing`` names the seven sizes, and one seed missing one size is enough to have none."""
    circuits = pd.DataFrame({"curve": ["seed 0"] * 3, "circuit": ["a", "b", "c"], "kept_fraction": [0.1, 0.2, 0.5],
                             "units_kept": [30, 60, 150], "metric": [0.0] * 3, "faithfulness": [0.5, 0.8, 1.0]})
    curve = FaithfulnessCurve(circuits, full=1.0, empty=0.0, n_items=300)
    assert math.isnan(curve.cpr) and math.isnan(curve.cmd)
    assert curve.missing == [0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 1.0]
    assert curve.curve.dropna()["kept_fraction"].tolist() == [0.1, 0.2, 0.5]
    grid = (0.1, 0.2, 0.5)  # on a grid of its own sizes it has areas
    assert FaithfulnessCurve(circuits, 1.0, 0.0, 300, grid).cpr == pytest.approx(0.1 * 1.3 / 2 + 0.3 * 1.8 / 2)
    two = pd.concat([circuits, circuits.iloc[:2].assign(curve="seed 1")])
    assert FaithfulnessCurve(two, 1.0, 0.0, 300, grid).missing == [0.5]


def test_one_ranking_gives_every_size_and_the_whole_circuit_is_the_model(planted_prompts):
    """``ranking_curve``: a ranking cut at each of MIB's sizes (int(k n) of the planted model's 6 units: 0, 0, 0,
    0, 0, 0, 0, 1, 3, 6) through the same ablation path; f(100%) is 1 and the empty circuit 0 up to numerics, the
    top-3 of a ranking that puts the planted heads first keeps the task (f = 1), and one that puts them last does
    not; CPR and CMD are the trapezoids of those ten points."""
    model, data, means, metric = planted_prompts
    first = Ranking("planted first", "node", torch.tensor([5.0, 0.0, 1.0, 0.5, 0.2, 4.0]))  # L0.H0, L1.MLP top
    last = Ranking("planted last", "node", torch.tensor([-1.0, 3.0, 2.0, 4.0, 5.0, -2.0]))
    curve = ranking_curve(model, [first], data, metric=metric, means=means, cache=False)
    points = curve.points.set_index("kept_fraction")
    assert points["kept"].tolist() == [0, 0, 0, 0, 0, 0, 0, 1, 3, 6]
    assert points.loc[1.0, "faithfulness"] == pytest.approx(1.0, abs=1e-6)
    assert points.loc[0.001, "faithfulness"] == pytest.approx(0.0, abs=1e-6)
    assert points.loc[0.5, "faithfulness"] == pytest.approx(1.0, abs=1e-6)  # L0.H0, L1.MLP and L0.MLP
    assert abs(points.loc[0.2, "faithfulness"] - 1) > 0.05  # L0.H0 alone
    f = points["faithfulness"].tolist()
    grid = points.index.tolist()
    assert curve.cpr == pytest.approx(sum((grid[i + 1] - grid[i]) * (f[i] + f[i + 1]) / 2 for i in range(9)))
    other = ranking_curve(model, [last], data, metric=metric, means=means, cache=False)
    assert other.points.set_index("kept_fraction").loc[0.5, "faithfulness"] == pytest.approx(0.0, abs=1e-6)
    assert other.cpr < curve.cpr
    with pytest.raises(HeurlensError, match="rank 3 nodes and this model has 6"):
        ranking_curve(model, Ranking("short", "node", torch.ones(3)), data, metric=metric, means=means, cache=False)


def test_a_runs_ranking_is_its_log_alpha():
    """``ranking_of`` a unit record: its heads' and MLPs' log_alpha in UnitLayout's order, so the top n are the
    units the masks would keep first."""
    heads, mlps = torch.tensor([[0.5, 3.0], [2.0, -1.0]]), torch.tensor([1.0, -4.0])
    record = Subnetwork([], 2, 2, 0.5, 0.5, 0.0, 7, "m", "fp", "d", log_alpha_heads=heads, log_alpha_mlps=mlps)
    ranking = ranking_of(record)
    assert ranking.level == "node" and ranking.label == "50% seed 7"
    layout = UnitLayout(2, 2)
    assert layout.units_where(ranking.top(3).bool()) == sorted(heurlens.parse_units("L0.H1,L1.H0,L0.MLP", 2, 2))
    assert Ranking("abs", "node", torch.tensor([1.0, -3.0, 2.0]), absolute=True).top(1).tolist() == [0, 1, 0]
    assert random_ranking("edge", 10, 3).top(4).sum() == 4 and random_ranking("edge", 10, 3).label == "random seed 3"
    with pytest.raises(HeurlensError, match="no trained log_alpha"):
        ranking_of(Subnetwork([], 2, 2, 0.5, 0.5, 0.0, 7, "m", "fp", "d"))


@pytest.fixture
def planted_prompts():
    """The planted model, token batches, their means and a difference of two outputs the planted pair moves."""
    model = build_planted_model()
    data = token_batches(torch.randint(0, 4, (64, 6), generator=torch.Generator().manual_seed(0)), batch_size=16)
    means = heurlens.compute_means(model, data)
    return model, data, means, lambda scores: scores[:, 2].mean() - scores[:, 3].mean()


def test_the_planted_circuit_is_faithful_and_a_circuit_without_it_is_not():
    model = build_planted_model()
    data = token_batches(torch.randint(0, 4, (64, 6), generator=torch.Generator().manual_seed(0)), batch_size=16)
    means = heurlens.compute_means(model, data)
    metric = {"m": lambda scores: scores[:, 2].mean() - scores[:, 3].mean()}["m"]  # a difference the planted pair moves
    curve = faithfulness_curve(model, {"planted": ",".join(PLANTED), "one": PLANTED[0], "others": "L0.H1,L1.H0,L1.H1"},
                               data, metric=metric, means=means, cache=False)
    faithfulness = dict(zip(curve.circuits["circuit"], curve.circuits["faithfulness"]))
    assert faithfulness["planted"] == pytest.approx(1.0, abs=1e-6)
    assert faithfulness["others"] == pytest.approx(0.0, abs=1e-6)  # units that carry nothing: the empty model's m
    assert abs(faithfulness["one"] - 1) > 0.05 and curve.full != curve.empty
    assert curve.circuits.set_index("circuit")["kept_fraction"].to_dict() == pytest.approx(
        {"planted": 2 / 6, "one": 1 / 6, "others": 3 / 6})
    twin = Subnetwork(heurlens.parse_units(",".join(PLANTED), 2, 2), 2, 2, 2 / 3, 2 / 3, 0.0, 0, "planted",
                      as_model(model).fingerprint(), "data")
    with pytest.raises(HeurlensError, match="two circuits share the label '66.6667% seed 0'"):  # a table row each
        faithfulness_curve(model, [twin, twin], data, metric=metric, means=means, cache=False)
    with pytest.raises(HeurlensError, match="no distractors, so there is no default logit difference"):
        faithfulness_curve(model, {"planted": ",".join(PLANTED)}, data, means=means, cache=False)
    with pytest.raises(HeurlensError, match="undefined: use a metric the units change"):
        faithfulness_curve(model, {"planted": ",".join(PLANTED)}, data, metric=lambda scores: 1.0, means=means,
                           cache=False)


def test_the_faithfulness_command_scores_a_prune_run(tiny_decoder_dirs, tmp_path, capsys):
    """``heurlens faithfulness RUN_DIR --task FILE``: one row per subnetwork with the library's f, CPR and CMD, and
    the plotly figure."""
    import json

    from cli_run import heurlens_in_process
    from transformer_lens.model_bridge import TransformerBridge

    from heurlens.circuits.attribution import attribution_scores
    from heurlens.data.prompt_tasks import logit_difference
    from heurlens.data.run_data import PromptTaskData
    from heurlens.pruning.run_folder import load_run_means

    task = tmp_path / "task.jsonl"
    rows = [{"prompt": "the man sees the", "answer": " dog", "distractors": [" cat"]},
            {"prompt": "a dog sees a", "answer": " man", "distractors": [" cat"]},
            {"prompt": "the cat runs .", "answer": " the", "distractors": [" a"]}]
    task.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    directory = str(tiny_decoder_dirs["llama"])
    model = heurlens.wrap_bridge(TransformerBridge.boot_transformers(directory, device="cpu"))
    data = PromptTaskData(str(task), 3, 0)
    subnetworks = heurlens.prune(model, data.train(model), sparsity=[0.3, 0.6], seeds=[0], out=tmp_path / "run",
                                 means=data.means(model), progress=False, config=heurlens.PruneSettings(
                                     total_steps=20, log_alpha_init=0.0, lr_log_alpha=0.3))
    status, out, err = heurlens_in_process(capsys, "faithfulness", str(tmp_path / "run"), "--task", str(task),
                                           "--task-examples", "3", "--figure", str(tmp_path / "f.html"),
                                           "--random-seeds", "2", "--json")
    assert status == 0, err
    shown = pd.DataFrame(json.loads(out))
    prompts, means = data.eval_sets(model)[0], load_run_means(tmp_path / "run")
    expected = ranking_curve(model, [ranking_of(sub) for sub in subnetworks], prompts, means=means, cache=False)
    pruned = shown[shown["method"] == "mask optimisation"]
    assert pruned["curve"].unique().tolist() == ["30% seed 0", "60% seed 0"]  # each record's ranking, every size
    assert pruned["units_kept"].tolist() == [0, 1, 2, 5, 10] * 2  # int(k * 10) for MIB's sizes, each count once
    assert pruned["faithfulness"].tolist() == pytest.approx(expected.circuits["faithfulness"].tolist())
    assert pruned["faithfulness"].tolist()[4] == pytest.approx(1.0, abs=1e-5)  # 100% of the units: the model
    assert pruned["cpr"].iloc[0] == pytest.approx(expected.cpr) and pruned["cmd"].iloc[0] == pytest.approx(expected.cmd)
    # attribution patching's ranking of the units (on the training prompts), cut at the same sizes: CPR from the
    # ranking by score (-delta_m: the units whose ablation lowers m most first), CMD from the ranking by |score|
    scores = -torch.tensor(attribution_scores(model, data.train(model), logit_difference, means=means)["score"])
    attributed = shown[shown["method"] == "attribution"]
    assert set(attributed["areas_ranked_by"]) == {"CPR by score, CMD by |score|"}
    for by, area in (("score", "cpr"), ("|score|", "cmd")):
        alone = ranking_curve(model, Ranking("attribution", "node", scores, absolute=by == "|score|"), prompts,
                              means=means, cache=False)
        rows = attributed[attributed["ranked_by"] == by]
        assert rows["faithfulness"].tolist() == pytest.approx(alone.circuits["faithfulness"].tolist())
        assert attributed[area].iloc[0] == pytest.approx(getattr(alone, area))
    randoms = shown[shown["method"] == "random (nodes)"]
    assert randoms["curve"].unique().tolist() == ["random seed 0", "random seed 1"]
    assert "CPR" in (tmp_path / "f.html").read_text()
    # the circuits the targets kept (3 and 6 pruned of 10 units, 7 and 4 kept): on no size of MIB's grid, so no CPR
    status, out, err = heurlens_in_process(capsys, "faithfulness", str(tmp_path / "run"), "--task", str(task),
                                           "--task-examples", "3", "--circuits", "targets")
    assert status == 0, err
    assert "mask optimisation: CPR, CMD n/a: no circuit at 0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50, 100%" in out
    status, out, err = heurlens_in_process(capsys, "faithfulness", str(tmp_path / "run"), "--task", str(task),
                                           "--task-examples", "3", "--circuits", "targets", "--grid", "0.4,0.7")
    assert status == 0 and "mask optimisation: CPR 0." in out, err


@pytest.mark.parametrize("family", ["gpt2", "llama"])
def test_a_node_circuit_on_the_edge_axis_mean_ablated_is_the_node_circuit_mean_ablated(family, tiny_gpt2_dirs,
                                                                                      tiny_decoder_dirs):
    """Mean ablation on edges (MIB's "mean"): a node circuit as the edges between its units (and the embeddings and
    logits) leaves every unit outside it carrying its mean on every edge out of it, which is the unit mean-ablated:
    the same metric on both axes, for circuits of one to all but one unit (grouped key-value heads included); the
    empty circuits differ (on edges the embeddings carry their mean too)."""
    model = heurlens.load_model(tiny_gpt2_dirs["lm"] if family == "gpt2" else tiny_decoder_dirs[family])
    with torch.no_grad():  # random weights at 0.02 move the logits by 1e-5: scaled to matter
        for weight in model.bridge.parameters():
            weight.mul_(8 if weight.dim() > 1 else 1)
    data = token_batches(torch.tensor([[2, 4, 10, 5, 6], [3, 5, 10, 9, 7], [2, 9, 10, 4, 8]]), batch_size=2)
    means = heurlens.compute_means(model, data)
    circuits = {"one head": "L1.H2", "heads of a key-value head": "L0.H0,L0.H1,L1.MLP",
                "all but one": "L0.H0,L0.H1,L0.H2,L0.H3,L0.MLP,L1.H0,L1.H1,L1.H3,L1.MLP"}

    def metric(scores):
        return scores[:, 5] - scores[:, 7]

    on_nodes, on_edges = (faithfulness_curve(model, circuits, data, metric=lambda s: metric(s).mean(), method="mean",
                                             means=means, edges=edges, cache=False) for edges in (False, True))
    nodes, edges = (curve.circuits.set_index("circuit")["metric"] for curve in (on_nodes, on_edges))
    assert (nodes - on_nodes.full).abs().min() > 1e-3  # every circuit changes the metric: the comparison can tell
    assert nodes.to_dict() == pytest.approx(edges.to_dict(), abs=1e-5)
    assert abs(on_nodes.empty - on_edges.empty) > 1e-3


def test_each_area_comes_from_its_own_ranking_as_mibs_print_results_takes_them():
    """Signed scores cut two ways (MIB's print_results.py): CPR from the circuits ranked by score, CMD from those
    ranked by |score|. By hand on a two-size grid (0.5, 1): by score f = 0.2, 1 gives CPR 0.5 (0.2 + 1) / 2 = 0.3;
    by |score| f = 0.8, 1 gives CMD 0.5 (0.2 + 0) / 2 = 0.05 (from one order alone: CMD 0.2, or CPR 0.45)."""
    rows = [{"curve": "r", "circuit": f"top {kept} by {by}", "kept_fraction": kept / 2, "units_kept": kept,
             "ranked_by": by, "metric": f, "faithfulness": f}
            for by, values in (("score", (0.2, 1.0)), ("|score|", (0.8, 1.0))) for kept, f in zip((1, 2), values)]
    curve = FaithfulnessCurve(pd.DataFrame(rows), 1.0, 0.0, 2, (0.5, 1.0), cpr_from="score", cmd_from="|score|")
    assert curve.cpr == pytest.approx(0.3) and curve.cmd == pytest.approx(0.05)
    assert curve.area_rankings == "CPR by score, CMD by |score|" and curve.missing == []
    assert curve.curve["faithfulness"].tolist() == pytest.approx([0.2, 1.0])  # the figure draws CPR's order
    one = FaithfulnessCurve(pd.DataFrame(rows[:2]), 1.0, 0.0, 2, (0.5, 1.0), cpr_from="score", cmd_from="score")
    assert (one.cpr, one.cmd) == (pytest.approx(0.3), pytest.approx(0.2)) and one.area_rankings == "score"


def test_one_rankings_cmd_is_at_least_its_cprs_distance_from_the_whole_grid():
    """For one ranking CMD = sum w_i |1 - f_i| >= |sum w_i (1 - f_i)| = |0.999 - CPR| (the trapezoid's weights w_i are
    positive and sum to the grid's width, 1 - 0.001), equal when f never passes 1: a single ranking cannot be above
    EAP-IG's CPR c > 1 and below a CMD of c - 0.999 (why MIB reads EAP-IG's two areas from two rankings). 200
    random curves, half of them overshooting."""
    generator = torch.Generator().manual_seed(0)
    for i in range(200):
        f = (torch.rand(len(MIB_GRID), generator=generator) * (3.0 if i % 2 else 1.0)).tolist()
        cpr, cmd = cpr_and_cmd(MIB_GRID, f)
        assert cmd >= abs(0.999 - cpr) - 1e-12
        if max(f) <= 1:
            assert cmd == pytest.approx(0.999 - cpr, abs=1e-12)
