"""An edge-masked pruning step against a node-masked one, side by side, on SmolLM2 and IOI prompts.

Run: .venv/bin/python benchmarks/edge_pruning_step.py [--prompts 32] [--steps 4] [--rounds 2] [--device cpu]
     [--dtypes float32,bfloat16]

Both with interchange ablation (each step also runs the corrupted prompts), one seed, ``--steps`` optimizer steps of
one batch of ``--prompts`` IOI prompts, node masks (``train_unit_masks``: 30 x 10 units) and edge masks
(``train_edge_masks``: every edge between SmolLM2's writers and its query/key/value, MLP and logit readers) run
alternately; prints each round's seconds per step and the medians' ratio (the edge pruning issue asks for at most 2x).
With ``--dtypes float32,bfloat16`` each precision's pair (``PruneSettings(dtype=)``: the matrix products under
autocast) runs in the same rounds, so the ratios between precisions are measured side by side too.
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings
from functools import partial


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=32)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--device", default=None)
    parser.add_argument("--dtypes", default="float32", help="Comma-separated precisions of the masked passes.")
    args = parser.parse_args()
    warnings.simplefilter("ignore")  # a shortened run misses its target: not what is measured here

    import torch

    import heurlens
    from heurlens.data.run_data import PromptTaskData
    from heurlens.evaluate import predict_logits
    from heurlens.interventions.graph import edge_layout
    from heurlens.interventions.means import compute_means
    from heurlens.pruning.train import train_edge_masks, train_unit_masks

    model = heurlens.load_model("smollm2", device=args.device)
    data = PromptTaskData("ioi", args.prompts, 0, batch_size=args.prompts).train(model)
    full, means = predict_logits(model, data), compute_means(model, data)
    runs = {}
    for dtype in args.dtypes.split(","):
        nodes = heurlens.PruneSettings(total_steps=args.steps, ablation="corrupt", dtype=dtype)
        edges = heurlens.PruneSettings(total_steps=args.steps, ablation="corrupt", level="edge", dtype=dtype)
        runs[f"node masks, {dtype}"] = partial(train_unit_masks, model, data, full, means, 0.5, [0], nodes,
                                               progress=False)
        runs[f"edge masks, {dtype}"] = partial(train_edge_masks, model, data, full, 0.95, [0], edges, progress=False)
    print(f"SmolLM2 on {heurlens.runtime.devices.device_of(model)}, {torch.get_num_threads()} threads, {args.prompts} IOI "
          f"prompts a step, {model.n_layers * (model.n_heads + 1)} units, {edge_layout(model).n_edges} edges")
    for run in runs.values():
        run()  # warm-up
    seconds: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(args.rounds):
        for name, run in runs.items():
            start = time.perf_counter()
            run()
            seconds[name].append((time.perf_counter() - start) / args.steps)
            print(f"  {name}: {seconds[name][-1]:.2f} s a step", flush=True)
    first = args.dtypes.split(",")[0]
    for dtype in args.dtypes.split(","):
        node, edge = (statistics.median(seconds[f"{level} masks, {dtype}"]) for level in ("node", "edge"))
        print(f"{dtype}: node masks {node:.2f} s a step, edge masks {edge:.2f} s a step (medians): an edge step costs "
              f"{edge / node:.2f}x a node step, {edge / statistics.median(seconds[f'node masks, {first}']):.2f}x a "
              f"{first} node step")


if __name__ == "__main__":
    main()
