"""Faithfulness curves, CPR and CMD (MIB's definitions) with known answers: the planted model's circuit is as good
as the model (f = 1), a circuit without a planted unit is not, and the areas of a hand-made curve."""

import pandas as pd
import pytest
import torch
from planted import PLANTED, build_planted_model

import heurlens
from heurlens.analysis.faithfulness import FaithfulnessCurve, faithfulness_curve
from heurlens.errors import HeurlensError
from heurlens.models.classifier import as_model
from heurlens.pruning.subnetwork import Subnetwork
from heurlens.tasks import token_batches


def test_cpr_and_cmd_of_a_hand_made_curve():
    """f(1/3) = 1 (a perfect third), f(2/3) = 0.5 (a bad larger one, averaged over two seeds 0.25 and 0.75), plus
    f(0) = 0 and f(1) = 1: CPR = (1/3)(0 + 1)/2 + (1/3)(1 + 0.5)/2 + (1/3)(0.5 + 1)/2 = 2/3, CMD = (1/3)(1 + 0)/2 +
    (1/3)(0 + 0.5)/2 + (1/3)(0.5 + 0)/2 = 1/3."""
    circuits = pd.DataFrame({"circuit": ["a", "b", "c"], "kept_fraction": [1 / 3, 2 / 3, 2 / 3],
                             "units_kept": [2, 4, 4], "metric": [0.0] * 3, "faithfulness": [1.0, 0.25, 0.75]})
    curve = FaithfulnessCurve(circuits, full=1.0, empty=0.0)
    assert curve.curve["kept_fraction"].tolist() == pytest.approx([0, 1 / 3, 2 / 3, 1])
    assert curve.curve["faithfulness"].tolist() == pytest.approx([0, 1, 0.5, 1])
    assert curve.cpr == pytest.approx(2 / 3) and curve.cmd == pytest.approx(1 / 3)


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

    from heurlens.analysis.attribution import attribution_circuits, attribution_scores
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
                                           "--task-examples", "3", "--figure", str(tmp_path / "f.html"), "--json")
    assert status == 0, err
    shown = json.loads(out)
    expected = faithfulness_curve(model, subnetworks, data.eval_sets(model)[0],
                                  means=load_run_means(tmp_path / "run"), cache=False)
    pruned = [row for row in shown if row["method"] == "mask optimisation"]
    assert [row["circuit"] for row in pruned] == ["30% seed 0", "60% seed 0"]
    assert [row["faithfulness"] for row in pruned] == pytest.approx(expected.circuits["faithfulness"].tolist())
    assert pruned[0]["cpr"] == pytest.approx(expected.cpr) and pruned[0]["cmd"] == pytest.approx(expected.cmd)
    # attribution's circuits of the same sizes, ranked on the training prompts
    ranking = attribution_scores(model, data.train(model), logit_difference, means=load_run_means(tmp_path / "run"))
    sizes = sorted(row["kept_fraction"] for row in pruned)
    by_attribution = faithfulness_curve(model, attribution_circuits(ranking, sizes, 2, 4), data.eval_sets(model)[0],
                                        means=load_run_means(tmp_path / "run"), cache=False)
    attributed = [row for row in shown if row["method"] == "attribution"]
    assert [row["units_kept"] for row in attributed] == sorted(row["units_kept"] for row in pruned)
    assert [row["faithfulness"] for row in attributed] == pytest.approx(by_attribution.circuits["faithfulness"].tolist())
    assert attributed[0]["cpr"] == pytest.approx(by_attribution.cpr)
    assert "CPR" in (tmp_path / "f.html").read_text()
