"""Single-unit scans, group super-additivity and pairwise interactions on the hand-set model,
where every accuracy can be derived by hand."""

import pytest
import torch
from hand_model import build_hand_model, one_sequence

from heurlens.analysis.ablation_studies import (
    group_superadditivity,
    scan_table,
    single_unit_scan,
)
from heurlens.evaluate import EvalSet
from heurlens.interventions.ablation import ablate
from heurlens.interventions.units import Unit

H0, H1, MLP = Unit(0, 0), Unit(0, 1), Unit(0)


@pytest.fixture
def model_and_data():
    """Tokens 3,3,3,3,2 (label 0). At the last position x = (2, 0), head means (0.4, 2.4), MLP
    (0.5, -0.25), so logits = (2.9, 2.15). Zero-ablating H0 gives (2.5, 2.15), the MLP (2.4, 2.15),
    H1 (2.9, -0.25): each alone keeps label 0. H0 and the MLP together give (2.0, 2.15): wrong.
    All three together give (2.0, -0.25): right again."""
    sequence = one_sequence([3, 3, 3, 3, 2])
    return build_hand_model(), EvalSet("hand", sequence.batches, torch.tensor([0]), sequence.label_names)


def test_the_derivation_holds(model_and_data):
    model, data = model_and_data
    assert ablate(model, [H0, MLP], [data], method="zero")["ablated_accuracy"][0] == 0.0
    assert ablate(model, [H0, H1, MLP], [data], method="zero")["ablated_accuracy"][0] == 1.0


def test_single_unit_scan_and_table(model_and_data):
    model, data = model_and_data
    scan = single_unit_scan(model, [H0, H1, MLP], [data], means=None, method="zero", progress=False)
    assert list(scan["ablated"]) == ["L0.H0", "L0.H1", "L0.MLP"]
    assert (scan["delta"] == 0).all() and (scan["accuracy"] == 1.0).all()
    table = scan_table(scan, core=[H0]).set_index("ablated")
    assert list(table.index) == ["none", "avg (non-core)", "L0.H0"]
    assert table.loc["avg (non-core)", "hand"] == 100.0 and table.loc["L0.H0", "hand delta"] == 0.0


def test_pair_is_superadditive(model_and_data):
    model, data = model_and_data
    summary, interactions = group_superadditivity(model, [H0, MLP], [data], means=None, method="zero", progress=False)
    row = summary.iloc[0]
    assert row["group_drop"] == 1.0 and row["sum_of_single_drops"] == 0.0 and row["excess"] == 1.0
    assert bool(row["superadditive"])
    assert interactions.empty  # a group of two is its own only pair


def test_pairwise_interactions_of_a_triple(model_and_data):
    model, data = model_and_data
    summary, interactions = group_superadditivity(model, [H0, H1, MLP], [data], means=None, method="zero", progress=False)
    assert summary.iloc[0]["group_drop"] == 0.0 and not bool(summary.iloc[0]["superadditive"])
    by_pair = interactions.set_index("pair")["interaction"].to_dict()
    assert by_pair == {"L0.H0,L0.H1": 0.0, "L0.H0,L0.MLP": 1.0, "L0.H1,L0.MLP": 0.0}


def test_a_scan_as_a_layer_by_head_tensor():
    """``head_grid``: each head's value at [layer, head] (TransformerLens' patching layout), NaN where a head was not
    scanned, MLP rows left out; one set's rows chosen by name when the scan has several."""
    import math

    import pandas as pd
    import pytest
    import torch

    from heurlens.analysis.ablation_studies import head_grid
    from heurlens.errors import HeurlensError

    scan = pd.DataFrame({"ablated": ["L0.H1", "L1.H0", "L1.MLP", "L0.H1", "L1.H0", "L1.MLP"],
                         "eval_set": ["a"] * 3 + ["b"] * 3, "delta": [-0.5, 0.25, -1.0, 0.1, 0.2, 0.3],
                         "kl": [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]})
    grid = head_grid(scan, 2, 2, eval_set="a")
    assert grid.shape == (2, 2) and grid[0, 1] == -0.5 and grid[1, 0] == 0.25
    assert math.isnan(grid[0, 0]) and math.isnan(grid[1, 1])
    assert torch.equal(head_grid(scan, 2, 2, "kl", "b")[1, 0], torch.tensor(5.0))
    with pytest.raises(HeurlensError, match="covers 2 evaluation sets"):
        head_grid(scan, 2, 2)
    with pytest.raises(HeurlensError, match="no column 'logit'"):
        head_grid(scan, 2, 2, "logit", "a")
