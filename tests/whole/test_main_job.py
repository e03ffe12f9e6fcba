"""README's main command on the real default model: fetch, fine-tune once (cached), ablate, report.

Slow on a fresh cache (about 5 minutes to fine-tune), about a minute afterwards.
"""

import json
import subprocess
import sys

import pandas as pd
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


@pytest.mark.slow
def test_the_default_models_tables_from_cached_residual_streams(monkeypatch, tmp_path):
    """The default model on the main command's kinds of evaluation set (SNLI test pairs and the 30 HANS-style
    subcases, a quarter of each: 500 and 50 a subcase), a head of layers 1, 3 and 5 mean-ablated: the table read
    from the activation cache equals the one computed with nothing stored (an empty cache capped at 0: the residual
    streams kept in memory, padding included), number for number. (Every layer, against whole passes, on a tiny
    model: tests/interventions/test_activation_cache.py.)"""
    from heurlens.data.run_data import NliData
    from heurlens.interventions.ablation import ablate_groups
    from heurlens.interventions.activation_cache import entry_dir, full_model_logits, residual_streams
    from heurlens.models import load_model
    from heurlens.runtime.call_context import call_context

    model = load_model("default")
    data = NliData(in_domain_examples=500, per_subcase=50)
    eval_sets, means = data.eval_sets(model), data.means(model)
    groups = ["L1.H3", "L3.H7", "L5.H11"]
    context = call_context(model)
    fingerprint = model.fingerprint()
    full = {s.name: full_model_logits(model, s, context) for s in eval_sets}
    with monkeypatch.context() as empty_cache:
        empty_cache.setenv("HEURLENS_CACHE", str(tmp_path))
        empty_cache.setenv("HEURLENS_CACHE_LIMIT_GB", "0")
        in_memory = ablate_groups(model, groups, eval_sets, method="mean", means=means, full_logits=full)
    assert not list(tmp_path.rglob("*.safetensors"))
    for eval_set in eval_sets:
        residual_streams(model, eval_set, [1, 3, 5], context)
        assert all((entry_dir(fingerprint, eval_set) / f"residual-{layer}.safetensors").exists() for layer in (1, 3, 5))
    from_cache = ablate_groups(model, groups, eval_sets, method="mean", means=means)
    assert len(from_cache) == 3 * 31
    pd.testing.assert_frame_equal(from_cache, in_memory, check_exact=False, rtol=0, atol=1e-6)
    assert (from_cache["ablated_accuracy"] == in_memory["ablated_accuracy"]).all()
