"""Attribution patching of units (heurlens.circuits.attribution), with known answers on the planted model
(tests/planted.py): its logits are linear in the last MLP's output (no LayerNorm after it), so the first-order
estimate for L1.MLP is exact; the heads that carry nothing score 0; the planted units rank first."""

import pytest
import torch
from planted import PLANTED, build_planted_model

import heurlens
from heurlens.circuits.attribution import attribution_circuits, attribution_scores
from heurlens.errors import HeurlensError
from heurlens.tasks import token_batches


def metric(scores):
    return scores[:, 2].mean() - scores[:, 3].mean()


@pytest.fixture(scope="module")
def planted():
    model = build_planted_model()
    data = token_batches(torch.randint(0, 4, (64, 6), generator=torch.Generator().manual_seed(0)), batch_size=16)
    data.corrupted = token_batches(torch.randint(0, 4, (64, 6), generator=torch.Generator().manual_seed(1)),
                                   batch_size=16)  # a task's corruption: the same shapes, other tokens
    return model, data, heurlens.compute_means(model, data)


@pytest.mark.parametrize("method", ["mean", "corrupt", "zero"])
def test_the_last_mlps_attribution_is_its_ablation_exactly(planted, method):
    model, data, means = planted
    scores = attribution_scores(model, data, metric, method=method, means=means).set_index("unit")["score"]
    delta = heurlens.ablate(model, "L1.MLP", [data], method=method, means=means, metrics={"m": metric},
                            cache=False)["delta"].item()
    assert scores["L1.MLP"] == pytest.approx(delta, rel=1e-4) and abs(delta) > 0.01
    for unit in ("L0.H1", "L1.H0", "L1.H1", "L0.MLP"):  # outputs 0 on every input: nothing to attribute
        assert scores[unit] == pytest.approx(0, abs=1e-6)


def test_attribution_ranks_the_planted_units_first_and_cuts_circuits(planted):
    model, data, means = planted
    scores = attribution_scores(model, data, metric, means=means)
    circuits = attribution_circuits(scores, [1 / 3, 1 / 6, 0.0], model.n_layers, model.n_heads)
    assert {str(unit) for unit in circuits["attribution, k = 0.333"]} == set(PLANTED)
    assert len(circuits["attribution, k = 0.167"]) == 1 and circuits["attribution, k = 0"] == []
    with pytest.raises(HeurlensError, match="a metric with a gradient"):
        attribution_scores(model, data, lambda scores: float(scores.mean()), means=means)
    with pytest.raises(HeurlensError, match="needs the units' means"):
        attribution_scores(model, data, metric)
