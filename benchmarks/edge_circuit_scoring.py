"""Scoring edge circuits before and after the one intervention layer (issue 64), side by side in one run.

Run: .venv/bin/python benchmarks/edge_circuit_scoring.py [--before ad2c1f5] [--prompts 32] [--circuits 4] [--rounds 3]

The same edge circuits of SmolLM2 (``--circuits`` random top-k masks at 95% edge sparsity, seeded) are scored on
``--prompts`` IOI prompts with their corrupted prompts, in a fresh process per measurement, alternately by the code
of ``--before`` (``pruning.circuit.circuit_scores``, its own batch loop) and by this checkout's
(``scores_with_masks(model, "edge", ...)``, through the one loop ``resumed_passes.masked_scores``). Prints each
round's seconds, the medians' ratio, and whether the scores are the same bits (a sha256 of every score).
"""

from __future__ import annotations

import argparse
import json
import statistics

from code_before import REPO, heurlens_source, measured_in

MEASUREMENT = """
import hashlib, json, sys, time, torch
prompts, circuits, threads = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
torch.set_num_threads(threads)
import heurlens
try:  # this checkout's layout
    from heurlens.data.run_data import PromptTaskData
    from heurlens.interventions.graph import edge_layout
    from heurlens.interventions.scoring import scores_with_masks
    from heurlens.runtime.call_context import call_context
    def score(model, masks, task, context):
        return scores_with_masks(model, "edge", masks, task, "corrupt", None, context)
except ImportError:  # the code before
    from heurlens.data.run_data import PromptTaskData
    from heurlens.interventions.graph import edge_layout
    from heurlens.pruning.circuit import circuit_scores as score
    from heurlens.runtime.call_context import call_context
model = heurlens.load_model("smollm2")
task = PromptTaskData("ioi", prompts, 0, batch_size=16).train(model)
layout = edge_layout(model)
generator = torch.Generator().manual_seed(0)
masks = []
for _ in range(circuits):
    keep = torch.zeros(layout.n_edges)
    keep[torch.randperm(layout.n_edges, generator=generator)[:layout.n_edges // 20]] = 1
    masks.append(keep)
context = call_context(model, cache=False)
score(model, masks[:1], task, context)  # warm-up
start = time.perf_counter()
scores = score(model, masks, task, context)
seconds = time.perf_counter() - start
digest = hashlib.sha256(b"".join(s.numpy().tobytes() for s in scores)).hexdigest()
print(json.dumps({"seconds": seconds, "sha256": digest, "edges": layout.n_edges}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", default="ad2c1f5")
    parser.add_argument("--prompts", type=int, default=32)
    parser.add_argument("--circuits", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    argv = [str(args.prompts), str(args.circuits), str(args.threads)]
    env = {"OMP_NUM_THREADS": str(args.threads)}
    seconds: dict[str, list[float]] = {"before": [], "now": []}
    digests: dict[str, set[str]] = {"before": set(), "now": set()}
    with heurlens_source(args.before) as before:
        for round_ in range(args.rounds):  # which goes first alternates, so neither always runs on a warmer machine
            order = (("before", before), ("now", REPO))
            for name, source in order if round_ % 2 == 0 else order[::-1]:
                measured = measured_in(source, MEASUREMENT, argv, env)
                seconds[name].append(measured["seconds"])
                digests[name].add(measured["sha256"])
                print(f"round {round_ + 1}: {name} {measured['seconds']:.2f} s ({measured['edges']} edges)", flush=True)
    before_s, now_s = statistics.median(seconds["before"]), statistics.median(seconds["now"])
    same = digests["before"] == digests["now"] and len(digests["now"]) == 1
    print(json.dumps({"before_s": round(before_s, 2), "now_s": round(now_s, 2), "ratio_now_over_before":
                      round(now_s / before_s, 3), "same_scores": same}))


if __name__ == "__main__":
    main()
