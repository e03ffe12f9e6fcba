"""The standard NLI set-up of the Heuristic Core paper with offline data: an in-domain set plus HANS-style subcases,
and unit means over SNLI training pairs (cached on disk per model fingerprint)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from heurlens.runtime.cache import cache_dir, disk_cache_enabled, stored

if TYPE_CHECKING:  # the functions import what they run on: the CLI reads the defaults below without torch
    from heurlens.evaluate import EvalSet
    from heurlens.interventions.means import UnitMeans
    from heurlens.protocols import PreparedModel


def nli_eval_sets(model: PreparedModel, in_domain: str | Path = "snli", in_domain_examples: int | None = 2000,
                  per_subcase: int = 1000, subcases: list[str] | None = None, seed: int = 0,
                  batch_size: int = 64) -> list[EvalSet]:
    """The in-domain set (SNLI test, or a local pair file) followed by one set per HANS-style subcase, each
    batched by length (less padding; accuracy and KL are means, so the order does not change them). Built once per
    model and choice of data, then read from heurlens' cache (``heurlens.data.tokenised_sets``)."""
    import heurlens.data.hans
    import heurlens.data.snli
    import heurlens.evaluate
    from heurlens.data.hans import resolve_subcases
    from heurlens.data.tokenised_sets import cached_eval_sets, content_key

    chosen = [str(in_domain), str(in_domain_examples), str(per_subcase), ",".join(resolve_subcases(subcases)),
              str(seed), str(batch_size)]
    makers = [Path(module.__file__ or "") for module in (heurlens.data.hans, heurlens.data.snli, heurlens.evaluate)]
    own_file = [Path(in_domain)] if str(in_domain) != "snli" and Path(in_domain).is_file() else []
    return cached_eval_sets(model.fingerprint(), content_key(chosen, makers + own_file), lambda: nli_eval_sets_for(
        model.tokenizer, in_domain, in_domain_examples, per_subcase, subcases, seed, batch_size))


def nli_eval_sets_for(tokenizer, in_domain: str | Path = "snli", in_domain_examples: int | None = 2000,
                      per_subcase: int = 1000, subcases: list[str] | None = None, seed: int = 0,
                      batch_size: int = 64) -> list[EvalSet]:
    """``nli_eval_sets`` tokenised by ``tokenizer`` (an HF tokenizer), for a model that is not bridged."""
    from heurlens.data.files import load_pair_file
    from heurlens.data.hans import generate_hans, resolve_subcases
    from heurlens.data.snli import load_snli
    from heurlens.evaluate import tokenize_pairs

    if str(in_domain) == "snli":
        data, name = load_snli("test", limit=in_domain_examples, seed=seed), "snli-test"
    else:
        data, name = load_pair_file(in_domain), Path(in_domain).name
        if in_domain_examples is not None and in_domain_examples < len(data):
            data = data.shuffle(seed=seed).select(range(in_domain_examples))
    sets = [tokenize_pairs(name, data, tokenizer, batch_size, sort_by_length=True)]
    for subcase in resolve_subcases(subcases):
        pairs = generate_hans(per_subcase, [subcase], seed=seed)
        sets.append(tokenize_pairs(f"hans/{subcase}", pairs, tokenizer, batch_size, sort_by_length=True))
    return sets


REFERENCE_PAIRS = 8000  # the SNLI training pairs (sample seed 0) the default model was fine-tuned on
PRUNING_PAIRS = REFERENCE_PAIRS  # what heurlens prune and the analyses prune on by default (the same pairs)
PRUNING_BATCH = 16  # pairs per micro-batch of mask training, by default


def snli_pruning_data(model: PreparedModel, examples: int = PRUNING_PAIRS, batch_size: int = PRUNING_BATCH
                      ) -> EvalSet:
    """``examples`` SNLI training pairs (sample seed 0) to prune on, batched by length (see tokenize_pairs)."""
    from heurlens.data.snli import load_snli
    from heurlens.evaluate import tokenize_pairs

    return tokenize_pairs("snli-train", load_snli("train", limit=examples, seed=0), model.tokenizer, batch_size,
                          sort_by_length=True)


def snli_reference_means(model: PreparedModel, examples: int = REFERENCE_PAIRS, seed: int = 0,
                         batch_size: int = 64) -> UnitMeans:
    """Unit means over ``examples`` SNLI training pairs: by default the one reference set that ablation,
    pruning, evaluation and the analyses all replace units by. Computed once per model and cached (a
    cache file that cannot be read back whole is computed again)."""
    from heurlens.data.snli import load_snli
    from heurlens.evaluate import tokenize_pairs
    from heurlens.interventions.means import UnitMeans, compute_means

    def compute() -> UnitMeans:
        pairs = load_snli("train", limit=examples, seed=seed)
        return compute_means(model, tokenize_pairs("snli-train", pairs, model.tokenizer, batch_size))

    if not disk_cache_enabled():
        return compute()
    path = cache_dir() / "means" / f"{model.fingerprint()}-snli-train-{examples}-s{seed}.safetensors"

    def load() -> UnitMeans:  # a file of another shape (damaged, or edited) is computed again, like a cut one
        means = UnitMeans.load(path)
        means.check_fits(model)
        return means

    return stored(path, compute, lambda means: means.save(path), load)
