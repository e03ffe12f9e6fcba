"""Memory and disk of an ablation scan on a next-token model with a large vocabulary, with the code before the
caches-that-scale work and this checkout side by side.

Run: .venv/bin/python benchmarks/cache_scale.py [--before e5820c5] [--prompts 512] [--tokens 12]

Model: a randomly initialised Llama with Llama 3's vocabulary (128,256 tokens), 4 layers of width 256 (4 query and
2 key-value heads), weights in bfloat16, bridged by TransformerLens and scored on the last token. Data:
``--prompts`` random token rows of ``--tokens`` tokens. Calls, in one process per code version, each in a fresh
cache folder: ``compute_means``, then ``single_unit_scan`` of every head and MLP (20 units, mean ablation; the mean top logit
and the KL). A next-token model's scores are prompts x vocabulary (512 x 128,256 x 4 bytes = 263 MB in float32): before,
the scan held every unit's scores at once; now a chunk of them within ``ablation.SCORES_IN_MEMORY_BYTES`` (1 GiB),
the KL computed over chunks of rows, and the cache entry stored in the narrowest precision that holds it exactly.
Memory is the process's peak resident set (``ru_maxrss``) after each call; the cache is the bytes on disk after
both. The scan's KL column is printed from both versions as a check that they computed the same thing.

Measured 2026-11-27 on this project's 2-core CPU (one core busy with a fine-tune at one thread), 512 x 12, before
(e5820c5) -> now: compute_means 3.2 -> 2.7 s, 1.20 GiB peak both; the scan 73.0 -> 57.7 s, peak 9.13 -> 3.51 GiB;
cache 268.5 -> 134.3 MiB (the logits in bfloat16, as computed); the KL column the same to 6 decimals.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from code_before import REPO, heurlens_source, measured_in_fresh_cache

MEASURE = """
import json, os, resource, sys, time, torch
from transformer_lens.model_bridge.sources._bridge_builder import build_bridge_from_module
from transformers import AutoModelForCausalLM, LlamaConfig
import heurlens
from heurlens.analysis import single_unit_scan
from heurlens.models.classifier import HookedClassifier

prompts, tokens = int(sys.argv[1]), int(sys.argv[2])
config = LlamaConfig(vocab_size=128256, hidden_size=256, intermediate_size=512, num_hidden_layers=4,
                     num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                     architectures=["LlamaForCausalLM"])
torch.manual_seed(0)
hf = AutoModelForCausalLM.from_config(config).to(torch.bfloat16).eval()
model = HookedClassifier(build_bridge_from_module(hf, "LlamaForCausalLM", hf_config=config, tokenizer=None,
                                                  model_name="llama-vocab128k-random"), model_id="llama-vocab128k")
data = torch.randint(0, 128256, (prompts, tokens), generator=torch.Generator().manual_seed(0))
rows = []

def record(name, start):
    rows.append({"call": name, "seconds": round(time.perf_counter() - start, 1),
                 "peak_gb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 2)})

start = time.perf_counter()
means = heurlens.compute_means(model, data)
record("compute_means", start)
start = time.perf_counter()
def top_logit(scores):
    return scores.max(-1).values.mean()

scan = single_unit_scan(model, "L0.*,L1.*,L2.*,L3.*", [data], means=means, metrics={"top_logit": top_logit},
                        progress=False)
record("single_unit_scan, 20 units", start)
cache = sum(f.stat().st_size for f in __import__("pathlib").Path(os.environ["HEURLENS_CACHE"]).rglob("*") if f.is_file())
print(json.dumps({"rows": rows, "cache_mb": cache / 2**20, "kl": scan["kl"].round(6).tolist()}))
"""


def measured(source: Path, prompts: int, tokens: int) -> dict:
    return measured_in_fresh_cache(source, MEASURE, [str(prompts), str(tokens)])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", default="e5820c5", help="git revision of the code to compare with")
    parser.add_argument("--prompts", type=int, default=512)
    parser.add_argument("--tokens", type=int, default=12)
    args = parser.parse_args()
    import pandas as pd

    with heurlens_source(args.before) as old:
        results = {"before": measured(old, args.prompts, args.tokens), "now": measured(REPO, args.prompts, args.tokens)}
    table = pd.DataFrame(results["before"]["rows"]).merge(pd.DataFrame(results["now"]["rows"]), on="call",
                                                          suffixes=("_before", "_now"))
    print(f"random Llama, vocabulary 128,256, 4 layers x 256, bfloat16 weights; {args.prompts} prompts x "
          f"{args.tokens} tokens; scores {args.prompts * 128256 * 4 / 2**20:.0f} MiB a unit in float32")
    print(table.to_string(index=False))
    for name, result in results.items():
        print(f"  {name}: cache {result['cache_mb']:.1f} MiB")
    same = results["before"]["kl"] == results["now"]["kl"]
    print(f"  the scan's KL column (20 units) {'is the same' if same else 'DIFFERS'} in both: "
          f"{results['now']['kl'][:4]} ...")


if __name__ == "__main__":
    main()
