"""One settings object per circuit call (``circuits.settings``): checked when made; the old keywords give the same
result as the settings they stand for, with a warning naming what to write; both at once are refused."""

import json
import warnings

import pytest
import torch

import heurlens
from heurlens.circuits.attribution import attribution_ranking, attribution_scores, edge_attribution_scores
from heurlens.circuits.faithfulness import keep_mask_curve, ranking_curve
from heurlens.circuits.settings import AttributionSettings, FaithfulnessSettings
from heurlens.data.prompt_tasks import logit_difference
from heurlens.data.run_data import PromptTaskData
from heurlens.errors import HeurlensError


@pytest.fixture(scope="module")
def prompts(tiny_decoder_dirs, tmp_path_factory):
    model = heurlens.load_model(tiny_decoder_dirs["llama"])
    path = tmp_path_factory.mktemp("task") / "task.jsonl"
    path.write_text("\n".join(json.dumps({"prompt": clean, "answer": " dog", "distractors": [" cat"],
                                          "corrupted_prompt": corrupted})
                              for clean, corrupted in [("the man sees", "a dog runs"), ("a cat sleeps", "the man sees"),
                                                       ("the dog runs", "a cat sees"), ("a man runs", "the cat sleeps")])
                    + "\n")
    data = PromptTaskData(str(path), 4, 0, batch_size=2)
    return model, data.train(model), data.means(model)


@pytest.mark.parametrize("wrong, message", [
    (dict(level="unit"), "level 'unit'"), (dict(ig_steps=0), "one step or more"), (dict(ig_steps=True), "whole number"),
    (dict(ig_steps=3, ablation="mean"), "use corrupt ablation"), (dict(ablation="resample"), "resample"),
    (dict(ig_steps=5, ig_points_per_pass=0), "from 1"), (dict(ig_steps=5, ig_points_per_pass=2.5), "whole number")])
def test_attribution_settings_are_checked_when_made(wrong, message):
    with pytest.raises(HeurlensError, match=message):
        AttributionSettings(**wrong)


def test_faithfulness_settings_are_checked_when_made():
    assert FaithfulnessSettings(grid=[0.5, 1]).grid == (0.5, 1.0)
    with pytest.raises(HeurlensError, match="strictly ascending"):
        FaithfulnessSettings(grid=(1.0, 0.5))
    with pytest.raises(HeurlensError, match="cache"):
        FaithfulnessSettings(cache="yes")
    with pytest.warns(DeprecationWarning, match="'corrupt'"):
        assert FaithfulnessSettings(ablation="interchange").ablation == "corrupt"


def test_the_old_keywords_give_the_settings_result_with_a_warning(prompts):
    model, train, means = prompts
    settings = AttributionSettings(level="edge", ig_steps=2)
    new = attribution_ranking(model, train, logit_difference, settings, progress=False)
    with pytest.warns(DeprecationWarning, match=r"pass settings=AttributionSettings\(level=..., ig_steps=...\)"):
        old = attribution_ranking(model, train, logit_difference, level="edge", ig_steps=2, progress=False)
    assert torch.equal(new.scores, old.scores) and new.label == old.label == "EAP-IG (2 steps)"
    with pytest.raises(HeurlensError, match="give settings= or the keywords level, not both"):
        attribution_ranking(model, train, logit_difference, settings, level="node")
    table = attribution_scores(model, train, logit_difference, means=means)  # default: EAP with mean ablation
    by_hand = attribution_ranking(model, train, logit_difference, AttributionSettings(ablation="mean"), means=means,
                                  progress=False)
    assert table["score"].tolist() == (-by_hand.scores).tolist() and table["unit"][4] == "L0.MLP"
    with pytest.raises(HeurlensError, match="scores edges and settings.level is 'node'"):
        edge_attribution_scores(model, train, logit_difference, AttributionSettings())
    ranking = new
    grid = FaithfulnessSettings(grid=(0.1, 0.5, 1.0))
    curve = ranking_curve(model, ranking, train, grid, progress=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        old_curve = ranking_curve(model, ranking, train, grid=[0.1, 0.5, 1.0], progress=False)
    assert [str(w.message).split("(")[0] for w in caught if w.category is DeprecationWarning] == ["ranking_curve"]
    assert [w.filename for w in caught if w.category is DeprecationWarning] == [__file__]  # the caller's line
    assert (curve.cpr, curve.cmd) == (old_curve.cpr, old_curve.cmd) and curve.grid == (0.1, 0.5, 1.0)
    masks = {"top": ranking.top(8)}
    zero = keep_mask_curve(model, "edge", masks, train, FaithfulnessSettings(ablation="zero"), progress=False)
    corrupt = keep_mask_curve(model, "edge", masks, train, progress=False)
    assert (zero.ablation, corrupt.ablation) == ("zero", "corrupt")  # None: edges' default, MIB's patching
    assert zero.circuits["metric"][0] != corrupt.circuits["metric"][0]
