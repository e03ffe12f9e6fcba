"""The README's main command's evaluation (`heurlens ablate --heads L4.H0`): before and after the full-logit cache
and length-batched evaluation sets, side by side.

Run: .venv/bin/python benchmarks/ablation_full_logit_cache.py [--heads L4.H0] [--rounds 3]

Both sides ablate the same head of the default model on the command's evaluation sets (2,000 SNLI test pairs and
the 30 HANS-style subcases x 200 pairs, batch 64) with the same unit means. "Before": pairs batched in data order,
the full model run next to the ablated one, as heurlens did until 2026-11-24. "After": pairs batched by length,
the full model's logits read from the disk cache (filled once before timing, as after a command's first run).
Rounds alternate the sides; the ratio of medians is printed, and the tables must agree (accuracy exactly, KL to
float tolerance: the batches differ, so the sums do).
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

import heurlens
from heurlens.data.hans import generate_hans, resolve_subcases
from heurlens.data.nli_setup import snli_reference_means
from heurlens.evaluate import predict_logits, tokenize_pairs
from heurlens.interventions.activation_cache import full_model_logits
from heurlens.runtime.call_context import call_context


def eval_sets(model, by_length: bool):
    sets = [tokenize_pairs("snli-test", heurlens.load_snli("test", limit=2000, seed=0), model.tokenizer, 64,
                           sort_by_length=by_length)]
    for subcase in resolve_subcases(None):
        sets.append(tokenize_pairs(f"hans/{subcase}", generate_hans(200, [subcase], seed=0), model.tokenizer, 64,
                                   sort_by_length=by_length))
    return sets


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--heads", default="L4.H0")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    model = heurlens.load_model("default")
    units = heurlens.parse_units(args.heads, model.n_layers, model.n_heads)
    means = snli_reference_means(model)
    before, after = eval_sets(model, by_length=False), eval_sets(model, by_length=True)
    for data in after:
        full_model_logits(model, data, call_context(model))  # the cache a command's first run leaves

    def run_before():
        return heurlens.ablate(model, units, before, method="mean", means=means,
                               full_logits={s.name: predict_logits(model, s) for s in before})

    def run_after():
        return heurlens.ablate(model, units, after, method="mean", means=means)

    times: dict[str, list[float]] = {"before": [], "after": []}
    tables = {}
    for _ in range(args.rounds):
        for name, run in (("before", run_before), ("after", run_after)):
            start = time.perf_counter()
            tables[name] = run()
            times[name].append(time.perf_counter() - start)
    same_accuracy = tables["before"]["ablated_accuracy"].equals(tables["after"]["ablated_accuracy"])
    kl_gap = (tables["before"]["kl"] - tables["after"]["kl"]).abs().max()
    print(f"ablating {args.heads} of the default model on {sum(len(s) for s in after):,} pairs "
          f"({len(after)} sets), {torch.get_num_threads()} threads, {args.rounds} rounds")
    for name in times:
        print(f"{name:>6}: {statistics.median(times[name]):.1f} s (median)")
    print(f"speed-up: {statistics.median(times['before']) / statistics.median(times['after']):.2f}x; "
          f"same accuracies: {same_accuracy}; largest KL difference: {kl_gap:.1e}")


if __name__ == "__main__":
    main()
