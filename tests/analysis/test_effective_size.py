"""Effective size from a hand-made evaluation table (known answers) and the bisection search."""

from types import SimpleNamespace

import pandas as pd
import pytest

from heurlens.analysis import effective_size
from heurlens.analysis.effective_size import (
    accuracy_by_kind,
    checkpoint_step,
    effective_size_per_seed,
    effective_size_spread,
    effective_sizes,
)


def evaluation(rows, seed=0):
    """Long table as evaluate_subnetworks returns it, from (name, sparsity, in-domain, [ood...][, seed])."""
    records = []
    for name, sparsity, in_domain, ood, *row_seed in rows:
        keys = {"subnetwork": name, "target_sparsity": sparsity, "achieved_sparsity": sparsity,
                "seed": None if name == "full model" else (row_seed or [seed])[0]}
        records.append(keys | {"eval_set": "snli", "accuracy": in_domain})
        records += [keys | {"eval_set": f"hans/{i}", "accuracy": a} for i, a in enumerate(ood)]
    return pd.DataFrame(records)


TABLE = evaluation([("full model", 0.0, 0.80, [0.30, 0.50]),  # ood 0.40
                    ("20%", 0.2, 0.79, [0.10, 0.30]),          # ood 0.20 (unfaithful)
                    ("50%", 0.5, 0.78, [0.40, 0.42]),          # ood 0.41
                    ("70%", 0.7, 0.70, [0.38, 0.40])])         # in-domain -10, ood 0.39


def test_accuracy_by_kind():
    table = accuracy_by_kind(TABLE).set_index("subnetwork")
    assert table.loc["full model", "ood"] == pytest.approx(0.40)
    assert table.loc["50%", "mixed"] == pytest.approx((0.78 + 0.40 + 0.42) / 3)  # every set counts once


# Two seeds, 100 units; full model: in-domain 0.80, OOD (0.30 + 0.40) / 2 = 0.35, all sets 0.50.
SEEDS = evaluation([("full model", 0.0, 0.80, [0.30, 0.40]),
                    ("30% s0", 0.3, 0.79, [0.50, 0.60], 0),  # OOD 0.55: beats the full model by 20 points
                    ("60% s0", 0.6, 0.70, [0.45, 0.45], 0),  # OOD 0.45: beats it by 10
                    ("30% s1", 0.3, 0.78, [0.20, 0.20], 1),
                    ("60% s1", 0.6, 0.76, [0.30, 0.30], 1)])


def test_effective_size_is_per_seed_one_sided_and_averaged():
    # in-domain (> 0.77): seed 0 up to 30% (0.70 at 60% fails), seed 1 up to 30% (0.76 fails): 70 and 70
    # OOD (> 0.32): seed 0 up to 60% -> 40 units; seed 1 never (0.20, 0.30) -> 100 units; mean 70.
    #   Two-sided (|diff| <= 0.03) seed 0 would never be faithful (100, mean 100); pooling the seeds'
    #   sparsest faithful subnetwork, as heurlens did before, would give 40.
    # all sets (> 0.47): seed 0 60% (0.70 + 0.90) / 3 = 0.533 -> 40; seed 1 30% 0.393, 60% 0.453 -> 100; mean 70
    per_seed = effective_size_per_seed(SEEDS, n_units=100).set_index(["kind", "seed"])["size"]
    assert per_seed.to_dict() == pytest.approx({("in_domain", 0): 70, ("in_domain", 1): 70, ("ood", 0): 40,
                                                ("ood", 1): 100, ("mixed", 0): 40, ("mixed", 1): 100})
    assert effective_sizes(SEEDS, n_units=100) == pytest.approx({"in_domain": 70, "ood": 70, "mixed": 70})
    assert effective_size_spread(SEEDS, n_units=100) == pytest.approx({"in_domain": 0, "ood": 30, "mixed": 30})


def test_effective_size_uses_the_target_sparsity_and_a_strict_margin():
    sizes = effective_sizes(TABLE, n_units=78)
    assert sizes == pytest.approx({"in_domain": 39, "ood": 78 * 0.3, "mixed": 39})
    achieved = TABLE.assign(achieved_sparsity=TABLE["achieved_sparsity"] - 0.01)  # what was reached is not used
    assert effective_sizes(achieved, n_units=78) == sizes
    # margin 0.001: in-domain 0.79 and 0.78 fall short of 0.799; OOD 0.41 > 0.399; all sets 0.533 > 0.532
    assert effective_sizes(TABLE, n_units=78, margin=0.001) == {"in_domain": 78, "ood": 78 * 0.5, "mixed": 39}


def test_bisection_prunes_fewer_sparsities_and_agrees_with_the_grid(monkeypatch):
    """Fake pruning: a subnetwork at sparsity s keeps in-domain accuracy up to 0.6, OOD up to 0.3."""
    pruned = []

    def fake_prune(model, train, sparsity, seeds, out, config, means, progress, workers, loss):
        sparsities = sparsity if isinstance(sparsity, list) else [sparsity]  # the grid prunes all in one call
        pruned.extend(sparsities)
        return [SimpleNamespace(target_sparsity=s) for s in sparsities]

    def fake_evaluate(model, subnetworks, eval_sets, means, metrics, dtype="float32"):
        s = subnetworks[0].target_sparsity
        return evaluation([("full model", 0.0, 0.8, [0.5]),
                           (f"{s}", s, 0.8 if s <= 0.6 else 0.5, [0.5 if s <= 0.3 else 0.1])])

    class Model:
        n_layers, n_heads = 6, 12

    monkeypatch.setattr(effective_size, "prune", fake_prune)
    monkeypatch.setattr(effective_size, "evaluate_subnetworks", fake_evaluate)
    grid_sizes, _ = effective_size.effective_size_of(Model(), None, [], None, seeds=[0], search="grid")
    grid_count = len(pruned)
    pruned.clear()
    bisect_sizes, table = effective_size.effective_size_of(Model(), None, [], None, seeds=[0], search="bisect")
    assert grid_sizes == bisect_sizes == pytest.approx({"in_domain": 78 * 0.4, "ood": 78 * 0.7, "mixed": 78 * 0.7})
    assert grid_count == 19 and len(pruned) < 12
    assert (table["subnetwork"] == "full model").sum() == 2  # one row per eval set, not one per sparsity


def test_checkpoint_step_from_directory_name(tmp_path):
    assert checkpoint_step(tmp_path / "step-1200", 3) == 1200
    assert checkpoint_step(tmp_path / "final", 3) == 3
    assert checkpoint_step(tmp_path / "checkpoint-500", 3) == 500  # the Hugging Face Trainer's folders
    assert checkpoint_step(tmp_path / "minilm-v2", 3) == 3 and checkpoint_step(tmp_path / "run2024", 1) == 1


def test_a_subnetwork_that_missed_its_target_is_never_counted_faithful():
    import pandas as pd

    from heurlens.analysis.effective_size import effective_size_per_seed

    rows = [{"subnetwork": "full model", "target_sparsity": 0.0, "achieved_sparsity": 0.0, "seed": None,
             "eval_set": s, "accuracy": 0.8} for s in ("id", "ood")]
    for target, achieved in ((0.3, 0.3), (0.6, 0.0)):  # the 60% run kept every unit: it missed its target
        rows += [{"subnetwork": f"{target:.0%} seed 0", "target_sparsity": target, "achieved_sparsity": achieved,
                  "seed": 0, "eval_set": s, "accuracy": 0.8} for s in ("id", "ood")]
    per_seed = effective_size_per_seed(pd.DataFrame(rows), n_units=10)
    assert set(per_seed["sparsity"]) == {0.3} and set(per_seed["size"]) == {7.0}


@pytest.mark.parametrize("content, fragment", [
    (b"", "cannot be read as a table (EmptyDataError)"),
    (b"\xff\xfe\x00binary\x80\x81\n", "cannot be read as a table (UnicodeDecodeError)"),
    (b"a,b\n1,2\n", "lacks the columns checkpoint, step"),
    (None, "has empty or cut-short rows"),  # a good table with its last row cut in half
])
def test_a_damaged_table_is_refused_before_any_checkpoint_is_pruned(tmp_path, content, fragment):
    from heurlens.analysis.effective_size import TABLE_COLUMNS, effective_size_over_checkpoints
    from heurlens.errors import HeurlensError

    out = tmp_path / "es"
    out.mkdir()
    (out / "settings.json").write_text("{}")
    if content is None:
        row = ",".join("ck" if c == "checkpoint" else "1" for c in TABLE_COLUMNS)
        content = (",".join(TABLE_COLUMNS) + "\n" + row + "\n" + row[: len(row) // 2] + "\n").encode()
    (out / "effective-size.csv").write_bytes(content)
    with pytest.raises(HeurlensError, match=f"{out / 'effective-size.csv'} .*{fragment.replace('(', '.').replace(')', '.')}"
                       ".*checkpoints' finished prune runs .* are kept"):
        effective_size_over_checkpoints([str(tmp_path / "never-loaded")], out, lambda model: [])
    assert (out / "effective-size.csv").read_bytes() == content  # nothing rewritten
