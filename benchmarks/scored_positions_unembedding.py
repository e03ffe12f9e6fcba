"""A next-token model's unembedding on every position against on the scored positions only, side by side on
SmolLM2 and IOI prompts.

Run: .venv/bin/python benchmarks/scored_positions_unembedding.py [--prompts 32] [--steps 3] [--rounds 2]

SmolLM2-135M's vocabulary (49,152 x 576) makes its unembedding about a fifth of a forward pass over a prompt, and an
IOI prompt is scored at one position. Each round times, both ways in turn: the model's scores on ``--prompts`` IOI
prompts (no gradient), and ``--steps`` node-mask training steps with interchange ablation (``train_unit_masks``,
the step ``heurlens prune --task ioi --ablation interchange`` takes: the corrupted prompts' pass, then the masked
pass and its backward). "every position" is the code before 2026-11-27 (``HookedClassifier`` computed the logits
at every position, then took the last real token's); "scored positions" passes HF's ``logits_to_keep``. Prints the
medians, their ratio, and the largest difference between the two ways' scores.
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=32)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    warnings.simplefilter("ignore")  # a shortened run misses its target: not what is measured here

    import torch

    import heurlens
    from heurlens.data.run_data import PromptTaskData
    from heurlens.evaluate import predict_logits
    from heurlens.interventions.means import compute_means
    from heurlens.pruning.train import train_unit_masks

    model = heurlens.load_model("smollm2")
    data = PromptTaskData("ioi", args.prompts, 0, batch_size=args.prompts).train(model)
    settings = heurlens.PruneSettings(total_steps=args.steps, ablation="corrupt")
    full, means = predict_logits(model, data), compute_means(model, data)  # the training steps' references
    scores: dict[bool, torch.Tensor] = {}

    def scoring(kept: bool) -> float:
        model._keeps_logits = kept
        start = time.perf_counter()
        scores[kept] = predict_logits(model, data)
        return time.perf_counter() - start

    def training(kept: bool) -> float:
        model._keeps_logits = kept
        start = time.perf_counter()
        train_unit_masks(model, data, full, means, 0.5, [0], settings, progress=False)
        return (time.perf_counter() - start) / args.steps

    print(f"SmolLM2 on the CPU, {torch.get_num_threads()} threads, {args.prompts} IOI prompts "
          f"(up to {data.batches[0]['input_ids'].shape[1]} positions, 1 scored)")
    for name, run in (("scores (no gradient)", scoring), ("a node-mask training step", training)):
        run(True), run(False)  # warm-up
        seconds: dict[bool, list[float]] = {True: [], False: []}
        for _ in range(args.rounds):
            for kept in (False, True):
                seconds[kept].append(run(kept))
        every, scored = statistics.median(seconds[False]), statistics.median(seconds[True])
        print(f"{name}: every position {every:.2f} s, scored positions {scored:.2f} s (medians of {args.rounds}): "
              f"{every / scored:.2f}x")
    print(f"largest difference between the two ways' scores: {(scores[True] - scores[False]).abs().max():.1e}")
    model._keeps_logits = True


if __name__ == "__main__":
    main()
