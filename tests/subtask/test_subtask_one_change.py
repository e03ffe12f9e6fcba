"""heurlens transfer-changes (``heurlens.subtask.one_change``): a sweep's transfer one change at a time."""

import json

import pytest
from cli_run import assert_refused, heurlens

from heurlens.errors import HeurlensError
from heurlens.subtask import one_change
from heurlens.subtask.one_change import CHANGES, CONDITIONS, result_name, run_one_change
from heurlens.subtask.settings import SweepSettings
from heurlens.subtask.sweep import run_sweep

SWEEP = SweepSettings(max_value=10, t1_epochs=1, discovery_epochs=1, disambiguation=(10,), transfer_epochs=1,
                      t1_test_examples=10, architecture="released", filling="inherited", conditions=CONDITIONS, seeds=2)


@pytest.fixture(scope="module")
def sweep_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("sweep")
    run_sweep(folder, SWEEP, progress=False)
    return folder


def test_the_first_row_is_the_sweeps_own_runs_and_a_change_changes_them(sweep_dir, tmp_path):
    """Row 0 trains as the sweep does (same data, seeds, models, dropout masks): every result equals the sweep's
    own file to the last digit; row 1 (dropout 0) trains other models, so its results differ."""
    table = run_one_change(sweep_dir, tmp_path, seeds=2, disambiguation=10, rows=[0, 1], progress=False)
    for condition in CONDITIONS:
        for seed in range(2):
            ours = json.loads((tmp_path / result_name(CHANGES[0], condition, seed)).read_text())
            stem = condition.replace(" ", "-")
            sweeps = json.loads((sweep_dir / "results" / f"{stem}-n10-s{seed}.json").read_text())
            assert (ours["best_eval_accuracy"], ours["test_accuracy"]) == (sweeps["best_eval_accuracy"],
                                                                             sweeps["test_accuracy"])
    first, dropout_zero = ([json.loads((tmp_path / result_name(CHANGES[row], c, s)).read_text())["best_eval_accuracy"]
                            for c in CONDITIONS for s in range(2)] for row in (0, 1))
    assert first != dropout_zero
    assert list(table["change"]) == [change.name for change in CHANGES]
    assert (table.iloc[2:][list(CONDITIONS)] == "not run").all().all()
    cell = table.iloc[0]["random init"]
    values = [100 * json.loads((tmp_path / result_name(CHANGES[0], "random init", s)).read_text())["test_accuracy"]
              for s in range(2)]
    assert cell.endswith(f"({values[0]:.1f}, {values[1]:.1f})") and cell.startswith(f"{sum(values) / 2:.1f} ± ")


def test_a_folder_resumes_without_training_and_refuses_another_sample_count(sweep_dir, tmp_path, monkeypatch):
    first = run_one_change(sweep_dir, tmp_path, seeds=1, disambiguation=10, rows=[3], progress=False)
    assert first.iloc[3]["subtask induction"] != "not run" and " ± " not in first.iloc[3]["subtask induction"]
    settings = (tmp_path / "settings.json").read_text()

    def never(*args, **kwargs):
        raise AssertionError("a finished run was trained again")

    monkeypatch.setattr(one_change, "train_transfer_runs", never)
    assert run_one_change(sweep_dir, tmp_path, seeds=1, disambiguation=10, rows=[3], progress=False).equals(first)
    (tmp_path / "settings.json").unlink()  # results whose settings are unknown are not reused for any settings
    with pytest.raises(HeurlensError, match="holds a one-change analysis's files .* but no settings.json"):
        run_one_change(sweep_dir, tmp_path, seeds=1, disambiguation=30, rows=[3], progress=False)
    (tmp_path / "settings.json").write_text(settings)
    with pytest.raises(HeurlensError, match="other settings \\(disambiguation\\)"):
        run_one_change(sweep_dir, tmp_path, seeds=1, disambiguation=30, rows=[3], progress=False)
    with pytest.raises(HeurlensError, match="rows= names row 6, but the rows are 0 to 5: 0 as the sweep"):
        run_one_change(sweep_dir, tmp_path, rows=[6])


def test_the_command_prints_the_table_and_refuses_a_native_sweep(sweep_dir, tmp_path, capsys):
    out = tmp_path / "changes"
    result = heurlens("transfer-changes", "--from", str(sweep_dir), "--out", str(out), "--seeds", "1",
                      "--disambiguation", "10", "--rows", "5", "--json")
    assert result.returncode == 0, result.stderr
    records = json.loads(result.stdout)
    assert records[5]["change"] == "Adam (no weight decay)" and records[0]["random init"] == "not run"
    written = json.loads((out / result_name(CHANGES[5], "random init", 0)).read_text())["test_accuracy"]
    assert records[5]["random init"] == f"{100 * written:.1f}"
    native = tmp_path / "native"
    run_sweep(native, SweepSettings(max_value=10, t1_epochs=1, discovery_epochs=1, disambiguation=(0,),
                                    transfer_epochs=1, t1_test_examples=10, conditions=("random init",)), progress=False)
    assert_refused(capsys, "trained heurlens' native decoder", "transfer-changes", "--from", str(native))
    assert_refused(capsys, "--rows names row 7, but the rows are 0 to 5", "transfer-changes", "--from", str(sweep_dir),
                   "--rows", "7", "--out", str(tmp_path / "other"))
