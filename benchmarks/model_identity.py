"""What a model's identity (``fingerprint()``, the key of every disk cache and run-folder check) costs per call,
before and after ``heurlens.runtime.model_identity``, side by side in one run.

Run: .venv/bin/python benchmarks/model_identity.py [--rounds 3] [--skip-1b]

"before": the code up to 2026-11-26 (each weight copied into a new bytes object with ``.cpu().numpy().tobytes()``,
then hashed; every call hashes again). "first call": the digest over uint8 views of the weights where they lie;
"repeated call": the same model again, unchanged (the remembered digest, checked against the weights' version
counters). Host copy: the most bytes Python allocated during one call (``tracemalloc``: numpy/bytes buffers; torch's
own allocations are not counted, and the CPU path makes none). Models: the default model (MiniLM-L6 fine-tuned on
SNLI, 22.7M parameters) and a randomly initialised Llama config of about 1.1B parameters (TinyLlama's shape, float32,
4.4 GB; bfloat16 where "before" cannot run at all). The digests of "before" and "first call" must agree for float32.
"""

from __future__ import annotations

import argparse
import hashlib
import statistics
import time
import tracemalloc
from collections.abc import Callable

import torch


def fingerprint_before(model) -> str:
    """heurlens' fingerprint as it was: a host copy of every weight, hashed on every call."""
    digest = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        digest.update(name.encode())
        digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    if model.tokenizer is not None:
        digest.update(repr(sorted(model.tokenizer.get_vocab().items())).encode())
        digest.update(repr(sorted(map(str, model.tokenizer.all_special_tokens))).encode())
    return digest.hexdigest()[:16]


def measured(call: Callable[[], str]) -> tuple[float, int, str]:
    """Seconds, peak bytes Python allocated, and the result of one call."""
    tracemalloc.start()
    start = time.perf_counter()
    result = call()
    seconds = time.perf_counter() - start
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return seconds, peak, result


def compare(label: str, model, rounds: int, before_runs: bool = True) -> list[dict]:
    from heurlens.runtime.model_identity import forget_identity

    rows = []
    parameters = sum(p.numel() for p in model.parameters())
    variants: dict[str, Callable[[], str]] = {}
    if before_runs:
        variants["before (every call)"] = lambda: fingerprint_before(model)

    def first() -> str:
        forget_identity(model)
        return model.fingerprint()

    variants["first call"] = first
    variants["repeated call"] = model.fingerprint
    results: dict[str, list[tuple[float, int, str]]] = {name: [] for name in variants}
    for _ in range(rounds):
        for name, call in variants.items():
            results[name].append(measured(call))
    digests = {name: {r[2] for r in runs} for name, runs in results.items()}
    if before_runs and digests["before (every call)"] != digests["first call"]:
        raise SystemExit(f"{label}: the digests differ: {digests}")
    before = statistics.median(r[0] for r in results["before (every call)"]) if before_runs else None
    for name, runs in results.items():
        seconds = statistics.median(r[0] for r in runs)
        rows.append({"model": label, "parameters": f"{parameters / 1e6:,.1f}M", "call": name,
                     "seconds": f"{seconds:.4f}", "host copy (MB)": f"{max(r[1] for r in runs) / 1e6:,.1f}",
                     "before / this": "" if before is None or name.startswith("before") else f"{before / seconds:,.0f}x"})
    return rows


def llama_1b(dtype: torch.dtype):
    """A randomly initialised Llama of TinyLlama-1.1B's shape, bridged by TransformerLens (no tokenizer): allocated
    without initialisation (a minute saved), then weights ~ N(0, 0.02), norms 1, and the rotary frequencies built
    again (``to_empty`` leaves buffers as they were in memory), so it also runs (benchmarks/scale_1b.py)."""
    from transformer_lens.model_bridge.sources._bridge_builder import build_bridge_from_module
    from transformers import AutoModelForCausalLM, LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    from heurlens.models.classifier import HookedClassifier

    config = LlamaConfig(vocab_size=32000, hidden_size=2048, intermediate_size=5632, num_hidden_layers=22,
                         num_attention_heads=32, num_key_value_heads=4, max_position_embeddings=2048,
                         architectures=["LlamaForCausalLM"])
    torch.manual_seed(0)
    with torch.device("meta"):
        shell = AutoModelForCausalLM.from_config(config, dtype=dtype)
    model = shell.to_empty(device="cpu")
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            parameter.fill_(1.0) if "norm" in name else parameter.normal_(std=0.02)
    model.model.rotary_emb = LlamaRotaryEmbedding(config)
    bridge = build_bridge_from_module(model.eval(), "LlamaForCausalLM", hf_config=config, tokenizer=None,
                                      model_name="llama-1b-random")
    return HookedClassifier(bridge, model_id="llama-1b-random")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--skip-1b", action="store_true", help="only the default model")
    args = parser.parse_args()
    import pandas as pd

    import heurlens

    rows = compare("default", heurlens.load_model("default", device="cpu"), args.rounds)
    if not args.skip_1b:
        rows += compare("llama 1.1B float32", llama_1b(torch.float32), args.rounds)
        rows += compare("llama 1.1B bfloat16", llama_1b(torch.bfloat16), args.rounds, before_runs=False)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; medians of {args.rounds} rounds")
    print(pd.DataFrame(rows).to_string(index=False))


if __name__ == "__main__":
    main()
