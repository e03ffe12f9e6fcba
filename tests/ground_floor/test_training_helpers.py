"""The shared training helpers: frozen parameters restored whatever happens, frozen entries kept bit for bit, the
random state a resumed training restores."""

import io

import pytest
import torch
from torch import nn

from heurlens.training_helpers import (
    FrozenWeights,
    frozen_parameters,
    optimizer_step,
    random_state,
    restore_random_state,
)


def test_frozen_parameters_restore_after_an_error_and_leave_frozen_ones_frozen():
    model = nn.Sequential(nn.Linear(3, 3), nn.Linear(3, 1))
    model[1].bias.requires_grad_(False)  # frozen before: must stay frozen after
    with pytest.raises(RuntimeError, match="stop"):
        with frozen_parameters(model):
            assert not any(p.requires_grad for p in model.parameters())
            raise RuntimeError("stop")
    assert [p.requires_grad for p in model.parameters()] == [True, True, True, False]


def test_masks_train_inside_frozen_parameters_and_weights_get_no_gradient():
    model = nn.Linear(2, 1)
    scale = torch.ones(2, requires_grad=True)
    with frozen_parameters(model):
        (model(torch.ones(1, 2) * scale)).sum().backward()
    assert scale.grad is not None and model.weight.grad is None


def test_frozen_entries_stay_bit_for_bit_under_weight_decay():
    model = nn.Linear(4, 4, bias=False)
    mask = torch.eye(4, dtype=torch.bool)
    before = model.weight.detach().clone()
    frozen = FrozenWeights(model, {"weight": mask})
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.1, weight_decay=0.5)
    for _ in range(3):
        optimizer_step(optimizer, model(torch.randn(8, 4)).pow(2).mean(), frozen)
    assert torch.equal(model.weight[mask], before[mask]) and not torch.equal(model.weight[~mask], before[~mask])
    optimizer_step(optimizer, model(torch.randn(8, 4)).pow(2).mean())
    assert not torch.equal(model.weight[mask], before[mask])  # a step without it: the diagonal trains again


def test_frozen_entries_over_stacked_models_are_each_models_own():
    """FrozenWeights.stacked: model 0's diagonal held, model 1 (frozen None) free, in one stacked parameter."""
    models = [nn.Linear(4, 4, bias=False) for _ in range(2)]
    stack = nn.Parameter(torch.stack([model.weight.detach() for model in models]))
    before = stack.detach().clone()
    frozen = FrozenWeights.stacked({"weight": stack}, [FrozenWeights(models[0], {"weight": torch.eye(4) > 0}), None])
    assert frozen.masks["weight"].shape == (2, 4, 4) and not frozen.masks["weight"][1].any()
    optimizer = torch.optim.AdamW([stack], lr=0.1, weight_decay=0.5)
    for _ in range(3):
        optimizer_step(optimizer, torch.einsum("mij,bj->mbi", stack, torch.randn(8, 4)).pow(2).mean(), frozen)
    diagonal = torch.eye(4) > 0
    assert torch.equal(stack[0][diagonal], before[0][diagonal]) and not torch.equal(stack[0], before[0])
    assert not torch.equal(stack[1][diagonal], before[1][diagonal])


def test_the_saved_random_state_gives_the_same_dropout_masks_again_after_other_draws() -> None:
    """A resumed training draws the dropout masks the uninterrupted one would have drawn: the state restored
    from a checkpoint (through torch.save and back) replays the draws, whatever was drawn since."""
    cpu = torch.device("cpu")
    torch.manual_seed(3)
    buffer = io.BytesIO()
    torch.save(random_state(cpu), buffer)
    first = nn.functional.dropout(torch.ones(64), p=0.5, training=True)
    torch.rand(1000)  # what the killed process drew afterwards
    buffer.seek(0)
    saved = torch.load(buffer, weights_only=True)
    assert saved["cuda_rng"] is None  # a CPU training keeps no GPU state
    restore_random_state(saved, cpu)
    again = nn.functional.dropout(torch.ones(64), p=0.5, training=True)
    assert torch.equal(first, again)
    assert not torch.equal(first, nn.functional.dropout(torch.ones(64), p=0.5, training=True))


def test_examples_are_shuffled_one_way_and_stay_paired():
    """One shuffler for the sequence, image and label loops: torch.randperm drawn by the CPU generator, cut into
    batches (the order every earlier run of those loops used), each example's rows kept together."""
    from heurlens.training_helpers import shuffled_batches

    images, labels = torch.arange(10), torch.arange(10) * 10
    batches = shuffled_batches([images, labels], 4, torch.Generator().manual_seed(3))
    order = torch.randperm(10, generator=torch.Generator().manual_seed(3))
    assert [batch[0].tolist() for batch in batches] == [order[:4].tolist(), order[4:8].tolist(), order[8:].tolist()]
    assert all(torch.equal(batch[1], batch[0] * 10) for batch in batches)


def test_the_best_epoch_rule_states_which_of_two_equal_epochs_is_kept():
    from heurlens.training_helpers import is_best_epoch

    assert is_best_epoch(0.5, None, ties="earlier") and is_best_epoch(0.5, None, ties="later")
    assert is_best_epoch(0.5, 0.5, ties="later") and not is_best_epoch(0.5, 0.5, ties="earlier")
    assert not is_best_epoch(0.4, 0.5, ties="later") and is_best_epoch(0.6, 0.5, ties="earlier")


def test_work_run_with_denormals_flushed_sees_the_callers_disk_cache_setting():
    """The work runs in a thread of its own; ``disk_cache(False)`` (a context variable) did not reach it (issue 63)."""
    from heurlens.runtime.cache import disk_cache, disk_cache_enabled
    from heurlens.training_helpers import run_with_denormals_flushed

    with disk_cache(False):
        assert run_with_denormals_flushed(disk_cache_enabled) is False
    assert run_with_denormals_flushed(disk_cache_enabled) is True
