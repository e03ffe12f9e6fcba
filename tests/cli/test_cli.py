"""The command line, run as a user runs it: a real subprocess, its exit code, stdout and stderr."""

import importlib.util
import json

import pytest
from cli_run import assert_one_line_error, heurlens


def test_help_lists_every_command():
    result = heurlens("--help")
    assert result.returncode == 0
    for command in ("ablate", "prune", "evaluate", "finetune", "core", "core-over-training", "patterns",
                    "effective-size", "report", "transfer", "transfer-changes", "shape-bias"):
        assert command in result.stdout


def test_the_cli_starts_without_the_heavy_libraries():
    """``import heurlens`` and ``heurlens.cli`` (every command's options) load no torch, TransformerLens,
    transformers, datasets or pandas: those come with the command that uses them."""
    import subprocess
    import sys

    heavy = ("torch", "transformer_lens", "transformers", "datasets", "pandas", "timm")
    code = f"import heurlens, heurlens.cli, sys; print([m for m in {heavy!r} if m in sys.modules])"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0 and result.stdout.strip() == "[]", result.stdout + result.stderr
    import heurlens

    assert heurlens.parse_units("L1.H2", 2, 4)[0].head == 2  # the names still resolve, on first use
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        heurlens.nothing  # noqa: B018


def test_out_of_range_head_is_one_line_error(tiny_bert_dir):
    assert_one_line_error(heurlens("ablate", "--heads", "L99.H0", "--model", str(tiny_bert_dir)),
                          "layer 99 is out of range; this model has layers L0-L1 and heads H0-H3")


def test_malformed_head_spec(tiny_bert_dir):
    assert_one_line_error(heurlens("ablate", "--heads", "L1.X", "--model", str(tiny_bert_dir)), "cannot read 'L1.X'")


def test_unknown_model_and_unreadable_data(tiny_bert_dir, tmp_path):
    assert_one_line_error(heurlens("ablate", "--heads", "L0.H0", "--model", str(tmp_path / "none")),
                          "does not exist (moved or deleted?)")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"premise": "x", "hypothesis": "y"}\n')
    assert_one_line_error(heurlens("ablate", "--heads", "L0.H0", "--model", str(tiny_bert_dir), "--data", str(bad)),
                          "lacks column(s) label")
    assert_one_line_error(heurlens("ablate", "--heads", "L0.H0", "--model", str(tiny_bert_dir),
                                   "--data", str(tmp_path / "missing.csv")), "does not exist")


def test_ablate_json_and_csv(tiny_bert_dir, pairs_file):
    args = ["ablate", "--heads", "L1.H0,L0.MLP", "--model", str(tiny_bert_dir), "--data", str(pairs_file),
            "--subcases", "SO-Swap,Embed-If", "--per-subcase", "10", "--reference-examples", "40"]
    result = heurlens(*args, "--json")
    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout)
    assert [r["eval_set"] for r in rows] == ["pairs.jsonl", "hans/ln_subject/object_swap", "hans/cn_embedded_under_if"]
    assert [r["examples"] for r in rows] == [3, 10, 10]
    for row in rows:
        assert row["ablated"] == "L1.H0,L0.MLP"
        assert row["delta"] == pytest.approx(row["ablated_accuracy"] - row["full_accuracy"])
        assert row["kl"] >= 0
    csv = heurlens(*args, "--csv", "--method", "zero")
    assert csv.returncode == 0, csv.stderr
    assert csv.stdout.splitlines()[0] == "ablated,eval_set,examples,full_accuracy,ablated_accuracy,delta,kl"
    assert len(csv.stdout.splitlines()) == 4
    table = heurlens(*args[:-2], "--reference-examples", "40")
    assert table.returncode == 0 and "mean-ablated L1.H0,L0.MLP" in table.stdout


def test_prune_then_evaluate_and_resume(tiny_bert_dir, tmp_path):
    out = tmp_path / "run"
    args = ["prune", "--sparsity", "0.3", "0.5", "--seeds", "2", "--out", str(out), "--model", str(tiny_bert_dir),
            "--train-examples", "64", "--steps", "4", "--log-alpha-init", "0", "--log-alpha-init-std", "3",
            "--in-domain-examples", "20", "--per-subcase", "10",
            "--subcases", "SO-Swap", "--json"]
    result = heurlens(*args)
    assert result.returncode == 0, result.stderr[-2000:]
    rows = json.loads(result.stdout)
    names = list(dict.fromkeys(r["subnetwork"] for r in rows))
    assert names == ["full model", "30% seed 0", "30% seed 1", "50% seed 0", "50% seed 1"]
    assert {r["eval_set"] for r in rows} == {"snli-test", "hans/ln_subject/object_swap"}
    assert sorted(p.name for p in (out / "sparsity-0.50").iterdir()) == [
        "seed-00.json", "seed-00.safetensors", "seed-01.json", "seed-01.safetensors"]
    stamps = {p: p.stat().st_mtime_ns for p in out.rglob("*.json")}
    again = heurlens(*args)  # resumes: nothing retrained, same table
    assert again.returncode == 0 and json.loads(again.stdout) == rows
    assert {p: p.stat().st_mtime_ns for p in out.rglob("*.json")} == stamps
    evaluated = heurlens("evaluate", str(out), "--in-domain-examples", "20", "--per-subcase", "10",
                         "--subcases", "SO-Swap", "--json")
    assert evaluated.returncode == 0, evaluated.stderr[-2000:]
    assert json.loads(evaluated.stdout) == rows
    table = heurlens("evaluate", str(out), "--in-domain-examples", "20", "--per-subcase", "10", "--subcases", "SO-Swap")
    assert "50% seed 1" in table.stdout and "snli-test" in table.stdout


def test_prune_errors(tiny_bert_dir, tmp_path):
    assert_one_line_error(heurlens("evaluate", str(tmp_path)), "holds no subnetworks")
    assert_one_line_error(heurlens("prune", "--sparsity", "1.5", "--model", str(tiny_bert_dir), "--out",
                                   str(tmp_path / "r"), "--train-examples", "32", "--steps", "1"),
                          "'--sparsity': 1.5 is not in the range 0<=x<1")  # refused before loading anything


def test_ablate_mode_errors(tiny_bert_dir):
    assert_one_line_error(heurlens("ablate"), "say what to ablate")
    assert_one_line_error(heurlens("ablate", "--scan", "--superadditivity"), "choose one of --scan and --superadditivity")
    assert_one_line_error(heurlens("ablate", "--heads", "L0.H0", "--core", "L0.H1"), "--core only applies to --scan")
    assert_one_line_error(heurlens("ablate", "--heads", "L0.H0", "--workers", "2"), "--workers applies to --scan")
    assert_one_line_error(heurlens("ablate", "--scan", "--ray-address", "auto"), "--ray-address needs --workers")
    assert_one_line_error(heurlens("ablate", "--heads", "L0.H0", "--superadditivity", "--model", str(tiny_bert_dir)),
                          "needs at least two units")


def test_ablate_scan_and_superadditivity(tiny_bert_dir, pairs_file):
    common = ["--model", str(tiny_bert_dir), "--data", str(pairs_file), "--subcases", "SO-Swap", "--per-subcase", "6",
              "--reference-examples", "20"]
    scan = heurlens("ablate", "--scan", "--heads", "L0.*", *common, "--json")
    assert scan.returncode == 0, scan.stderr[-2000:]
    rows = json.loads(scan.stdout)
    assert [r["ablated"] for r in rows] == ["L0.H0", "L0.H0", "L0.H1", "L0.H1", "L0.H2", "L0.H2", "L0.H3", "L0.H3"]
    for row in rows:
        assert row["delta"] == pytest.approx(row["accuracy"] - row["full_accuracy"])
    if importlib.util.find_spec("ray") is not None:  # the same scan as Ray tasks on 2 local workers
        on_ray = heurlens("ablate", "--scan", "--heads", "L0.*", *common, "--json", "--workers", "2")
        assert on_ray.returncode == 0, on_ray.stderr[-2000:]
        assert [(r["ablated"], r["accuracy"]) for r in json.loads(on_ray.stdout)] == [
            (r["ablated"], r["accuracy"]) for r in rows]
    table = heurlens("ablate", "--scan", "--heads", "L0.*", "--core", "L0.H1", *common)
    assert table.returncode == 0 and "avg (non-core)" in table.stdout
    group = heurlens("ablate", "--superadditivity", "--heads", "L0.H0,L0.H1,L1.H2", *common)
    assert group.returncode == 0, group.stderr[-2000:]
    assert "sum_of_single_drops" in group.stdout and "L0.H1,L1.H2" in group.stdout


def test_patterns_command_writes_a_head_plot(tiny_bert_dir, tmp_path):
    page = tmp_path / "heads.html"
    result = heurlens("patterns", "--model", str(tiny_bert_dir), "--examples", "8", "--heads", "L1.*",
                      "--html", str(page), "--json")
    assert result.returncode == 0, result.stderr[-2000:]
    rows = json.loads(result.stdout)
    assert [r["unit"] for r in rows] == ["L1.H0", "L1.H1", "L1.H2", "L1.H3"]
    assert all(r["label"] in ("repeated_token", "previous_token", "next_token", "separator", "self", "other")
               for r in rows)
    assert "L1.H3" in page.read_text()
    assert_one_line_error(heurlens("patterns", "--model", str(tiny_bert_dir), "--heads", "L0.MLP"), "MLP")


def test_effective_size_over_two_checkpoints(tiny_bert_dir, tmp_path):
    import shutil

    for step in (0, 10):
        shutil.copytree(tiny_bert_dir, tmp_path / "checkpoints" / f"step-{step}")
    out = tmp_path / "eff"
    result = heurlens("effective-size", str(tmp_path / "checkpoints" / "step-10"), str(tmp_path / "checkpoints" / "step-0"),
                      "--sparsity", "0.3", "0.6", "--seeds", "1", "--steps", "3", "--lr-log-alpha", "0.05",
                      "--train-examples", "32",
                      "--in-domain-examples", "20", "--per-subcase", "5", "--subcases", "SO-Swap", "--out", str(out),
                      "--json")
    assert result.returncode == 0, result.stderr[-2000:]
    rows = json.loads(result.stdout)
    assert [r["step"] for r in rows] == [0, 10]  # ordered by training step
    for row in rows:
        assert row["n_units"] == 10 and all(1 <= row[f"size_{k}"] <= 10 for k in ("in_domain", "ood", "mixed"))
    assert (out / "effective-size.csv").exists() and (out / "effective-size.html").exists()
    recorded = json.loads((out / "step-0" / "sparsity-0.60" / "seed-00.json").read_text())["hyperparameters"]
    assert (recorded["total_steps"], recorded["lr_log_alpha"]) == (3, 0.05)  # prune's options, declared once
    assert_one_line_error(heurlens("effective-size"), "give checkpoint directories")


def test_effective_size_adds_checkpoints_one_call_at_a_time(tiny_bert_dir, tmp_path):
    """Checkpoints measured by separate calls into one --out end up in one table (the first call's row kept as it
    was written); a call with another tolerance is refused before it prunes, leaving the table as it was."""
    import shutil

    for step in (0, 10):
        shutil.copytree(tiny_bert_dir, tmp_path / "checkpoints" / f"step-{step}")
    out = tmp_path / "eff"
    options = ["--sparsity", "0.3", "0.6", "--seeds", "1", "--steps", "3", "--train-examples", "32",
               "--in-domain-examples", "20", "--per-subcase", "5", "--subcases", "SO-Swap", "--out", str(out), "--json"]
    first = heurlens("effective-size", str(tmp_path / "checkpoints" / "step-10"), *options)
    assert first.returncode == 0, first.stderr[-2000:]
    written_first = (out / "effective-size.csv").read_text()
    second = heurlens("effective-size", str(tmp_path / "checkpoints" / "step-0"), *options)
    assert second.returncode == 0, second.stderr[-2000:]
    rows = json.loads(second.stdout)
    assert [r["step"] for r in rows] == [0, 10]  # the table of both calls, by training step
    assert rows[1] == json.loads(first.stdout)[0]
    merged = (out / "effective-size.csv").read_text()
    assert written_first.splitlines()[1] in merged.splitlines()
    refused = heurlens("effective-size", str(tmp_path / "checkpoints" / "step-0"), *options, "--tolerance", "0.1")
    assert_one_line_error(refused, "other settings (tolerance)")
    assert (out / "effective-size.csv").read_text() == merged


def test_shape_bias_without_fashion_mnist_says_how_to_get_it(tmp_path):
    import os

    pytest.importorskip("timm")  # without the vision extra the next test's refusal comes first
    env = os.environ | {"HEURLENS_FASHION_MNIST": str(tmp_path / "empty"), "HEURLENS_CACHE": str(tmp_path / "cache")}
    result = heurlens("shape-bias", "--out", str(tmp_path / "run"), env=env)
    assert_one_line_error(result, "apt-get install dataset-fashion-mnist")


def test_shape_bias_without_the_vision_extra_says_how_to_install_it(tmp_path):
    """heurlens installed beside a researcher's own torch leaves the vision extra out: timm that cannot be
    imported (shadowed here by a module that raises ImportError) is named with the install command."""
    import os

    (tmp_path / "shadow").mkdir()
    (tmp_path / "shadow" / "timm.py").write_text("raise ImportError('no timm here')\n")
    env = os.environ | {"PYTHONPATH": str(tmp_path / "shadow"), "HEURLENS_CACHE": str(tmp_path / "cache")}
    result = heurlens("shape-bias", "--out", str(tmp_path / "run"), env=env)
    assert_one_line_error(result, "needs timm")
    assert "pip install 'heurlens[vision]'" in result.stderr and not (tmp_path / "run").exists()


def test_ablate_and_prune_a_decoder_on_a_prompt_task(tiny_decoder_dirs, tmp_path):
    """--task: a decoder LM on a prompt task file; accuracy is the answer against its distractor and the table
    has one row for the task's prompts."""
    task = tmp_path / "task.jsonl"
    rows = [{"prompt": "the man sees the", "answer": " dog", "distractors": [" cat"]},
            {"prompt": "a dog sees a", "answer": " man", "distractors": [" cat"]},
            {"prompt": "the cat runs .", "answer": " the", "distractors": [" a"]}]
    task.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    model = str(tiny_decoder_dirs["llama"])
    result = heurlens("ablate", "--model", model, "--task", str(task), "--task-examples", "3", "--heads", "L1.H2",
                      "--json")
    assert result.returncode == 0, result.stderr[-2000:]
    (row,) = json.loads(result.stdout)
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    reference, tokenizer = AutoModelForCausalLM.from_pretrained(model).eval(), AutoTokenizer.from_pretrained(model)
    right, differences = 0, []
    for r in rows:  # the plain HF model: is the answer's next-token logit above the distractor's?
        with torch.no_grad():
            last = reference(**tokenizer(r["prompt"], return_tensors="pt")).logits[0, -1]
        difference = float(last[tokenizer.convert_tokens_to_ids(r["answer"].strip())]
                           - last[tokenizer.convert_tokens_to_ids(r["distractors"][0].strip())])
        right += int(difference > 0)
        differences.append(difference)
    assert row["eval_set"] == "task-s1" and row["examples"] == 3
    assert row["full_accuracy"] == pytest.approx(right / 3)
    # the logit difference beside accuracy (a prompt task with distractors): the plain model's, and its change
    assert row["full_logit_diff"] == pytest.approx(sum(differences) / 3, abs=1e-4)
    assert row["delta_logit_diff"] == pytest.approx(row["ablated_logit_diff"] - row["full_logit_diff"])
    assert row["delta_logit_diff"] != 0
    out = tmp_path / "prune"
    result = heurlens("prune", "--model", model, "--task", str(task), "--task-examples", "3", "--sparsity", "0.5",
                      "--seeds", "1", "--steps", "3", "--log-alpha-init", "0", "--log-alpha-init-std", "3",
                      "--out", str(out), "--json")
    assert result.returncode == 0, result.stderr[-2000:]
    assert {r["eval_set"] for r in json.loads(result.stdout)} == {"task-s1"}
    assert (out / "sparsity-0.50" / "seed-00.json").exists()
    result = heurlens("report", str(out), "--task", str(task), "--task-examples", "3", "--pattern-examples", "3")
    assert result.returncode == 0, result.stderr[-2000:]
    page = (out / "report.html").read_text()
    assert "task-s1" in page and "induction" in page  # the task's evaluation and the decoder pattern scores
    result = heurlens("core", str(out), "--json")
    assert result.returncode == 0 and len(json.loads(result.stdout)) == 8  # every head's frequency
    assert_one_line_error(heurlens("ablate", "--model", model, "--task", "nope", "--heads", "L0.H0"),
                          "unknown task 'nope'")
    result = heurlens("patterns", "--model", model, "--task", str(task), "--task-examples", "3", "--heads", "L1.*",
                      "--html", str(tmp_path / "heads.html"), "--json")
    assert result.returncode == 0, result.stderr[-2000:]
    table = json.loads(result.stdout)
    assert [r["unit"] for r in table] == ["L1.H0", "L1.H1", "L1.H2", "L1.H3"]
    assert {"previous_token", "duplicate_token", "induction"} <= set(table[0])
    page = (tmp_path / "heads.html").read_text()  # the task's first prompt (after the seed's shuffle), plotted
    assert any(f'"tokens": {json.dumps(r["prompt"].split())}' in page for r in rows)


def test_version_is_the_packages_own(capsys):
    from importlib.metadata import version

    from cli_run import heurlens_in_process

    import heurlens

    for flag in ("--version", "-V"):
        status, out, _ = heurlens_in_process(capsys, flag)
        assert status == 0 and out == f"heurlens {version('heurlens')}\n" == f"heurlens {heurlens.__version__}\n"
