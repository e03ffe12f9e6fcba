"""How much training several pruning seeds in one pass could gain on this machine: the time of one
forward+backward of the default model per 16-pair batch, alone and stacked 4 and 12 times.

Run: .venv/bin/python benchmarks/seed_batching_headroom.py [--rounds 3]

Batched seeds (issue 18) would run S seeds' masks on S copies of a batch in one forward and backward. On
hardware where a 16-pair step leaves the device idle (a GPU), a stacked step costs about as much as one and
S seeds cost about one; where the step is compute-bound, stacking buys only what the larger matrix products
gain in efficiency. This measures exactly that ceiling, with the gradient flowing to one scalar on every MLP
output (as the masks' does, no weight gradients). Rounds alternate the sizes; the best time per round is kept
and the ratio of per-batch times (alone / stacked) printed: the most batched seeds could gain.
"""

from __future__ import annotations

import argparse
import time

import torch

import heurlens
from heurlens.data.nli_setup import snli_pruning_data


def seconds_per_batch(model, batch: dict, copies: int, rounds: int) -> float:
    stacked = {k: v.repeat(copies, 1) for k, v in batch.items()}
    scale = torch.ones(1, requires_grad=True)
    hooks = [(f"blocks.{layer}.hook_mlp_out", lambda a, hook: a * scale) for layer in range(model.n_layers)]
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        with model.hooks(hooks):
            model(**stacked).logsumexp(-1).sum().backward()
        best = min(best, time.perf_counter() - start)
    return best / copies


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    model = heurlens.load_model("default")
    for parameter in model.parameters():
        parameter.requires_grad_(False)
    data = snli_pruning_data(model)
    batch = data.batches[len(data.batches) // 2]  # a median-length batch of the pruning data
    times = {copies: seconds_per_batch(model, batch, copies, args.rounds) for copies in (1, 4, 12)}
    print(f"default model, batch {tuple(batch['input_ids'].shape)}, {torch.get_num_threads()} threads")
    for copies, seconds in times.items():
        print(f"{copies:>2} copies: {1000 * seconds:.1f} ms per 16-pair batch; "
              f"ceiling of batched seeds {times[1] / seconds:.2f}x")


if __name__ == "__main__":
    main()
