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


def _jsonl(path, *lines):
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize("lines, fragment", [
    (['{"prompt": "the man sees", "answer": " dog"}', '{"prompt": "abc", "answer": [" x"]'], "line 2: not a JSON"),
    (['{"prompt": "The capital of France is", "answer": [" Paris", " Lyon"], "distractors": [" London"]}'],
     "answer is a list, not a text"),
    (['{"prompt": "a", "answer": " x", "distractors": " y"}'], "distractors must be a list of texts"),
    (['[1, 2]'], "line 1: a JSON list, not an object"),
])
def test_a_malformed_prompt_file_is_one_line_naming_file_and_line(tmp_path, lines, fragment):
    from heurlens.data.prompt_tasks import load_prompt_file

    path = _jsonl(tmp_path / "task.jsonl", *lines)
    with pytest.raises(HeurlensError, match=fragment) as refused:
        load_prompt_file(path)
    assert str(path) in str(refused.value)


@pytest.mark.parametrize("label", ["[0]", "true"])
def test_list_and_boolean_labels_in_a_pair_file_are_refused(tmp_path, label):
    from heurlens.data.files import load_pair_file

    path = _jsonl(tmp_path / "pairs.jsonl", f'{{"premise": "a man", "hypothesis": "a person", "label": {label}}}')
    with pytest.raises(HeurlensError, match="row 1 has label .*a label is a name"):
        load_pair_file(path)


def test_a_prompt_task_on_a_classifier_and_no_hans_pairs_are_refused(tiny_bert_dir, tmp_path):
    import heurlens
    from heurlens.data.run_data import PromptTaskData

    path = _jsonl(tmp_path / "task.jsonl", '{"prompt": "a man", "answer": " sleeps"}')
    with pytest.raises(HeurlensError, match="is a classifier with labels entailment"):
        PromptTaskData(str(path)).eval_sets(heurlens.load_model(tiny_bert_dir))
    with pytest.raises(HeurlensError, match="n_per_subcase = 0"):
        heurlens.generate_hans(0)


def test_prune_refuses_a_folder_of_the_users_with_an_empty_sparsity_folder(capsys, tmp_path):
    (tmp_path / "NOTES.txt").write_text("mine")
    (tmp_path / "sparsity-0.50").mkdir()
    assert_refused(capsys, "was not written by heurlens", "prune", "--out", str(tmp_path))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["NOTES.txt", "sparsity-0.50"]


def test_a_cached_means_file_of_the_wrong_shape_is_computed_again(tiny_bert_dir):
    import torch
    from safetensors.torch import load_file, save_file

    import heurlens
    from heurlens.data.nli_setup import snli_reference_means
    from heurlens.runtime.cache import cache_dir

    model = heurlens.load_model(tiny_bert_dir)
    first = snli_reference_means(model, examples=8)
    [path] = (cache_dir() / "means").glob(f"{model.fingerprint()}-snli-train-8-s0.safetensors")
    tensors = load_file(path)
    tensors["heads.1"] = torch.zeros(3, 5)  # another model's shape
    save_file(tensors, path, metadata={"source": "edited"})
    again = snli_reference_means(model, examples=8)
    assert torch.equal(again.heads[1], first.heads[1]) and load_file(path)["heads.1"].shape == (4, 8)


def test_a_cut_transfer_result_is_trained_again_and_named_when_read(tmp_path):
    from heurlens.subtask.sweep_transfer import finished_run, read_result, result_path

    path = result_path(tmp_path, "subtask induction", 30, 0)
    path.parent.mkdir(parents=True)
    path.write_text('{"condition": "subtask induction", "disambigu')
    assert not finished_run(path)
    with pytest.raises(HeurlensError, match=f"{path} cannot be read whole .*delete it and run the same command"):
        read_result(path)


def _closed_loopback_port() -> int:
    import socket

    with socket.socket() as probe:  # a port the system just handed out, closed again: nothing listens there
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.mark.parametrize("address, fragment", [
    (None, "no Ray cluster answers there"), ("auto", "no Ray cluster was started on this machine"),
    ("ray://127.0.0.1:10001", "Ray Client addresses need the ray[client] extra"),
])
def test_an_unreachable_cluster_is_refused_quickly_before_anything_is_written(capsys, tmp_path, monkeypatch, address,
                                                                              fragment):
    import time

    monkeypatch.setenv("RAY_TMPDIR", str(tmp_path / "no-ray"))  # no cluster record here
    address = address or f"127.0.0.1:{_closed_loopback_port()}"
    start = time.time()
    assert_refused(capsys, fragment, "prune", "--workers", "2", "--ray-address", address, "--out", str(tmp_path / "p"))
    assert time.time() - start < 10 and not (tmp_path / "p").exists()


def test_an_unreachable_ray_address_from_the_environment_is_refused_as_the_option_is(capsys, tmp_path, monkeypatch):
    """RAY_ADDRESS, which Ray reads by itself, bypassed the --ray-address check: a prune hung for over 10 minutes
    after writing its means. Ray must never be left to try it: checked on loopback before Ray is imported."""
    import time

    address = f"127.0.0.1:{_closed_loopback_port()}"
    monkeypatch.setenv("RAY_ADDRESS", address)
    start = time.time()
    assert_refused(capsys, f"RAY_ADDRESS={address}: no Ray cluster answers there", "prune", "--workers", "2",
                   "--out", str(tmp_path / "p"))
    assert time.time() - start < 10 and not (tmp_path / "p").exists()
    assert_refused(capsys, "(unset RAY_ADDRESS: the workers run on this machine)", "ablate", "--scan", "--workers", "2")


def test_gpu_workers_this_machine_cannot_hold_are_refused_before_anything_is_written(capsys, tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    assert_refused(capsys, "--gpus-per-worker 1: Ray runs on this machine, which has 0 GPU(s)", "prune", "--workers",
                   "2", "--gpus-per-worker", "1", "--out", str(tmp_path / "p"))
    assert not (tmp_path / "p").exists()


def test_a_cache_that_cannot_be_written_is_named_with_the_fix(monkeypatch, tmp_path):
    """As root no folder is read-only to the tests, so the operating system's refusal is stood in for."""
    import errno
    import tempfile

    from heurlens.runtime.cache import atomic_write_bytes

    monkeypatch.setenv("HEURLENS_CACHE", str(tmp_path / "cache"))

    def refused(*args, **kwargs):
        raise PermissionError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(tempfile, "mkstemp", refused)
    with pytest.raises(HeurlensError, match=r"cannot write .*means/x.safetensors \(Read-only file system\).*"
                                            r"point \$HEURLENS_CACHE at a folder you can write to"):
        atomic_write_bytes(tmp_path / "cache" / "means" / "x.safetensors", b"")
    with pytest.raises(HeurlensError, match="choose a folder you can write to"):
        atomic_write_bytes(tmp_path / "elsewhere" / "x.json", b"")


def test_a_read_only_cache_folder_ends_any_command_in_one_line(monkeypatch, tmp_path, capsys, tiny_bert_dir):
    """The cache folder exists but the system refuses writes in it (a read-only mount: stood in for, as root
    writes anywhere): the first write of any kind (here the downloads folder of SNLI) named the fix, not a trace."""
    import errno
    from pathlib import Path

    cache = tmp_path / "cache"
    cache.mkdir()
    monkeypatch.setenv("HEURLENS_CACHE", str(cache))
    real_mkdir = Path.mkdir

    def read_only(self, *args, **kwargs):  # Path.mkdir (on Python 3.10 it does not go through os.mkdir)
        if str(self).startswith(str(cache)) and not self.exists():  # as a read-only mount: existing folders exist
            raise OSError(errno.EROFS, "Read-only file system", str(self))
        return real_mkdir(self, *args, **kwargs)

    monkeypatch.setattr(Path, "mkdir", read_only)
    assert_refused(capsys, f"cannot write {cache}/", "ablate", "--heads", "L0.H0", "--model", str(tiny_bert_dir),
                   "--in-domain-examples", "20", "--per-subcase", "5", "--reference-examples", "20")
    assert_refused(capsys, "(Read-only file system): its folder is read-only; point $HEURLENS_CACHE at a folder",
                   "ablate", "--heads", "L0.H0", "--model", str(tiny_bert_dir), "--in-domain-examples", "20")
    assert list(cache.iterdir()) == []


def test_a_sparsity_given_twice_is_refused_and_minus_zero_is_zero(tmp_path):
    import torch
    from planted import build_planted_model

    import heurlens
    from heurlens.tasks import token_batches

    model = build_planted_model()
    data = token_batches(torch.randint(0, 4, (8, 5), generator=torch.Generator().manual_seed(0)))
    with pytest.raises(HeurlensError, match=r"sparsity 0.5 is given twice"):
        heurlens.prune(model, data, sparsity=[0.5, 0.496, 0.5], seeds=[0], out=tmp_path / "p", progress=False)
    heurlens.prune(model, data, sparsity=-0.0, seeds=[0], out=tmp_path / "q", progress=False,
                   config=heurlens.PruneSettings(total_steps=1))
    assert [p.name for p in (tmp_path / "q").glob("sparsity-*")] == ["sparsity-0.00"]


def test_multi_value_options_written_with_an_equals_sign_take_their_values():
    from heurlens.cli import expand_multi_value_options

    assert expand_multi_value_options(["prune", "--sparsity=0.5", "0.7", "--seeds", "2"]) == [
        "prune", "--sparsity=0.5", "--sparsity", "0.7", "--seeds", "2"]


def test_empty_model_names_data_folders_and_unitless_models_are_refused(tmp_path):
    import heurlens
    from heurlens.data.files import load_pair_file

    with pytest.raises(HeurlensError, match="the model name is empty"):
        heurlens.load_model("")
    with pytest.raises(HeurlensError, match="is a folder; give a .jsonl"):
        load_pair_file(tmp_path)
    with pytest.raises(HeurlensError, match="0 layers of 4 heads has no units"):
        heurlens.parse_units("L0.H0", 0, 4)


def test_sigterm_ends_a_run_with_one_line_and_keeps_what_was_finished(tmp_path, tiny_bert_dir):
    import signal
    import subprocess
    import sys
    import time

    run = subprocess.Popen([sys.executable, "-m", "heurlens", "prune", "--model", str(tiny_bert_dir), "--seeds", "2",
                            "--steps", "100000", "--out", str(tmp_path / "p")], stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while not (tmp_path / "p" / "unit-means.safetensors").exists() and time.time() < deadline:
        time.sleep(0.5)  # until it is training (its means written)
    run.send_signal(signal.SIGTERM)
    _, err = run.communicate(timeout=60)
    assert run.returncode == 143, err[-2000:]
    assert err.strip().splitlines()[-1] == ("heurlens: aborted (SIGTERM); what was finished is kept: the same command "
                                            "resumes")
    assert (tmp_path / "p" / "unit-means.safetensors").exists() and "Traceback" not in err


def test_a_report_table_of_new_contents_replaces_the_stale_one(tmp_path):
    import pandas as pd

    from heurlens.analysis.run_report import cached_table

    table = pd.DataFrame({"a": [1, 2]})
    cached_table(tmp_path / "evaluation-aaaaaaaaaaaa.csv", 2, lambda: table)
    (tmp_path / "patterns-cccccccccccc.csv").write_text("a\n1\n")
    cached_table(tmp_path / "evaluation-bbbbbbbbbbbb.csv", 2, lambda: table)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["evaluation-bbbbbbbbbbbb.csv", "patterns-cccccccccccc.csv"]


@pytest.mark.parametrize("name, content, fragment", [
    ("header.csv", "premise,hypothesis,label\n", "holds no rows under its header"),
    ("blank.jsonl", "\n\n", "holds no rows; give one JSON object per line"),
    ("garbage.jsonl", "\x00\x01garbage{{{\n", "line 1: not a JSON object"),
    ("binary.jsonl", b"\xff\xfe\x00", "is not text"),
])
def test_empty_and_garbled_data_files_are_named_with_what_is_wrong(tmp_path, name, content, fragment):
    from heurlens.data.files import load_pair_file

    path = tmp_path / name
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    with pytest.raises(HeurlensError, match=fragment):
        load_pair_file(path)


def test_more_hans_pairs_than_the_templates_make_are_refused_in_seconds():
    import time

    import heurlens

    start = time.time()
    with pytest.raises(HeurlensError, match=r"gives about \d+ distinct ln_subject/object_swap pairs, not 100000"):
        heurlens.generate_hans(100_000, ["ln_subject/object_swap"])
    assert time.time() - start < 30


def test_a_second_prune_on_one_folder_is_refused_before_it_loads_a_model(tmp_path):
    from cli_run import assert_one_line_error, heurlens

    from heurlens.pruning.run_folder import prune_folder

    out = tmp_path / "p"
    folder = prune_folder(out)
    with folder.writing():  # as a first prune holds it, from before its model loads
        with folder.writing():  # the same process may take it again (the library inside the CLI)
            pass
        # the model named does not exist: refused for the lock first means nothing was loaded
        second = heurlens("prune", "--out", str(out), "--model", str(tmp_path / "no-model"))
    assert_one_line_error(second, f"another heurlens process is writing to the prune run folder {out} now")


def test_token_masks_that_are_not_right_padded_zero_one_rows_are_refused(tiny_decoder_dirs):
    """A left-padded attention mask was scored at ``mask.sum() - 1``, the wrong position; holes, an all-zero row or a 2
    passed; scored positions of 2, 0.5 or -1 miscounted rows; ``tokenize_texts(positions=<tensor>)`` skipped every
    check (issue 63)."""
    import torch

    import heurlens
    from heurlens.tasks import token_batches, tokenize_texts

    tokens = torch.tensor([[2, 3, 4, 5], [2, 3, 4, 0]])
    right = torch.tensor([[1, 1, 1, 1], [1, 1, 1, 0]])
    token_batches(tokens, attention_mask=right)  # right-padded: fine
    for mask, fragment in [(torch.tensor([[1, 1, 1, 1], [0, 1, 1, 1]]), "example 1 has padding \\(0\\) before"),
                           (torch.tensor([[1, 0, 1, 1], [1, 1, 1, 0]]), "example 0 has padding \\(0\\) before"),
                           (torch.tensor([[1, 1, 1, 1], [0, 0, 0, 0]]), "example 1 is all 0"),
                           (torch.tensor([[1, 1, 1, 2], [1, 1, 1, 0]]), "hold 2 at example 0, position 3")]:
        with pytest.raises(HeurlensError, match=fragment):
            token_batches(tokens, attention_mask=mask)
    for value in (2, 0.5, -1):
        positions = right.float().clone()
        positions[0, 1] = value
        with pytest.raises(HeurlensError, match=f"the scored positions hold {float(value)} at example 0, position 1"):
            token_batches(tokens, attention_mask=right, positions=positions)
    model = heurlens.load_model(tiny_decoder_dirs["llama"])
    with pytest.raises(HeurlensError, match=r"tokenize_texts\(\): positions=tensor\(\[\[1, 1, 1, 1\], \[1, 1, 1, 0\]\]\) "
                                            r"is not one of 'last', 'all'"):
        tokenize_texts(model, ["the man", "a dog"], positions=right)  # type: ignore[arg-type]
