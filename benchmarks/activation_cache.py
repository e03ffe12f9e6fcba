"""The activation cache: the README main command and ablation scans with and without the full model's residual
streams read from disk, side by side in one run.

Run: .venv/bin/python benchmarks/activation_cache.py [--before REV] [--rounds 3]

1. The README main command, ``heurlens ablate --heads L4.H0``, as a user runs it (a new process: imports, model
   load, data, ablation), wall time. "before": the code at ``--before`` (a git revision, default the last commit
   before the activation cache; checked out to a temporary worktree and run with it first on ``PYTHONPATH``),
   which kept the full model's logits on disk and recomputed the lower blocks on every run. "first": this code
   on a cache without the residual stream (deleted before each round: a first ablation starting at layer 4 on
   this data). "repeated": this code again, the residual stream on disk.
2. In process, the ablation alone on the same evaluation sets (2,000 SNLI test pairs, 30 HANS-style subcases x
   200 pairs): L4.H0 and L0.H0 with the residual streams computed in memory (an empty cache capped at 0 GiB: as
   before) and read from the cache; a 12-head scan of layer 4 both ways.
3. Where the main command's import time goes (``python -X importtime``): the time of every module imported,
   summed per top-level package (each module's own time, without its imports).
Rounds alternate the variants; medians are printed with their ratios, and the tables must agree: "first" and
"repeated" bit for bit, "before" in every accuracy (its KL may differ in the ninth decimal: it reads full-model
logits computed by an earlier process, in the old cache folder).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pandas as pd

REPO = Path(__file__).resolve().parents[1]
MAIN_COMMAND = ["-m", "heurlens", "ablate", "--heads", "L4.H0", "--json"]
BEFORE = "49b7e5a"  # main on 2026-11-25, before the activation cache


Result = TypeVar("Result")


def timed(run: Callable[[], Result]) -> tuple[float, Result]:
    start = time.perf_counter()
    result = run()
    return time.perf_counter() - start, result


def main_command(python_path: Path) -> str:
    env = os.environ | {"PYTHONPATH": str(python_path)}
    result = subprocess.run([sys.executable, *MAIN_COMMAND], capture_output=True, text=True, env=env, cwd=python_path)
    if result.returncode != 0:
        raise SystemExit(result.stderr[-2000:])
    return result.stdout


def import_times(python_path: Path) -> collections.Counter[str]:
    """Microseconds of the main command spent importing each top-level package (``-X importtime``'s self times)."""
    env = os.environ | {"PYTHONPATH": str(python_path)}
    result = subprocess.run([sys.executable, "-X", "importtime", *MAIN_COMMAND], capture_output=True, text=True,
                            env=env, cwd=python_path)
    per_package: collections.Counter[str] = collections.Counter()
    for line in result.stderr.splitlines():
        if line.startswith("import time:") and "self [us]" not in line:
            own, _, name = line[len("import time:"):].split("|")
            per_package[name.strip().split(".")[0]] += int(own)
    return per_package


def forget_residuals(layer: int) -> None:
    """Delete every stored residual stream entering ``layer`` (the first run's state for an ablation there)."""
    from heurlens.runtime.cache import cache_dir

    for path in (cache_dir() / "activations").glob(f"*/residual-{layer}.safetensors"):
        path.unlink()


def report(title: str, times: dict[str, list[float]], baseline: str) -> None:
    print(f"\n{title}")
    base = statistics.median(times[baseline])
    for name, values in times.items():
        median = statistics.median(values)
        print(f"  {name:<34} {median:6.1f} s median of {len(values)} ({', '.join(f'{v:.1f}' for v in values)}); "
              f"{median / base:.2f} of {baseline}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", default=BEFORE)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    import heurlens
    from heurlens.data.run_data import NliData
    from heurlens.interventions.activation_cache import full_model_logits
    from heurlens.interventions.units import Unit
    from heurlens.runtime.call_context import call_context

    # 1. the main command, three ways
    with tempfile.TemporaryDirectory() as scratch:
        before_tree = Path(scratch) / "before"
        subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", str(before_tree), args.before],
                       check=True, capture_output=True)
        try:
            outputs = {}
            command_times: dict[str, list[float]] = {"before (full logits cached)": [], "first (residual computed)": [],
                                                     "repeated (residual read)": []}
            main_command(before_tree)
            main_command(REPO)  # both sides' means and full logits on disk, as after any earlier command
            for _ in range(args.rounds):
                for name in command_times:
                    if name.startswith("first"):
                        forget_residuals(4)
                    tree = before_tree if name.startswith("before") else REPO
                    seconds, outputs[name] = timed(lambda: main_command(tree))  # noqa: B023 (called at once)
                    command_times[name].append(seconds)
        finally:
            subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(before_tree)], check=True)
    print(f"README main command `heurlens {' '.join(MAIN_COMMAND[2:-1])}`, wall time; before = {args.before}")
    report("1. the main command", command_times, "before (full logits cached)")
    before, first, repeated = (json.loads(text) for text in outputs.values())
    print("  first and repeated: the same table:", first == repeated)
    kl_gap = max(abs(old["kl"] - new["kl"]) for old, new in zip(before, repeated))
    print("  before and repeated: the same accuracies:",
          all(old["ablated_accuracy"] == new["ablated_accuracy"] for old, new in zip(before, repeated)),
          f"largest KL difference {kl_gap:.1e} (before reads the full logits of its own older cache, which may",
          "differ from a fresh computation in float rounding)", flush=True)

    # 2. the ablation alone, in process
    model = heurlens.load_model("default")
    data = NliData()
    eval_sets, means = data.eval_sets(model), data.means(model)
    full = {s.name: full_model_logits(model, s, call_context(model)) for s in eval_sets}
    scan = [Unit(4, head) for head in range(model.n_heads)]

    def in_memory(run: Callable[[], pd.DataFrame]) -> Callable[[], pd.DataFrame]:
        def without_cache() -> pd.DataFrame:
            with tempfile.TemporaryDirectory() as empty:
                saved = {k: os.environ.get(k) for k in ("HEURLENS_CACHE", "HEURLENS_CACHE_LIMIT_GB")}
                os.environ |= {"HEURLENS_CACHE": empty, "HEURLENS_CACHE_LIMIT_GB": "0"}
                try:
                    return run()
                finally:
                    for key, value in saved.items():
                        os.environ.pop(key) if value is None else os.environ.__setitem__(key, value)
        return without_cache

    ablate = {head: (lambda head=head: heurlens.ablate(model, head, eval_sets, method="mean", means=means,
                                                       full_logits=full)) for head in ("L4.H0", "L0.H0")}
    layer_scan = lambda: heurlens.single_unit_scan(model, scan, eval_sets, means=means, full_logits=full,  # noqa: E731
                                                   progress=False)
    variants = {"L4.H0, lower blocks in memory": in_memory(ablate["L4.H0"]),
                "L4.H0, residual read": ablate["L4.H0"],
                "L0.H0 (nothing below to skip)": ablate["L0.H0"],
                "layer-4 scan, lower blocks in memory": in_memory(layer_scan),
                "layer-4 scan, residual read": layer_scan}
    ablate["L4.H0"]()  # the layer-4 residual streams on disk
    times: dict[str, list[float]] = {name: [] for name in variants}
    results = {}
    for _ in range(args.rounds):
        for name, run in variants.items():
            seconds, results[name] = timed(run)
            times[name].append(seconds)
    examples = sum(len(s) for s in eval_sets)
    report(f"2. the ablation alone ({examples:,} pairs, {len(eval_sets)} sets)",
           {k: times[k] for k in list(variants)[:3]}, "L4.H0, lower blocks in memory")
    report("   a 12-head scan of layer 4", {k: times[k] for k in list(variants)[3:]},
           "layer-4 scan, lower blocks in memory")
    same = (results["L4.H0, lower blocks in memory"].equals(results["L4.H0, residual read"])
            and results["layer-4 scan, lower blocks in memory"].equals(results["layer-4 scan, residual read"]))
    print("  same tables with and without the cache:", same)

    # 3. import time of the main command
    packages = import_times(REPO)
    total = sum(packages.values()) / 1e6
    print(f"\n3. the main command's imports: {total:.1f} s in all; "
          + ", ".join(f"{name} {micros / 1e6:.2f} s" for name, micros in packages.most_common(8))
          + f"; heurlens itself {packages['heurlens'] / 1e6:.2f} s")


if __name__ == "__main__":
    main()
