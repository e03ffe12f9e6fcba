"""Evaluation in bfloat16 (this CPU has AVX-512 BF16) against float32: speed, and what it changes in the numbers.

Run: .venv/bin/python benchmarks/bf16_evaluation.py [--heads L4.H0] [--rounds 3]

Both sides evaluate the default model on the README main command's evaluation sets (2,000 SNLI test pairs
and the 30 HANS-style subcases x 200 pairs, batched by length), full and with --heads mean-ablated. float32 is
what heurlens does; bfloat16 runs the same forward under ``torch.autocast("cpu", dtype=torch.bfloat16)``
(matrix products in bf16, softmax and LayerNorm in float32). Rounds alternate the sides, the ratio of median
times is printed, then for each side the accuracies per set kind and, against float32, the largest accuracy
change on any set, the fraction of examples whose predicted label changes and the mean KL between the two
sides' outputs.
"""

from __future__ import annotations

import argparse
import statistics
import time
from contextlib import nullcontext

import torch

import heurlens
from heurlens.data.nli_setup import nli_eval_sets, snli_reference_means
from heurlens.evaluate import accuracy, mean_kl, predict_logits
from heurlens.interventions.ablation import ablation_hooks


def logits_on(model, sets, hooks, bf16: bool) -> list[torch.Tensor]:
    with torch.autocast("cpu", dtype=torch.bfloat16) if bf16 else nullcontext():
        return [predict_logits(model, eval_set, fwd_hooks=hooks) for eval_set in sets]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--heads", default="L4.H0")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    model = heurlens.load_model("default")
    sets = nli_eval_sets(model)
    means = snli_reference_means(model)
    units = heurlens.parse_units(args.heads, model.n_layers, model.n_heads)
    variants = {"full": [], f"{args.heads} ablated": ablation_hooks(model, units, method="mean", means=means)}
    seconds: dict[bool, list[float]] = {False: [], True: []}
    outputs: dict[tuple[str, bool], list[torch.Tensor]] = {}
    for _ in range(args.rounds):
        for bf16 in (False, True):
            start = time.perf_counter()
            for name, hooks in variants.items():
                outputs[name, bf16] = logits_on(model, sets, hooks, bf16)
            seconds[bf16].append(time.perf_counter() - start)
    fp32, reduced = statistics.median(seconds[False]), statistics.median(seconds[True])
    examples = sum(len(s) for s in sets)
    print(f"default model, {len(sets)} sets ({examples} pairs), full + ablated, {torch.get_num_threads()} threads")
    print(f"float32 {fp32:.1f} s, bfloat16 {reduced:.1f} s (medians of {args.rounds}): speed-up {fp32 / reduced:.2f}x")
    for name in variants:
        exact, low = outputs[name, False], outputs[name, True]
        changes = [abs(accuracy(b, s, model.labels) - accuracy(a, s, model.labels)) for a, b, s in zip(exact, low, sets)]
        flipped = sum(int((a.argmax(-1) != b.argmax(-1)).sum()) for a, b in zip(exact, low)) / examples
        kl = sum(mean_kl(a, b) * len(s) for a, b, s in zip(exact, low, sets)) / examples
        in_domain = (accuracy(exact[0], sets[0], model.labels), accuracy(low[0], sets[0], model.labels))
        print(f"{name}: SNLI accuracy {100 * in_domain[0]:.2f}% (float32) vs {100 * in_domain[1]:.2f}% (bfloat16); "
              f"largest change on a set {100 * max(changes):.2f} points; predicted label changed on "
              f"{100 * flipped:.2f}% of pairs; mean KL(float32 || bfloat16) {kl:.2e} nats")


if __name__ == "__main__":
    main()
