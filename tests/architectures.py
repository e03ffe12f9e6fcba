"""The architecture matrix (issue 67): a tiny random model of each architecture from its transformers config (no
weights from a hub), and per architecture the properties that make heurlens right on it, each checked against an
independent computation (the HF model, TransformerLens' own cache, hooks written by hand). Used by
tests/whole/test_architectures.py, which also writes docs/architectures.md from what it measured."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import torch
import transformers as hf
from conftest import WORDS, word_level_tokenizer

VOCAB = len(WORDS)
_DECODER = dict(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                max_position_embeddings=32, pad_token_id=0, eos_token_id=0, bos_token_id=0)
_GROUPED = dict(_DECODER, num_key_value_heads=2)
_GPT_STYLE = dict(vocab_size=VOCAB, n_embd=32, n_layer=2, n_head=4, n_positions=32, pad_token_id=0, bos_token_id=0,
                  eos_token_id=0)

# architecture name (as transformers and TransformerLens spell it) -> its tiny config
CONFIGS: dict[str, Callable[[], hf.PretrainedConfig]] = {
    "GPT2LMHeadModel": lambda: hf.GPT2Config(**_GPT_STYLE),
    "GPTNeoXForCausalLM": lambda: hf.GPTNeoXConfig(**_DECODER),
    "GPTJForCausalLM": lambda: hf.GPTJConfig(rotary_dim=4, **_GPT_STYLE),
    "OPTForCausalLM": lambda: hf.OPTConfig(vocab_size=VOCAB, hidden_size=32, ffn_dim=64, num_hidden_layers=2,
                                           num_attention_heads=4, max_position_embeddings=32, word_embed_proj_dim=32,
                                           pad_token_id=0, bos_token_id=0, eos_token_id=0),
    "LlamaForCausalLM": lambda: hf.LlamaConfig(**_GROUPED),
    "MistralForCausalLM": lambda: hf.MistralConfig(**_GROUPED),
    "MixtralForCausalLM": lambda: hf.MixtralConfig(num_local_experts=2, num_experts_per_tok=1, **_GROUPED),
    "Qwen2ForCausalLM": lambda: hf.Qwen2Config(**_GROUPED),
    "Qwen3ForCausalLM": lambda: hf.Qwen3Config(head_dim=8, **_GROUPED),
    "GemmaForCausalLM": lambda: hf.GemmaConfig(head_dim=8, **_GROUPED),
    "Gemma2ForCausalLM": lambda: hf.Gemma2Config(head_dim=8, **_GROUPED),
    "Gemma3ForCausalLM": lambda: hf.Gemma3TextConfig(head_dim=8, **_GROUPED),
    "PhiForCausalLM": lambda: hf.PhiConfig(**_DECODER),
    "Phi3ForCausalLM": lambda: hf.Phi3Config(**_GROUPED),
    "OlmoForCausalLM": lambda: hf.OlmoConfig(**_GROUPED),
    "Olmo2ForCausalLM": lambda: hf.Olmo2Config(**_GROUPED),
    "StableLmForCausalLM": lambda: hf.StableLmConfig(**_GROUPED),
    "FalconForCausalLM": lambda: hf.FalconConfig(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2,
                                                 num_attention_heads=4, pad_token_id=0, bos_token_id=0, eos_token_id=0,
                                                 new_decoder_architecture=False, parallel_attn=True),
    "MambaForCausalLM": lambda: hf.MambaConfig(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, state_size=4,
                                               pad_token_id=0, bos_token_id=0, eos_token_id=0),
    "BertForSequenceClassification": lambda: hf.BertConfig(
        vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
        num_labels=3, initializer_range=0.3, pad_token_id=0,
        id2label={0: "entailment", 1: "neutral", 2: "contradiction"},
        label2id={"entailment": 0, "neutral": 1, "contradiction": 2}),
}

FEATURES = ("logits", "unit means", "unit ablation", "node masks", "resumed pass", "edge masks", "bfloat16")
FEATURE_MEANS = {
    "logits": "the bridge's logits (a classifier's: heurlens' head on them) equal the HF model's",
    "unit means": "`compute_means` equals the mean of `run_with_cache`'s `hook_z`, `hook_mlp_out` and (the embeddings) "
                  "`blocks.0.hook_resid_pre`",
    "unit ablation": "L0.H1 and L1.MLP mean-ablated by heurlens equal the same replacement written with TransformerLens "
                     "hooks by hand",
    "node masks": "unit masks at 1 give the model, and at 0 on L0.H1 and L1.MLP the hand-written ablation",
    "resumed pass": "an ablated pass resumed at layer 1 from the cached residual stream equals the whole pass",
    "edge masks": "every edge kept gives the model, every edge pruned its run on the corrupted prompts, and single "
                  "edges out of a head, an MLP and the embeddings equal the patch written by hand; or a refusal by "
                  "name",
    "bfloat16": "the model loaded in bfloat16 scores within 5% of float32's logit range",
}
# what heurlens refuses, by architecture and feature: (what its message says, the reason as the page gives it)
_PARALLEL = ("runs attention and MLP in parallel", "attention and MLP in parallel")
_NO_SPLIT = ("TransformerLens cannot split this model's", "no split query/key/value inputs in TransformerLens")
_POST_NORM = ("a norm on the attention's output", "post-norm: outputs normalised before the residual add")
_OLMO_HALF = ("TransformerLens 4.3's attention multiplies OLMo's float32", "TransformerLens 4.3 mixes float32 and "
              "bfloat16 in OLMo's attention")
REFUSED = {
    ("GPTNeoXForCausalLM", "edge masks"): _PARALLEL, ("GPTJForCausalLM", "edge masks"): _PARALLEL,
    ("PhiForCausalLM", "edge masks"): _PARALLEL, ("FalconForCausalLM", "edge masks"): _PARALLEL,
    ("OPTForCausalLM", "edge masks"): _NO_SPLIT, ("BertForSequenceClassification", "edge masks"): _NO_SPLIT,
    ("Gemma2ForCausalLM", "edge masks"): _POST_NORM, ("Gemma3ForCausalLM", "edge masks"): _POST_NORM,
    ("Olmo2ForCausalLM", "edge masks"): _POST_NORM,
    ("OlmoForCausalLM", "bfloat16"): _OLMO_HALF, ("Olmo2ForCausalLM", "bfloat16"): _OLMO_HALF,
    **{("MambaForCausalLM", feature): ("have no attention heads", "no attention heads: a state-space model")
       for feature in FEATURES},
}


def build(architecture: str, out: Path) -> Path:
    """The tiny random model of ``architecture`` saved in ``out`` with the word-level tokenizer."""
    config = CONFIGS[architecture]()
    config.architectures = [architecture]
    torch.manual_seed(0)
    if architecture.endswith("ForSequenceClassification"):
        model = hf.AutoModelForSequenceClassification.from_config(config).eval()
    else:
        model = hf.AutoModelForCausalLM.from_config(config).eval()
    model.save_pretrained(out)
    word_level_tokenizer().save_pretrained(out)
    return out
