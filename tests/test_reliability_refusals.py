"""Reliability, second round: a refused run leaves nothing behind, and no NaN or infinity gets through, from
the CLI or the library (issue: refused runs, nan/inf)."""

import math

import pytest
from cli_run import assert_refused

from heurlens.errors import HeurlensError
from heurlens.models.settings import FinetuneSettings
from heurlens.pruning.settings import PruneSettings
from heurlens.subtask.settings import SweepSettings
from heurlens.vision.settings import ShapeBiasSettings


@pytest.mark.parametrize("options, fragment", [
    (["--t1", "a+"], "a+"), (["--subtask", "xyz"], "xyz"), (["--t2", "a^9"], "a^9"),
    (["--t1-fraction", "nan"], "not a finite number"), (["--t1-fraction", "inf"], "--t1-fraction"),
    (["--l0-lambda", "nan"], "not a finite number"), (["--t1-fraction", "1.5"], "1.5"),
])
def test_a_refused_transfer_writes_nothing_and_the_folder_stays_usable(capsys, tmp_path, options, fragment):
    out = tmp_path / "transfer"
    assert_refused(capsys, fragment, "transfer", *options, "--out", str(out))
    assert not (out / "settings.json").exists()  # the same folder takes a valid run afterwards


def test_a_refused_shape_bias_run_writes_nothing(capsys, tmp_path):
    out = tmp_path / "shape"
    assert_refused(capsys, "'--pretrain-agreement': 2.0 is not in the range", "shape-bias", "--pretrain-agreement", "2",
                   "--out", str(out))
    assert not out.exists() or not any(out.iterdir())


@pytest.mark.parametrize("command", [
    ["prune", "--log-alpha-init", "nan"], ["prune", "--weight-decay", "inf"], ["prune", "--sparsity=nan"],
    ["effective-size", ".", "--tolerance", "nan"], ["patterns", "--min-score", "nan"], ["finetune", "--lr", "nan"],
])
def test_non_finite_numbers_are_refused_before_any_work(capsys, tmp_path, command):
    out = ["--out", str(tmp_path / "out")] if command[0] in ("prune", "finetune") else []
    assert_refused(capsys, "finite", *command, *out)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("make", [
    lambda: PruneSettings(weight_decay=math.inf), lambda: SweepSettings(t1_lr=math.nan),
    lambda: ShapeBiasSettings(discovery_lr=math.nan), lambda: FinetuneSettings(learning_rate=math.inf),
    lambda: SweepSettings(transfer_lrs=(1e-3, math.nan)), lambda: FinetuneSettings(warmup_ratio=2.0),
])
def test_the_library_refuses_the_same_values(make):
    with pytest.raises(HeurlensError, match="finite|at most"):
        make()
