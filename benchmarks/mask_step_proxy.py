"""The per-step overhead of mask training, on a model so small that its compute is nil: a CPU proxy for what a GPU
step costs around its kernels. The code before the per-step work and this checkout, side by side in one run.

Run: .venv/bin/python benchmarks/mask_step_proxy.py [--before ed4c511] [--steps 300] [--rounds 3]

Model: a random 2-layer BERT classifier (d_model 32, 4 heads, MiniLM's tokenizer), 64 SNLI training pairs in
batches of 4, ``train_unit_masks`` with the default recipe for ``--steps`` steps, no progress bar, one thread. Each
round runs "before" (the heurlens source of git revision ``--before``) and "now" (this checkout) in fresh
processes, in turn; a step's time is the loop's seconds over its steps, the medians are printed with their
ratio. On this proxy the time is Python: TransformerLens' bridge and HF's modules around tiny kernels, the hooks,
the optimizer. What the per-step work removed (a device-to-host read of the losses every step, a tensor of
example counts built on the host every step, every batch and the full model's logits copied to the device every
step) costs little on a CPU, where nothing waits for a device; on a GPU each was a point where the host waited for
the device's queue to drain. Measured 2026-11-26 on this project's 2-core CPU: 4.95 ms a step before, 5.07 ms now
(0.98x, within the rounds' spread): the proxy shows no cut, and no GPU was at hand to measure the waits removed.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

from code_before import REPO, heurlens_source, measured_in

MEASURE = """
import json, sys, time, torch
torch.set_num_threads(1)
from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification
import heurlens
from heurlens.runtime.assets import minilm_dir
from heurlens.evaluate import predict_logits, tokenize_pairs
from heurlens.interventions.means import compute_means
from heurlens.models import load_model
from heurlens.pruning.settings import PruneSettings
from heurlens.pruning.train import train_unit_masks

folder, steps = sys.argv[1], int(sys.argv[2])
torch.manual_seed(0)
config = BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                    intermediate_size=64, num_labels=3)
BertForSequenceClassification(config).eval().save_pretrained(folder)
AutoTokenizer.from_pretrained(minilm_dir()).save_pretrained(folder)
model = load_model(folder)
data = tokenize_pairs("snli", heurlens.load_snli("train", limit=64, seed=0), model.tokenizer, 4)
full, means = predict_logits(model, data), compute_means(model, data)
settings = PruneSettings(total_steps=steps, warmup_steps=steps // 2)
train_unit_masks(model, data, full, means, 0.5, [0], PruneSettings(total_steps=20, warmup_steps=10), progress=False)
start = time.perf_counter()
train_unit_masks(model, data, full, means, 0.5, [0], settings, progress=False)
print(json.dumps({"ms_per_step": (time.perf_counter() - start) / steps * 1000}))
"""


def measured(source: Path, steps: int) -> float:
    with tempfile.TemporaryDirectory() as folder:
        return measured_in(source, MEASURE, [folder, str(steps)], {"OMP_NUM_THREADS": "1"})["ms_per_step"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", default="ed4c511", help="git revision of the code to compare with")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with heurlens_source(args.before) as old:
        times: dict[str, list[float]] = {"before": [], "now": []}
        for _ in range(args.rounds):
            times["before"].append(measured(old, args.steps))
            times["now"].append(measured(REPO, args.steps))
    median = {name: statistics.median(values) for name, values in times.items()}
    print(f"mask training, tiny BERT (compute nil), {args.steps} steps, one thread, median of {args.rounds} rounds")
    for name, value in median.items():
        print(f"  {name:7s} {value:6.2f} ms a step   ({', '.join(f'{v:.2f}' for v in times[name])})")
    print(f"  before / now: {median['before'] / median['now']:.2f}x")


if __name__ == "__main__":
    main()
