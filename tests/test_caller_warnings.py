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
    from heurlens.analysis.attribution_runs import attribute

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
