"""The same work on the CPU and on a GPU, side by side in one run: the README main command's evaluation (float32
and bfloat16), a 3-seed prune of the default model at 50%, 12 pruning seeds stacked against one by one, and 16
Subtask Induction transfer runs stacked against one by one.

Run: .venv/bin/python benchmarks/gpu.py [--quick] [--gpu cuda]

Prints "no CUDA device" and exits 0 where torch sees no GPU. Each part runs first on the CPU, then on ``--gpu``;
the ratio CPU / GPU is printed with the GPU's peak memory, and the results must agree (the ablation table to
1e-4; the pruned subnetworks; the transfer runs' test accuracies). ``--quick``: fewer pruning steps and transfer
epochs (a check that everything runs, not a measurement); ``--gpu cpu --quick`` checks the script without a GPU
(it ran end to end on 2026-11-25: every part "same results: True"). Not measured yet: no GPU was lent to the
sessions that wrote this (see README, "On a GPU").
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

import pandas as pd
import torch

if TYPE_CHECKING:
    from heurlens.runtime.precision import Precision


Result = TypeVar("Result")


def timed(run: Callable[[], Result]) -> tuple[float, Result]:
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    start = time.perf_counter()
    result = run()
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    return time.perf_counter() - start, result


def main_command_evaluation(device: str, dtype: Precision = "float32"):
    """``heurlens ablate --heads L4.H0``'s table on ``device`` (the activation cache filled first: the ablation)."""
    import heurlens
    from heurlens.data.run_data import NliData

    model = heurlens.load_model("default", device=device)
    data = NliData()
    eval_sets, means = data.eval_sets(model), data.means(model)
    heurlens.ablate(model, "L4.H0", eval_sets, method="mean", means=means, dtype=dtype)  # fills the caches
    return lambda: heurlens.ablate(model, "L4.H0", eval_sets, method="mean", means=means, dtype=dtype)


def prune_seeds(device: str, seeds: int, steps: int | None, stacked: bool):
    """The default model pruned to 50% with ``seeds`` seeds, one after another or ``stacked``: the kept units."""
    import heurlens
    from heurlens.data.run_data import NliData

    model = heurlens.load_model("default", device=device)
    data = NliData()
    train, means = data.train(model), data.means(model)
    config = heurlens.PruneSettings() if steps is None else heurlens.PruneSettings(total_steps=steps)

    def run():
        return [[str(unit) for unit in s.kept] for s in heurlens.prune(
            model, train, sparsity=0.5, seeds=range(seeds), config=config, means=means, progress=False, stack_seeds=stacked)]
    return run


def sixteen_transfers(device: str, epochs: int, stacked: bool):
    from heurlens.subtask.arithmetic import ArithmeticTask, ambiguous_set, evaluation_set
    from heurlens.subtask.batched_training import train_next_token_together
    from heurlens.subtask.training import arithmetic_model, train_next_token

    task = ArithmeticTask("a^2+b^2", max_value=100)
    trains = [ambiguous_set(task, 100, seed) for seed in range(16)]
    evaluation, test = evaluation_set(task, 1000, 11), evaluation_set(task, 1000, 12)

    def run():
        models = [arithmetic_model(task, 2, seed, device) for seed in range(16)]
        if stacked:
            results = train_next_token_together(models, trains, evaluation, test, epochs, 5e-4, 64,
                                                seeds=list(range(16)), progress=False)
        else:
            results = [train_next_token(model, train, evaluation, test, epochs, 5e-4, 64, seed=seed, progress=False)
                       for seed, (model, train) in enumerate(zip(models, trains))]
        return [round(r.test_accuracy, 3) for r in results]
    return run


def compare(name: str, make: Callable[[str], Callable[[], object]], gpu: str) -> None:
    seconds, results = {}, {}
    for device in ("cpu", gpu):
        run = make(device)
        if device.startswith("cuda"):
            torch.cuda.reset_peak_memory_stats()
        seconds[device], results[device] = timed(run)
    peak = f", peak GPU memory {torch.cuda.max_memory_allocated() / 2**30:.2f} GiB" if gpu.startswith("cuda") else ""
    print(f"{name}: cpu {seconds['cpu']:.1f} s, {gpu} {seconds[gpu]:.1f} s, cpu / {gpu} = "
          f"{seconds['cpu'] / seconds[gpu]:.2f}x{peak}")
    first, second = results["cpu"], results[gpu]
    if isinstance(first, pd.DataFrame) and isinstance(second, pd.DataFrame):
        same = bool(((first.select_dtypes("number") - second.select_dtypes("number")).abs() <= 1e-4).all().all())
    else:
        same = first == second
    print(f"  same results: {same}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--gpu", default="cuda", help="The GPU to compare with (cpu only to check this script).")
    args = parser.parse_args()
    warnings.simplefilter("ignore")  # shortened prunes miss their targets: recorded in each subnetwork, not timed
    if args.gpu.startswith("cuda") and not torch.cuda.is_available():
        print("no CUDA device")
        sys.exit(0)
    if args.gpu.startswith("cuda"):
        print(f"GPU: {torch.cuda.get_device_name(args.gpu)}; CPU threads: {torch.get_num_threads()}")
    epochs = 1 if args.quick else 10
    steps = 30 if args.quick else None
    compare("README main command's evaluation (L4.H0, 8,000 pairs)", main_command_evaluation, args.gpu)
    compare("the same in bfloat16", lambda d: main_command_evaluation(d, "bfloat16"), args.gpu)
    compare("prune the default model at 50%, 3 seeds", lambda d: prune_seeds(d, 3, steps, False), args.gpu)
    short = 300 if not args.quick else steps  # 12 seeds of the full 1,516 steps would take hours on the CPU
    compare(f"12 pruning seeds one by one ({short} steps)", lambda d: prune_seeds(d, 12, short, False), args.gpu)
    compare(f"12 pruning seeds stacked ({short} steps)", lambda d: prune_seeds(d, 12, short, True), args.gpu)
    compare(f"16 transfer runs one by one ({epochs} epochs)", lambda d: sixteen_transfers(d, epochs, False), args.gpu)
    compare(f"16 transfer runs stacked ({epochs} epochs)", lambda d: sixteen_transfers(d, epochs, True), args.gpu)


if __name__ == "__main__":
    main()
