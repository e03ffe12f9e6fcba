"""Mask-training time per step on SNLI pairs batched in data order vs batched by length.

Run: .venv/bin/python benchmarks/length_sorted_batches.py [--model default] [--examples 2000] [--steps 100]

Both sides run heurlens' ``train_unit_mask`` for ``--steps`` steps on the same ``--examples``
SNLI training pairs, batch 16, each batch padded to its longest pair; one side tokenises them in
data order (``tokenize_pairs``), the other sorted by length (``sort_by_length=True``, what
``heurlens prune`` uses). Rounds alternate the two sides; the ratio of medians is printed, with
the padding each side carries.
"""

from __future__ import annotations

import argparse
import statistics

import torch
from mask_timing import mask_step_seconds

import heurlens
from heurlens.evaluate import EvalSet, predict_logits, tokenize_pairs
from heurlens.interventions.means import compute_means


def padding_fraction(data: EvalSet) -> float:
    return 1 - sum(int(b["attention_mask"].sum()) for b in data.batches) / sum(b["input_ids"].numel() for b in data.batches)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="default")
    parser.add_argument("--examples", type=int, default=2000)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    model = heurlens.load_model(args.model)
    pairs = heurlens.load_snli("train", limit=args.examples, seed=0)
    sides = {"data order": tokenize_pairs("bench", pairs, model.tokenizer, args.batch_size),
             "by length": tokenize_pairs("bench", pairs, model.tokenizer, args.batch_size, sort_by_length=True)}
    means = compute_means(model, sides["data order"])
    full_logits = {name: predict_logits(model, data) for name, data in sides.items()}

    times: dict[str, list[float]] = {name: [] for name in sides}
    for _ in range(args.rounds):
        for name, data in sides.items():
            times[name].append(mask_step_seconds(model, data, full_logits[name], means, args.steps))
    print(f"model {model.model_id}, {args.examples} SNLI pairs, batch {args.batch_size}, "
          f"{torch.get_num_threads()} threads, {args.rounds} rounds of {args.steps} steps")
    for name, data in sides.items():
        print(f"{name:>10}: {1000 * statistics.median(times[name]):.1f} ms/step, "
              f"{padding_fraction(data):.0%} of tokens are padding")
    ratio = statistics.median(times["data order"]) / statistics.median(times["by length"])
    print(f"speed-up of batching by length: {ratio:.2f}x")


if __name__ == "__main__":
    main()
