"""Subtask Induction: the mask math, frozen transfer, random controls, data generators, and a
tiny resumable sweep."""

import subprocess
import sys

import pytest
import torch
from torch import nn

from heurlens.errors import HeurlensError
from heurlens.subtask import (ArithmeticTask, DiscoveryConfig, WeightSubnetwork, ambiguous_set,
                              beta_at, copy_subnetwork, discover_subnetwork, evaluation_set, masked_forward,
                              select_weights, training_set, transfer_condition)
from heurlens.subtask.arithmetic import COMPUTATIONS
from heurlens.subtask.sweep import SweepSettings, run_sweep, summary_table
from heurlens.subtask.training import arithmetic_model, next_token_loss


def test_beta_schedule():
    assert beta_at(0, 10, 100.0) == 1.0
    assert beta_at(10, 10, 100.0) == pytest.approx(100.0)  # reached after the last epoch
    for epoch in range(9):
        assert beta_at(epoch + 1, 10, 100.0) / beta_at(epoch, 10, 100.0) == pytest.approx(100 ** 0.1)


class TwoWeights(nn.Module):
    """y = w0 x0 + w1 x1 with w = (1, 1); the task y = x0 needs w0 and is hurt by w1."""

    def __init__(self):
        super().__init__()
        self.mlp = nn.Linear(2, 1, bias=False)
        with torch.no_grad():
            self.mlp.weight.fill_(1.0)

    def forward(self, x):
        return self.mlp(x)


def test_discovery_keeps_the_needed_weight_and_never_moves_weights():
    model = TwoWeights()
    before = model.mlp.weight.detach().clone()
    x = torch.randn(256, 2, generator=torch.Generator().manual_seed(0))
    batches = [x[i:i + 32] for i in range(0, 256, 32)]

    def loss_fn(forward, batch):
        return ((forward(batch).squeeze(-1) - batch[:, 0]) ** 2).mean()

    sub = discover_subnetwork(model, loss_fn, batches, DiscoveryConfig(epochs=10, lr=0.05, l0_lambda=1e-3),
                              progress=False)
    assert select_weights(model) == ["mlp.weight"]
    assert sub.masks["mlp.weight"].tolist() == [[True, False]]
    assert sub.fraction_kept == 0.5
    assert torch.equal(model.mlp.weight, before) and model.mlp.weight.requires_grad and model.mlp.weight.grad is None


def test_binary_mask_is_s_positive():
    """With lr 0 every mask weight stays at its initial value: s = -0.1 keeps nothing, s = 0.1 everything."""
    x = [torch.randn(4, 2)]
    loss = lambda forward, batch: forward(batch).sum()  # noqa: E731
    none = discover_subnetwork(TwoWeights(), loss, x, DiscoveryConfig(epochs=1, lr=0.0), progress=False)
    every = discover_subnetwork(TwoWeights(), loss, x, DiscoveryConfig(epochs=1, lr=0.0, mask_init=0.1), progress=False)
    assert none.kept == 0 and every.kept == 2


def test_masked_forward_on_a_transformerlens_model_and_parameters_restored():
    task = ArithmeticTask("a+ab", 20)
    model = arithmetic_model(task, 1, seed=0)
    tokens = training_set(task, 0.5)[:8, :3]
    names = select_weights(model)
    assert names and all(("attn" in n or "mlp" in n) and "embed" not in n for n in names)
    parameters = dict(model.named_parameters())
    zeros = masked_forward(model, {n: torch.zeros_like(parameters[n]) for n in names})(tokens)
    assert all(p is parameters[n] for n, p in model.named_parameters())  # the real parameters are back
    reference = arithmetic_model(task, 1, seed=0)
    with torch.no_grad():
        for name, p in reference.named_parameters():
            if name in names:
                p.zero_()
    assert torch.allclose(zeros, reference(tokens), atol=1e-6)
    assert torch.equal(masked_forward(model, {n: torch.ones_like(parameters[n]) for n in names})(tokens), model(tokens))


def random_subnetwork(model, seed=0, density=0.1):
    generator = torch.Generator().manual_seed(seed)
    return WeightSubnetwork({n: torch.rand(p.shape, generator=generator) < density
                             for n, p in model.named_parameters() if n in select_weights(model)}, "test")


def test_random_controls_match_per_tensor_counts():
    task = ArithmeticTask("a+ab", 20)
    sub = random_subnetwork(arithmetic_model(task, 2))
    for complement in (False, True):
        control = sub.random_like(seed=1, complement=complement)
        for name, mask in sub.masks.items():
            assert control.masks[name].sum() == mask.sum()
            if complement:
                assert not (control.masks[name] & mask).any()
        assert not all(torch.equal(control.masks[n], m) for n, m in sub.masks.items())


def test_frozen_subnetwork_stays_bit_for_bit_and_the_rest_trains():
    task = ArithmeticTask("a+ab", 20)
    trained, fresh_seed = arithmetic_model(task, 1, seed=0), 5
    sub = random_subnetwork(trained)
    model, frozen = transfer_condition("subtask induction", sub, trained, lambda s: arithmetic_model(task, 1, s),
                                       fresh_seed)
    source = dict(trained.named_parameters())
    data = training_set(task, 0.5)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.1)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    for _ in range(5):
        loss = next_token_loss(model, data)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        frozen.restore()
    for name, p in model.named_parameters():
        if name in sub.masks:
            mask = sub.masks[name]
            assert torch.equal(p[mask], source[name][mask])  # the copied subnetwork, unchanged
            assert not torch.equal(p[~mask], before[name][~mask])  # everything else moved
    unfrozen, none = transfer_condition("subtask induction (unfrozen)", sub, trained,
                                        lambda s: arithmetic_model(task, 1, s), fresh_seed)
    assert none is None
    with pytest.raises(HeurlensError, match="unknown condition"):
        transfer_condition("magic", sub, trained, lambda s: arithmetic_model(task, 1, s), 0)


def test_subnetwork_files_and_wrong_model(tmp_path):
    task = ArithmeticTask("a+ab", 20)
    sub = random_subnetwork(arithmetic_model(task, 2))
    sub.save(tmp_path / "sub")
    loaded = WeightSubnetwork.load(tmp_path / "sub")
    assert all(torch.equal(loaded.masks[n], m) for n, m in sub.masks.items())
    assert loaded.fraction_kept == pytest.approx(sub.fraction_kept)
    with pytest.raises(HeurlensError, match="does not have"):
        copy_subnetwork(sub, arithmetic_model(task, 2), arithmetic_model(task, 1))  # no layer 1 there


def test_arithmetic_labels_for_every_computation():
    for name, f in COMPUTATIONS.items():
        task = ArithmeticTask(name, 50, 7)
        rows = evaluation_set(task, 200, seed=3)
        for a, b, sep, c in rows.tolist():
            assert sep == 50 and c == f(a, b) % 7, name


def test_training_and_ambiguous_sets():
    task = ArithmeticTask("a^2+ab", 100, 7)
    train = training_set(task, 0.05, seed=0)
    assert set(train[:, :2].flatten().tolist()) == set(range(100))  # every token present
    ambiguous = ambiguous_set(task, 30, seed=0)
    assert len(ambiguous) == 130
    assert torch.equal(ambiguous[:100, 0], ambiguous[:100, 1]) and ambiguous[:100, 0].tolist() == list(range(100))
    assert len({tuple(r) for r in ambiguous[100:, :2].tolist()}) == 30
    with pytest.raises(HeurlensError, match="unknown computation"):
        ArithmeticTask("a*b*c")


def test_tiny_sweep_resumes(tmp_path):
    settings = SweepSettings(max_value=12, t1_epochs=2, discovery_epochs=2, disambiguation=(0, 5),
                             conditions=("subtask induction", "random init"), transfer_epochs=2)
    results = run_sweep(tmp_path, settings, progress=False)
    assert len(results) == 4 and results["test_accuracy"].between(0, 1).all()
    stamps = {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*.json")}
    again = run_sweep(tmp_path, settings, progress=False)
    assert again.equals(results) and {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*.json")} == stamps
    assert list(summary_table(results).columns) == ["subtask induction", "random init"]
    with pytest.raises(HeurlensError, match="other settings"):
        run_sweep(tmp_path, SweepSettings(max_value=13), progress=False)
    more = run_sweep(tmp_path, SweepSettings(**{**settings.__dict__, "seeds": 2}), progress=False)  # adds seed 1
    assert len(more) == 8 and more[more["seed"] == 0].reset_index(drop=True).equals(results)


def test_transfer_command_rejects_unknown_condition():
    result = subprocess.run([sys.executable, "-m", "heurlens", "transfer", "--conditions", "magic"],
                            capture_output=True, text=True)
    assert result.returncode == 2 and "unknown condition(s) magic" in result.stderr
