"""Pruning seeds stacked in one forward pass against the same seeds one by one, on this machine's device.

Run: .venv/bin/python benchmarks/stacked_seeds.py [--seeds 3] [--steps 120] [--rounds 2] [--device cpu]

The default model pruned to 50% on 1,000 SNLI training pairs (length-sorted batches of 16), ``--steps`` steps,
``--seeds`` seeds, ``prune(..., stack_seeds=False)`` and ``stack_seeds=True`` alternately; prints each round's
wall time, the medians' ratio, and whether both give the same subnetworks (they must). On a CPU the padding of
every seed's batch to the longest costs more than the stacking saves (docs/pruning.md); on a GPU it is the
default (``benchmarks/gpu.py`` compares the two devices).
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=120)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--device", default=None)
    args = parser.parse_args()
    warnings.simplefilter("ignore")  # a shortened run misses its target: said in every subnetwork, not here

    import torch

    import heurlens
    from heurlens.data.snli import load_snli
    from heurlens.evaluate import tokenize_pairs
    from heurlens.interventions.means import compute_means

    model = heurlens.load_model("default", device=args.device)
    data = tokenize_pairs("snli-train", load_snli("train", limit=1000, seed=0), model.tokenizer, 16,
                          sort_by_length=True)
    means = compute_means(model, data)
    config = heurlens.PruneSettings(total_steps=args.steps)
    heurlens.prune(model, data, sparsity=0.5, seeds=[0], means=means, config=heurlens.PruneSettings(total_steps=2),
                   progress=False)  # warm-up: the full logits cached, kernels loaded
    print(f"device {heurlens.runtime.devices.device_of(model)}, {torch.get_num_threads()} threads, {args.seeds} seeds x "
          f"{args.steps} steps")
    seconds: dict[bool, list[float]] = {False: [], True: []}
    kept: dict[bool, list] = {}
    for _ in range(args.rounds):
        for stacked in (False, True):
            start = time.perf_counter()
            found = heurlens.prune(model, data, sparsity=0.5, seeds=range(args.seeds), means=means, config=config,
                                   progress=False, stack_seeds=stacked)
            seconds[stacked].append(time.perf_counter() - start)
            kept[stacked] = [sub.kept for sub in found]
            print(f"  {'stacked   ' if stacked else 'one by one'} {seconds[stacked][-1]:.1f} s", flush=True)
    alone, together = statistics.median(seconds[False]), statistics.median(seconds[True])
    print(f"one by one {alone:.1f} s, stacked {together:.1f} s (medians): stacked is {alone / together:.2f}x; "
          f"same subnetworks: {kept[False] == kept[True]}")


if __name__ == "__main__":
    main()
