"""Throughput of training a sweep's transfer models together (``train_next_token_together``) over training
them one by one (``train_next_token``): same models, data, seeds and epochs, in one run.

Run: .venv/bin/python benchmarks/batched_transfer_training.py [--models 15] [--disambiguation 10] [--epochs 3]
     [--threads 2]

The models are the paper-scale ones (numbers 0..999 mod 7, GPT-2 with 2 layers, 4 heads, d_model 128,
d_mlp 512) prepared as a sweep prepares them at one sample count: ``--models`` runs cycling through the
conditions subtask induction, random subnetwork, random complement, full model, random init (seeds 0,
1, 2, ...), each on its own ambiguous set of 1000 + ``--disambiguation`` rows, batch 64, with the
evaluation and test sets of 1,000 rows after every epoch. The subnetwork is a random tenth of every
attention and MLP matrix of a freshly initialised "T1" model (the speed does not depend on which
weights are kept). Prints seconds for each side, the ratio, and the largest difference of the final
models' outputs and weights (attention key biases, whose gradient is zero in exact arithmetic, apart).
"""

from __future__ import annotations

import argparse
import time

import torch

from heurlens.subtask.arithmetic import ArithmeticTask, ambiguous_set, evaluation_set
from heurlens.subtask.batched_training import train_next_token_together
from heurlens.subtask.training import arithmetic_model, train_next_token
from heurlens.subtask.transfer import transfer_condition
from heurlens.subtask.weight_subnetwork import WeightSubnetwork

CONDITIONS = ("subtask induction", "random subnetwork", "random complement", "full model", "random init")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=int, default=15)
    parser.add_argument("--disambiguation", type=int, default=10)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    task = ArithmeticTask("a^2+ab", 1000, 7)

    def make_model(seed: int):
        return arithmetic_model(task, 2, seed)

    trained = make_model(0)
    generator = torch.Generator().manual_seed(0)
    subnetwork = WeightSubnetwork({name: torch.rand(p.shape, generator=generator) < 0.1
                                   for name, p in trained.named_parameters()
                                   if p.ndim == 2 and ".layers." in f".{name}"}, "a random tenth")
    runs = [(CONDITIONS[index % len(CONDITIONS)], index // len(CONDITIONS)) for index in range(args.models)]
    trains = [ambiguous_set(task, args.disambiguation, seed) for _, seed in runs]
    evaluation, test = evaluation_set(task, 1000, 11), evaluation_set(task, 1000, 12)

    def prepared():
        return [transfer_condition(condition, subnetwork, trained, make_model, seed + 100) for condition, seed in runs]

    alone_models = prepared()
    start = time.perf_counter()
    for (model, frozen), train, (_, seed) in zip(alone_models, trains, runs):
        train_next_token(model, train, evaluation, test, args.epochs, 2e-4, 64, frozen, seed, progress=False)
    alone_seconds = time.perf_counter() - start

    together_models = prepared()
    start = time.perf_counter()
    train_next_token_together([model for model, _ in together_models], trains, evaluation, test, args.epochs, 2e-4, 64,
                              [frozen for _, frozen in together_models], [seed for _, seed in runs], progress=False)
    together_seconds = time.perf_counter() - start

    probe = evaluation[:256, :-1]
    with torch.no_grad():
        output_difference = max(float((a(probe) - b(probe)).abs().max())
                                for (a, _), (b, _) in zip(alone_models, together_models))
        weight_difference = max(float((p - q).abs().max())
                                for (a, _), (b, _) in zip(alone_models, together_models)
                                for (name, p), q in zip(a.named_parameters(), b.parameters())
                                if not (".k." in name and p.ndim == 1))
    steps = args.epochs * -(-len(trains[0]) // 64)
    print(f"{args.models} models, {len(trains[0])} rows each, {args.epochs} epochs ({steps} steps per model), "
          f"{args.threads} threads")
    print(f"one by one: {alone_seconds:.1f} s   together: {together_seconds:.1f} s   "
          f"throughput ratio: {alone_seconds / together_seconds:.2f}x")
    print(f"largest difference after training: outputs {output_difference:.2e}, weights {weight_difference:.2e}")


if __name__ == "__main__":
    main()
