"""A step of edge masks with node masks beside them (``PruneSettings(node_sparsity=)``), the code before the joint
product moved ahead of the examples and this checkout, side by side in one run, on SmolLM2 and IOI prompts.

Run: .venv/bin/python benchmarks/joint_mask_step.py [--before 8851de0] [--seeds 3] [--steps 2] [--rounds 2]
     [--dtype bfloat16]

Interchange ablation, ``--seeds`` seeds stacked (as analyses/circuits_ioi_smollm2_cpu.sh trains them), batches of 32
IOI prompts, node sparsity 0.72 (Edge Pruning's default), one thread. Each round runs "before" (the heurlens source
of git revision ``--before``, where each example's row of the joint masks z_wr z_w z_r was computed after a seed's
draw was repeated for its examples) and "now" (the product once per seed's draw, then repeated) in fresh processes,
in turn; a step's time is the loop's seconds over its steps after one warm-up step. Both compute the same masks
(bit-identical log_alpha on the planted path, checked when the change was made).

Measured 2026-12-03 on this project's 2-core CPU, the other core running a one-thread mask job: before 35.75 and
30.06 s a step, now 30.08 and 29.45 s (medians 32.90 and 29.77 s: 1.11x; the rounds' spread is as large as the
gain). The product over 70,651 edges was ~0.2 s of each seed's micro-batch; the rest of the step is the model.
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

from code_before import REPO, heurlens_source, measured_in

MEASURE = """
import json, sys, time, warnings, torch
torch.set_num_threads(1)
warnings.simplefilter("ignore")
import heurlens
from heurlens.data.run_data import PromptTaskData
from heurlens.evaluate import predict_logits
from heurlens.pruning.train import train_edge_masks

seeds, steps, dtype = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
model = heurlens.load_model("smollm2")
data = PromptTaskData("ioi", 32 * seeds, 0, batch_size=32).train(model)
full = predict_logits(model, data)
def run(n):
    settings = heurlens.PruneSettings(total_steps=n, ablation="corrupt", level="edge", dtype=dtype, node_sparsity=0.72)
    train_edge_masks(model, data, full, 0.95, list(range(seeds)), settings, progress=False)
run(1)
start = time.perf_counter()
run(steps)
print(json.dumps({"s_per_step": (time.perf_counter() - start) / steps}))
"""


def measured(source: Path, args: argparse.Namespace) -> float:
    return measured_in(source, MEASURE, [str(args.seeds), str(args.steps), args.dtype],
                       {"OMP_NUM_THREADS": "1"})["s_per_step"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", default="8851de0", help="git revision of the code to compare with")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--dtype", default="bfloat16")
    args = parser.parse_args()
    with heurlens_source(args.before) as old:
        times: dict[str, list[float]] = {"before": [], "now": []}
        for _ in range(args.rounds):
            times["before"].append(measured(old, args))
            times["now"].append(measured(REPO, args))
            print(f"  before {times['before'][-1]:.2f} s a step, now {times['now'][-1]:.2f} s a step", flush=True)
    median = {name: statistics.median(values) for name, values in times.items()}
    print(f"joint edge and node masks, SmolLM2, {args.seeds} seeds x 32 IOI prompts, {args.dtype}, one thread, "
          f"median of {args.rounds} rounds: before {median['before']:.2f} s a step, now {median['now']:.2f} s "
          f"(before / now {median['before'] / median['now']:.2f}x)")


if __name__ == "__main__":
    main()
