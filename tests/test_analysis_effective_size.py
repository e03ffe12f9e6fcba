"""Effective size from a hand-made evaluation table (known answers) and the bisection search."""

import pandas as pd
import pytest

from heurlens.analysis import effective_size
from heurlens.analysis.effective_size import accuracy_by_kind, checkpoint_step, effective_sizes


def evaluation(rows):
    """Long table as evaluate_subnetworks returns it, from (name, sparsity, in-domain, [ood...])."""
    records = []
    for name, sparsity, in_domain, ood in rows:
        records.append({"subnetwork": name, "target_sparsity": sparsity, "achieved_sparsity": sparsity, "seed": 0,
                        "eval_set": "snli", "accuracy": in_domain})
        records += [{"subnetwork": name, "target_sparsity": sparsity, "achieved_sparsity": sparsity, "seed": 0,
                     "eval_set": f"hans/{i}", "accuracy": a} for i, a in enumerate(ood)]
    return pd.DataFrame(records)


TABLE = evaluation([("full model", 0.0, 0.80, [0.30, 0.50]),  # ood 0.40, mixed 0.60
                    ("20%", 0.2, 0.79, [0.10, 0.30]),          # ood 0.20 (unfaithful), mixed 0.495
                    ("50%", 0.5, 0.78, [0.40, 0.42]),          # ood 0.41, mixed 0.595
                    ("70%", 0.7, 0.70, [0.38, 0.40])])         # in-domain -10, ood 0.39, mixed 0.545


def test_accuracy_by_kind():
    table = accuracy_by_kind(TABLE).set_index("subnetwork")
    assert table.loc["full model", "ood"] == pytest.approx(0.40)
    assert table.loc["50%", "mixed"] == pytest.approx((0.78 + 0.41) / 2)


def test_effective_sizes_are_the_smallest_faithful_subnetworks():
    sizes = effective_sizes(TABLE, n_units=78)
    assert sizes == {"in_domain": 39, "ood": 23, "mixed": 39}  # 78 * (1 - 0.5), 78 * (1 - 0.7) = 23.4
    assert effective_sizes(TABLE, n_units=78, tolerance=0.001) == {"in_domain": 78, "ood": 78, "mixed": 78}


def test_bisection_prunes_fewer_sparsities_and_agrees_with_the_grid(monkeypatch):
    """Fake pruning: a subnetwork at sparsity s keeps in-domain accuracy up to 0.6, OOD up to 0.3."""
    pruned = []

    def fake_prune(model, train, sparsity, seeds, out, config, means, progress):
        pruned.append(sparsity)
        return [sparsity]

    def fake_evaluate(model, subnetworks, eval_sets, means):
        s = subnetworks[0]
        return evaluation([("full model", 0.0, 0.8, [0.5]),
                           (f"{s}", s, 0.8 if s <= 0.6 else 0.5, [0.5 if s <= 0.3 else 0.1])])

    class Model:
        n_layers, n_heads = 6, 12

    monkeypatch.setattr(effective_size, "prune", fake_prune)
    monkeypatch.setattr(effective_size, "evaluate_subnetworks", fake_evaluate)
    grid_sizes, _ = effective_size.effective_size_of(Model(), None, [], None, search="grid")
    grid_count = len(pruned)
    pruned.clear()
    bisect_sizes, table = effective_size.effective_size_of(Model(), None, [], None, search="bisect")
    assert grid_sizes == bisect_sizes == {"in_domain": round(78 * 0.4), "ood": round(78 * 0.7), "mixed": round(78 * 0.7)}
    assert grid_count == 19 and len(pruned) < 12
    assert (table["subnetwork"] == "full model").sum() == 2  # one row per eval set, not one per sparsity


def test_checkpoint_step_from_directory_name(tmp_path):
    assert checkpoint_step(tmp_path / "step-1200", 3) == 1200
    assert checkpoint_step(tmp_path / "final", 3) == 3
