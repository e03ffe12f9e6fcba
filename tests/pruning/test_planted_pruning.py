"""What pruning keeps, on a model where the right answer is known: only one head and one MLP carry anything
(tests/planted.py), so a subnetwork of a third of the units that stays faithful must be exactly those two. With
a constant loss in place of the KL the same run keeps other units (checked by hand: L0.H0 alone, then nothing)."""

import warnings

import pytest
import torch
from planted import PLANTED, build_planted_model

import heurlens
from heurlens.errors import HeurlensError, for_command_line
from heurlens.pruning.run_folder import SparsityTargetMissed
from heurlens.tasks import token_batches

SETTINGS = heurlens.PruneSettings()  # the default schedule: 300 steps on these 128 sequences, 288 of them warm-up


@pytest.fixture(scope="module")
def planted():
    model = build_planted_model()
    data = token_batches(torch.randint(0, 4, (128, 6), generator=torch.Generator().manual_seed(0)), batch_size=16)
    return model, data


def kept(subnetwork) -> set[str]:
    return {str(unit) for unit in subnetwork.kept}


def test_only_the_planted_units_matter(planted):
    model, data = planted
    means = heurlens.compute_means(model, data)
    for unit in ("L0.H1", "L1.H0", "L1.H1", "L0.MLP"):
        assert heurlens.ablate(model, unit, [data], means=means, metrics={})["kl"].item() == 0
    for unit in PLANTED:
        assert heurlens.ablate(model, unit, [data], means=means, metrics={})["kl"].item() > 0.5


@pytest.mark.parametrize("loss", [None, lambda scores, full, example_ids: (scores - full).pow(2).mean()],
                         ids=["kl", "squared-error"])
def test_pruning_to_a_third_keeps_exactly_the_planted_head_and_mlp(planted, loss):
    model, data = planted
    for subnetwork in heurlens.prune(model, data, sparsity=2 / 3, seeds=[0, 1], config=SETTINGS, progress=False, loss=loss):
        assert kept(subnetwork) == set(PLANTED)
        assert subnetwork.achieved_sparsity == pytest.approx(2 / 3) and not subnetwork.missed_target


def test_the_quadratic_penalty_holds_lambda1_at_zero_and_keeps_the_planted_units(planted):
    """penalty="quadratic" trains lambda2 alone: lambda1 ends at exactly 0 (the paper's Lagrangian moves it), and the
    cut is still the planted pair."""
    model, data = planted
    runs = {penalty: heurlens.prune(model, data, sparsity=2 / 3, seeds=[0], progress=False,
                                    config=heurlens.PruneSettings(penalty=penalty))[0]
            for penalty in ("quadratic", "lagrangian")}
    assert runs["quadratic"].metrics["final_lambda1"] == 0 and runs["quadratic"].metrics["final_lambda2"] > 10
    assert abs(runs["lagrangian"].metrics["final_lambda1"]) > 10
    assert kept(runs["quadratic"]) == set(PLANTED) and not runs["quadratic"].missed_target
    assert runs["quadratic"].hyperparameters["penalty"] == "quadratic"
    assert "penalty" not in runs["lagrangian"].hyperparameters  # as recorded before the setting existed


def test_seeds_whose_masks_are_off_target_train_on_until_they_are_not(planted):
    """extend_steps: at a third (2 of 6 units) the default budget (300 steps, 288 of them warm-up) leaves the quadratic
    penalty's seed 1 with masks no threshold of the grid cuts to the target (flagged); it trains on, 25 steps
    at a time, until it is not. Seed 0, on target at the end of the budget, takes no step more: its masks are the
    budget's own. Each seed stacked with the others extends as it does alone."""
    model, data = planted
    quadratic = heurlens.PruneSettings(penalty="quadratic")
    extended = heurlens.PruneSettings(penalty="quadratic", extend_steps=1000)
    with pytest.warns(SparsityTargetMissed):
        budget = heurlens.prune(model, data, sparsity=1 / 3, seeds=[0, 1], config=quadratic, progress=False)
    longer = heurlens.prune(model, data, sparsity=1 / 3, seeds=[0, 1], config=extended, progress=False)
    assert [sub.missed_target for sub in budget] == [False, True]
    steps = [sub.metrics["extension_steps"] for sub in longer]
    assert steps[0] == 0 and torch.equal(longer[0].log_alpha_heads, budget[0].log_alpha_heads)
    assert 0 < steps[1] < 1000 and steps[1] % 25 == 0
    assert not any(sub.missed_target for sub in longer)
    assert all(set(PLANTED) <= kept(sub) and sub.metrics["grid_sparsity"] == pytest.approx(1 / 3) for sub in longer)
    assert longer[0].hyperparameters["extend_steps"] == 1000 and "extend_steps" not in budget[0].hyperparameters
    stacked = heurlens.prune(model, data, sparsity=1 / 3, seeds=[0, 1], config=extended, progress=False,
                             stack_seeds=True)
    assert [sub.metrics["extension_steps"] for sub in stacked] == steps
    assert all(torch.allclose(a.log_alpha_heads, b.log_alpha_heads, atol=1e-5) for a, b in zip(stacked, longer))


def test_an_extension_stops_at_its_limit(planted):
    """At half (3 of 6) the masks must choose which of the four units that carry nothing to keep, and nothing in the
    loss tells them apart: they stay off target, and each seed stops after exactly extend_steps more steps."""
    model, data = planted
    with pytest.warns(SparsityTargetMissed, match="trained on for 60 steps more, the limit, and stayed off target"):
        subnetworks = heurlens.prune(model, data, sparsity=0.5, seeds=[0, 1], progress=False,
                                     config=heurlens.PruneSettings(penalty="quadratic", extend_steps=60))
    assert [sub.metrics["extension_steps"] for sub in subnetworks] == [60, 60]  # 25 + 25 + 10
    assert all(sub.missed_target and set(PLANTED) <= kept(sub) for sub in subnetworks)
    with pytest.raises(HeurlensError, match="linear learning-rate schedule has reached 0"):
        heurlens.PruneSettings(extend_steps=100, lr_schedule="linear")


def test_heads_only_pruning_keeps_every_mlp_and_counts_heads_alone(planted):
    model, data = planted
    [subnetwork] = heurlens.prune(model, data, sparsity=0.75, seeds=[0], progress=False,
                                  config=heurlens.PruneSettings(units="heads"))
    assert kept(subnetwork) == {"L0.H0", "L0.MLP", "L1.MLP"} and subnetwork.achieved_sparsity == 0.75
    # the same masks cut again: the heads-only run's MLPs stay kept whatever the cut, and top-k gives it back
    by_grid = subnetwork.discretized("global-threshold")
    assert {"L0.MLP", "L1.MLP"} <= kept(by_grid) and by_grid.hyperparameters["discretization"] == "global-threshold"
    assert by_grid.discretized("top-k").kept == subnetwork.kept


def test_a_missed_sparsity_target_is_warned_and_recorded(planted):
    model, data = planted
    with pytest.warns(SparsityTargetMissed, match="keeps its target size, but no threshold on its masks' keep-"
                      "probabilities comes nearer the target 0.50 than 0.00.*did not move far enough. Train longer.*"
                      r"\(PruneSettings\(log_alpha_init=7\); these started at 10\)") as shown:
        [subnetwork] = heurlens.prune(model, data, sparsity=0.5, seeds=[0], progress=False,
                                      config=heurlens.PruneSettings(total_steps=3))
    before, after = (str(warning.message) for warning in shown)  # one before training, one of the result
    assert for_command_line(before) == (  # as the CLI shows it
        "sparsity 0.50 cannot be reached in 3 steps: the masks start at log_alpha 10 and Adam moves them by about "
        "--lr-log-alpha 0.1 a step, so no unit can be pruned before ~100 steps. Give --steps 300 or more, or start "
        "the masks lower (--log-alpha-init 0)")
    assert for_command_line(after).endswith(
        "Train longer (--steps ...) or start the masks lower (--log-alpha-init 7; these started at 10). Or let the "
        "seeds whose masks end off target train on, --extend-steps 1000, surest with --penalty quadratic "
        "(docs/pruning.md)")
    assert subnetwork.missed_target and subnetwork.metrics["missed_target"] is True
    assert subnetwork.achieved_sparsity == 0.5 and subnetwork.metrics["grid_sparsity"] == 0.0  # the size, not the masks
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a target met raises no warning
        heurlens.prune(model, data, sparsity=2 / 3, seeds=[0], config=SETTINGS, progress=False)


def test_a_subnetwork_that_missed_is_marked_in_tables_and_left_out_of_pooled_analyses(planted, tmp_path):
    from heurlens.pruning.run_folder import subnetworks_by_sparsity

    model, data = planted
    means = heurlens.compute_means(model, data)
    with pytest.warns(SparsityTargetMissed):
        missed = heurlens.prune(model, data, sparsity=0.5, seeds=[0], out=tmp_path / "short", means=means, progress=False,
                                config=heurlens.PruneSettings(total_steps=3))
    met = heurlens.prune(model, data, sparsity=2 / 3, seeds=[0], out=tmp_path / "long", means=means, progress=False,
                         config=SETTINGS)
    evaluation = heurlens.evaluate_subnetworks(model, missed + met, [data], means=means, metrics={})
    assert list(evaluation["subnetwork"]) == ["full model", "50% seed 0 (missed its target)", "66.6667% seed 0"]
    with pytest.warns(SparsityTargetMissed, match="sparsity-0.50/seed-00.json is left out"):
        pooled = subnetworks_by_sparsity([tmp_path / "short", tmp_path / "long"], pooled=True)
    assert list(pooled) == [pytest.approx(2 / 3)]


def test_the_subnetworks_own_kl_on_the_pruning_data_is_recorded(planted):
    """``subnetwork_train_kl``: the binary subnetwork's KL to the full model over the pruning data, as
    ``heurlens.ablate`` computes it: 0 for the planted pair, more than 0.5 for one unit alone (either planted unit
    ablated costs that much: test_only_the_planted_units_matter)."""
    model, data = planted
    means = heurlens.compute_means(model, data)
    with pytest.warns(SparsityTargetMissed):  # 5/6 asks to drop a unit the masks keep
        pair, alone = heurlens.prune(model, data, sparsity=[2 / 3, 5 / 6], seeds=[0], means=means, config=SETTINGS,
                                     progress=False)
    assert pair.metrics["subnetwork_train_kl"] == pytest.approx(0, abs=1e-6)
    ablated = heurlens.ablate(model, alone.pruned, [data], means=means, metrics={})["kl"].item()
    assert alone.metrics["subnetwork_train_kl"] == pytest.approx(ablated, rel=1e-4) and ablated > 0.5


def test_targets_that_differ_in_the_third_decimal_keep_their_own_records(planted, tmp_path):
    """0.665 and 0.668 in one run folder: each target is trained and saved on its own (two decimals alone would
    file both under sparsity-0.67 and hand the first one's record back for the second); 0.50 keeps its old name."""
    model, data = planted
    found = heurlens.prune(model, data, sparsity=[0.5, 0.665, 0.668], seeds=[0], out=tmp_path, progress=False,
                           config=heurlens.PruneSettings(total_steps=20, warmup_steps=10))
    assert [sub.target_sparsity for sub in found] == [0.5, 0.665, 0.668]
    assert [sub.label for sub in found] == ["50% seed 0", "66.5% seed 0", "66.8% seed 0"]  # tables' keys too
    assert sorted(p.parent.name for p in tmp_path.glob("sparsity-*/seed-00.json")) == [
        "sparsity-0.50", "sparsity-0.665", "sparsity-0.668"]
    again = heurlens.prune(model, data, sparsity=[0.668], seeds=[0], out=tmp_path, progress=False,
                           config=heurlens.PruneSettings(total_steps=20, warmup_steps=10))
    assert again[0].target_sparsity == 0.668 and again[0].log_alpha_heads.equal(found[2].log_alpha_heads)
    threads = torch.get_num_threads()  # where its time was spent, read back from its record
    assert again[0].metrics["trained_on"] == f"cpu, {threads} thread{'s' * (threads > 1)}"
