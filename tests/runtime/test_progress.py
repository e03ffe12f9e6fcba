"""Progress on the long steps (issue 77, item 6): attribute and faithfulness show a bar on stderr (they ran for
minutes with nothing printed), and ``heurlens --quiet`` turns every bar off; the results on stdout are the same."""

import json

from cli_run import heurlens_in_process
from planted_edges import build_planted_edges_model, planted_edges_task_file


def test_attribute_and_faithfulness_show_progress_and_quiet_turns_it_off(tmp_path, capsys):
    model = str(build_planted_edges_model(tmp_path / "planted"))
    task = str(planted_edges_task_file(tmp_path / "task.jsonl"))
    common = ["--model", model, "--task", task, "--task-examples", "16"]
    status, out, err = heurlens_in_process(capsys, "attribute", *common, "--out", str(tmp_path / "run"), "--json")
    assert status == 0 and "EAP-IG (5 steps) of the edges" in err, err
    status, shown, err = heurlens_in_process(capsys, "faithfulness", str(tmp_path / "run"), "--task", task,
                                             "--task-examples", "16", "--json")
    assert status == 0 and "scoring" in err and "circuits" in err, err
    status, quiet, err = heurlens_in_process(capsys, "--quiet", "faithfulness", str(tmp_path / "run"), "--task", task,
                                             "--task-examples", "16", "--json")
    assert status == 0 and "scoring" not in err and "EAP" not in err, err
    assert json.loads(quiet) == json.loads(shown)
    status, _, err = heurlens_in_process(capsys, "faithfulness", str(tmp_path / "run"), "--task", task,
                                         "--task-examples", "16", "--json")
    assert status == 0 and "scoring" in err  # --quiet lasts for its own command only


def test_means_and_evaluation_show_a_bar_once_they_take_a_while(tiny_decoder_dirs, tmp_path, capsys, monkeypatch):
    """compute_means and evaluate_subnetworks (the default model's set-up, prune's and evaluate's tables) show a
    bar on stderr once they have run ``SHORT_STEP_DELAY_S`` (set to 0 here: the tiny model is done in
    milliseconds, when nothing is shown); ``progress=False`` shows none."""
    import heurlens
    from heurlens.pruning import PruneSettings, evaluate_subnetworks
    from heurlens.runtime import progress

    model = heurlens.load_model(tiny_decoder_dirs["llama"])
    texts = ["the man sees", "a cat sleeps", "the dog runs"]
    capsys.readouterr()
    heurlens.compute_means(model, texts)
    assert "means over" not in capsys.readouterr().err  # done before the delay
    monkeypatch.setattr(progress, "SHORT_STEP_DELAY_S", 0.0)
    means = heurlens.compute_means(model, texts)
    assert "means over texts" in capsys.readouterr().err
    heurlens.compute_means(model, texts, progress=False)
    assert "means over" not in capsys.readouterr().err
    [record] = heurlens.prune(model, texts, sparsity=0.5, seeds=[0], means=means, progress=False, cache=False,
                              config=PruneSettings(total_steps=2))
    capsys.readouterr()
    evaluate_subnetworks(model, [record], [texts], means=means, cache=False, metrics={})
    assert "evaluating 1 subnetworks" in capsys.readouterr().err
    evaluate_subnetworks(model, [record], [texts], means=means, cache=False, metrics={}, progress=False)
    assert "evaluating" not in capsys.readouterr().err
