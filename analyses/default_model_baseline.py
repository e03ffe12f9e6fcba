"""Accuracy of the embedded default model (no ablation) on SNLI test and every HANS-style subcase.

Run: .venv/bin/python analyses/default_model_baseline.py [--per-subcase 1000] [--out docs/results/...]
Writes a markdown table; the numbers recorded in docs/default-model.md come from this script.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import pandas as pd

import heurlens
from heurlens.data.nli_setup import nli_eval_sets
from heurlens.runtime.results_page import write_results_page


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-subcase", type=int, default=1000)
    parser.add_argument("--in-domain-examples", type=int, default=0, help="0 = the whole SNLI test set")
    parser.add_argument("--out", type=Path, default=Path("docs/results/default-model-baseline.md"))
    args = parser.parse_args()

    start = time.time()
    model = heurlens.load_model("default")
    rows = []
    for eval_set in nli_eval_sets(model, "snli", args.in_domain_examples or None, args.per_subcase):
        logits = heurlens.predict_logits(model, eval_set)
        rows.append({"eval_set": eval_set.name, "examples": len(eval_set),
                     "accuracy_%": round(100 * heurlens.accuracy(logits, eval_set, model.labels), 1)})
    table = pd.DataFrame(rows)
    write_results_page(args.out, f"# Default model baseline\n\nModel fingerprint `{model.fingerprint()}`; "
                        f"{args.per_subcase} pairs per HANS-style subcase; evaluation took "
                        f"{time.time() - start:.0f} s on this machine.\n\n```\n{table.to_string(index=False)}\n```\n")
    print(table.to_string(index=False))


if __name__ == "__main__":
    main()
