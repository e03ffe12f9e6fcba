"""Warnings point at the researcher's line (issue 77): prune's SparsityTargetMissed was attributed to
``<@beartype(heurlens.pruning.runs.prune) at 0x...>:295``; a warm start warned "the masks start at log_alpha 10"."""

import json
import warnings

import heurlens
from heurlens.data.run_data import PromptTaskData
from heurlens.pruning import PruneSettings
from heurlens.pruning.run_folder import SparsityTargetMissed


def test_a_prune_warning_is_attributed_to_the_callers_line_and_a_warm_start_is_described_as_one(tiny_decoder_dirs,
                                                                                               tmp_path):
    from heurlens.circuits.attribution_runs import attribute

    model = heurlens.load_model(tiny_decoder_dirs["llama"])
    task = tmp_path / "task.jsonl"
    task.write_text("\n".join(json.dumps({"prompt": clean, "answer": " dog", "distractors": [" cat"],
                                          "corrupted_prompt": corrupted})
                              for clean, corrupted in [("the man sees", "a dog runs"), ("a cat sleeps", "the man sees"),
                                                       ("the dog runs", "a cat sees"), ("a man runs", "the cat sleeps")])
                    + "\n")
    data = PromptTaskData(str(task), 4, 0, batch_size=4)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        heurlens.prune(model, data.train(model), sparsity=0.5, seeds=[0], cache=False, progress=False,
                       config=PruneSettings(total_steps=2))  # too few steps: warned before training
    missed = [w for w in caught if issubclass(w.category, SparsityTargetMissed)]
    assert missed and all(w.filename == __file__ for w in missed), [(w.filename, w.lineno) for w in missed]
    attribute(model, data, tmp_path / "eap", level="node", method="eap")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        heurlens.prune(model, data.train(model), sparsity=0.5, seeds=[0], cache=False, progress=False,
                       config=PruneSettings(total_steps=2, ablation="corrupt", init_from=str(tmp_path / "eap")))
    texts = [str(w.message) for w in caught if issubclass(w.category, SparsityTargetMissed)]
    assert not any("cannot be reached" in text for text in texts)  # warm-started masks start from 0 up
    assert any("these started from" in text and "eap's scores, log_alpha 0 to 10" in text for text in texts)


def test_a_task_files_two_draws_sharing_prompts_are_named(tiny_decoder_dirs, tmp_path):
    """A task file of 8 prompts drawn twice (seed 0 to train and for the means, seed 1 to evaluate), 6 each: they
    share some, counted here from the prompts the two sets hold, and the evaluation draw's warning says how many,
    at the caller's line. Drawn 3 of 64 they share none here, and nothing is said."""
    model = heurlens.load_model(tiny_decoder_dirs["llama"])
    words = ["the", "a", "man", "dog", "cat", "sees", "runs", "sleeps"]
    rows = [{"prompt": f"{first} {second}", "answer": " dog", "distractors": [" cat"]} for first in words
            for second in words]
    small, large = tmp_path / "small.jsonl", tmp_path / "large.jsonl"
    small.write_text("\n".join(json.dumps(row) for row in rows[:8]) + "\n")
    large.write_text("\n".join(json.dumps(row) for row in rows) + "\n")

    def prompts(task):
        return {tuple(ids[mask.bool()].tolist()) for batch in task.batches
                for ids, mask in zip(batch["input_ids"], batch["attention_mask"])}

    for path, examples in ((small, 6), (large, 3)):
        data = PromptTaskData(str(path), examples, 0)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            [evaluated] = data.eval_sets(model)
        shared = len(prompts(data.train(model)) & prompts(evaluated))
        said = [w for w in caught if "are not held out" in str(w.message)]
        if path == small:
            assert shared >= 4 and len(said) == 1 and f"share {shared} of its 8 prompts" in str(said[0].message)
            assert said[0].filename == __file__
        else:
            assert shared == 0 and not said
