"""The library's arguments checked at its door (heurlens.runtime.argument_checks, issue 63): a wrong type is one line that
names the function, the argument and the type it needs, before any work; the right ones still run."""

import pytest
import torch

import heurlens
from heurlens.errors import HeurlensError


@pytest.fixture(scope="module")
def llama(tiny_decoder_dirs):
    return heurlens.load_model(tiny_decoder_dirs["llama"])


TOKENS = torch.tensor([[2, 3, 4, 5], [3, 4, 5, 6]])


@pytest.mark.parametrize("call, message", [
    (lambda m: heurlens.prune(m, TOKENS, sparsity="0.5"), "prune(): sparsity='0.5' is not float | Iterable[float]"),
    (lambda m: heurlens.prune(m, TOKENS, seeds=3), "prune(): seeds=3 is not Iterable[int]"),
    (lambda m: heurlens.prune(m, TOKENS, batch_size=0), "prune(): batch_size=0 is not int >= 1 | None"),
    (lambda m: heurlens.prune(m, TOKENS, batch_size=-3), "prune(): batch_size=-3 is not int >= 1 | None"),
    (lambda m: heurlens.prune(m, TOKENS, cache="no"), "prune(): cache='no' is not bool | None"),
    (lambda m: heurlens.prune(m, TOKENS, config={"total_steps": 2}), "prune(): config={'total_steps': 2} is not "
                                                                      "PruneSettings"),
    (lambda m: heurlens.ablate(m, "L0.H0", [TOKENS], metrics=[len]), "ablate(): metrics=[<built-in function len>] is "
                                                                      "not Metrics | None"),
    (lambda m: heurlens.ablate(m, [], [TOKENS]), "units= names no unit"),
    (lambda m: heurlens.compute_means(m, TOKENS, prepend_bos="yes"), "compute_means(): prepend_bos='yes' is not "
                                                                      "bool | None"),
    (lambda m: heurlens.token_batches(TOKENS, batch_size=0), "token_batches(): batch_size=0 is not int >= 1"),
    (lambda m: heurlens.single_unit_scan(m, "L0.*", [TOKENS], progress="no"), "single_unit_scan(): progress='no' "
                                                                               "is not bool"),
    (lambda m: heurlens.PruneSettings(total_steps=2.5), "pruning setting total_steps = 2.5 is not int | None"),
    (lambda m: heurlens.PruneSettings(lr_log_alpha="0.1"), "pruning setting lr_log_alpha = '0.1' is not float"),
    (lambda m: heurlens.predict_logits(m, torch.tensor([[2, 3, 99]])), "token ids run from 2 to 99, and the model's "
                                                                       "vocabulary has ids 0 to 10"),
    (lambda m: heurlens.predict_logits(m, torch.full((1, 40), 2)), "sequences of 40 tokens, and the model's context "
                                                                   "is 32"),
])
def test_a_wrong_argument_is_one_line_naming_it_before_any_work(llama, call, message):
    with pytest.raises(HeurlensError) as refused:
        call(llama)
    assert message in str(refused.value) and "\n" not in str(refused.value)


def test_the_right_arguments_still_run_and_an_int_is_taken_for_a_float(llama):
    means = heurlens.compute_means(llama, TOKENS)
    table = heurlens.ablate(llama, "L0.H0", [TOKENS], means=means, metrics={}, cache=False)
    assert table["kl"].iloc[0] > 0
    assert heurlens.PruneSettings(lr_log_alpha=1).lr_log_alpha == 1  # an int where a float goes, as Python takes it
    [subnetwork] = heurlens.prune(llama, TOKENS, sparsity=0, seeds=range(1), progress=False, cache=False,
                                  config=heurlens.PruneSettings(total_steps=1))
    assert subnetwork.target_sparsity == 0
