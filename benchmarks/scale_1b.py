"""heurlens on a model of about 1B parameters: seconds and peak memory of unit means, an ablation and a 20-step
prune, and the bytes heurlens' cache keeps, with the code before the speed work and this checkout side by side.

Run: .venv/bin/python benchmarks/scale_1b.py [--before ed4c511] [--dtype float32] [--prompts 32] [--tokens 16]

Model: a randomly initialised Llama of TinyLlama-1.1B's shape (22 layers, d_model 2048, 32 query and 4 key-value
heads, vocabulary 32,000; benchmarks/model_identity.py's ``llama_1b``), bridged by TransformerLens and scored as a
next-token model on the last token. Data: ``--prompts`` random token rows of ``--tokens`` tokens. Calls, in this
order in one process per code version, each in a fresh cache folder: ``compute_means``, ``ablate`` of L11.H0
(mean, KL only: the full model's logits computed and cached, then the pass resumed at layer 11), and ``prune``
at 50% for 20 steps (one seed, the token rows as one batch, KL to the full model). Memory is the process's peak
resident set (``ru_maxrss``) after each call, against the bound of issue 47: twice the model's own bytes plus one
batch's activations.

Measured 2026-11-26 on this project's 2-core CPU, float32 (4.10 GiB of weights), 32 prompts x 16 tokens, before ->
now: building 10.4 -> 7.8 s; compute_means 7.3 -> 6.0 s; ablate 20.8 -> 19.2 s; prune 245 -> 241 s (12 s a step);
peak 7.84 -> 7.80 GiB, 1.90x the weights; cache 7.9 MiB (the full model's last-position logits, 32 x 32,000, and
the residual stream entering layer 11). The peak is the weights, about 0.9 GiB of torch, transformers and
TransformerLens, and during pruning the activations a backward pass keeps for one batch (about 70 MB a layer for 512
tokens, measured with torch's saved-tensor hooks: no weight is copied). No GPU was at hand for the 8B run.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from code_before import REPO, heurlens_source, measured_in_fresh_cache

MEASURE = """
import json, os, resource, sys, time, torch
sys.path.append(sys.argv[4])  # this checkout's benchmarks/, for the model (after the heurlens measured)
from model_identity import llama_1b
import heurlens
from heurlens.pruning.settings import PruneSettings

dtype, prompts, tokens = getattr(torch, sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])

rows = []

def peak_gb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20

def record(name, start):
    rows.append({"call": name, "seconds": round(time.perf_counter() - start, 2), "peak_gb": round(peak_gb(), 2)})

start = time.perf_counter()
model = llama_1b(dtype)
record("build the model", start)
size_gb = sum(p.numel() * p.element_size() for p in model.parameters()) / 2**30
data = torch.randint(0, 32000, (prompts, tokens), generator=torch.Generator().manual_seed(0))
start = time.perf_counter()
means = heurlens.compute_means(model, data)
record("compute_means", start)
start = time.perf_counter()
heurlens.ablate(model, "L11.H0", [data], means=means, metrics={})
record("ablate L11.H0 (KL)", start)
start = time.perf_counter()
heurlens.prune(model, data, sparsity=0.5, seeds=[0], means=means, progress=False,
               config=PruneSettings(total_steps=20, warmup_steps=10))
record("prune, 20 steps", start)
cache = sum(f.stat().st_size for f in __import__("pathlib").Path(os.environ["HEURLENS_CACHE"]).rglob("*") if f.is_file())
print(json.dumps({"rows": rows, "model_gb": size_gb, "cache_mb": cache / 2**20}))
"""


def measured(source: Path, dtype: str, prompts: int, tokens: int) -> dict:
    return measured_in_fresh_cache(source, MEASURE, [dtype, str(prompts), str(tokens), str(REPO / "benchmarks")])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", default="ed4c511", help="git revision of the code to compare with")
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    parser.add_argument("--prompts", type=int, default=32)
    parser.add_argument("--tokens", type=int, default=16)
    args = parser.parse_args()
    import pandas as pd

    with heurlens_source(args.before) as old:
        results = {"before": measured(old, args.dtype, args.prompts, args.tokens),
                   "now": measured(REPO, args.dtype, args.prompts, args.tokens)}
    table = pd.DataFrame(results["before"]["rows"]).merge(pd.DataFrame(results["now"]["rows"]), on="call",
                                                          suffixes=("_before", "_now"))
    model_gb = results["now"]["model_gb"]
    print(f"random Llama, TinyLlama-1.1B's shape, {args.dtype} ({model_gb:.2f} GiB of weights), {args.prompts} "
          f"prompts x {args.tokens} tokens, torch's default threads")
    print(table.to_string(index=False))
    for name, result in results.items():
        print(f"  {name}: cache {result['cache_mb']:.1f} MiB; peak {result['rows'][-1]['peak_gb']:.2f} GiB = "
              f"{result['rows'][-1]['peak_gb'] / model_gb:.2f}x the weights (bound: 2x plus one batch's activations)")


if __name__ == "__main__":
    main()
