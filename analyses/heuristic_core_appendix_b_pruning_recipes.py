"""Compare pruning recipes on the default model: heurlens' earlier default, each setting of the released
code alone on top of it, the whole released recipe, and faster combinations (the pruning issue's table).

Every recipe prunes with 3 seeds at 50% on the 8,000 SNLI pairs the default model was fine-tuned on
and is evaluated on 2,000 SNLI test pairs and the four focus HANS-style subcases (200 pairs each).
Each recipe has its own run folder under --out; finished subnetworks are kept, so the script resumes
where it was stopped and can be run recipe by recipe (--recipes). The table is written after every
recipe to --out/recipes.csv and, with --docs, as markdown.

Run: .venv/bin/python analyses/heuristic_core_appendix_b_pruning_recipes.py [--recipes NAME ...] [--seeds 3] [--threads 1]
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace
from pathlib import Path

import pandas as pd
import torch

import heurlens
from heurlens.data.hans import FOCUS_SUBCASES
from heurlens.data.nli_setup import PRUNING_PAIRS, REFERENCE_PAIRS, nli_eval_sets, snli_pruning_data, snli_reference_means
from heurlens.protocols import PreparedModel
from heurlens.pruning import PruneSettings, accuracy_table, evaluate_subnetworks, prune
from heurlens.runtime.cache import atomic_write_csv, atomic_write_json
from heurlens.runtime.run_folders import RunFolder

BEFORE = PruneSettings(log_alpha_init=0.0)  # heurlens' default until 2026-11-23: each change below is made to it alone
# name -> (batch size, settings, what it changes); the released recipe is PruneSettings.released()
RECIPES: dict[str, tuple[int, PruneSettings, str]] = {
    "before": (16, BEFORE, "heurlens' default until 2026-11-23 (log_alpha ~ N(0, 0.01))"),
    "init-10": (16, replace(BEFORE, log_alpha_init=10.0), "log_alpha ~ N(10, 0.01): the default since"),
    "adamw": (16, replace(BEFORE, weight_decay=0.01), "AdamW, weight decay 0.01"),
    "linear-lr": (16, replace(BEFORE, lr_schedule="linear", lr_warmup_steps=200), "lr: 200 warm-up steps, linear decay"),
    "clip": (16, replace(BEFORE, max_grad_norm=1.0), "gradient norm clipped at 1.0"),
    "accumulate-4": (16, replace(BEFORE, grad_accumulation=4), "4 micro-batches per step (same epochs)"),
    "sampled": (16, replace(BEFORE, sparsity_estimate="sampled"), "sampled sparsity in the Lagrangian"),
    "dropout": (16, replace(BEFORE, dropout=True), "masked model in train mode"),
    "per-layer": (16, replace(BEFORE, discretization="per-layer"), "per-layer discretisation"),
    "released-9300": (16, PruneSettings.released(grad_accumulation=1),
                      "released recipe, its 9,300 steps, batch 16 without accumulation"),
    "released-1516": (16, PruneSettings.released(grad_accumulation=1, step_budget="paper-epochs"),
                      "released recipe squeezed into the default's 1,516 steps"),
    "fast-2400": (16, replace(BEFORE, log_alpha_init=10.0, weight_decay=0.01, lr_schedule="linear", lr_warmup_steps=100,
                              total_steps=2400, warmup_steps=1600),
                  "init 10, AdamW 0.01, linear lr (100 warm-up), 2,400 steps, target reached at 1,600"),
}
# name -> (recipe whose trained masks are re-used, discretisation, what it changes): no retraining
REDISCRETISED: dict[str, tuple[str, str, str]] = {
    "init-10-per-layer": ("init-10", "per-layer", "init-10's trained masks, per-layer discretisation"),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--recipes", nargs="+", default=list(RECIPES), choices=list(RECIPES) + list(REDISCRETISED))
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's choice)")
    parser.add_argument("--out", type=Path, default=Path("runs/pruning-recipes"))
    parser.add_argument("--docs", type=Path, default=None, help="Also write the table as markdown here.")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    model = heurlens.load_model("default")
    recipes = RunFolder(args.out, "pruning-recipes run", ("recipes.csv", "*/unit-means.safetensors")).opened()
    with recipes.writing():
        run_recipes(args, model, recipes)


def run_recipes(args: argparse.Namespace, model: PreparedModel, recipes: RunFolder) -> None:
    """Prune, evaluate and table each recipe not in the folder's table yet (``recipes.csv``, one row per recipe)."""
    eval_sets = nli_eval_sets(model, "snli", 2000, 200, list(FOCUS_SUBCASES), seed=0)
    results_path = args.out / "recipes.csv"
    done = pd.read_csv(results_path) if recipes.finished("recipes.csv") else pd.DataFrame()
    for name in args.recipes:
        source, method, change = REDISCRETISED.get(name, (name, None, None))
        batch_size, config, source_change = RECIPES[source]
        change = change or source_change
        folder = args.out / source
        if len(done) and ((done["recipe"] == name) & (done["seeds"] >= args.seeds)).any():
            continue
        start = time.time()
        train = snli_pruning_data(model, PRUNING_PAIRS, batch_size)
        means = snli_reference_means(model, REFERENCE_PAIRS, 0, batch_size)
        subnetworks = prune(model, train, sparsity=0.5, seeds=range(args.seeds), out=folder, config=config, means=means)
        if method:
            subnetworks = [sub.discretized(method) for sub in subnetworks]
        evaluation = evaluate_subnetworks(model, subnetworks, eval_sets, means=means)
        wide = accuracy_table(evaluation)
        full = wide.iloc[0]
        rows = []
        for sub, (_, row) in zip(subnetworks, wide.iloc[1:].iterrows()):
            rows.append({"recipe": name, "change": change, "seed": sub.seed, "batch": batch_size,
                         "steps": sub.hyperparameters["total_steps"], "achieved_sparsity": sub.achieved_sparsity,
                         "final_kl": round(sub.metrics["final_train_kl"], 4),
                         "train_seconds": sub.metrics["train_seconds"],
                         **{k: row[k] for k in wide.columns[2:]},
                         "snli_drop": round(full[wide.columns[2]] - row[wide.columns[2]], 1)})
        table = pd.DataFrame(rows)
        summary = {"recipe": name, "change": change, "seeds": args.seeds, "wall_seconds": round(time.time() - start),
                   "snli_full": full[wide.columns[2]], "snli": " / ".join(f"{v:.1f}" for v in table[wide.columns[2]]),
                   "max_drop": table["snli_drop"].max(), "mean_drop": round(table["snli_drop"].mean(), 1),
                   **{k: round(table[k].mean(), 1) for k in wide.columns[3:]},
                   "sparsity": " / ".join(f"{v:.2f}" for v in table["achieved_sparsity"]),
                   "final_kl": round(table["final_kl"].mean(), 4),
                   "train_min_per_seed": round(table["train_seconds"].mean() / 60, 1)}
        atomic_write_json(folder / f"per-seed{'-' + method if method else ''}.json", rows)
        done = pd.concat([done[done["recipe"] != name] if len(done) else done, pd.DataFrame([summary])],
                         ignore_index=True)
        atomic_write_csv(results_path, done)
        if args.docs:
            recipes.write_results_page(args.docs, done.to_markdown(index=False) + "\n")
        print(done.to_string(index=False), flush=True)


if __name__ == "__main__":
    main()
