"""The core over training, from hand-made checkpoint runs whose answer is counted by hand."""

import json

import pytest
import torch
from cli_run import assert_refused, heurlens_in_process

from heurlens.analysis.core_over_training import checkpoint_subnetworks, core_presence
from heurlens.interventions.units import Unit, parse_units
from heurlens.pruning.run_folder import subnetwork_stem
from heurlens.pruning.subnetwork import Subnetwork

KEPT = {  # step -> seed -> heads kept at 50% (2 layers x 2 heads)
    0: {0: "L0.H0", 1: "L1.H1"},
    50: {0: "L0.H0,L1.H0", 1: "L0.H0,L1.H1"},
    100: {0: "L0.H0,L1.H0", 1: "L0.H0,L1.H0"},
}


def save_runs(folder, sparsity=0.5):
    for step, seeds in KEPT.items():
        for seed, kept in seeds.items():
            sub = Subnetwork(kept=parse_units(kept, 2, 2), n_layers=2, n_heads=2, target_sparsity=sparsity,
                             achieved_sparsity=sparsity, threshold=0.5, seed=seed, model_id=f"step-{step}",
                             model_fingerprint=f"fp{step}", data_id="d", log_alpha_heads=torch.zeros(2, 2),
                             log_alpha_mlps=torch.zeros(2))
            sub.save(subnetwork_stem(folder / f"step-{step}", sparsity, seed))


def test_core_presence_counts_each_checkpoints_subnetworks(tmp_path):
    save_runs(tmp_path)
    save_runs(tmp_path, sparsity=0.7)  # another sparsity, not looked at
    runs = checkpoint_subnetworks(tmp_path, 0.5)
    assert list(runs) == [0, 50, 100] and all(len(subs) == 2 for subs in runs.values())
    table = core_presence([Unit(0, 0), Unit(1, 0)], runs).set_index(["step", "unit"])
    # L0.H0: kept by 1 of 2 at step 0, by both later; L1.H0: by none, 1, 2
    assert table["kept"].to_dict() == {(0, "L0.H0"): 1, (0, "L1.H0"): 0, (50, "L0.H0"): 2, (50, "L1.H0"): 1,
                                       (100, "L0.H0"): 2, (100, "L1.H0"): 2}
    assert table.loc[(50, "L1.H0"), "frequency"] == pytest.approx(0.5)


def test_command_takes_the_core_from_the_last_checkpoint_run(capsys, tmp_path):
    save_runs(tmp_path / "checkpoints")
    final = tmp_path / "checkpoints" / "step-100"  # its core: heads kept by both seeds = L0.H0, L1.H0
    status, out, err = heurlens_in_process(capsys, "core-over-training", str(tmp_path / "checkpoints"),
                                           "--core", str(final), "--json", "--html", str(tmp_path / "core.html"))
    assert status == 0, err
    rows = json.loads(out)
    assert {(r["step"], r["unit"]): r["kept"] for r in rows}[(0, "L1.H0")] == 0
    assert {r["unit"] for r in rows} == {"L0.H0", "L1.H0"}
    assert "plotly" in (tmp_path / "core.html").read_text()[:100000]
    assert_refused(capsys, "no checkpoint runs with subnetworks at sparsity 0.3", "core-over-training",
                   str(tmp_path / "checkpoints"), "--core", "L0.H0", "--sparsity", "0.3")
