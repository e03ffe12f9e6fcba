"""Corrupt ablation (heurlens.interventions.corruption; "interchange" in heurlens 0.1.0, still accepted with a
warning): an ablated unit takes its activation on each example's corrupted prompt. Known answer: the same unit
patched by hand with TransformerLens' own ``run_with_cache`` and ``run_with_hooks`` on the bridge."""

import pytest
import torch
from conftest import word_level_tokenizer
from transformer_lens.model_bridge import TransformerBridge

import heurlens
from heurlens.data.prompt_tasks import PromptExample, tokenize_prompt_task
from heurlens.errors import HeurlensError
from heurlens.interventions.units import heads_hook_name, mlp_hook_name

# clean and corrupted prompts of the same length (the word-level tokenizer: one token a word)
EXAMPLES = [PromptExample("the man sees the dog", " runs", (" sleeps",), "the cat sees a man"),
            PromptExample("a dog sees the cat", " sleeps", (" runs",), "the man runs . the"),
            PromptExample("the cat runs . a", " dog", (" man",), "a man sleeps . the")]


@pytest.fixture(scope="module")
def llama(tiny_decoder_dirs):
    bridge = TransformerBridge.boot_transformers(str(tiny_decoder_dirs["llama"]), device="cpu")
    return bridge, heurlens.wrap_bridge(bridge)


def patched_by_hand(bridge, clean: torch.Tensor, corrupted: torch.Tensor, hook_name: str, index) -> torch.Tensor:
    """The last position's logits of ``clean`` with ``hook_name[..., index]`` taken from the corrupted run."""
    _, cache = bridge.run_with_cache(corrupted)
    donor = cache[hook_name]

    def patch(activation, hook):
        activation[index] = donor[index]
        return activation

    return bridge.run_with_hooks(clean, fwd_hooks=[(hook_name, patch)])[:, -1].float()


@pytest.mark.parametrize("unit, hook, index", [("L1.H2", heads_hook_name(1), (slice(None), slice(None), 2)),
                                               ("L0.MLP", mlp_hook_name(0), (slice(None),))])
def test_corrupt_ablation_of_one_unit_is_that_unit_run_on_the_corrupted_prompt(llama, unit, hook, index):
    bridge, model = llama
    task = tokenize_prompt_task("toy", EXAMPLES, word_level_tokenizer(), n_ctx=32, add_special_tokens=False)
    seen = []
    metrics = {"scores": lambda scores, task: seen.append(scores.clone()) or 0.0}
    heurlens.ablate(model, unit, [task], method="corrupt", metrics=metrics, cache=False)
    full, ablated = seen
    by_hand = patched_by_hand(bridge, task.batches[0]["input_ids"], task.corrupted.batches[0]["input_ids"], hook, index)
    torch.testing.assert_close(ablated, by_hand, atol=1e-5, rtol=1e-5)
    assert (ablated - full).abs().max() > 1e-3  # the corrupted activation, not the clean one


def test_the_scans_corrupt_ablate_as_ablate_does(llama):
    from heurlens.analysis import group_superadditivity, single_unit_scan

    _, model = llama
    task = tokenize_prompt_task("toy", EXAMPLES, word_level_tokenizer(), n_ctx=32, add_special_tokens=False)
    metrics = {"first": lambda scores, task: float(scores[:, 0].mean())}
    delta = {unit: heurlens.ablate(model, unit, [task], method="corrupt", metrics=metrics, cache=False)["delta"]
             .item() for unit in ("L0.H1", "L1.H2", "L0.H1,L1.H2")}
    scan = single_unit_scan(model, "L0.H1,L1.H2", [task], method="corrupt", metrics=metrics, progress=False,
                            cache=False)
    assert scan["delta"].tolist() == pytest.approx([delta["L0.H1"], delta["L1.H2"]], rel=1e-5)
    summary, _ = group_superadditivity(model, "L0.H1,L1.H2", [task], method="corrupt", metrics=metrics,
                                       progress=False, cache=False)
    assert summary["group_drop"].item() == pytest.approx(-delta["L0.H1,L1.H2"], rel=1e-5) and delta["L1.H2"] != 0


def test_corrupt_needs_a_corruption_of_the_same_length(llama):
    _, model = llama
    uneven = [EXAMPLES[0], PromptExample("the dog runs", " .", (" the",), "the dog runs . the")]
    task = tokenize_prompt_task("uneven", uneven, word_level_tokenizer(), n_ctx=32, add_special_tokens=False)
    with pytest.raises(HeurlensError, match="example 1 of 'uneven' is 3 tokens and its corrupted input 5"):
        heurlens.ablate(model, "L0.H0", [task], method="corrupt", metrics={}, cache=False)
    with pytest.raises(HeurlensError, match="the task 'texts' carries none: use a prompt task"):
        heurlens.ablate(model, "L0.H0", [["the man sees"]], method="corrupt", metrics={}, cache=False)
    with pytest.raises(HeurlensError, match="a fixed set of hooks cannot know"):
        heurlens.ablation_hooks(model, "L0.H0", method="corrupt")
    without = tokenize_prompt_task("plain", [PromptExample("the man", " runs")], word_level_tokenizer(), n_ctx=32)
    assert without.corrupted is None


def test_the_ablate_command_with_corrupt_on_a_prompt_file(llama, tiny_decoder_dirs, tmp_path, capsys):
    """``heurlens ablate --method corrupt``: the library's numbers for the task file's prompts; a task without
    corrupted prompts is refused in one line."""
    import json

    from cli_run import assert_refused, heurlens_in_process

    from heurlens.data.prompt_tasks import load_prompt_file

    task = tmp_path / "task.jsonl"
    task.write_text("\n".join(json.dumps({"prompt": e.prompt, "answer": e.answer, "distractors": list(e.distractors),
                                          "corrupted_prompt": e.corrupted_prompt}) for e in EXAMPLES) + "\n")
    model = str(tiny_decoder_dirs["llama"])
    status, out, err = heurlens_in_process(capsys, "ablate", "--model", model, "--task", str(task), "--task-examples",
                                           "3", "--heads", "L1.H2", "--method", "corrupt", "--json")
    assert status == 0, err
    (row,) = json.loads(out)
    _, bridge_model = llama
    examples = load_prompt_file(task)
    prompts = tokenize_prompt_task("task", examples, bridge_model.tokenizer, n_ctx=32)
    [expected] = heurlens.ablate(bridge_model, "L1.H2", [prompts], method="corrupt",
                                 cache=False).to_dict("records")
    assert row["ablated_accuracy"] == pytest.approx(expected["ablated_accuracy"])
    assert row["kl"] == pytest.approx(expected["kl"], rel=1e-6) and row["kl"] > 0
    with pytest.warns(DeprecationWarning, match="'interchange' is now called 'corrupt'"):
        status, old_name, err = heurlens_in_process(capsys, "ablate", "--model", model, "--task", str(task),
                                                    "--task-examples", "3", "--heads", "L1.H2", "--method",
                                                    "interchange", "--json")
    assert status == 0 and json.loads(old_name) == [row], err  # heurlens 0.1.0's choice, the same table
    status, out, err = heurlens_in_process(capsys, "prune", "--model", model, "--task", str(task), "--task-examples",
                                           "3", "--sparsity", "0.5", "--seeds", "1", "--steps", "3", "--ablation",
                                           "corrupt", "--out", str(tmp_path / "run"))
    assert status == 0, err
    assert "pruned units replaced by their activations on each example's corrupted prompt" in out
    assert json.loads((tmp_path / "run" / "sparsity-0.50" / "seed-00.json").read_text())["hyperparameters"][
        "ablation"] == "corrupt"
    status, out, err = heurlens_in_process(capsys, "evaluate", str(tmp_path / "run"), "--task", str(task),
                                           "--task-examples", "3", "--json")  # evaluated as it was pruned
    assert status == 0, err
    [pruned] = [row for row in json.loads(out) if row["subnetwork"] != "full model"]
    from heurlens.pruning import Subnetwork

    units = Subnetwork.load(tmp_path / "run" / "sparsity-0.50" / "seed-00.json").pruned
    assert pruned["kl"] == pytest.approx(heurlens.ablate(bridge_model, units, [prompts], method="corrupt",
                                                         metrics={}, cache=False)["kl"].item(), rel=1e-5)
    task.write_text("\n".join(json.dumps({"prompt": e.prompt, "answer": e.answer, "distractors": list(e.distractors)})
                              for e in EXAMPLES) + "\n")
    assert_refused(capsys, "carries none", "ablate", "--model", model, "--task", str(task), "--task-examples", "3",
                   "--heads", "L1.H2", "--method", "corrupt")


def test_pruning_with_corrupt_ablation_records_it_and_evaluates_with_it(llama):
    """``PruneSettings(ablation="corrupt")``: the masks train against the corrupted activations, the subnetwork
    records it, its own loss is the corrupt-ablated KL (as ``ablate`` computes it), and ``evaluate_subnetworks``
    ablates the way it was pruned."""
    from dataclasses import replace

    _, model = llama
    task = tokenize_prompt_task("toy", EXAMPLES * 4, word_level_tokenizer(), n_ctx=32, batch_size=4,
                                add_special_tokens=False)
    means = heurlens.compute_means(model, task)
    settings = heurlens.PruneSettings(ablation="corrupt", total_steps=40, log_alpha_init=0.0, lr_log_alpha=0.3)
    [sub] = heurlens.prune(model, task, sparsity=0.5, seeds=[0], means=means, config=settings, progress=False,
                           cache=False)
    [mean_sub] = heurlens.prune(model, task, sparsity=0.5, seeds=[0], means=means, progress=False, cache=False,
                                config=replace(settings, ablation="mean"))
    assert sub.hyperparameters["ablation"] == "corrupt" and "ablation" not in mean_sub.hyperparameters
    assert not torch.equal(sub.log_alpha_heads, mean_sub.log_alpha_heads)  # trained against other replacements
    corrupt_ablated = heurlens.ablate(model, sub.pruned, [task], method="corrupt", metrics={}, cache=False)
    assert sub.metrics["subnetwork_train_kl"] == pytest.approx(corrupt_ablated["kl"].item(), rel=1e-4)
    mean_ablated = heurlens.ablate(model, sub.pruned, [task], means=means, metrics={}, cache=False)["kl"].item()
    assert mean_ablated != pytest.approx(corrupt_ablated["kl"].item(), rel=0.1)  # the two replacements differ here
    table = heurlens.evaluate_subnetworks(model, [sub], [task], means=means, metrics={}, cache=False)
    assert table["kl"].iloc[-1] == pytest.approx(corrupt_ablated["kl"].item(), rel=1e-4)
    with pytest.raises(HeurlensError, match="different ablations"):
        heurlens.evaluate_subnetworks(model, [sub, mean_sub], [task], means=means, metrics={}, cache=False)
    with pytest.raises(HeurlensError, match="carries none"):
        heurlens.prune(model, ["the man sees the dog"], sparsity=0.5, seeds=[0], config=settings, progress=False)


def test_interchange_is_corrupt_with_a_warning_in_calls_settings_and_stored_records(llama, tmp_path):
    """heurlens 0.1.0's name still works for one release: the same numbers, a DeprecationWarning naming "corrupt";
    a stored record that says "interchange" reads as "corrupt", so its run resumes with the new name."""
    import json
    import subprocess
    import sys

    from heurlens.pruning.subnetwork import Subnetwork

    _, model = llama
    task = tokenize_prompt_task("toy", EXAMPLES * 4, word_level_tokenizer(), n_ctx=32, batch_size=4,
                                add_special_tokens=False)
    corrupt = heurlens.ablate(model, "L1.H2", [task], method="corrupt", metrics={}, cache=False)
    with pytest.warns(DeprecationWarning, match="'interchange' is now called 'corrupt'"):
        old_name = heurlens.ablate(model, "L1.H2", [task], method="interchange", metrics={}, cache=False)
    assert old_name.equals(corrupt) and corrupt["kl"].item() > 0
    with pytest.warns(DeprecationWarning, match="'interchange' is now called 'corrupt'"):
        assert heurlens.PruneSettings(ablation="interchange").ablation == "corrupt"

    settings = heurlens.PruneSettings(ablation="corrupt", total_steps=2)
    [sub] = heurlens.prune(model, task, sparsity=0.5, seeds=[0], config=settings, progress=False, cache=False,
                           out=tmp_path / "run")
    [record] = (tmp_path / "run").glob("sparsity-*/seed-00.json")
    stored = json.loads(record.read_text())
    assert stored["hyperparameters"]["ablation"] == "corrupt"
    stored["hyperparameters"]["ablation"] = "interchange"  # as heurlens 0.1.0 wrote it
    record.write_text(json.dumps(stored))
    assert Subnetwork.load(record).hyperparameters["ablation"] == "corrupt"
    [resumed] = heurlens.prune(model, task, sparsity=0.5, seeds=[0], config=settings, progress=False, cache=False,
                               out=tmp_path / "run")  # refused as "another run's settings" if it read "interchange"
    assert resumed.kept == sub.kept

    shown = subprocess.run([sys.executable, "-c", "from heurlens.cli import _warnings_in_command_line_terms as w; w(); "
                            "from heurlens.pruning.settings import PruneSettings; PruneSettings(ablation='interchange')"],
                           capture_output=True, text=True, check=True).stderr
    assert "'interchange' is now called 'corrupt'" in shown  # the CLI shows it (Python hides it outside __main__)
