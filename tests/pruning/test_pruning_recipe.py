"""The released code's pruning recipe, piece by piece, against values worked out by hand."""

import math

import pytest
import torch

from heurlens.evaluate import predict_logits, tokenize_pairs
from heurlens.interventions.means import compute_means
from heurlens.interventions.units import Unit
from heurlens.models import load_model
from heurlens.pruning import HardConcrete, PruneSettings, discretize, train_unit_mask
from heurlens.pruning.objective import expected_sparsity, mask_optimizer, sampled_sparsity
from heurlens.pruning.subnetwork import per_layer_soft_mask


def learning_rates(config: PruneSettings, total: int) -> list[float]:
    """The log_alpha learning rate each optimizer step uses."""
    mask, lambdas = HardConcrete(3), torch.zeros(2, requires_grad=True)
    optimizer, schedule = mask_optimizer(mask, lambdas, config, total)
    used = []
    for _ in range(total):
        used.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        schedule.step()
    return used


def test_linear_schedule_warms_up_for_200_steps_then_decays_to_zero():
    lrs = learning_rates(PruneSettings.released(), total=1000)
    assert lrs[0] == 0.0  # the released code's first step moves nothing
    assert lrs[100] == pytest.approx(0.1 * 100 / 200)
    assert lrs[200] == pytest.approx(0.1)
    assert lrs[999] == pytest.approx(0.1 * 1 / 800)  # (total - step) / (total - warm-up)
    assert learning_rates(PruneSettings(), total=5) == [0.1] * 5


def test_weight_decay_shrinks_a_lambda_without_gradient_by_one_minus_lr_times_decay():
    mask, lambdas = HardConcrete(3), torch.tensor([2.0, -3.0], requires_grad=True)
    optimizer, _ = mask_optimizer(mask, lambdas, PruneSettings(weight_decay=0.01, lr_lambda=1.0), total_steps=10)
    for step in range(1, 6):
        lambdas.grad = torch.zeros(2)
        optimizer.step()
        assert torch.allclose(lambdas.detach(), torch.tensor([2.0, -3.0]) * (1 - 1.0 * 0.01) ** step, atol=1e-7)


def test_sampled_sparsity_is_one_minus_the_mean_draw_and_averages_to_the_expected_one():
    mask = HardConcrete(6)
    with torch.no_grad():
        mask.log_alpha.copy_(torch.tensor([-3.0, -1.0, 0.0, 0.5, 2.0, 4.0]))
    generator = torch.Generator().manual_seed(0)
    draws = [mask.sample(generator) for _ in range(20000)]
    assert sampled_sparsity(draws[0]).item() == pytest.approx(1 - draws[0].mean().item())
    # P(z > 0) is not E[z], but the fraction of zero entries over many draws is the expected sparsity
    zero_fraction = torch.stack([(d == 0).float().mean() for d in draws]).mean()
    assert zero_fraction.item() == pytest.approx(expected_sparsity(mask).item(), abs=0.01)


def sigmoid(x):
    return 1 / (1 + math.exp(-x))


def test_per_layer_soft_mask_zeroes_the_expected_number_of_smallest_entries():
    heads = torch.tensor([[3.0, 0.0, -1.0, -2.5]])
    mlps = torch.tensor([-2.0])
    shift = (2 / 3) * math.log(11)  # P(z > 0) = sigmoid(log_alpha + beta log(1.1 / 0.1))
    keep = [sigmoid(a + shift) for a in (3.0, 0.0, -1.0, -2.5)]  # 0.990, 0.832, 0.646, 0.289
    assert round(4 - sum(keep)) == 1  # one expected zero among the heads
    assert round(1 - sigmoid(-2.0 + shift)) == 1  # the MLP's keep-probability is 0.40: it is zeroed
    expected = [[sigmoid(3.0 * 1.2), sigmoid(0.0), sigmoid(-1.2), 0.0, 0.0]]  # sigmoid(log_alpha / (2/3) * 0.8)
    soft_heads, soft_mlps = per_layer_soft_mask(heads, mlps)
    assert torch.allclose(torch.cat([soft_heads, soft_mlps[:, None]], dim=1), torch.tensor(expected), atol=1e-6)
    # 3 of 5 pruned needs 0.2315 <= threshold < 0.5; of the grid's 0.25-0.45 the one nearest 0.5 wins
    kept, achieved, threshold = discretize(heads, mlps, 0.6, "per-layer")
    assert kept == [Unit(0, 0), Unit(0, 1)] and achieved == pytest.approx(0.6) and threshold == 0.45


@pytest.fixture(scope="module")
def model_and_pairs(tiny_bert_dir):
    from heurlens.data.snli import load_snli

    model = load_model(tiny_bert_dir)
    return model, load_snli("train", limit=32, seed=0)


def test_accumulating_two_micro_batches_equals_one_batch_of_both(model_and_pairs, monkeypatch):
    """With the same mask draw, KL(batchmean) over 2 x 16 accumulated equals KL over the 32 at once."""
    model, pairs = model_and_pairs
    u = torch.linspace(0.05, 0.95, 2 * 5)  # one fixed draw for every micro-batch

    def fixed_draw(self, generator=None):
        s = torch.sigmoid((torch.log(u) - torch.log(1 - u) + self.log_alpha) / self.beta)
        return (s * (self.right - self.left) + self.left).clamp(0, 1)

    monkeypatch.setattr(HardConcrete, "sample", fixed_draw)
    results = []
    for batch_size, accumulation in ((16, 2), (32, 1)):
        data = tokenize_pairs("pairs", pairs, model.tokenizer, batch_size)
        config = PruneSettings(total_steps=3, grad_accumulation=accumulation, sparsity_estimate="sampled",
                             weight_decay=0.01, max_grad_norm=1.0, log_alpha_init=1.0)
        results.append(train_unit_mask(model, data, predict_logits(model, data), compute_means(model, data), 0.5,
                                       seed=0, config=config, progress=False))
    accumulated, whole = results
    assert torch.allclose(accumulated.log_alpha, whole.log_alpha, atol=1e-5)  # heads and MLPs
    assert not torch.allclose(whole.log_alpha, torch.ones_like(whole.log_alpha), atol=1e-3)  # it moved


def test_dropout_setting_trains_in_train_mode_and_restores_eval(model_and_pairs):
    model, pairs = model_and_pairs
    data = tokenize_pairs("pairs", pairs, model.tokenizer, 16)
    logits, means = predict_logits(model, data), compute_means(model, data)
    # from a half-on start (log_alpha 0): fully-on masks (the default 10) are clamped at 1 and get no KL gradient
    runs = [train_unit_mask(model, data, logits, means, 0.5, seed=0,
                            config=PruneSettings(total_steps=2, dropout=d, log_alpha_init=0.0), progress=False)
            for d in (False, True, False)]
    assert torch.equal(runs[0].log_alpha, runs[2].log_alpha)  # eval mode: same seed, same result
    assert not torch.equal(runs[0].log_alpha, runs[1].log_alpha)  # dropout changed the gradients
    assert not model.training and not any(m.training for m in model.modules())


def test_released_recipe_values():
    config = PruneSettings.released()
    assert (config.log_alpha_init, config.log_alpha_init_std, config.lr_log_alpha, config.lr_lambda) == (10, 0.01, 0.1, 1)
    assert (config.weight_decay, config.lr_schedule, config.lr_warmup_steps, config.max_grad_norm) == (0.01, "linear",
                                                                                                       200, 1.0)
    assert (config.grad_accumulation, config.sparsity_estimate, config.dropout) == (4, "sampled", True)
    assert config.steps_for(0.5, 8000, 32) == (9000, 9300) and config.steps_for(0.7, 10, 32) == (10000, 10420)
    assert config.discretization == "per-layer"
    assert PruneSettings.released(grad_accumulation=1).grad_accumulation == 1
    # with accumulation, the epoch-scaled budget counts optimizer steps of batch x accumulation
    assert PruneSettings(grad_accumulation=4).steps_for(0.5, 8000, 16) == PruneSettings().steps_for(0.5, 8000, 64)
