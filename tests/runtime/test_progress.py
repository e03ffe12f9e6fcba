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
