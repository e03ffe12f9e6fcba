"""Nothing lost, nothing corrupt trusted: what heurlens refuses, and that it deletes nothing it did not make."""

import json
import shutil
import subprocess
import sys

import pytest
from cli_run import assert_one_line_error, assert_refused, heurlens, heurlens_in_process

from heurlens.errors import HeurlensError
from heurlens.models import load_model
from heurlens.models.default import default_model_dir
from heurlens.models.nli_finetune import FINETUNE_RECORD, finetune_nli
from heurlens.models.settings import FinetuneSettings
from heurlens.runtime.cache import cache_dir

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json")


@pytest.fixture(scope="module")
def tiny_finetuned(tmp_path_factory):
    """A default-model fine-tuning run on 32 pairs (a real ``heurlens finetune`` output folder)."""
    return finetune_nli(tmp_path_factory.mktemp("ft") / "model", FinetuneSettings(train_examples=32, batch_size=16))


def test_finetune_never_deletes_an_existing_folder(tmp_path):
    out = tmp_path / "runs" / "x"
    out.mkdir(parents=True)
    (out / "NOTES.txt").write_text("notes")
    assert_one_line_error(heurlens("finetune", "--examples", "32", "--out", str(out)), "is not empty")
    assert (out / "NOTES.txt").read_text() == "notes" and sorted(p.name for p in out.iterdir()) == ["NOTES.txt"]
    assert not (tmp_path / "runs" / "x.partial").exists()


def test_finetune_into_a_file_is_refused_before_training(tmp_path):
    target = tmp_path / "model.bin"
    target.write_text("keep me")
    assert_one_line_error(heurlens("finetune", "--examples", "32", "--out", str(target)), "is a file")
    assert target.read_text() == "keep me" and not (tmp_path / "model.bin.partial").exists()


def test_finetune_again_returns_the_finished_folder_and_refuses_other_settings(tiny_finetuned):
    record = (tiny_finetuned / FINETUNE_RECORD).read_text()
    assert finetune_nli(tiny_finetuned, FinetuneSettings(train_examples=32, batch_size=16)) == tiny_finetuned
    assert (tiny_finetuned / FINETUNE_RECORD).read_text() == record  # not trained again
    with pytest.raises(HeurlensError, match="fine-tuned with other settings; nothing was changed"):
        finetune_nli(tiny_finetuned, FinetuneSettings(train_examples=48, batch_size=16))


def test_finetune_into_an_empty_folder(tmp_path):
    out = tmp_path / "empty"
    out.mkdir()
    assert finetune_nli(out, FinetuneSettings(train_examples=16, batch_size=16)) == out
    assert (out / FINETUNE_RECORD).exists() and (out / "model.safetensors").exists()


def test_model_without_its_tokenizer_is_refused(tiny_bert_dir, tmp_path):
    bare = tmp_path / "bare"
    shutil.copytree(tiny_bert_dir, bare)
    for name in TOKENIZER_FILES:
        (bare / name).unlink(missing_ok=True)
    with pytest.raises(HeurlensError, match="no usable tokenizer .* tokenizer files are missing"):
        load_model(bare)
    assert_one_line_error(heurlens("ablate", "--heads", "L0.H0", "--model", str(bare)), "no usable tokenizer")


def test_damaged_finetuned_model_is_named_with_its_fix(tiny_finetuned, tmp_path):
    for name, damage in (("tokenizer.json", lambda p: p.unlink()),
                         ("model.safetensors", lambda p: p.write_bytes(p.read_bytes()[:1000]))):
        copy = tmp_path / name
        shutil.copytree(tiny_finetuned, copy)
        damage(copy / name)
        with pytest.raises(HeurlensError, match=f"{copy / name} is (missing|damaged).*Delete {copy}"):
            load_model(copy)


def test_damaged_cached_default_model_says_to_delete_it(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("HEURLENS_CACHE", str(tmp_path))
    damaged = tmp_path / "models" / FinetuneSettings().slug()
    damaged.mkdir(parents=True)
    (damaged / "config.json").write_text("{}")
    with pytest.raises(HeurlensError, match=f"cached default model {damaged} is damaged.*delete that folder"):
        default_model_dir()
    status, _, err = heurlens_in_process(capsys, "ablate", "--heads", "L0.H0")
    assert status == 2 and "delete that folder" in err and "--model default" not in err
    assert (damaged / "config.json").exists()


def test_fingerprint_is_the_content_not_the_path(tiny_bert_dir, tmp_path):
    copy = tmp_path / "elsewhere"
    shutil.copytree(tiny_bert_dir, copy)
    assert load_model(copy).fingerprint() == load_model(tiny_bert_dir).fingerprint()
    tokenizer = json.loads((copy / "tokenizer.json").read_text())
    tokenizer["model"]["vocab"]["thee"] = tokenizer["model"]["vocab"].pop("the")  # one word renamed
    (copy / "tokenizer.json").write_text(json.dumps(tokenizer))
    assert load_model(copy).fingerprint() != load_model(tiny_bert_dir).fingerprint()


# --- every bad value refused up front, in one line ---------------------------------------------------------------

@pytest.mark.parametrize("args, fragment", [
    (["prune", "--steps", "-5"], "'--steps': -5 is not in the range x>=1"),
    (["prune", "--batch-size", "0"], "'--batch-size': 0 is not in the range x>=1"),
    (["prune", "--train-examples", "0"], "'--train-examples': 0 is not in the range x>=1"),
    (["prune", "--lr-log-alpha", "-1"], "'--lr-log-alpha': -1.0 is not in the range x>0"),
    (["prune", "--lr-schedule", "cosine"], "'--lr-schedule'"),
    (["finetune", "--examples", "0"], "'--examples': 0 is not in the range x>=1"),
    (["finetune", "--examples", "-5"], "'--examples': -5 is not in the range x>=1"),
    (["finetune", "--epochs", "0"], "'--epochs': 0 is not in the range x>=1"),
    (["effective-size", "--seeds", "0", "x"], "'--seeds': 0 is not in the range x>=1"),
    (["transfer", "--seeds", "0"], "'--seeds': 0 is not in the range x>=1"),
    (["transfer", "--modulus", "0"], "'--modulus': 0 is not in the range x>=2"),
    (["transfer", "--layers", "0"], "'--layers': 0 is not in the range x>=1"),
    (["ablate", "--heads", "L0.H0", "--in-domain-examples", "-5"], "'--in-domain-examples': -5"),
    (["ablate", "--heads", "L0.H0", "--per-subcase", "0"], "'--per-subcase': 0"),
    (["ablate", "--heads", "L0.H0", "--reference-examples", "0"], "'--reference-examples': 0"),
    (["ablate", "--heads", "L0.H0", "--seed", "-1"], "'--seed': -1"),
    (["patterns", "--examples", "0"], "'--examples': 0 is not in the range x>=1"),
    (["prune", "--sparsity", "1.5"], "'--sparsity': 1.5 is not in the range 0<=x<1"),
    (["ablate", "--heads", "L0.H0", "--json", "--csv", "--model", "/nowhere"], "choose one of --json and --csv"),
    (["ablate", "--heads", "L1.H0", "--heads", "L2.H0"], "--heads is given twice"),
    (["ablate", "--nope"], "No such option '--nope'"),
])
def test_bad_values_are_refused_before_any_work(capsys, args, fragment):
    assert_refused(capsys, fragment, *args)


def test_multi_value_options_stop_at_the_first_non_number():
    from heurlens.cli import expand_multi_value_options

    assert expand_multi_value_options(["effective-size", "--sparsity", "0.5", "0.7", "runs/ft/step-50"]) == [
        "effective-size", "--sparsity", "0.5", "--sparsity", "0.7", "runs/ft/step-50"]
    assert expand_multi_value_options(["transfer", "--l0-lambda", "1e-7", "5e-7", "--seeds", "2"]) == [
        "transfer", "--l0-lambda", "1e-7", "--l0-lambda", "5e-7", "--seeds", "2"]
    assert expand_multi_value_options(["prune", "--seeds", "2", "3"]) == ["prune", "--seeds", "2", "3"]  # single


def test_empty_unit_list_is_refused_with_and_without_scan(capsys, tiny_bert_dir):
    assert_refused(capsys, "empty unit", "ablate", "--heads", "", "--model", str(tiny_bert_dir))
    assert_refused(capsys, "empty unit", "ablate", "--scan", "--heads", "", "--model", str(tiny_bert_dir))


def test_core_that_is_neither_a_run_nor_heads(capsys, tiny_bert_dir, tmp_path):
    assert_refused(capsys, "no such run directory", "ablate", "--scan", "--core", str(tmp_path / "typo"),
                   "--model", str(tiny_bert_dir))


# --- user data files -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("content, fragment", [
    ("", "is empty"),
    ('{"premise": "a", "hypothesis": "b", "label": null}\n', "row 1 has no label"),
    ('{"premise": "a", "hypothesis": "b", "label": 0}\n{"premise": null, "hypothesis": "b", "label": 1}\n',
     "row 2 has no premise text"),
    ('{"premise": "a", "hypothesis": "b", "label": 1}\n{"premise": "a", "hypothesis": "b", "label": 1.5}\n',
     "row 2 has label 1.5"),
])
def test_bad_pair_files_are_named_by_row(tmp_path, content, fragment):
    from heurlens.data.files import load_pair_file

    path = tmp_path / "pairs.jsonl"
    path.write_text(content)
    with pytest.raises(HeurlensError, match=fragment):
        load_pair_file(path)


# --- models -------------------------------------------------------------------------------------------------------

def test_model_folder_without_or_with_truncated_weights(tiny_bert_dir, tmp_path):
    copy = tmp_path / "no-weights"
    shutil.copytree(tiny_bert_dir, copy)
    weights = copy / "model.safetensors"
    data = weights.read_bytes()
    weights.unlink()
    with pytest.raises(HeurlensError, match="cannot read the weights of model .*OSError.*save the model again"):
        load_model(copy)
    weights.write_bytes(data[:5000])
    with pytest.raises(HeurlensError, match="cannot read the weights of model .*SafetensorError"):
        load_model(copy)


def test_unreachable_hub_name_fails_at_once():
    import time

    start = time.time()
    with pytest.raises(HeurlensError, match="not reachable on the hub"):
        load_model("some-org/some-model")
    assert time.time() - start < 5


def test_relative_model_path_is_recorded_absolute(tiny_bert_dir, tmp_path, monkeypatch):
    monkeypatch.chdir(tiny_bert_dir.parent)
    model = load_model(tiny_bert_dir.name)
    assert model.model_id == str(tiny_bert_dir.resolve())


# --- output locations, run folders and caches ------------------------------------------------------------------------

def test_unwritable_outputs_are_refused_before_any_work(capsys, tmp_path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    inside = str(blocker / "sub")  # cannot be created: its parent is a file (root can write anywhere else)
    assert_refused(capsys, "cannot be written", "core", str(tmp_path), "--out", inside)
    assert_refused(capsys, "cannot be written", "patterns", "--html", inside + "/p.html", "--model", "/nowhere")
    assert_refused(capsys, "is a file", "prune", "--out", str(blocker), "--model", "/nowhere")
    assert_refused(capsys, "cannot be written", "report", str(tmp_path), "--out", inside + "/r.html")
    assert_refused(capsys, "is a file", "finetune", "--out", str(blocker))
    monkeypatch.setenv("HEURLENS_CACHE", str(blocker))
    assert_refused(capsys, "is a file, not a folder", "ablate", "--heads", "L0.H0")


def test_prune_refuses_a_folder_it_did_not_make(capsys, tmp_path):
    (tmp_path / "thesis.tex").write_text("mine")
    assert_refused(capsys, "not empty and was not written by heurlens", "prune", "--out", str(tmp_path),
                   "--model", "/nowhere")
    assert [p.name for p in tmp_path.iterdir()] == ["thesis.tex"]


@pytest.fixture(scope="module")
def small_run(tiny_bert_dir, tmp_path_factory):
    """A pruning run folder of the tiny model: 50%, one seed, 3 steps."""
    from heurlens.data.snli import load_snli
    from heurlens.evaluate import tokenize_pairs
    from heurlens.pruning import PruneSettings, prune

    model = load_model(tiny_bert_dir)
    data = tokenize_pairs("snli-train", load_snli("train", limit=32, seed=0), model.tokenizer, 16)
    out = tmp_path_factory.mktemp("small-run")
    prune(model, data, sparsity=0.5, seeds=[0], out=out, config=PruneSettings(total_steps=3), progress=False)
    return model, data, out


def test_run_folder_refuses_other_settings_model_or_data_at_any_sparsity(small_run, tiny_finetuned):
    from heurlens.pruning import PruneSettings, prune

    model, data, out = small_run
    with pytest.raises(HeurlensError, match="another model, data set or settings"):
        prune(model, data, sparsity=0.3, seeds=[0], out=out, config=PruneSettings(total_steps=3, lr_log_alpha=0.2),
              progress=False)
    fewer = type(data)(data.name, data.batches[:1], data.labels[:16], data.label_names)
    with pytest.raises(HeurlensError, match="another model, data set or settings"):
        prune(model, fewer, sparsity=0.3, seeds=[0], out=out, config=PruneSettings(total_steps=3), progress=False)
    other = load_model(tiny_finetuned)
    with pytest.raises(HeurlensError, match="another model"):
        prune(other, data, sparsity=0.3, seeds=[0], out=out, config=PruneSettings(total_steps=3), progress=False)
    assert sorted(p.name for p in out.iterdir()) == [".heurlens.lock", "sparsity-0.50", "unit-means.safetensors"]


def test_run_means_recomputed_on_another_device_resume_and_other_means_are_refused(small_run, tmp_path):
    """Means recomputed elsewhere (a GPU after a CPU) differ by float32 rounding at the scale of their tensor's
    largest entry, also on an entry near zero (SmolLM2 on an H200: 6e-5 beside 392): the run resumes. Means 1%
    off are another run's: refused, nothing overwritten."""
    import shutil

    from heurlens.interventions.means import UnitMeans
    from heurlens.pruning import PruneSettings, prune
    from heurlens.pruning.run_folder import MEANS_FILE, load_run_means

    model, data, out = small_run
    copy = tmp_path / "run"
    shutil.copytree(out, copy, ignore=shutil.ignore_patterns(".heurlens.lock"))
    saved = load_run_means(copy)
    nudged_mlp = saved.mlps[0].clone()
    nudged_mlp[nudged_mlp.abs().argmin()] += 5e-5 * saved.mlps[0].abs().max()
    settings = PruneSettings(total_steps=3)
    [resumed] = prune(model, data, sparsity=0.5, seeds=[0], out=copy, config=settings, progress=False,
                      means=UnitMeans(saved.heads, {**saved.mlps, 0: nudged_mlp}, saved.source))
    assert resumed.kept == prune(model, data, sparsity=0.5, seeds=[0], out=out, config=settings, progress=False)[0].kept
    before = (copy / MEANS_FILE).read_bytes()
    with pytest.raises(HeurlensError, match="holds the means of another model or data set"):
        prune(model, data, sparsity=0.5, seeds=[0], out=copy, config=settings, progress=False,
              means=UnitMeans(saved.heads, {**saved.mlps, 0: saved.mlps[0] * 1.01}, saved.source))
    assert (copy / MEANS_FILE).read_bytes() == before


def test_two_prunes_into_one_folder_do_not_both_work(small_run):
    from heurlens.pruning import PruneSettings, prune
    from heurlens.pruning.run_folder import prune_folder

    model, data, out = small_run
    holder = subprocess.Popen(  # another process holding the folder (within one process the lock is re-entrant)
        [sys.executable, "-c", "import sys, time\nfrom heurlens.pruning.run_folder import prune_folder\n"
         f"with prune_folder({str(out)!r}).writing():\n    print('held', flush=True)\n    time.sleep(120)"],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(HeurlensError, match="another heurlens process is writing to the prune run folder"):
            prune(model, data, sparsity=0.5, seeds=[0, 1], out=out, config=PruneSettings(total_steps=3), progress=False)
    finally:
        holder.kill()
        holder.wait()
    assert not (out / "sparsity-0.50" / "seed-01.json").exists()
    with prune_folder(out).writing():  # free again once that process is gone
        pass


@pytest.mark.parametrize("damage, fragment", [
    (lambda stem: stem.with_suffix(".safetensors").write_bytes(stem.with_suffix(".safetensors").read_bytes()[:40]),
     "cannot be read"),
    (lambda stem: stem.with_suffix(".json").write_text("{}"), "cannot be read"),
])
def test_damaged_subnetwork_files_are_named_with_their_fix(small_run, tmp_path, damage, fragment):
    from heurlens.pruning import Subnetwork

    _, _, out = small_run
    copy = tmp_path / "run"
    shutil.copytree(out, copy)
    stem = copy / "sparsity-0.50" / "seed-00"
    damage(stem)
    with pytest.raises(HeurlensError, match=f"subnetwork {stem} {fragment}.*delete {stem}.json"):
        Subnetwork.load(stem)


def test_damaged_run_means_are_named_with_their_fix(small_run, tmp_path):
    import torch
    from safetensors.torch import load_file, save_file

    from heurlens.pruning.run_folder import MEANS_FILE, load_run_means

    _, _, out = small_run
    copy = tmp_path / "run"
    shutil.copytree(out, copy)
    means = copy / MEANS_FILE
    tensors = load_file(means)
    tensors["heads.0"][0, 0] = float("nan")
    save_file(tensors, means)
    with pytest.raises(HeurlensError, match=f"{means} are incomplete or hold NaN.*run heurlens prune --out {copy}"):
        load_run_means(copy)
    means.write_bytes(b"\x00" * 10)
    with pytest.raises(HeurlensError, match=f"{means} cannot be read"):
        load_run_means(copy)
    assert torch.isnan(tensors["heads.0"][0, 0])


def test_damaged_means_cache_is_computed_again(tiny_bert_dir, tmp_path, monkeypatch):
    import torch

    from heurlens.data.nli_setup import snli_reference_means

    real_cache = cache_dir()
    monkeypatch.setenv("HEURLENS_CACHE", str(tmp_path))
    for name in ("downloads", "data"):  # the SNLI files, without fetching them again
        shutil.copytree(real_cache / name, tmp_path / name)
    model = load_model(tiny_bert_dir)
    means = snli_reference_means(model, 40)
    cached = next((tmp_path / "means").iterdir())
    cached.write_bytes(cached.read_bytes()[:100])  # truncated
    again = snli_reference_means(model, 40)
    assert all(torch.allclose(again.heads[layer], means.heads[layer]) for layer in means.heads)
    assert cached.stat().st_size > 100


def test_cut_snli_file_is_extracted_again(tmp_path, monkeypatch):
    from heurlens.data.snli import load_snli

    real_cache = cache_dir()
    monkeypatch.setenv("HEURLENS_CACHE", str(tmp_path))
    shutil.copytree(real_cache / "downloads", tmp_path / "downloads")
    assert len(load_snli("test")) == 9824
    test_file = tmp_path / "data" / "snli" / "snli_1.0_test.jsonl"
    lines = test_file.read_text().splitlines(keepends=True)
    test_file.write_text("".join(lines[:5000]))  # cut at a line boundary
    assert len(load_snli("test")) == 9824


def test_report_cache_follows_the_subnetworks_contents(small_run, tmp_path):
    import json as json_module

    from heurlens.analysis.run_report import cache_path, cached_table

    model, data, out = small_run
    copy = tmp_path / "run"
    shutil.copytree(out, copy)
    before = cache_path(copy, "evaluation", [data], model)
    record = copy / "sparsity-0.50" / "seed-00.json"
    changed = json_module.loads(record.read_text()) | {"threshold": 0.55}  # as if pruned again
    record.write_text(json_module.dumps(changed))
    assert cache_path(copy, "evaluation", [data], model) != before
    import pandas as pd

    table = pd.DataFrame({"a": [1, 2, 3]})
    path = tmp_path / "t.csv"
    assert cached_table(path, 3, lambda: table).equals(table)
    path.write_text("a\n1\n")  # truncated: one row of three
    calls = []
    cached_table(path, 3, lambda: calls.append(1) or table)
    assert calls == [1]


def test_kl_rounding_below_zero_is_reported_as_zero():
    import torch
    import torch.nn.functional as F

    from heurlens.evaluate import mean_kl

    for seed in range(200):  # float32 rounding: KL of a distribution to itself plus a constant shift
        logits = torch.randn(8, 3, generator=torch.Generator().manual_seed(seed))
        shifted = logits + 1.0  # the same distribution
        p, q = F.log_softmax(logits, -1), F.log_softmax(shifted, -1)
        if (p.exp() * (p - q)).sum(-1).mean().item() < 0:
            assert mean_kl(logits, shifted) == 0.0
            return
    pytest.fail("no rounding below zero found to test with")


def test_superadditivity_json_keeps_the_pairwise_table(capsys, tiny_bert_dir):
    status, out, err = heurlens_in_process(
        capsys, "ablate", "--superadditivity", "--heads", "L0.H0,L0.H1,L1.H2", "--model", str(tiny_bert_dir),
        "--subcases", "SO-Swap", "--per-subcase", "6", "--in-domain-examples", "20", "--reference-examples", "20",
        "--json")
    assert status == 0, err
    rows = json.loads(out)
    pairs = {r["pair"] for r in rows if r["table"] == "pairwise"}
    assert pairs == {"L0.H0,L0.H1", "L0.H0,L1.H2", "L0.H1,L1.H2"}
    assert {r["table"] for r in rows} == {"group", "pairwise"}


def test_core_from_another_models_run_is_refused(capsys, small_run, tiny_finetuned):
    _, _, out = small_run
    assert_refused(capsys, "was pruned from model", "ablate", "--scan", "--core", str(out), "--model",
                   str(tiny_finetuned))


def test_a_stored_stage_is_computed_once_and_recomputed_when_damaged(tmp_path):
    """``cache.stored``, the one resumable-stage helper: computed and saved the first time, read back the
    second, computed again when its file cannot be read back whole."""
    import json as json_module

    from heurlens.runtime.cache import atomic_write_json, stored

    path, calls = tmp_path / "stage.json", []

    def compute():
        calls.append(1)
        return {"value": len(calls)}

    def run():
        return stored(path, compute, lambda result: atomic_write_json(path, result),
                      lambda: json_module.loads(path.read_text()))

    assert run() == {"value": 1} and run() == {"value": 1} and len(calls) == 1  # the second run resumed
    path.write_text('{"value": ')  # an interrupted write of an older version
    assert run() == {"value": 2} and json_module.loads(path.read_text()) == {"value": 2}
