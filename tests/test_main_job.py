"""README's main command on the real default model: fetch, fine-tune once (cached), ablate, report.

Slow on a fresh cache (about 5 minutes to fine-tune), about a minute afterwards.
"""

import json
import subprocess
import sys

import pytest


@pytest.mark.slow
def test_readme_main_command_on_the_default_model():
    result = subprocess.run([sys.executable, "-m", "heurlens", "ablate", "--heads", "L4.H0", "--json"],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-2000:]
    rows = json.loads(result.stdout)
    assert len(rows) == 31 and rows[0]["eval_set"] == "snli-test" and rows[0]["examples"] == 2000
    assert rows[0]["full_accuracy"] > 0.6  # fine-tuning worked: chance is 1/3 on 3-way SNLI
    assert all(row["ablated"] == "L4.H0" for row in rows)
    assert all(row["delta"] == pytest.approx(row["ablated_accuracy"] - row["full_accuracy"]) for row in rows)
    assert all(row["kl"] > 0 for row in rows)  # the ablation reached the output
