"""A scan of every head of the default model: one whole pass per head with TransformerLens hooks, against the scan
heurlens runs (each head's pass resumed at its layer from the full model's blocks below, computed once per batch).

Run: .venv/bin/python benchmarks/resumed_ablation_scan.py [--pairs 1000] [--rounds 1]

Both sides mean-ablate each of the 72 heads alone on the same length-batched SNLI test pairs (batch 64), with the
same unit means and the same cached full-model logits, and build the same table (accuracy and KL per head).
"Hook loop": ``predict_logits`` with the head's ablation hooks, head after head, as heurlens did until
2026-11-24. "Resumed scan": ``single_unit_scan``. Rounds alternate the sides; the ratio of medians is printed,
and the tables must be equal (the logits are the same bits). The FLOP count it is held against: a head of layer
L needs blocks L..5 only, 3.5 of 6 blocks on average over the heads, so at most 6 / 3.5 = 1.71x.
"""

from __future__ import annotations

import argparse
import statistics
import time

import pandas as pd
import torch

import heurlens
from heurlens.analysis.ablation_studies import single_unit_scan
from heurlens.data.nli_setup import snli_reference_means
from heurlens.evaluate import accuracy, mean_kl, predict_logits, tokenize_pairs
from heurlens.interventions.ablation import ablation_hooks
from heurlens.interventions.activation_cache import full_model_logits
from heurlens.interventions.units import all_units
from heurlens.runtime.call_context import call_context


def hook_loop(model, heads, eval_set, means, full) -> pd.DataFrame:
    rows = []
    for head in heads:
        ablated = predict_logits(model, eval_set, fwd_hooks=ablation_hooks(model, [head], method="mean", means=means))
        rows.append({"ablated": str(head), "accuracy": accuracy(ablated, eval_set, model.labels),
                     "kl": mean_kl(full, ablated)})
    return pd.DataFrame(rows)


def resumed_scan(model, heads, eval_set, means, full) -> pd.DataFrame:
    scan = single_unit_scan(model, heads, [eval_set], means=means, full_logits={eval_set.name: full}, progress=False)
    return scan[["ablated", "accuracy", "kl"]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()

    model = heurlens.load_model("default")
    heads = [unit for unit in all_units(model.n_layers, model.n_heads) if not unit.is_mlp]
    means = snli_reference_means(model)
    eval_set = tokenize_pairs("snli-test", heurlens.load_snli("test", limit=args.pairs, seed=0), model.tokenizer, 64,
                              sort_by_length=True)
    full = full_model_logits(model, eval_set, call_context(model))
    times: dict[str, list[float]] = {"hook loop": [], "resumed scan": []}
    tables = {}
    for _ in range(args.rounds):
        for name, run in (("hook loop", hook_loop), ("resumed scan", resumed_scan)):
            start = time.perf_counter()
            tables[name] = run(model, heads, eval_set, means, full)
            times[name].append(time.perf_counter() - start)
    same = tables["hook loop"].reset_index(drop=True).equals(tables["resumed scan"].reset_index(drop=True))
    print(f"scanning {len(heads)} heads of the default model on {len(eval_set):,} SNLI test pairs, "
          f"{torch.get_num_threads()} threads, {args.rounds} round(s)")
    for name in times:
        print(f"{name:>12}: {statistics.median(times[name]):.1f} s (median)")
    print(f"speed-up: {statistics.median(times['hook loop']) / statistics.median(times['resumed scan']):.2f}x "
          f"(FLOP bound 1.71x); same table: {same}")


if __name__ == "__main__":
    main()
