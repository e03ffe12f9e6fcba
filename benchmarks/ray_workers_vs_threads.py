"""Pruning seeds of the default model on 2 Ray workers of 1 thread each against 1 process of 2 threads.

Run: .venv/bin/python benchmarks/ray_workers_vs_threads.py [--seeds 4] [--steps 300]

Both sides prune the same seeds with the same settings (the default recipe, shortened to --steps mask
steps per seed so that the comparison takes minutes) without a run folder. The process side runs them one
after another with torch's 2 threads; the Ray side runs them as tasks of ``heurlens.runtime.distributed`` on a
local Ray instance with 2 workers, each given 1 thread. Ray's start-up is timed apart (a user pays it once
per command) and included in the second ratio. The subnetworks of the two sides are compared.
"""

from __future__ import annotations

import argparse
import os
import time

import torch

import heurlens
from heurlens.data.nli_setup import snli_pruning_data, snli_reference_means
from heurlens.pruning import PruneSettings, prune
from heurlens.runtime.distributed import Workers


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=4)
    parser.add_argument("--steps", type=int, default=300)
    args = parser.parse_args()
    import ray

    model = heurlens.load_model("default")
    data, means = snli_pruning_data(model), snli_reference_means(model)
    config = PruneSettings(total_steps=args.steps, warmup_steps=args.steps * 2 // 3)
    seeds = range(args.seeds)
    prune(model, data, sparsity=0.5, seeds=[0], config=PruneSettings(total_steps=2), means=means, progress=False)  # warm-up

    torch.set_num_threads(2)
    start = time.perf_counter()
    in_process = prune(model, data, sparsity=0.5, seeds=seeds, config=config, means=means, progress=False)
    process_seconds = time.perf_counter() - start

    start = time.perf_counter()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    ray_start_seconds = time.perf_counter() - start
    start = time.perf_counter()
    on_ray = prune(model, data, sparsity=0.5, seeds=seeds, config=config, means=means, progress=False, workers=Workers(2))
    ray_seconds = time.perf_counter() - start
    ray.shutdown()

    same = sum(a.kept == b.kept for a, b in zip(in_process, on_ray))
    print(f"default model, {args.seeds} seeds at 50%, {args.steps} mask steps each, {os.cpu_count()} cores")
    print(f"1 process x 2 threads: {process_seconds:.1f} s")
    print(f"2 Ray workers x 1 thread: {ray_seconds:.1f} s (+ {ray_start_seconds:.1f} s to start Ray)")
    print(f"throughput ratio (Ray / process): {process_seconds / ray_seconds:.2f}x; "
          f"with Ray's start-up: {process_seconds / (ray_seconds + ray_start_seconds):.2f}x")
    print(f"same subnetworks: {same} of {args.seeds}")


if __name__ == "__main__":
    main()
