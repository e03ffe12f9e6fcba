"""Subtask Induction for shape bias, offline (Subtask Induction paper, Section 5, Tables 1 and 2), on textured
Fashion-MNIST with a small timm ResNet18 on this CPU.

Trains the base model, finds its subnetwork for mean-pooled garments, trains every downstream
condition and writes both tables to docs/. Resumable (the run directory keeps every finished part).

Run: .venv/bin/python analyses/subtask_induction_tables1_2_shape_bias.py [--out runs/shape-bias] [--arch resnet18-quarter]
     [--downstream-seeds 3] [--docs docs/results/shape-bias-fashion-mnist.md]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from heurlens.runtime.results_page import write_results_page
from heurlens.vision.models import SMALL_ARCHITECTURES
from heurlens.vision.shape_bias import SCORES, ShapeBiasRun, ShapeBiasSettings, summary
from heurlens.vision.textured_shapes import BACKGROUND, FASHION_CLASSES, TEXTURES


def percent(table):
    table = table.copy()
    table[list(SCORES)] = (100 * table[list(SCORES)]).round(1)
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("runs/shape-bias"))
    parser.add_argument("--arch", choices=sorted(SMALL_ARCHITECTURES), default="resnet18-quarter")
    parser.add_argument("--downstream-seeds", type=int, default=ShapeBiasSettings.downstream_seeds)
    parser.add_argument("--docs", type=Path, default=Path("docs/results/shape-bias-fashion-mnist.md"))
    args = parser.parse_args()
    start = time.time()
    settings = ShapeBiasSettings(arch=args.arch, downstream_seeds=args.downstream_seeds)
    table1, table2 = ShapeBiasRun(settings, args.out).run()
    table2 = percent(table2).round({"% parameters": 2})
    lines = ["# Subtask Induction for shape bias: textured Fashion-MNIST (offline)\n",
             f"Produced by `analyses/subtask_induction_tables1_2_shape_bias.py` on this project's 2-core CPU in "
             f"{(time.time() - start) / 60:.1f} min (parts already on disk are not recomputed). Settings: "
             f"`{json.dumps(settings.to_dict())}`.\n",
             f"Data: Fashion-MNIST garments ({', '.join(FASHION_CLASSES)}) painted with one of 10 textures "
             f"made from scikit-image's brick, grass and gravel photographs ({len(TEXTURES)} scale/orientation "
             f"variants, all normalised to the same mean and spread; background texture at {BACKGROUND:.0%} "
             "brightness). Mean-pooled images: Felzenszwalb segments, each replaced by its mean. Test sets: "
             f"{settings.test_size} test-split garments with their class's texture (*original*), the same "
             "mean-pooled, and the same with another class's texture (*cue conflict*: accuracy = by shape, "
             "robustness = not by texture, shape bias = shape / (shape + texture) decisions). All numbers "
             "are percentages.\n",
             "## Table 2: the shape subnetwork inside the base model\n",
             f"Base model trained on {settings.pretrain_size} garments whose texture matches the class "
             f"{settings.pretrain_agreement:.0%} of the time; subnetwork found by continuous sparsification "
             f"on {settings.discovery_size} mean-pooled garments (every parameter but the classifier's, batch-norm "
             "scales and shifts included).\n",
             table2.to_markdown(index=False), "",
             "## Table 1: downstream training where texture is a perfect shortcut\n",
             f"{settings.downstream_size} garments, each with its class's texture, {settings.downstream_epochs} "
             "epochs, model selection on a validation set of the same kind. Subtask induction: the subnetwork's "
             "weights copied into a re-initialised model and frozen; random subnetwork: as many weights per "
             "tensor, chosen at random; data mixture: the base model fine-tuned on the downstream set plus the "
             "mean-pooled discovery set; linear probe: the base model with only its classifier trained. "
             f"Mean ± standard deviation over {settings.downstream_seeds} seeds (initialisation of the fresh "
             "models, the random subnetwork, data order); one base model and one subnetwork.\n",
             summary(table1).to_markdown(index=False), ""]
    args.docs.parent.mkdir(parents=True, exist_ok=True)
    write_results_page(args.docs, "\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
