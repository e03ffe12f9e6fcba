"""Every run tied to its model and task (reliability, fifth round): a prune or attribution run scored, compared,
warm-started from or exported on another model of the same shape, or on another task's prompts, is refused by name
(before: scored without a word, CPR 0.250 on a same-shape model where its own gave 0.925); the library's grids are
checked as the CLI's are."""

import json

import pytest
import torch

import heurlens
from heurlens.circuits.attribution_runs import attribute, load_attribution
from heurlens.circuits.comparison import compare_runs
from heurlens.circuits.faithfulness import faithfulness_curve, keep_mask_curve, ranking_curve
from heurlens.data.run_data import PromptTaskData
from heurlens.errors import HeurlensError
from heurlens.interventions.rankings import Ranking
from heurlens.pruning import PruneSettings


def write_task(path, swap=False):
    rows = [{"prompt": clean, "answer": " dog" if not swap else " cat", "distractors": [" cat" if not swap else " dog"],
             "corrupted_prompt": corrupted}
            for clean, corrupted in [("the man sees", "a dog runs"), ("a cat sleeps", "the man sees"),
                                     ("the dog runs", "a cat sees"), ("a man runs", "the cat sleeps")]]
    path.write_text("\n".join(json.dumps(row) for row in rows) + "\n")
    return path


@pytest.fixture(scope="module")
def twins(tiny_decoder_dirs, tmp_path_factory):
    """The tiny Llama and a second one of the same shape (other weights), and two task files of one shape."""
    from conftest import word_level_tokenizer
    from transformers import AutoModelForCausalLM

    model = heurlens.load_model(tiny_decoder_dirs["llama"])
    other_dir = tmp_path_factory.mktemp("other-llama")
    hf = AutoModelForCausalLM.from_pretrained(tiny_decoder_dirs["llama"])
    with torch.no_grad():
        for parameter in hf.parameters():
            parameter.mul_(1.5)
    hf.save_pretrained(other_dir)
    word_level_tokenizer().save_pretrained(other_dir)
    folder = tmp_path_factory.mktemp("tasks")
    return model, heurlens.load_model(other_dir), write_task(folder / "task.jsonl"), write_task(folder / "swap.jsonl",
                                                                                                  swap=True)


def test_a_prune_run_is_refused_on_another_model_and_another_task(twins, tmp_path):
    model, other, task, swapped = twins
    data = PromptTaskData(str(task), 4, 0, batch_size=4)
    records = heurlens.prune(model, data.train(model), sparsity=0.5, seeds=[0], out=tmp_path / "run", cache=False,
                             progress=False, config=PruneSettings(total_steps=2, ablation="corrupt"))
    run = str(tmp_path / "run")
    compare_runs(model, {run: records}, data)  # its own model and task: scored
    with pytest.raises(HeurlensError, match="pruned from model .* not from"):
        compare_runs(other, {run: records}, data)
    with pytest.raises(HeurlensError, match="was pruned on .* not on the training prompts of task"):
        compare_runs(model, {run: records}, PromptTaskData(str(swapped), 4, 0, batch_size=4))
    with pytest.raises(HeurlensError, match="not on the training prompts"):  # other prompts of the same task
        compare_runs(model, {run: records}, PromptTaskData(str(task), 4, 1, batch_size=4))


def test_an_attribution_run_is_refused_on_another_model_task_and_as_another_models_warm_start(twins, tmp_path):
    model, other, task, swapped = twins
    data = PromptTaskData(str(task), 4, 0, batch_size=4)
    run = attribute(other, data, tmp_path / "other-eap", level="edge", method="eap")
    assert run.settings["model_fingerprint"] == other.fingerprint()
    with pytest.raises(HeurlensError, match="scored model .* not .*: use it with its own model"):
        compare_runs(model, {}, data, attributions=[run])
    with pytest.raises(HeurlensError, match=r"attributed on task .* \(4 prompts, seed 0\), not on task"):
        compare_runs(other, {}, PromptTaskData(str(swapped), 4, 0, batch_size=4), attributions=[run])
    with pytest.raises(HeurlensError, match="scored model .*, not"):  # --init-from: another model's scores
        heurlens.prune(model, data.train(model), sparsity=0.9, seeds=[0], cache=False, progress=False,
                       config=PruneSettings(level="edge", ablation="corrupt", init_from=str(tmp_path / "other-eap"),
                                            total_steps=2))


def test_the_prune_command_reads_its_warm_start_at_the_door(twins, tmp_path, capsys):
    """``heurlens prune --init-from RUN``: the command reads the attribution run and hands its ranking to ``prune``
    (no deprecation warning: pruning reads no folder), the records name the folder; another model's run is refused
    before any training, and nothing is written."""
    import warnings

    from cli_run import heurlens_in_process

    model, other, task, _ = twins
    attribute(other, PromptTaskData(str(task), 4, 0, batch_size=4), tmp_path / "other-eap", level="node", method="eap")
    attribute(model, PromptTaskData(str(task), 4, 0, batch_size=4), tmp_path / "eap", level="node", method="eap")
    common = ["prune", "--task", str(task), "--task-examples", "4", "--seeds", "1", "--steps", "2",
              "--ablation", "corrupt", "--model", str(model.model_id)]
    status, _, err = heurlens_in_process(capsys, *common, "--init-from", str(tmp_path / "other-eap"), "--out",
                                         str(tmp_path / "refused"))
    assert status != 0 and "scored model" in err and not list((tmp_path / "refused").glob("sparsity-*"))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        status, _, err = heurlens_in_process(capsys, *common, "--init-from", str(tmp_path / "eap"), "--out",
                                             str(tmp_path / "run"))
    assert status == 0, err
    assert not [w for w in caught if w.category is DeprecationWarning and "warm_start" in str(w.message)]
    [record] = (tmp_path / "run").glob("sparsity-*/seed-*.json")
    assert json.loads(record.read_text())["hyperparameters"]["init_from"] == str(tmp_path / "eap")


def test_the_faithfulness_command_refuses_another_models_run(twins, tmp_path, capsys):
    from cli_run import heurlens_in_process

    model, other, task, _ = twins
    data = PromptTaskData(str(task), 4, 0, batch_size=4)
    heurlens.prune(model, data.train(model), sparsity=0.5, seeds=[0], out=tmp_path / "run", cache=False,
                   progress=False, config=PruneSettings(total_steps=2, ablation="corrupt"))
    common = ["--task", str(task), "--task-examples", "4"]
    status, _, err = heurlens_in_process(capsys, "faithfulness", str(tmp_path / "run"), *common, "--model",
                                         str(other.model_id))
    assert status != 0 and "pruned from model" in err and "Traceback" not in err
    status, _, err = heurlens_in_process(capsys, "export-mib", str(tmp_path / "run"), "--out", str(tmp_path / "mib"),
                                         "--model", str(other.model_id))
    assert status != 0 and "pruned from model" in err and not (tmp_path / "mib").exists()


@pytest.mark.parametrize("grid", [[1.0, 0.5, 0.1], [0.5], [0.0, 1.0], [0.1, 0.1, 1.0], [True, 1.0]])
def test_the_librarys_grids_are_checked_as_the_clis(twins, grid):
    """A descending grid gave CPR -0.250, one size CMD 0 (read as perfect), 0 was accepted: each refused."""
    model, _, task, _ = twins
    data = PromptTaskData(str(task), 4, 0, batch_size=4)
    prompts = data.train(model)
    ranking = Ranking("r", "node", torch.arange(10.0))
    for call in (lambda: ranking_curve(model, ranking, prompts, method="corrupt", grid=grid),
                 lambda: faithfulness_curve(model, {"c": "L0.H0"}, prompts, method="corrupt", grid=grid),
                 lambda: keep_mask_curve(model, "node", {"c": torch.ones(10)}, prompts, method="corrupt", grid=grid)):
        with pytest.raises(HeurlensError, match="strictly ascending"):
            call()


def test_an_attribution_run_stopped_before_its_scores_resumes_and_damaged_or_infinite_scores_are_named(twins,
                                                                                                       tmp_path):
    """A run stopped (SIGTERM, kill -9, a refusal) after its settings and before its scores left settings.json and
    the lock: the same call resumes (before: "not written by heurlens"). A damaged scores.safetensors, or one holding
    inf, is refused naming the file and the fix (before: a traceback, or a NaN loss at a warm start's first step)."""
    from safetensors.torch import save_file

    model, _, task, _ = twins
    data = PromptTaskData(str(task), 4, 0, batch_size=4)
    done = attribute(model, data, tmp_path / "run", level="node", method="eap")
    (tmp_path / "run" / "scores.safetensors").unlink()  # as a stop before the scores leaves the folder
    assert sorted(path.name for path in (tmp_path / "run").iterdir()) == [".heurlens.lock", "settings.json"]
    again = attribute(model, data, tmp_path / "run", level="node", method="eap")
    assert torch.equal(again.ranking.scores, done.ranking.scores)
    (tmp_path / "run" / "scores.safetensors").write_bytes(b"\x08\x00\x00\x00garbage")
    with pytest.raises(HeurlensError, match="scores.safetensors cannot be read .* remove it and run the same"):
        load_attribution(tmp_path / "run")  # as faithfulness, export-mib and --init-from read it
    again = attribute(model, data, tmp_path / "run", level="node", method="eap")  # attribute computes it anew
    assert torch.equal(again.ranking.scores, done.ranking.scores)
    save_file({"scores": torch.tensor([1.0, float("inf")] + [0.0] * 8)}, str(tmp_path / "run" / "scores.safetensors"))
    with pytest.raises(HeurlensError, match="not one finite number per item"):
        heurlens.prune(model, data.train(model), sparsity=0.5, seeds=[0], cache=False, progress=False,
                       config=PruneSettings(ablation="corrupt", init_from=str(tmp_path / "run"), total_steps=2))


def test_steps_seeds_and_ig_steps_that_are_not_whole_numbers_are_refused(twins):
    """ig_steps=True ran one step labelled 'EAP-IG (True steps)', 2.5 a TypeError; seeds [True] and [-1] and
    total_steps=True were accepted."""
    from heurlens.circuits.attribution import attribution_ranking
    from heurlens.data.prompt_tasks import logit_difference

    model, _, task, _ = twins
    prompts = PromptTaskData(str(task), 4, 0, batch_size=4).train(model)
    for steps in (True, 2.5):
        with pytest.raises(HeurlensError, match="give EAP-IG's number of steps as a whole number"):
            attribution_ranking(model, prompts, logit_difference, level="edge", ig_steps=steps)
    for seeds in ([True], [-1]):
        with pytest.raises(HeurlensError, match="give each seed as a whole number 0 or above"):
            heurlens.prune(model, prompts, sparsity=0.5, seeds=seeds, cache=False, progress=False,
                           config=PruneSettings(total_steps=2))
    with pytest.raises(HeurlensError, match="total_steps = True is not"):
        PruneSettings(total_steps=True)


def test_a_full_disk_or_file_size_limit_is_one_line_and_keeps_the_file_it_would_replace(tmp_path):
    """ulimit -f in a child process (Python ignores SIGXFSZ, so the write fails with EFBIG): the atomic write says
    what is full and what to do, and the file it would have replaced is untouched."""
    import subprocess
    import sys

    target = tmp_path / "scores.bin"
    target.write_bytes(b"kept")
    code = ("import resource, sys; from pathlib import Path; resource.setrlimit(resource.RLIMIT_FSIZE, (1000, 1000));"
            "from heurlens.runtime.cache import atomic_write_bytes; from heurlens.errors import HeurlensError\n"
            "try:\n    atomic_write_bytes(Path(sys.argv[1]), b'x' * 5000)\n"
            "except HeurlensError as error:\n    print(error)")
    result = subprocess.run([sys.executable, "-c", code, str(target)], capture_output=True, text=True, timeout=120)
    assert "File too large" in result.stdout and "file-size limit (ulimit -f) is full" in result.stdout, result
    assert target.read_bytes() == b"kept" and [p.name for p in tmp_path.iterdir()] == ["scores.bin"]


def test_a_warm_start_folder_given_relative_then_absolute_is_one_run(twins, tmp_path, monkeypatch):
    """--init-from ./eap and the same folder by its absolute path resume one prune run (before: refused as a run of
    other settings)."""
    model, _, task, _ = twins
    data = PromptTaskData(str(task), 4, 0, batch_size=4)
    attribute(model, data, tmp_path / "eap", level="node", method="eap")
    monkeypatch.chdir(tmp_path)
    for init_from, sparsities in (("./eap", [0.5]), (str(tmp_path / "eap"), [0.5, 0.7])):
        heurlens.prune(model, data.train(model), sparsity=sparsities, seeds=[0], out=tmp_path / "run", cache=False,
                       progress=False, config=PruneSettings(ablation="corrupt", init_from=init_from, total_steps=2))
    assert len(list((tmp_path / "run").glob("sparsity-*/seed-*.json"))) == 2


def test_tokens_on_the_meta_device_are_refused_by_name(twins):
    model, _, _, _ = twins
    with pytest.raises(HeurlensError, match="on the meta device, which holds shapes and no values"):
        heurlens.compute_means(model, torch.zeros(2, 3, dtype=torch.long, device="meta"))


def test_a_sigterm_while_ray_starts_reaches_the_processs_own_handler(monkeypatch):
    """Ray's driver installs a SIGTERM handler that exits with status 15 (no "aborted" line): heurlens keeps its own
    in place after ``ray.init`` and hands it a SIGTERM that Ray's handler turned into an exit. A stand-in for Ray
    that does what its init does."""
    import os
    import signal
    import sys

    from heurlens.runtime import distributed

    class Stopped(Exception):
        pass

    def own(signum, frame):
        raise Stopped()

    class FakeRay:
        def init(self, **kwargs):
            signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(signum))  # as ray's driver does
            os.kill(os.getpid(), signal.SIGTERM)

    previous = signal.signal(signal.SIGTERM, own)
    try:
        with pytest.raises(Stopped):
            distributed.start_ray(FakeRay(), distributed.Workers(2), progress=False)
        assert signal.getsignal(signal.SIGTERM) is own
        FakeRay.init = lambda self, **kwargs: signal.signal(signal.SIGTERM, lambda s, f: sys.exit(s))
        distributed.start_ray(FakeRay(), distributed.Workers(2), progress=False)
        assert signal.getsignal(signal.SIGTERM) is own  # restored after a start without a signal too
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_means_of_another_model_of_the_same_shape_are_refused_and_the_same_models_copies_take_them(
        twins, tiny_decoder_dirs, tmp_path):
    """Means fit any model of their shape: taken on one model they are refused on its same-shape twin (before:
    taken, every ablation then wrong), also after a save and load; the same weights in bfloat16, the bridge under a
    wrapper of its own and an ungrouped copy take them (they compute the same activations), as do means saved
    before they remembered their model."""
    from dataclasses import replace

    from transformer_lens.model_bridge import TransformerBridge

    from heurlens.interventions.means import UnitMeans
    from heurlens.models.ungrouped import ungrouped_copy

    model, other, task, _ = twins
    prompts = PromptTaskData(str(task), 4, 0, batch_size=4).train(model)
    means = heurlens.compute_means(model, prompts)
    means.save(tmp_path / "means.safetensors")
    for candidate in (means, UnitMeans.load(tmp_path / "means.safetensors")):
        candidate.check_fits(model)
        with pytest.raises(HeurlensError, match="were taken on another model"):
            candidate.check_fits(other)
    with pytest.raises(HeurlensError, match="were taken on another model"):
        heurlens.ablate(other, "L0.H0", [prompts], means=means, cache=False)
    for dtype in ("bfloat16", "float16"):
        means.check_fits(heurlens.load_model(tiny_decoder_dirs["llama"], dtype=dtype))
    means.check_fits(TransformerBridge.boot_transformers(str(tiny_decoder_dirs["llama"]), device="cpu"))
    means.check_fits(ungrouped_copy(model))
    replace(means, model_embeddings=None).check_fits(other)


def test_the_clis_grid_is_the_librarys_rule_on_its_sizes_sorted_once_each():
    """--grid takes the sizes in any order, each once; what check_grid refuses (one size, 0, above 1, not a number)
    is a usage error naming --grid."""
    import click

    from heurlens.cli.commands_circuits import parse_grid

    assert parse_grid("1,0.1,0.5,0.1") == (0.1, 0.5, 1.0)
    for grid in ("0.5", "0,1", "0.5,2", "a,b", "nan,1"):
        with pytest.raises(click.BadParameter, match="give two or more fractions kept in"):
            parse_grid(grid)


def test_faithfulness_says_which_records_missed_their_target(twins, tmp_path, capsys):
    """A run whose record missed its target is scored as trained, with a note on stderr naming it (before: scored
    without a word, where report refused the same run); stdout keeps the table alone."""
    import warnings

    from cli_run import heurlens_in_process

    model, _, task, _ = twins
    data = PromptTaskData(str(task), 4, 0, batch_size=4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        [record] = heurlens.prune(model, data.train(model), sparsity=0.5, seeds=[0], out=tmp_path / "run",
                                  cache=False, progress=False, config=PruneSettings(total_steps=2, ablation="corrupt"))
    assert record.missed_target
    status, out, err = heurlens_in_process(capsys, "--quiet", "faithfulness", str(tmp_path / "run"), "--task",
                                           str(task), "--task-examples", "4", "--model", str(model.model_id), "--json")
    assert status == 0 and "note: 1 of 1 records missed their target sparsity" in err and record.label in err
    assert json.loads(out)  # the table, untouched by the note
