"""Accuracy against sparsity (Figure 2) on a hand-made evaluation table."""

import pandas as pd
import pytest

from heurlens.analysis.accuracy_curve import accuracy_by_sparsity, accuracy_curve_figure, highest_faithful_sparsity


def evaluation_table() -> pd.DataFrame:
    """Full model 0.80 in-domain; OOD sets a and b. Seeds at 30% stay within 3 points, at 50% one does not."""
    rows = []

    def add(name, sparsity, seed, in_domain, a, b):
        for eval_set, accuracy in (("in", in_domain), ("a", a), ("b", b)):
            rows.append({"subnetwork": name, "target_sparsity": sparsity, "achieved_sparsity": sparsity, "seed": seed,
                         "eval_set": eval_set, "examples": 10, "accuracy": accuracy, "kl": 0.0})

    add("full model", 0.0, None, 0.80, 0.40, 0.60)
    add("30% seed 0", 0.3, 0, 0.79, 0.50, 0.50)
    add("30% seed 1", 0.3, 1, 0.77, 0.30, 0.50)
    add("50% seed 0", 0.5, 0, 0.78, 0.20, 0.20)
    add("50% seed 1", 0.5, 1, 0.76, 0.60, 0.40)
    return pd.DataFrame(rows)


def test_mean_and_spread_per_sparsity():
    summary = accuracy_by_sparsity(evaluation_table()).set_index("target_sparsity")
    assert summary.loc[0.3, "seeds"] == 2 and summary.loc[0.0, "seeds"] == 1
    assert summary.loc[0.3, "in_domain_mean"] == pytest.approx(0.78)
    assert (summary.loc[0.3, "in_domain_min"], summary.loc[0.3, "in_domain_max"]) == (0.77, 0.79)
    assert summary.loc[0.3, "ood_mean"] == pytest.approx((0.50 + 0.40) / 2)  # OOD = mean over sets a and b
    assert (summary.loc[0.5, "ood_min"], summary.loc[0.5, "ood_max"]) == pytest.approx((0.20, 0.50))


def test_highest_faithful_sparsity_needs_every_seed_within_the_margin():
    assert highest_faithful_sparsity(evaluation_table()) == 0.3  # 0.76 < 0.80 - 0.03 at 50%
    assert highest_faithful_sparsity(evaluation_table(), margin=0.05) == 0.5
    assert highest_faithful_sparsity(evaluation_table(), margin=0.01) == 0.0


def test_figure_has_both_curves_with_error_bars():
    figure = accuracy_curve_figure(evaluation_table())
    assert [trace.name for trace in figure.data] == ["in-domain", "out-of-domain"]
    in_domain = figure.data[0]
    assert list(in_domain.x) == [0.0, 0.3, 0.5] and in_domain.y[1] == pytest.approx(78.0)
    assert in_domain.error_y.array[1] == pytest.approx(1.0) and in_domain.error_y.arrayminus[1] == pytest.approx(1.0)


def test_accuracy_is_an_exact_fraction_so_a_drop_of_exactly_three_points_is_within_three():
    """1408 of 2,000 right against the full model's 1468: a 3.0-point drop. In float32, 0.704 and 0.734 round
    so that 0.704 < 0.734 - 0.03 and the subnetwork would wrongly count as unfaithful."""
    import torch

    from heurlens.evaluate import EvalSet, accuracy

    def fraction_right(right: int) -> float:
        logits = torch.zeros(2000, 2)
        logits[:right, 0], logits[right:, 1] = 1.0, 1.0
        return accuracy(logits, EvalSet("x", [], torch.zeros(2000, dtype=torch.long), ("a", "b")), None)

    full, sub = fraction_right(1468), fraction_right(1408)
    assert (full, sub) == (1468 / 2000, 1408 / 2000)
    assert torch.tensor(sub).item() < torch.tensor(full).item() - 0.03  # what float32 accuracies did
    table = evaluation_table()
    table.loc[table["eval_set"] == "in", "accuracy"] = [full, sub, sub, full, full]
    assert highest_faithful_sparsity(table) == 0.5
