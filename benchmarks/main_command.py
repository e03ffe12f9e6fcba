"""README's main command (``heurlens ablate --heads L4.H0``, warm: model fine-tuned and full model's activations
cached) with the code before the fixed-cost work and with this checkout, run alternately in one run, side by side.

Run: .venv/bin/python benchmarks/main_command.py [--before ed4c511] [--rounds 3]

"before": the heurlens source of git revision ``--before`` (default: the last commit before this work), run as its
console script ran it (``heurlens.cli.main``); "now": this checkout's ``python -m heurlens``. Both use this venv's
packages and the same heurlens cache, so both are warm (the default model and the full model's logits and residual
streams are cached; "now" also keeps its tokenised evaluation sets there). Each round runs both once, in turn; the
medians are printed with their ratio and whether the two printed the same table. The floor beside them is what any
command that loads a bridged BERT pays before it computes anything: importing torch, transformers and
TransformerLens and leaving the interpreter, timed as a bare ``python -c`` (and with this checkout's process
settings, ``heurlens.cli.process``).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

from code_before import REPO, heurlens_source

COMMAND = ["ablate", "--heads", "L4.H0"]
IMPORTS = "import torch, transformer_lens.model_bridge"


def timed(argv: list[str], cwd: Path) -> tuple[float, str]:
    start = time.perf_counter()
    result = subprocess.run(argv, cwd=cwd, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if result.returncode != 0:
        sys.exit(f"{' '.join(argv)} failed ({result.returncode}):\n{result.stderr[-2000:]}")
    return seconds, result.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", default="ed4c511", help="git revision of the code to compare with")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with heurlens_source(args.before) as old:
        runs = {
            "before": [sys.executable, "-c", "import sys; from heurlens.cli import main; sys.exit(main())", *COMMAND],
            "now": [sys.executable, "-m", "heurlens", *COMMAND],
            "floor: imports + interpreter exit": [sys.executable, "-c", IMPORTS],
            "floor with heurlens' process settings": [
                sys.executable, "-c", "import gc, os; gc.set_threshold(10_000, 10, 10); "
                f"{IMPORTS}; os._exit(0)"],
        }
        folders = {"before": old, "now": REPO}
        timed(runs["now"], REPO)  # the tokenised sets into the cache: "now" is measured warm, as "before"
        seconds: dict[str, list[float]] = {name: [] for name in runs}
        tables: dict[str, str] = {}
        for _ in range(args.rounds):
            for name, argv in runs.items():
                elapsed, tables[name] = timed(argv, folders.get(name, REPO))
                seconds[name].append(elapsed)
    median = {name: statistics.median(values) for name, values in seconds.items()}
    print(f"heurlens {' '.join(COMMAND)}, warm, median of {args.rounds} rounds (before = {args.before})")
    for name, value in median.items():
        print(f"  {name:40s} {value:6.2f} s   ({', '.join(f'{v:.2f}' for v in seconds[name])})")
    print(f"  before / now: {median['before'] / median['now']:.2f}x; same table: "
          f"{'yes' if tables['before'] == tables['now'] else 'NO'}")


if __name__ == "__main__":
    main()
