"""The release's model for Subtask Induction's arithmetic (HF GPT-2, ``heurlens.subtask.released_model``): it
learns a hand-checkable task, its dropout is on while training and off while evaluating, and the ``released``
filling puts N(0, 0.02) draws exactly in the masked-out entries."""

import pytest
import torch
from torch import nn

from heurlens.errors import HeurlensError
from heurlens.subtask import ArithmeticTask, WeightSubnetwork, select_weights, transfer_condition
from heurlens.subtask.batched_training import train_next_token_together
from heurlens.subtask.released_model import released_arithmetic_model
from heurlens.subtask.training import answer_accuracy, train_next_token


def every_pair(task: ArithmeticTask) -> torch.Tensor:
    a, b = torch.arange(task.max_value).repeat_interleave(task.max_value), torch.arange(task.max_value).repeat(
        task.max_value)
    return task.sequences(a, b)


def test_a_trained_gpt2_computes_a_plus_b_mod_7():
    """Numbers 0..9, a + b mod 7 on all 100 pairs: after training (the weights of its best epoch kept, as the
    release's T1 keeps its best checkpoint), 3 5 <sep> gives 1 (8 mod 7) and 6 6 gives 5 (12 mod 7), worked out
    by hand, and every pair is right."""
    task = ArithmeticTask("a+b", max_value=10, modulus=7)
    model = released_arithmetic_model(task, n_layers=2, seed=0, dropout=0.0)
    pairs = every_pair(task)
    train_next_token(model, pairs, pairs, pairs, epochs=100, lr=1e-3, batch_size=10, progress=False, patience=30)
    with torch.no_grad():
        answers = model(task.sequences(torch.tensor([3, 6]), torch.tensor([5, 6]))[:, :-1])[:, -1].argmax(-1)
    assert answers.tolist() == [1, 5]
    assert answer_accuracy(model, pairs) == 1.0


def test_the_release_model_has_its_sizes_tied_embeddings_and_scaled_residual_init():
    task = ArithmeticTask("a+b", max_value=1000)
    model = released_arithmetic_model(task, n_layers=2, seed=3)
    gpt2 = model.model
    assert (gpt2.config.n_embd, gpt2.config.n_head, gpt2.transformer.h[0].mlp.c_fc.weight.shape[1],
            gpt2.config.vocab_size) == (128, 4, 512, 1001)
    assert gpt2.lm_head.weight is gpt2.transformer.wte.weight
    assert not released_arithmetic_model(task, 2, 3, tie_embeddings=False).model.lm_head.weight.data_ptr() == (
        gpt2.transformer.wte.weight.data_ptr())
    stds = [float(gpt2.transformer.h[0].mlp.c_fc.weight.detach().std()),
            float(gpt2.transformer.h[0].mlp.c_proj.weight.detach().std())]
    assert abs(stds[0] - 0.02) < 0.001 and abs(stds[1] - 0.02 / 2) < 0.001  # c_proj: 0.02 / sqrt(2 n_layer)
    assert all(torch.equal(p, q) for p, q in zip(model.parameters(), released_arithmetic_model(task, 2, 3).parameters()))
    assert len(select_weights(model)) == 8  # c_attn, c_proj, c_fc, mlp c_proj per layer: the release's Conv1Ds


def test_dropout_is_on_in_training_and_off_in_evaluation():
    task = ArithmeticTask("a+b", max_value=10)
    model = released_arithmetic_model(task, n_layers=1, seed=0, dropout=0.1)
    modes: list[bool] = []
    dropout = next(module for module in model.modules() if isinstance(module, nn.Dropout))
    dropout.register_forward_pre_hook(lambda module, args: modes.append(module.training))
    pairs = every_pair(task)
    train_next_token(model, pairs, pairs[:10], pairs[:10], epochs=2, batch_size=50, progress=False)
    # per epoch: 2 training batches in train mode, then the evaluation (and test) passes in eval mode
    assert modes[:2] == [True, True] and modes[2] is False and True in modes[3:] and modes[-1] is False
    assert not model.training  # left in eval mode
    tokens = pairs[:5, :-1]
    with torch.no_grad():
        assert torch.equal(model(tokens), model(tokens))  # eval: no dropout
        model.train()
        assert not torch.equal(model(tokens), model(tokens))  # train: dropout draws differ


def test_the_released_filling_draws_the_masked_out_entries_from_n_0_002():
    """A hand-set mask keeping the first row of every masked matrix: those entries are T1's; every other entry
    of those matrices is a N(0, 0.02) draw (seeded: the same twice); every unmasked parameter is T1's."""
    task = ArithmeticTask("a+ab", max_value=50)
    trained = released_arithmetic_model(task, 2, seed=0)
    parameters = dict(trained.named_parameters())
    masks = {}
    for name in select_weights(trained):
        mask = torch.zeros_like(parameters[name], dtype=torch.bool)
        mask[0] = True
        masks[name] = mask
    sub = WeightSubnetwork(masks, "first rows")
    make = lambda seed: released_arithmetic_model(task, 2, seed)  # noqa: E731
    model, frozen = transfer_condition("subtask induction", sub, trained, make, 7, filling="released")
    again, _ = transfer_condition("subtask induction", sub, trained, make, 7, filling="released")
    outside = []
    for name, p in model.named_parameters():
        if name in masks:
            assert torch.equal(p[masks[name]], parameters[name][masks[name]])
            outside.append(p[~masks[name]])
        else:
            assert torch.equal(p, parameters[name]), name
    drawn = torch.cat(outside).detach()
    assert abs(float(drawn.mean())) < 1e-3 and abs(float(drawn.std()) - 0.02) < 2e-4  # 400k draws
    c_proj = model.model.transformer.h[1].mlp.c_proj.weight.detach()[~masks["model.transformer.h.1.mlp.c_proj.weight"]]
    assert abs(float(c_proj.std()) - 0.02) < 1e-3  # no residual scaling, unlike a fresh GPT-2's 0.01
    assert all(torch.equal(p, q) for p, q in zip(model.parameters(), again.parameters()))
    assert frozen is not None and set(frozen.masks) == set(masks)


def test_a_seeded_training_draws_the_same_dropout_whatever_ran_before():
    """Training with dropout, alone or stacked, gives the same weights for the same seeds even when the global random
    state differs before it (as in a resumed sweep); another seed gives other draws; the caller's state is restored."""
    task = ArithmeticTask("a+b", max_value=10)
    pairs = every_pair(task)

    def alone(seed: int) -> list[torch.Tensor]:
        model = released_arithmetic_model(task, n_layers=1, seed=0, dropout=0.3)
        train_next_token(model, pairs, pairs[:10], pairs[:10], epochs=1, batch_size=50, seed=seed, progress=False)
        return [p.detach().clone() for p in model.parameters()]

    def together(seeds: list[int]) -> list[torch.Tensor]:
        models = [released_arithmetic_model(task, n_layers=1, seed=i, dropout=0.3) for i in range(2)]
        train_next_token_together(models, [pairs, pairs], pairs[:10], pairs[:10], 1, batch_size=50, seeds=seeds,
                                  progress=False)
        return [p.detach().clone() for model in models for p in model.parameters()]

    for train in (lambda: alone(3), lambda: together([3, 4])):
        torch.manual_seed(0)
        first = train()
        torch.manual_seed(12345)
        torch.rand(100)  # the global generator elsewhere
        assert all(torch.equal(x, y) for x, y in zip(first, train()))
    torch.manual_seed(0)
    state = torch.get_rng_state()
    alone(3)
    assert torch.equal(state, torch.get_rng_state())  # the caller's random state untouched
    assert not all(torch.equal(x, y) for x, y in zip(alone(3), alone(4)))


def test_a_tied_t1_fills_both_embeddings_of_an_untied_transfer_model():
    """Inherited filling from a tied T1 into an untied GPT-2: the input and the output embedding both start as
    T1's one matrix, as two tensors that then train apart."""
    task = ArithmeticTask("a+ab", max_value=20)
    trained = released_arithmetic_model(task, 1, seed=0)
    sub = WeightSubnetwork({name: torch.rand(p.shape, generator=torch.Generator().manual_seed(1)) < 0.1
                            for name, p in trained.named_parameters() if name in set(select_weights(trained))})
    model, _ = transfer_condition("subtask induction", sub, trained,
                                  lambda seed: released_arithmetic_model(task, 1, seed, tie_embeddings=False), 3,
                                  filling="inherited")
    tied = trained.model.transformer.wte.weight
    embedding, unembedding = model.model.transformer.wte.weight, model.model.lm_head.weight
    assert torch.equal(embedding, tied) and torch.equal(unembedding, tied)
    assert embedding.data_ptr() != unembedding.data_ptr()


def test_gpt2s_with_tied_embeddings_trained_together_end_where_each_ends_alone():
    """Stacked training (``train_next_token_together``) keeps the tie of input and output embeddings (a copy
    moved to the meta device loses it unless retied): without dropout, the same losses and outputs as alone.
    With dropout two copies of one model under one seed draw the same masks (keyed by the seed) and still train."""
    from heurlens.subtask import ambiguous_set, evaluation_set
    from heurlens.subtask.batched_training import train_next_token_together

    task = ArithmeticTask("a^2+ab", 30, 7)
    evaluation, test = evaluation_set(task, 200, 11), evaluation_set(task, 200, 12)
    trains = [ambiguous_set(task, 40, seed) for seed in range(2)]
    alone = [released_arithmetic_model(task, 2, 100 + seed, dropout=0.0) for seed in range(2)]
    results_alone = [train_next_token(model, train, evaluation, test, 3, 1e-3, 16, seed=seed, progress=False)
                     for seed, (model, train) in enumerate(zip(alone, trains))]
    together = [released_arithmetic_model(task, 2, 100 + seed, dropout=0.0) for seed in range(2)]
    results = train_next_token_together(together, trains, evaluation, test, 3, 1e-3, 16, seeds=[0, 1],
                                        progress=False)
    probe = evaluation[:50, :-1]
    for model, model_alone, result, result_alone in zip(together, alone, results, results_alone):
        assert [h["loss"] for h in result.history] == pytest.approx([h["loss"] for h in result_alone.history],
                                                                    abs=1e-5)
        with torch.no_grad():
            torch.testing.assert_close(model(probe), model_alone(probe), atol=1e-4, rtol=1e-4)
        assert model.model.lm_head.weight is model.model.transformer.wte.weight
    with_dropout = [released_arithmetic_model(task, 2, 100, dropout=0.1) for _ in range(2)]
    losses = [r.history[-1]["loss"] for r in train_next_token_together(
        with_dropout, [trains[0], trains[0]], evaluation, test, 2, 1e-3, 16, seeds=[0, 0], progress=False)]
    assert losses[0] == losses[1]  # same model, data, order and seed: the same dropout masks (keyed by the seed)


def test_a_tiny_sweep_on_the_released_architecture_transfers_its_subnetwork(tmp_path):
    """T1, discovery and transfer on HF GPT-2 (``--architecture released``) with the released filling: it runs,
    masks the release's Conv1D weights, resumes from its folder (the tied T1 model stored once and loaded back),
    refuses the native architecture there, and records the architecture while a native sweep's settings stay as
    they were written before the option existed."""
    from heurlens.subtask import WeightSubnetwork
    from heurlens.subtask.settings import SweepSettings
    from heurlens.subtask.sweep import run_sweep

    settings = SweepSettings(max_value=12, t1_epochs=2, discovery_epochs=2, disambiguation=(5,),
                             conditions=("subtask induction", "random init"), transfer_epochs=2,
                             architecture="released", filling="released")
    results = run_sweep(tmp_path, settings, progress=False)
    assert len(results) == 2 and results["test_accuracy"].between(0, 1).all()
    subnetwork = WeightSubnetwork.load(tmp_path / "subnetwork")
    assert all(name.startswith("model.transformer.h.") for name in subnetwork.masks)
    assert settings.to_dict()["architecture"] == "released" and "architecture" not in SweepSettings().to_dict()
    assert run_sweep(tmp_path, settings, progress=False).equals(results)
    with pytest.raises(HeurlensError, match="other settings"):
        run_sweep(tmp_path, SweepSettings(**{**settings.__dict__, "architecture": "native"}), progress=False)


def test_a_released_sweep_grown_over_two_calls_equals_one_call(tmp_path):
    """The probe that found results depending on their neighbours: seed 0 alone then seed 1 into one folder, against
    both seeds in one call (seed 1 trained beside seed 0's runs there, alone in the first folder). Every result must
    be the same, bit for bit."""
    from heurlens.subtask.settings import SweepSettings
    from heurlens.subtask.sweep import run_sweep

    settings = SweepSettings(max_value=10, t1_epochs=1, discovery_epochs=1, disambiguation=(0, 10), transfer_epochs=1,
                             t1_test_examples=10, architecture="released", filling="released",
                             conditions=("subtask induction", "random init", "random subnetwork"))
    run_sweep(tmp_path / "grown", SweepSettings(**{**settings.__dict__, "seeds": 1}), progress=False)
    grown = run_sweep(tmp_path / "grown", SweepSettings(**{**settings.__dict__, "seeds": 2}), progress=False)
    at_once = run_sweep(tmp_path / "at-once", SweepSettings(**{**settings.__dict__, "seeds": 2}), progress=False)
    assert len(grown) == 12 and grown.equals(at_once)
    for result in sorted((tmp_path / "at-once").rglob("*.json")):
        relative = result.relative_to(tmp_path / "at-once")
        if relative.name != "settings.json":
            assert (tmp_path / "grown" / relative).read_text() == result.read_text(), relative


class _Killed(Exception):
    """Stands for the process being killed right after a checkpoint was written."""


def test_a_killed_training_together_resumes_from_its_checkpoint_bit_for_bit(tmp_path, monkeypatch):
    """Transfer models with dropout and frozen subnetwork weights trained together, killed after the checkpoint of
    epoch 2 of 4 and called again on fresh models, end exactly as the uninterrupted call: the same histories, best
    epochs and weights (data order, dropout draws and AdamW moments go on where they stopped). A checkpoint of
    another training (other seeds) or a damaged one is trained over from epoch 0 and overwritten."""
    from heurlens.subtask import ambiguous_set, batched_training, evaluation_set

    task = ArithmeticTask("a^2+ab", 30, 7)
    trained = released_arithmetic_model(task, 2, seed=0)
    sub = WeightSubnetwork({name: torch.rand(p.shape, generator=torch.Generator().manual_seed(1)) < 0.2
                            for name, p in trained.named_parameters() if name in set(select_weights(trained))})
    evaluation, test = evaluation_set(task, 200, 11), evaluation_set(task, 200, 12)
    trains = [ambiguous_set(task, 40, seed) for seed in range(2)]

    def train(checkpoint, seeds=(0, 1)):
        prepared = [transfer_condition(condition, sub, trained,
                                       lambda seed: released_arithmetic_model(task, 2, seed, dropout=0.1), 100 + i,
                                       filling="released") for i, condition in enumerate(["subtask induction",
                                                                                          "random init"])]
        assert prepared[0][1] is not None  # one model with frozen entries
        results = batched_training.train_next_token_together(
            [model for model, _ in prepared], trains, evaluation, test, 4, 1e-3, 16, [frozen for _, frozen in prepared],
            list(seeds), progress=False, checkpoint=checkpoint, checkpoint_seconds=0)
        return results, [p.detach().clone() for model, _ in prepared for p in model.parameters()]

    def same(first, second) -> bool:
        (results_a, weights_a), (results_b, weights_b) = first, second
        return results_a == results_b and all(torch.equal(a, b) for a, b in zip(weights_a, weights_b))

    whole = train(None)
    saved = batched_training._save

    def killed_after_epoch_2(path, identity, progress, *args):
        saved(path, identity, progress, *args)
        if progress.epochs_done == 2:
            raise _Killed

    checkpoint = tmp_path / "lr.pt"
    with monkeypatch.context() as patch:
        patch.setattr(batched_training, "_save", killed_after_epoch_2)
        with pytest.raises(_Killed):
            train(checkpoint)
    assert torch.load(checkpoint, weights_only=True)["epochs_done"] == 2
    assert same(train(checkpoint), whole)
    assert torch.load(checkpoint, weights_only=True)["epochs_done"] == 4
    assert same(train(checkpoint), whole)  # a finished training's checkpoint gives its results back

    other_seeds = train(None, seeds=(5, 6))
    assert not same(other_seeds, whole)
    assert same(train(checkpoint, seeds=(5, 6)), other_seeds)  # another training's checkpoint is not used
    checkpoint.write_bytes(checkpoint.read_bytes()[:1000])  # cut short
    assert same(train(checkpoint), whole)


def test_a_model_trained_in_a_stack_ends_the_same_whatever_trains_beside_it():
    """With dropout (the released architecture) each model's masks were one slice of a single draw for the whole
    stack, so a run's result depended on its neighbours and its place. Keyed dropout: its own seed and step alone."""
    from heurlens.subtask import ambiguous_set, evaluation_set

    task = ArithmeticTask("a^2+ab", 30, 7)
    evaluation, test = evaluation_set(task, 100, 11), evaluation_set(task, 100, 12)
    trains = {seed: ambiguous_set(task, 40, seed) for seed in range(3)}

    def trained(seeds: list[int], dropout: float = 0.1) -> dict:
        models = [released_arithmetic_model(task, 2, 100 + seed, dropout=dropout) for seed in seeds]
        results = train_next_token_together(models, [trains[seed] for seed in seeds], evaluation, test, 2, 1e-3, 16,
                                            seeds=seeds, progress=False)
        return {seed: (model, result.history) for seed, model, result in zip(seeds, models, results)}

    pair, triple = trained([0, 1]), trained([2, 1, 0])  # other neighbours, other places in the stack
    for seed in (0, 1):
        assert pair[seed][1] == triple[seed][1]
        assert all(torch.equal(p, q) for p, q in zip(pair[seed][0].parameters(), triple[seed][0].parameters()))
    without = trained([0, 1], dropout=0.0)  # the dropout did act
    assert [h["loss"] for h in without[0][1]] != [h["loss"] for h in pair[0][1]]


def test_keyed_dropout_masks_are_uniform_and_a_function_of_their_key():
    from heurlens.subtask.keyed_dropout import KeyedDropout, keyed_uniform

    key = torch.tensor([3, 7])
    u = keyed_uniform(key, 0, (200, 500))
    assert torch.equal(u, keyed_uniform(torch.tensor([3, 7]), 0, (200, 500))) and 0 <= u.min() and u.max() < 1
    assert abs(u.mean().item() - 0.5) < 0.005 and abs((u < 0.1).float().mean().item() - 0.1) < 0.005
    others = [keyed_uniform(torch.tensor([4, 7]), 0, (200, 500)), keyed_uniform(key, 1, (200, 500)),
              keyed_uniform(torch.tensor([3, 8]), 0, (200, 500))]  # another seed, module, step
    assert all(abs(torch.corrcoef(torch.stack([u.flatten(), o.flatten()]))[0, 1].item()) < 0.01 for o in others)
    dropout = KeyedDropout(0.25, salt=2).train()
    dropout.dropout_key.copy_(key)
    x = torch.ones(400, 250)
    kept = dropout(x)
    assert set(kept.unique().tolist()) == {0.0, torch.tensor(1 / 0.75).item()}
    assert abs((kept == 0).float().mean().item() - 0.25) < 0.005
    assert torch.equal(dropout.eval()(x), x)
