"""One metric signature for tables and pruning (heurlens.metrics): a logit difference written once is reported by
ablate and kept by prune; TransformerLens' one-argument form works as well as (scores, task)."""

import pytest
import torch
from transformer_lens.model_bridge import TransformerBridge

import heurlens
from heurlens.data.prompt_tasks import PromptSet
from heurlens.errors import HeurlensError
from heurlens.metrics import metric_loss, metric_value, takes_task


def logit_difference(scores, task):
    """Answer minus distractor logit, averaged over the rows: differentiable, one number."""
    return (scores.gather(1, task.answers) - scores.gather(1, task.distractors)).mean()


def test_pruning_to_a_metric_sees_each_batch_with_its_own_answers():
    """The loss on a batch is (m(masked) - m(full))^2 with that batch's answers: here batch 1 holds example 2 alone,
    whose answer is token 3 and distractor token 0."""
    batches = [{"input_ids": torch.zeros(2, 3, dtype=torch.long)}, {"input_ids": torch.zeros(1, 3, dtype=torch.long)}]
    data = PromptSet("p", batches, torch.tensor([[1], [2], [3]]), torch.tensor([[0], [0], [0]]))
    loss = metric_loss(logit_difference, data)
    masked = torch.tensor([[0.5, 0.0, 0.0, 2.0]], requires_grad=True)
    full = torch.tensor([[0.0, 0.0, 0.0, 4.0]])
    value = loss(masked, full, torch.tensor([2]))
    assert value.item() == pytest.approx(((2.0 - 0.5) - (4.0 - 0.0)) ** 2)
    value.backward()
    assert masked.grad is not None and masked.grad[0, 3].item() == pytest.approx(2 * (1.5 - 4.0))
    first = loss(torch.tensor([[0.0, 1.0, 5.0, 0.0], [0.0, 0.0, 1.0, 0.0]], requires_grad=True),
                 torch.zeros(2, 4), torch.tensor([0, 1]))  # batch 0: answers 1 and 2
    assert first.item() == pytest.approx(((1.0 + 1.0) / 2) ** 2)


@pytest.mark.filterwarnings("ignore:subnetwork 50% seed")  # a random model: where the masks settle is no matter
def test_a_metric_is_written_once_in_either_form(tiny_decoder_dirs):
    bridge = TransformerBridge.boot_transformers(str(tiny_decoder_dirs["llama"]), device="cpu")
    model = heurlens.wrap_bridge(bridge)
    dog, cat = model.tokenizer.convert_tokens_to_ids(["dog", "cat"])
    prompts = ["the man sees the", "a dog sees a", "the cat sees the", "a man sees a dog"] * 4
    means = heurlens.compute_means(model, prompts)
    with_task = {"dog_vs_cat": lambda scores, task: (scores[:, dog] - scores[:, cat]).mean()}
    transformerlens_form = {"dog_vs_cat": lambda logits: (logits[:, dog] - logits[:, cat]).mean()}
    assert takes_task(with_task["dog_vs_cat"]) and not takes_task(transformerlens_form["dog_vs_cat"])
    tables = [heurlens.ablate(model, "L1.H0", [prompts], means=means, metrics=metrics, cache=False)
              for metrics in (with_task, transformerlens_form)]
    assert tables[0].equals(tables[1]) and isinstance(tables[0]["full_dog_vs_cat"].item(), float)
    full = heurlens.predict_logits(model, prompts)
    assert tables[0]["full_dog_vs_cat"].item() == pytest.approx((full[:, dog] - full[:, cat]).mean().item())
    settings = heurlens.PruneSettings(units="heads", total_steps=40, warmup_steps=10, log_alpha_init=1.0)
    [kept] = heurlens.prune(model, prompts, sparsity=0.5, seeds=[0], means=means, config=settings, progress=False,
                            metric=transformerlens_form["dog_vs_cat"], cache=False)
    assert kept.hyperparameters["loss"] == "metric test_a_metric_is_written_once_in_either_form.<locals>.<lambda>"
    assert kept.metrics["final_train_loss"] >= 0
    with pytest.raises(HeurlensError, match="no gradient to prune with"):
        heurlens.prune(model, prompts, sparsity=0.5, seeds=[0], means=means, config=settings, progress=False,
                       metric=lambda scores: (scores.argmax(-1) == dog).float().mean(), cache=False)
    with pytest.raises(HeurlensError, match="not both"):
        heurlens.prune(model, prompts, metric=with_task["dog_vs_cat"], loss=lambda s, f, i: s.sum(), cache=False)
    with pytest.raises(HeurlensError, match="tensor of shape \\(16,\\)"):
        metric_value(lambda scores: scores[:, 0], full, heurlens.tokenize_texts(model, prompts), "per_row")
