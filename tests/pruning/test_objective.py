"""The pruning objective (``PruneSettings.objective`` / ``--objective``): the Heuristic Core's KL or MIB's logit
difference, with known answers on the planted-path model and the loss checked against a hand computation."""

import pytest
import torch
from planted_edges import N_EDGES, PATH, build_planted_edges_model, planted_edges_task

import heurlens
from heurlens.errors import HeurlensError
from heurlens.pruning import PruneSettings
from heurlens.pruning.objective import pruning_loss
from heurlens.tasks import token_batches

LOGIT_DIFF = PruneSettings(objective="logit-diff", ablation="corrupt")


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    return heurlens.load_model(build_planted_edges_model(tmp_path_factory.mktemp("planted-edges")))


def test_the_logit_difference_objective_is_the_squared_gap_to_the_full_models(planted):
    """On a batch of the planted task, the loss is (mean over its rows of logit[answer] - logit[distractor], masked,
    minus the same of the full model's)^2, computed here from the token ids by hand."""
    task = planted_edges_task()
    loss = pruning_loss(LOGIT_DIFF, task, None, None)
    rows = task.batches[1]["input_ids"].shape[0]
    start = rows  # the second batch's rows of scores
    masked = torch.randn(rows, 11, generator=torch.Generator().manual_seed(0))
    full = torch.randn(rows, 11, generator=torch.Generator().manual_seed(1))
    answers, distractors = task.answers[start:start + rows, 0], task.distractors[start:start + rows, 0]
    gap = lambda s: (s[torch.arange(rows), answers] - s[torch.arange(rows), distractors]).mean()  # noqa: E731
    by_hand = (gap(masked) - gap(full)) ** 2
    value = loss(masked.requires_grad_(), full, torch.arange(start, start + rows))
    assert float(value.detach()) == pytest.approx(float(by_hand), rel=1e-6) and float(by_hand) > 0.01
    assert pruning_loss(PruneSettings(), task, None, None) is None  # kl: the trainer's own KL


def test_masks_trained_on_the_logit_difference_find_the_planted_path(planted, tmp_path):
    """Known answers with objective='logit-diff': edge masks keep exactly the three path edges, node masks the two
    path heads, each with no loss left, and the runs record the objective (a KL run's record does not, as before)."""
    task = planted_edges_task()
    [circuit] = heurlens.prune(planted, task, sparsity=1 - len(PATH) / N_EDGES, seeds=[0], progress=False,
                               config=PruneSettings(level="edge", ablation="corrupt", objective="logit-diff"),
                               out=tmp_path / "edges", cache=False)
    assert sorted(map(str, circuit.edges)) == sorted(PATH)
    assert circuit.metrics["subnetwork_train_loss"] < 1e-8 and "subnetwork_train_kl" not in circuit.metrics
    assert circuit.hyperparameters["objective"] == "logit-diff"
    [subnetwork] = heurlens.prune(planted, task, sparsity=4 / 6, seeds=[0], config=LOGIT_DIFF, progress=False,
                                  cache=False)
    assert list(map(str, subnetwork.kept)) == ["L0.H1", "L1.H0"]
    assert "objective" not in PruneSettings().to_dict()  # run folders written before the option still match


def test_the_objective_is_refused_where_it_has_no_meaning(planted):
    texts = token_batches(torch.randint(2, 6, (8, 3)), batch_size=4)
    with pytest.raises(HeurlensError, match="has no distractors: prune a prompt task with distractors"):
        heurlens.prune(planted, texts, sparsity=0.5, seeds=[0], config=PruneSettings(objective="logit-diff"),
                       progress=False, cache=False)
    with pytest.raises(HeurlensError, match="objective='logit-diff' and metric= both say what to prune for"):
        heurlens.prune(planted, planted_edges_task(), sparsity=0.5, seeds=[0], config=LOGIT_DIFF, progress=False,
                       metric=lambda scores: scores.mean(), cache=False)
    with pytest.raises(HeurlensError, match="objective"):
        PruneSettings(objective="accuracy")


def test_the_raised_logit_difference_objective_drops_a_path_that_lowers_it(tmp_path):
    """objective='logit-diff-max': the loss is LD(full) - LD(masked) on a batch (by hand); on the tiered planted model
    with the second path read -2x (on the clean prompt it lowers the answer's logit, broken anywhere it carries the
    corrupted prompt's token and lowers the distractor's), a circuit of 6 edges keeps the answer's path and breaks the
    second: the logit difference raised to 6 units from the full model's 2 (both paths kept, the only 6 edges that
    keep the full model's, would give 2). Broken by keeping the full value (aim "keep") for logit-diff-max: failed."""
    from planted_edges import SECOND_PATH

    task = planted_edges_task()
    rows = task.batches[0]["input_ids"].shape[0]
    masked, full = torch.randn(2, rows, 11, generator=torch.Generator().manual_seed(0))
    answers, distractors = task.answers[:rows, 0], task.distractors[:rows, 0]
    gap = lambda s: (s[torch.arange(rows), answers] - s[torch.arange(rows), distractors]).mean()  # noqa: E731
    loss = pruning_loss(PruneSettings(objective="logit-diff-max"), task, None, None)
    value = loss(masked.requires_grad_(), full, torch.arange(rows))
    assert float(value.detach()) == pytest.approx(float(gap(full) - gap(masked.detach())), rel=1e-6)

    tiered = heurlens.load_model(build_planted_edges_model(tmp_path / "tiered", second_path=-2.0))
    config = PruneSettings(level="edge", ablation="corrupt", objective="logit-diff-max", total_steps=300)
    [circuit] = heurlens.prune(tiered, task, sparsity=1 - 6 / N_EDGES, seeds=[0], config=config, progress=False,
                               cache=False)
    kept = set(map(str, circuit.edges))
    assert set(PATH) <= kept and not set(SECOND_PATH) <= kept
