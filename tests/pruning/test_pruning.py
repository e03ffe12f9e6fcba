"""Hard-concrete pruning: the mask math, the training loop's contract, discretisation and runs."""

import math

import pytest
import torch

from heurlens.errors import HeurlensError
from heurlens.evaluate import tokenize_pairs
from heurlens.interventions.units import Unit
from heurlens.models import load_model
from heurlens.pruning import HardConcrete, PruneSettings, Subnetwork, discretize, prune, train_unit_mask
from heurlens.pruning import runs as runs_module
from heurlens.pruning.schedule import MIN_SCALED_STEPS, paper_steps, scaled_steps, target_at


def test_expected_l0_closed_form_matches_monte_carlo():
    mask = HardConcrete(5)
    with torch.no_grad():
        mask.log_alpha.copy_(torch.tensor([-3.0, -1.0, 0.0, 1.5, 4.0]))
    generator = torch.Generator().manual_seed(0)
    draws = torch.stack([mask.sample(generator) for _ in range(40000)])
    assert torch.allclose((draws > 0).float().mean(0), mask.prob_nonzero(), atol=0.01)
    assert mask.expected_l0().item() == pytest.approx(mask.prob_nonzero().sum().item())
    assert (draws == 0).any() and (draws == 1).any()  # the stretch puts mass exactly on 0 and 1
    assert draws.min() >= 0 and draws.max() <= 1


def test_sample_mask_formula():
    """Against a scalar computation written out by hand from Louizos et al."""
    mask = HardConcrete(3)
    with torch.no_grad():
        mask.log_alpha.copy_(torch.tensor([0.0, 2.0, -2.0]))
    generator = torch.Generator().manual_seed(7)
    u = torch.rand(3, generator=torch.Generator().manual_seed(7))
    z = mask.sample(generator)
    for i, log_alpha in enumerate([0.0, 2.0, -2.0]):
        s = 1 / (1 + math.exp(-(math.log(u[i]) - math.log(1 - u[i]) + log_alpha) / (2 / 3)))
        assert z[i].item() == pytest.approx(min(1, max(0, s * 1.2 - 0.1)), abs=1e-6)


def test_paper_schedule_and_scaling():
    assert paper_steps(0.5) == (9000, 9300)  # Appendix B: 9300 steps, the first 9000 warm up
    assert paper_steps(0.7)[0] == 10000
    warmup, total = scaled_steps(0.5, 392_702, 128)
    assert (warmup, total) == (9000, 9300)  # the paper's own data size gives the paper's steps
    warmup, total = scaled_steps(0.5, 8000, 16)
    assert total == math.ceil(9300 * 128 / 392_702 * 8000 / 16) == 1516  # the default model's budget
    assert warmup / total == pytest.approx(9000 / 9300, abs=0.01)
    # small data (200 prompts: 3 epochs would be 38 steps) gets the floor, with the same warm-up fraction
    assert scaled_steps(0.5, 200, 16) == (round(MIN_SCALED_STEPS * 9000 / 9300), MIN_SCALED_STEPS)
    # a total given alone keeps the paper's warm-up fraction; a given warm-up is used as it is
    assert PruneSettings(total_steps=3000).steps_for(0.5, 2000, 16) == (round(3000 * 9000 / 9300), 3000)
    assert PruneSettings(total_steps=3000, warmup_steps=2250).steps_for(0.5, 2000, 16) == (2250, 3000)
    assert PruneSettings(warmup_steps=10_000).steps_for(0.5, 4000, 16) == (758, 758)
    # settle_steps: the budget grows so that at least that many steps follow the warm-up (300 pairs: 290 + 200; the
    # default model's 8,000: 1,467 + 200), and is left alone where it already leaves them (the paper's own 300)
    settle = PruneSettings(settle_steps=200)
    assert settle.steps_for(0.5, 300, 16) == (290, 490) and settle.steps_for(0.5, 8000, 16) == (1467, 1667)
    assert settle.steps_for(0.5, 392_702, 128) == (9000, 9300)
    assert PruneSettings(settle_steps=200, total_steps=3000).steps_for(0.5, 2000, 16) == (2903, 3000)  # as given
    assert target_at(0, 10, 0.5) == pytest.approx(0.05) and target_at(9, 10, 0.5) == 0.5 and target_at(50, 10, 0.5) == 0.5


def log_alpha_with_keep_probability(keep: list[float]) -> torch.Tensor:
    """log_alpha whose keep-probabilities P(z > 0) = sigmoid(log_alpha - (2/3) log(0.1 / 1.1)) are ``keep``."""
    return torch.logit(torch.tensor([keep]).clamp(1e-6, 1 - 1e-6)) + (2 / 3) * math.log(0.1 / 1.1)


def test_the_paper_discretisation_picks_the_grid_threshold_closest_to_target():
    la = log_alpha_with_keep_probability([0.0, 0.1, 0.3, 0.5, 0.7, 0.9])  # the MLP's (log_alpha 10) is ~1
    kept, achieved, threshold = discretize(la, torch.tensor([10.0]), target=2 / 7, method="global-threshold")
    # pruning exactly 2 of 7 needs 0.1 <= threshold < 0.3; of 0.1-0.25 the one nearest 0.5 wins
    assert threshold == 0.25 and achieved == pytest.approx(2 / 7)
    assert kept == [Unit(0, 2), Unit(0, 3), Unit(0, 4), Unit(0, 5), Unit(0)]
    kept, achieved, threshold = discretize(la, torch.tensor([10.0]), target=0.0, method="global-threshold")
    assert (achieved, threshold) == (0.0, 0.0) and len(kept) == 7


def test_top_k_keeps_the_highest_log_alphas_and_reaches_the_target_where_the_grid_cannot():
    la = log_alpha_with_keep_probability([0.0, 0.1, 0.3, 0.6, 0.7, 0.9])
    kept, achieved, threshold = discretize(la, torch.tensor([10.0]), target=3 / 7)  # keep 4 of 7
    assert kept == [Unit(0, 3), Unit(0, 4), Unit(0, 5), Unit(0)] and achieved == pytest.approx(3 / 7)
    assert threshold == pytest.approx((0.6 + 0.3) / 2, abs=1e-5)  # halfway between the last kept and first dropped
    # four heads whose keep-probabilities are all 1.0 in float32: no threshold on P(z > 0) tells them apart
    saturated = torch.tensor([[30.0, 12.0, 20.0, 15.0]])
    # a threshold keeps all five or none; none (threshold 1.0) is nearer 0.6
    assert discretize(saturated, torch.tensor([25.0]), target=0.6, method="global-threshold")[1] == 1.0
    kept, achieved, _ = discretize(saturated, torch.tensor([25.0]), target=0.6)  # keep 2 of 5: log_alpha 30 and 25
    assert kept == [Unit(0, 0), Unit(0)] and achieved == pytest.approx(0.6)
    # only the heads may go: the MLP is kept and the sparsity counts the 4 heads; equal log_alphas: lower index first
    tied = torch.tensor([[1.0, 1.0, 1.0, 5.0]])
    heads_only = torch.tensor([True, True, True, True, False])
    kept, achieved, _ = discretize(tied, torch.tensor([-9.0]), target=0.5, prunable=heads_only)
    assert kept == [Unit(0, 0), Unit(0, 3), Unit(0)] and achieved == 0.5


def test_a_flagged_subnetwork_after_its_extension_says_whether_its_masks_were_still_moving():
    """After extend_steps, masks whose expected sparsity is still off target were on their way (SmolLM2 on IOI at
    90%: 0.83 after 400 more steps); masks whose expected sparsity is on target but that no grid threshold cuts there
    have units they do not tell apart (the planted model at half)."""
    def flagged(expected: float) -> str:
        return Subnetwork(kept=[Unit(0)], n_layers=1, n_heads=4, target_sparsity=0.9, achieved_sparsity=0.9,
                          threshold=0.5, seed=0, model_id="m", model_fingerprint="f", data_id="d",
                          metrics={"grid_sparsity": 1.0, "extension_steps": 400, "final_expected_sparsity": expected,
                                   "missed_target": True}).missed_target_message()

    assert "expected sparsity still at 0.83: they had not finished moving" in flagged(0.83)
    assert "do not tell apart the units the cut chose among" in flagged(0.89)
    assert "do not tell apart" not in flagged(0.83) and "still at" not in flagged(0.89)


@pytest.fixture(scope="module")
def pruning_model_dir(random_bert_dir):
    """A random 4-layer, 8-head BERT NLI classifier (36 units)."""
    return random_bert_dir(4, 8)


@pytest.fixture(scope="module")
def pruning_data(pruning_model_dir):
    from heurlens.data.snli import load_snli

    model = load_model(pruning_model_dir)
    return model, tokenize_pairs("snli-train", load_snli("train", limit=256, seed=0), model.tokenizer, 32)


def test_length_sorted_batches_hold_the_same_pairs_with_less_padding(pruning_data):
    from heurlens.data.snli import load_snli

    model, plain = pruning_data
    ordered = tokenize_pairs("snli-train", load_snli("train", limit=256, seed=0), model.tokenizer, 32,
                             sort_by_length=True)

    def pairs(eval_set):  # (unpadded token ids, label) of every example
        rows = [ids[mask.bool()].tolist() for batch in eval_set.batches
                for ids, mask in zip(batch["input_ids"], batch["attention_mask"])]
        return sorted(zip(map(tuple, rows), eval_set.labels.tolist()))

    assert pairs(ordered) == pairs(plain)
    lengths = [int(n) for batch in ordered.batches for n in batch["attention_mask"].sum(1)]
    assert lengths == sorted(lengths)
    padded = sum(batch["input_ids"].numel() for batch in ordered.batches)
    assert padded < 0.8 * sum(batch["input_ids"].numel() for batch in plain.batches)


def test_gradients_reach_log_alpha_and_never_the_weights(pruning_data):
    model, data = pruning_data
    before = {k: v.clone() for k, v in model.state_dict().items()}
    from heurlens.evaluate import predict_logits
    from heurlens.interventions.means import compute_means

    result = train_unit_mask(model, data, predict_logits(model, data), compute_means(model, data), 0.5, seed=0,
                             config=PruneSettings(total_steps=3), progress=False)
    after = model.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)  # weights bit for bit
    assert all(p.grad is None for p in model.parameters())
    assert all(p.requires_grad for p in model.parameters())  # restored for the caller
    torch.manual_seed(0)  # the initial draw, as train_unit_mask makes it for seed 0
    start = HardConcrete(4 * 9, PruneSettings().log_alpha_init, PruneSettings().log_alpha_init_std).log_alpha.detach()
    assert not torch.allclose(result.log_alpha, start, atol=0.05)  # log_alpha trained


def test_achieved_sparsity_near_target_and_same_seed_same_subnetwork(pruning_data):
    """The default schedule on a random model (no unit matters, the hardest case for a loss-driven mask; 300 steps,
    290 of them warm-up, on these 256 pairs): the cut has the target's size and the masks' expected sparsity ends
    within 0.02 of it; the same seed gives the same subnetwork."""
    model, data = pruning_data
    first = prune(model, data, sparsity=0.5, seeds=[3], progress=False)[0]
    assert first.achieved_sparsity == 0.5 and first.hyperparameters["total_steps"] == 300
    assert abs(first.metrics["final_expected_sparsity"] - 0.5) <= 0.02
    again = prune(model, data, sparsity=0.5, seeds=[3], progress=False)[0]
    assert again.kept == first.kept and torch.equal(again.log_alpha_heads, first.log_alpha_heads)


def test_run_resumes_after_an_interruption(pruning_data, tmp_path, monkeypatch):
    model, data = pruning_data
    config = PruneSettings(total_steps=4)
    real_train = runs_module.train_unit_masks
    calls = []

    def train_then_die(*args, **kwargs):
        calls.extend(args[5])  # the seeds (one at a time when not stacked)
        if len(calls) == 2:
            raise KeyboardInterrupt  # killed while training the second seed
        return real_train(*args, **kwargs)

    monkeypatch.setattr(runs_module, "train_unit_masks", train_then_die)
    with pytest.raises(KeyboardInterrupt):
        prune(model, data, sparsity=0.5, seeds=[0, 1], out=tmp_path, config=config, progress=False)
    files = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file())
    assert files == [".heurlens.lock",  # the (released) lock that keeps a second process out
                     "sparsity-0.50/seed-00.json", "sparsity-0.50/seed-00.safetensors", "unit-means.safetensors"]

    calls.clear()
    monkeypatch.setattr(runs_module, "train_unit_masks", lambda *a, **k: calls.extend(a[5]) or real_train(*a, **k))
    found = prune(model, data, sparsity=0.5, seeds=[0, 1], out=tmp_path, config=config, progress=False)
    assert calls == [1]  # seed 0 was loaded, not retrained
    assert [s.seed for s in found] == [0, 1]
    fresh = prune(model, data, sparsity=0.5, seeds=[1], config=config, progress=False)[0]
    assert fresh.kept == found[1].kept  # the resumed seed is the one an uninterrupted run gives

    with pytest.raises(HeurlensError, match="another model, data set or settings.*nothing was overwritten"):
        prune(model, data, sparsity=0.5, seeds=[0], out=tmp_path, config=PruneSettings(total_steps=5), progress=False)


def test_subnetwork_save_load_and_wrong_model(pruning_data, tiny_bert_dir, tmp_path):
    model, data = pruning_data
    sub = prune(model, data, sparsity=0.3, seeds=[0], config=PruneSettings(total_steps=3), progress=False)[0]
    sub.save(tmp_path / "s")
    loaded = Subnetwork.load(tmp_path / "s.json")
    assert loaded.kept == sub.kept and loaded.pruned == sub.pruned and loaded.seed == 0
    assert torch.equal(loaded.log_alpha_mlps, sub.log_alpha_mlps)
    assert len(loaded.kept) + len(loaded.pruned) == 4 * 9
    loaded.check_model(model)
    with pytest.raises(HeurlensError, match="was pruned from model .* load that model instead"):
        loaded.check_model(load_model(tiny_bert_dir))
    with pytest.raises(HeurlensError, match="outside"):
        prune(model, data, sparsity=1.2, seeds=[0], progress=False)
