"""Time of one hard-concrete mask-training step over one plain forward+backward, same model and batch.

Run: .venv/bin/python benchmarks/mask_step_overhead.py [--model default] [--batch-size 32] [--steps 20]

Both sides run the same HookedClassifier on the same tokenised SNLI batch, in eval mode. The plain
side computes cross-entropy and backpropagates into every weight; the mask side is heurlens'
``train_unit_mask`` (mask sample, hooks on every layer, KL to precomputed full-model logits, the
Lagrangian term, backward into log_alpha only, one AdamW step), timed per step over a run of
``--steps`` steps by ``mask_timing.mask_step_seconds``. Rounds alternate the two sides; the ratio
of medians is printed.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
import torch.nn.functional as F
from mask_timing import mask_step_seconds

import heurlens
from heurlens.evaluate import EvalSet, predict_logits, tokenize_pairs
from heurlens.interventions.means import compute_means


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="default")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    model = heurlens.load_model(args.model)
    pairs = heurlens.load_snli("train", limit=args.batch_size, seed=0)
    one_batch: EvalSet = tokenize_pairs("bench", pairs, model.tokenizer, args.batch_size)
    batch, labels = one_batch.batches[0], one_batch.labels
    full_logits = predict_logits(model, one_batch)
    means = compute_means(model, one_batch)

    def plain_step() -> None:
        loss = F.cross_entropy(model(**batch), labels)
        loss.backward()
        model.zero_grad(set_to_none=True)

    def time_plain() -> float:
        start = time.perf_counter()
        for _ in range(args.steps):
            plain_step()
        return (time.perf_counter() - start) / args.steps

    def time_mask() -> float:
        return mask_step_seconds(model, one_batch, full_logits, means, args.steps)

    time_plain(), time_mask()  # warm-up
    plain, mask = [], []
    for _ in range(args.rounds):
        plain.append(time_plain())
        mask.append(time_mask())
    p, m = statistics.median(plain), statistics.median(mask)
    print(f"model {model.model_id}, batch {args.batch_size} x {batch['input_ids'].shape[1]} tokens, "
          f"{torch.get_num_threads()} threads, {args.rounds} rounds of {args.steps} steps")
    print(f"plain forward+backward: {1000 * p:.1f} ms/step")
    print(f"mask-training step:     {1000 * m:.1f} ms/step")
    print(f"ratio mask/plain:       {m / p:.3f}  (target <= 1.15)")


if __name__ == "__main__":
    main()
