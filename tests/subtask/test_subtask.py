"""Subtask Induction: the mask math, frozen transfer, random controls, data generators, and a
tiny resumable sweep."""

import fcntl
import json
import subprocess
import sys

import pytest
import torch
from torch import nn

from heurlens.errors import HeurlensError
from heurlens.subtask import (
    ArithmeticTask,
    DiscoverySettings,
    WeightSubnetwork,
    ambiguous_set,
    batched_training,
    beta_at,
    copy_subnetwork,
    discover_subnetwork,
    evaluation_set,
    masked_forward,
    select_weights,
    training,
    training_set,
    transfer_condition,
)
from heurlens.subtask.arithmetic import COMPUTATIONS
from heurlens.subtask.batched_training import train_next_token_together, train_together_with_lr_search
from heurlens.subtask.sweep import PER_RUN, SweepSettings, finished_results, run_sweep, summary_table
from heurlens.subtask.sweep_discovery import most_accurate
from heurlens.subtask.sweep_transfer import result_path
from heurlens.subtask.training import (
    TrainingResult,
    arithmetic_model,
    batches_of,
    best_by_evaluation,
    last_token_loss,
    next_token_loss,
)
from heurlens.training_helpers import FrozenWeights


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

    sub = discover_subnetwork(model, loss_fn, batches, DiscoverySettings(epochs=10, lr=0.05, l0_lambda=1e-3),
                              progress=False)
    assert select_weights(model) == ["mlp.weight"]
    assert sub.masks["mlp.weight"].tolist() == [[True, False]]
    assert sub.fraction_kept == 0.5
    assert torch.equal(model.mlp.weight, before) and model.mlp.weight.requires_grad and model.mlp.weight.grad is None


def test_binary_mask_is_s_positive():
    """With lr 0 every mask weight stays at its initial value: s = -0.1 keeps nothing, s = 0.1 everything."""
    x = [torch.randn(4, 2)]
    loss = lambda forward, batch: forward(batch).sum()  # noqa: E731
    none = discover_subnetwork(TwoWeights(), loss, x, DiscoverySettings(epochs=1, lr=0.0), progress=False)
    every = discover_subnetwork(TwoWeights(), loss, x, DiscoverySettings(epochs=1, lr=0.0, mask_init=0.1), progress=False)
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


def test_new_computations_by_hand():
    """Appendix B.4's a^2-b^2 and its subtask a-b: negative values reduce into [0, 7)."""
    task, subtask = ArithmeticTask("a^2-b^2", 10, 7), ArithmeticTask("a-b", 10, 7)
    a, b = torch.tensor([1, 5, 3, 0]), torch.tensor([3, 2, 3, 6])
    assert task.answer(a, b).tolist() == [6, 0, 0, 6]  # -8, 21, 0, -36 mod 7
    assert subtask.answer(a, b).tolist() == [5, 3, 0, 1]  # -2, 3, 0, -6 mod 7
    assert "a^3+ab+b^2" not in COMPUTATIONS  # not in the paper


def test_discovery_weight_decay_shrinks_the_scores_by_the_adamw_factor():
    """With a loss that does not depend on the mask (zero gradient) AdamW moves each score only by its decay:
    s_k = s_0 (1 - lr wd)^k after k steps, seen through a one-weight model whose output is its soft mask
    sigmoid(beta s); with wd 0 (Adam) the scores never move."""
    def soft_masks(weight_decay: float) -> list[float]:
        model = nn.Linear(1, 1, bias=False)
        with torch.no_grad():
            model.weight.fill_(1.0)
        seen = []

        def loss_fn(forward, batch):
            out = forward(batch)
            seen.append(out.item())
            return 0.0 * out.sum()

        discover_subnetwork(model, loss_fn, [torch.ones(1, 1)] * 3, DiscoverySettings(
            epochs=1, lr=0.1, mask_init=0.5, l0_lambda=0.0, weight_decay=weight_decay), include="weight",
            progress=False)
        return seen

    decayed = [torch.sigmoid(torch.tensor(0.5 * (1 - 0.1 * 2.0) ** k)).item() for k in range(3)]  # beta 1: epoch 0
    assert soft_masks(2.0) == pytest.approx(decayed)
    assert soft_masks(0.0) == pytest.approx([torch.sigmoid(torch.tensor(0.5)).item()] * 3)


def test_released_discovery_is_recorded_and_native_folders_keep_their_settings(tmp_path):
    settings = SweepSettings(max_value=12, t1_epochs=2, discovery_epochs=2, disambiguation=(5,),
                             conditions=("subtask induction",), transfer_epochs=1)
    assert "discovery" not in settings.to_dict()  # folders written before the option still resume
    run_sweep(tmp_path, SweepSettings(**{**settings.__dict__, "discovery": "released"}), progress=False)
    assert json.loads((tmp_path / "settings.json").read_text())["discovery"] == "released"
    assert WeightSubnetwork.load(tmp_path / "subnetwork").settings["weight_decay"] == 0.01
    with pytest.raises(HeurlensError, match="other settings \\(discovery\\)"):
        run_sweep(tmp_path, settings, progress=False)


def test_paper_preset_is_appendix_b1():
    paper = SweepSettings.paper()
    expected = dict(t1="a+ab", subtask="ab", t2="a^2+ab", max_value=1000, modulus=7, n_layers=2, t1_fraction=0.2,
                    t1_lr=5e-4, t1_test_examples=20_000, t1_patience=10, subtask_fraction=0.05, discovery_epochs=50,
                    discovery_lr=1e-3, l0_lambdas=(1e-7, 5e-7, 1e-8), architecture="released", filling="released",
                    seeds=5, transfer_epochs=100,
                    transfer_lrs=(2e-4,),
                    disambiguation=(10, 16, 25, 40, 63, 100, 158, 251, 398, 631, 1000, 1585, 2512, 3981, 6310, 10000))
    assert {k: getattr(paper, k) for k in expected} == expected
    assert round(paper.t1_fraction * paper.max_value ** 2) == 200_000  # Section 4.2's rows
    assert round(paper.subtask_fraction * paper.max_value ** 2) == 50_000
    assert DiscoverySettings().beta_final == 100.0
    assert SweepSettings.paper(seeds=3).seeds == 3
    with pytest.raises(HeurlensError, match="filling = 'zeros' is not one of fresh, inherited"):
        SweepSettings(filling="zeros")


def test_inherited_filling_keeps_t1_outside_the_masked_matrices():
    task = ArithmeticTask("a+ab", 20)
    trained, seed = arithmetic_model(task, 1, seed=0), 5
    sub = random_subnetwork(trained)
    fresh = dict(arithmetic_model(task, 1, seed).named_parameters())
    source = dict(trained.named_parameters())
    model, _ = transfer_condition("subtask induction", sub, trained, lambda s: arithmetic_model(task, 1, s), seed,
                                  filling="inherited")
    unmasked = [name for name in source if name not in sub.masks]
    assert any("embed" in name for name in unmasked) and any(".ln" in name or "norm" in name for name in unmasked)
    for name, p in model.named_parameters():
        if name in sub.masks:
            mask = sub.masks[name]
            assert torch.equal(p[mask], source[name][mask]) and torch.equal(p[~mask], fresh[name][~mask])
        else:
            assert torch.equal(p, source[name]), name  # embeddings, LayerNorms, biases: T1's, bit for bit
    plain, _ = transfer_condition("subtask induction", sub, trained, lambda s: arithmetic_model(task, 1, s), seed)
    assert all(torch.equal(p, fresh[n]) for n, p in plain.named_parameters() if n not in sub.masks)  # fresh filling


def test_most_accurate_subnetwork_ties_go_to_the_sparser():
    def candidate(l0_lambda, kept, accuracy):
        return WeightSubnetwork({"w": torch.arange(10) < kept}, settings={"l0_lambda": l0_lambda,
                                                                          "subtask_accuracy": accuracy})
    dense, sparse, worse = candidate(1e-8, 9, 1.0), candidate(1e-7, 4, 1.0), candidate(5e-7, 2, 0.99)
    assert most_accurate([dense, worse, sparse]) is sparse
    assert most_accurate([dense, worse]) is dense
    with pytest.raises(HeurlensError, match="no candidate"):
        most_accurate([])


def test_lr_search_keeps_the_best_on_evaluation(monkeypatch):
    """Each lr gets freshly prepared models; per model the released script's choice: the first lr reaching
    100% (it stops there), else the last lr with the best evaluation accuracy (its >= keeps the later)."""
    eval_accuracy = {1e-3: (0.6, 1.0), 5e-4: (0.9, 1.0), 2e-4: (0.9, 0.5), 1e-4: (1.0, 1.0)}
    trained_with, prepared = [], []

    def fake_training(models, trains, evaluation, test, epochs, lr, *args, **kwargs):
        trained_with.append((models, lr))
        return [TrainingResult(eval_accuracy[lr][i], 1 - eval_accuracy[lr][i], [], lr) for i in range(len(models))]

    monkeypatch.setattr(batched_training, "train_next_token_together", fake_training)

    def prepare():
        prepared.append([(object(), None), (object(), None)])
        return prepared[-1]

    first, second = train_together_with_lr_search(prepare, [1e-3, 5e-4, 2e-4, 1e-4], [None, None], None, None, 1,
                                                  progress=False)
    assert first.lr == 1e-4 and first.best_eval_accuracy == 1.0
    assert second.lr == 1e-3 and second.test_accuracy == 0.0  # perfect at the first lr: the search stops there
    assert [models for models, _ in trained_with] == [[model for model, _ in p] for p in prepared]  # fresh per lr
    assert best_by_evaluation([TrainingResult(0.5, 0.1, [], 1e-3), TrainingResult(0.7, 0.2, [], 2e-4),
                               TrainingResult(0.7, 0.3, [], 1e-4), TrainingResult(0.6, 0.3, [], 5e-5)]).lr == 1e-4
    with pytest.raises(HeurlensError, match="at least one learning rate"):
        train_together_with_lr_search(prepare, [], [], None, None, 1)


@pytest.mark.parametrize("weight_decay", [0.01, 1.0])  # 1.0: large enough that ignoring it shows in the weights
def test_training_together_follows_each_model_alone(weight_decay):
    """Three decoders (two with frozen entries, own data and seeds) trained in one stack end where each
    ends alone: same losses, accuracies and outputs, and the same weights except the attention key biases,
    whose gradient is zero in exact arithmetic (softmax ignores a score added to every key) so Adam turns
    float noise into steps of size lr there. Frozen entries stay bit for bit."""
    task = ArithmeticTask("a^2+ab", 30, 7)

    def prepared(seed, freeze):
        model = arithmetic_model(task, 2, seed)
        if not freeze:
            return model, None
        name = next(name for name, p in model.named_parameters() if p.ndim == 2 and ".q." in name)
        mask = torch.rand(dict(model.named_parameters())[name].shape, generator=torch.Generator().manual_seed(seed)) < 0.3
        return model, FrozenWeights(model, {name: mask})

    evaluation, test = evaluation_set(task, 200, 11), evaluation_set(task, 200, 12)
    runs = [(0, True), (1, False), (2, True)]
    trains = [ambiguous_set(task, 40, seed) for seed, _ in runs]
    alone = []
    for (seed, freeze), train in zip(runs, trains):
        model, frozen = prepared(seed, freeze)
        alone.append((model, training.train_next_token(model, train, evaluation, test, 4, 1e-3, 16, frozen, seed,
                                                       progress=False, weight_decay=weight_decay)))
    together = [prepared(seed, freeze) for seed, freeze in runs]
    initial = [{name: p.detach().clone() for name, p in model.named_parameters()} for model, _ in together]
    results = train_next_token_together([model for model, _ in together], trains, evaluation, test, 4, 1e-3, 16,
                                        [frozen for _, frozen in together], [seed for seed, _ in runs],
                                        progress=False, weight_decay=weight_decay)
    probe = evaluation[:50, :-1]
    for (model_alone, result_alone), (model, frozen), result, start in zip(alone, together, results, initial):
        assert [h["loss"] for h in result.history] == pytest.approx([h["loss"] for h in result_alone.history],
                                                                    abs=1e-5)
        assert (result.best_eval_accuracy, result.test_accuracy) == (result_alone.best_eval_accuracy,
                                                                     result_alone.test_accuracy)
        torch.testing.assert_close(model(probe), model_alone(probe), atol=1e-4, rtol=1e-4)
        for (name, p), p_alone in zip(model.named_parameters(), model_alone.parameters()):
            if ".k." not in name or p.ndim != 1:
                torch.testing.assert_close(p, p_alone, atol=1e-4, rtol=1e-4)
            assert not torch.equal(p, start[name])  # it trained
        if frozen is not None:
            for name, mask in frozen.masks.items():
                assert torch.equal(dict(model.named_parameters())[name][mask], start[name][mask])
    with pytest.raises(HeurlensError, match="one size"):
        train_next_token_together([arithmetic_model(task, 2, 0)] * 2, [trains[0], trains[0][:10]], evaluation, test, 1)


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
    fewer = SweepSettings(**{**settings.__dict__, "disambiguation": (5,), "seeds": 1})
    assert run_sweep(tmp_path, fewer, progress=False).equals(more)  # a narrower call keeps the folder's plan
    assert {k: json.loads((tmp_path / "settings.json").read_text())[k] for k in PER_RUN} == {
        "disambiguation": [0, 5], "conditions": ["subtask induction", "random init"], "seeds": 2}


def test_a_sweep_killed_inside_a_count_goes_on_from_its_saved_progress(tmp_path, monkeypatch):
    """A count killed after its training saved its progress (here: after its last epoch, before any result was
    written) resumes from ``training-progress/n<samples>/`` to the results of an uninterrupted sweep, and that folder
    is gone once they are written. (Bit-for-bit resumption mid-training: tests/subtask/test_subtask_released_model.py.)"""
    from heurlens.subtask import batched_training

    settings = SweepSettings(max_value=12, t1_epochs=2, discovery_epochs=2, disambiguation=(5,),
                             conditions=("subtask induction", "random init"), transfer_epochs=3)
    whole = run_sweep(tmp_path / "whole", settings, progress=False)
    assert not (tmp_path / "whole" / "training-progress" / "n5").exists()
    saved = batched_training._save

    def killed_after_saving(*args):
        saved(*args)
        raise KeyboardInterrupt

    with monkeypatch.context() as patch:
        patch.setattr(batched_training, "_save", killed_after_saving)
        with pytest.raises(KeyboardInterrupt):
            run_sweep(tmp_path / "killed", settings, progress=False)
    progress_folder = tmp_path / "killed" / "training-progress" / "n5"
    assert sorted(path.name for path in progress_folder.iterdir()) == [".heurlens.lock", "lr0.001.pt"]  # lr 1e-3
    assert finished_results(tmp_path / "killed").empty
    with open(progress_folder / ".heurlens.lock") as lock:  # as a second process training this count holds it
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        with pytest.raises(HeurlensError, match="another heurlens process is writing to the training progress folder "
                                                ".*n5"):
            run_sweep(tmp_path / "killed", settings, progress=False)
    assert run_sweep(tmp_path / "killed", settings, progress=False).equals(whole)
    assert not progress_folder.exists()

    # A process that found the count pending, then waited while another finished it, leaves no folder behind.
    from heurlens.subtask import sweep_transfer
    pending = sweep_transfer.pending_runs

    def finished_meanwhile(job, n):
        return [] if progress_folder.exists() else pending(job, n)  # pending before the lock, done under it

    result_path(tmp_path / "killed", "random init", 5, 0).unlink()
    with monkeypatch.context() as patch:
        patch.setattr(sweep_transfer, "pending_runs", finished_meanwhile)
        run_sweep(tmp_path / "killed", settings, progress=False)
    assert not progress_folder.exists()


def test_finished_results_read_a_sweep_cut_short_without_training(tmp_path):
    settings = SweepSettings(max_value=12, t1_epochs=2, discovery_epochs=2, disambiguation=(0, 5),
                             conditions=("subtask induction", "random init"), transfer_epochs=2)
    results = run_sweep(tmp_path, settings, progress=False)
    assert finished_results(tmp_path).equals(results)
    result_path(tmp_path, "random init", 0, 0).unlink()  # as if cut short before that run ended
    stamps = {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*")}
    partial = finished_results(tmp_path)
    assert {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*")} == stamps  # nothing trained or written
    expected = results[~((results["condition"] == "random init") & (results["disambiguation"] == 0))]
    assert partial.equals(expected.reset_index(drop=True))
    with pytest.raises(HeurlensError, match="holds no transfer sweep"):
        finished_results(tmp_path / "elsewhere")


def test_tiny_sweep_with_lambda_and_lr_search(tmp_path):
    settings = SweepSettings(max_value=12, t1_epochs=2, discovery_epochs=2, disambiguation=(5,), l0_lambdas=(1e-5, 1e-3),
                             conditions=("subtask induction",), transfer_epochs=2, transfer_lrs=(1e-3, 1e-2),
                             filling="inherited")
    results = run_sweep(tmp_path, settings, progress=False)
    chosen = WeightSubnetwork.load(tmp_path / "subnetwork")
    candidates = [WeightSubnetwork.load(tmp_path / "candidates" / f"lambda-{x:g}") for x in (1e-5, 1e-3)]
    assert chosen.settings["l0_lambda"] == most_accurate(candidates).settings["l0_lambda"]
    assert [c["l0_lambda"] for c in chosen.settings["candidates"]] == [1e-5, 1e-3]
    assert results["lr"].isin([1e-3, 1e-2]).all()


def test_transfer_command_rejects_unknown_condition():
    result = subprocess.run([sys.executable, "-m", "heurlens", "transfer", "--conditions", "magic"],
                            capture_output=True, text=True)
    assert result.returncode == 2 and "unknown condition(s) magic" in result.stderr


def test_transfer_options_come_from_the_settings_fields():
    import dataclasses

    from heurlens.cli import cli
    from heurlens.cli.settings_options import settings_from_options

    options = {p.name: p for p in cli.commands["transfer"].params}
    assert {f.name for f in dataclasses.fields(SweepSettings)} <= set(options)
    assert options["l0_lambdas"].multiple and options["transfer_lrs"].multiple and not options["seeds"].multiple
    given = {"seeds": 3, "l0_lambdas": [1e-7], "t1": None, "disambiguation": ()}  # what click hands over
    assert settings_from_options(SweepSettings.paper(), given) == SweepSettings.paper(seeds=3, l0_lambdas=(1e-7,))


def test_t1_early_stopping_keeps_the_first_epoch_with_the_best_evaluation(monkeypatch):
    """The released T1 script's HF early stopping, patience 3: evaluation accuracies 0.2, 0.5, 0.5, 0.4, 0.5
    rise strictly at epochs 0 and 1 only, so training stops after epoch 4 (three epochs without a rise) and
    the model is left with epoch 1's weights; the test accuracy reported is that model's."""
    import heurlens.subtask.training as training
    from heurlens.subtask.arithmetic import ArithmeticTask, evaluation_set, training_set

    task = ArithmeticTask("a+ab", 10)
    model = arithmetic_model(task, 1, seed=0)
    train, evaluation, test = training_set(task, 0.5, 0), evaluation_set(task, 20, 1), evaluation_set(task, 20, 2)
    scripted, snapshots, tested = iter([0.2, 0.5, 0.5, 0.4, 0.5, 0.9]), [], []
    real = training.answer_accuracy

    def scored(model_, sequences):
        if sequences is evaluation:
            snapshots.append({k: v.clone() for k, v in model_.state_dict().items()})
            return next(scripted)
        tested.append({k: v.clone() for k, v in model_.state_dict().items()})
        return real(model_, sequences)

    monkeypatch.setattr(training, "answer_accuracy", scored)
    result = training.train_next_token(model, train, evaluation, test, epochs=10, lr=1e-2, batch_size=16,
                                       progress=False, patience=3)
    assert [h["eval"] for h in result.history] == [0.2, 0.5, 0.5, 0.4, 0.5]  # stopped before the 0.9
    assert result.best_eval_accuracy == 0.5
    for name, value in model.state_dict().items():
        assert torch.equal(value, snapshots[1][name])  # epoch 1's weights, not epoch 2's or 4's (ties)
        assert torch.equal(tested[-1][name], snapshots[1][name])  # the reported test accuracy is that model's
    assert any(not torch.equal(snapshots[1][k], snapshots[4][k]) for k in snapshots[1])  # training went on after


def float32_denormals(y: torch.Tensor) -> int:
    """How many entries of a float32 tensor are denormal, read from the bits (comparisons of floats would
    themselves see denormals as zero where denormals are flushed)."""
    bits = y.detach().contiguous().view(torch.int32) & 0x7FFFFFFF
    return int(((bits > 0) & (bits < 0x00800000)).sum())


def test_denormals_are_flushed_on_every_compute_thread():
    """sigmoid(-87.8) is a float32 denormal. Flushed, no compute thread may produce one; setting the flag
    in the calling thread alone would leave torch's earlier-started compute threads producing their share."""
    from heurlens.training_helpers import denormals_flushed, run_with_denormals_flushed

    threads = torch.get_num_threads()
    torch.set_num_threads(4)  # compute threads exist before the flag is set (4 even on fewer cores)
    try:
        x = torch.full((1_000_000,), -87.8)
        assert float32_denormals(torch.sigmoid(x)) == x.numel()
        assert run_with_denormals_flushed(lambda: float32_denormals(torch.sigmoid(x))) == 0
        assert not denormals_flushed() and float32_denormals(torch.sigmoid(x)) == x.numel()  # restored
        with pytest.raises(KeyError, match="raised inside"):  # an exception comes back as itself
            run_with_denormals_flushed(lambda: {}["raised inside"])
    finally:
        torch.set_num_threads(threads)


def test_discovery_flushes_denormals_without_changing_the_mask(monkeypatch):
    """At a high temperature sigmoid(beta * s) underflows into float32 denormals (slow on x86); discovery
    flushes them to zero, finds the mask it finds without flushing, and leaves the setting as it was."""
    from heurlens.subtask import masks as masks_module
    from heurlens.training_helpers import denormals_flushed

    task = ArithmeticTask("ab", 12, 7)
    model = arithmetic_model(task, 1, 0)
    batches = batches_of(training_set(task, 0.5, 0), 16, torch.Generator().manual_seed(0))
    config = DiscoverySettings(epochs=2, lr=0.2, l0_lambda=1e-4, beta_final=1e6)  # beta 1000 in epoch 2
    denormals = []  # per mask computation: how many soft-mask entries are float32 denormals
    real_sigmoid = torch.sigmoid

    def counting_sigmoid(x):
        y = real_sigmoid(x)
        denormals.append(float32_denormals(y))
        return y

    monkeypatch.setattr(masks_module.torch, "sigmoid", counting_sigmoid)
    flushed = discover_subnetwork(model, last_token_loss, batches, config, progress=False)
    assert sum(denormals) == 0 and not denormals_flushed()  # flushed inside, restored after
    denormals.clear()
    monkeypatch.setattr(masks_module, "run_with_denormals_flushed", lambda work: work())
    exact = discover_subnetwork(model, last_token_loss, batches, config, progress=False)
    assert sum(denormals) > 100  # without flushing they are there
    assert all(torch.equal(flushed.masks[name], exact.masks[name]) for name in exact.masks)


def test_a_second_sweep_process_waits_for_the_folders_t1_and_discovery(tmp_path):
    """Two processes on one sweep folder (each its own --disambiguation): the second waited for nothing and
    trained T1 and the subnetwork a second time beside the first. Now it waits for the folder's lock (held here
    by another process for a moment) and only then trains or reads them."""
    import subprocess
    import sys

    from heurlens.runtime.run_folders import LOCK_FILE, RunFolder

    settings = SweepSettings(max_value=12, t1_epochs=1, discovery_epochs=1, disambiguation=(5,),
                             conditions=("random init",), transfer_epochs=1)
    RunFolder(tmp_path, "sweep").record_settings(settings.to_dict(), PER_RUN)  # what the first process wrote first
    holder = subprocess.Popen([sys.executable, "-c", (
        "import fcntl, sys, time\n"
        f"handle = open({str(tmp_path / LOCK_FILE)!r}, 'a')\n"
        "fcntl.flock(handle, fcntl.LOCK_EX)\n"
        "print('held', flush=True)\n"
        "time.sleep(2)\n"
        f"open({str(tmp_path / 'released')!r}, 'w').write(repr(time.time()))\n")], stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    run_sweep(tmp_path, settings, progress=False)
    holder.wait()
    released = float((tmp_path / "released").read_text())
    assert (tmp_path / "t1-model.safetensors").stat().st_mtime >= released - 0.05  # trained after the wait


def test_a_sweep_folder_says_what_it_holds_through_one_reader(tmp_path):
    """RunFolder: the settings a sweep records come back as the same SweepSettings (the scripts that table a sweep
    read them so); a folder without them, or with a damaged file, is refused by name."""
    from heurlens.runtime.run_folders import RunFolder
    from heurlens.subtask.sweep import recorded_settings

    settings = SweepSettings.paper(seeds=2)
    RunFolder(tmp_path, "sweep").record_settings(settings.to_dict())
    assert recorded_settings(tmp_path) == settings
    with pytest.raises(HeurlensError, match="holds no transfer sweep .no settings.json.; start one with heurlens "
                                            "transfer --out"):
        recorded_settings(tmp_path / "empty")
    (tmp_path / "settings.json").write_text("{not json")
    with pytest.raises(HeurlensError, match="settings.json cannot be read .JSONDecodeError.; it records the settings"):
        recorded_settings(tmp_path)
