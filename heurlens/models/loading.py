"""``load_model``: every model heurlens analyses, as a ``HookedClassifier`` on a TransformerBridge.

Sources, by the ``name_or_path`` argument:
- ``"default"``: the embedded NLI model (MiniLM-L6 fine-tuned on SNLI by heurlens, cached);
- ``"snli-long"``: the same fine-tuned at the Heuristic Core paper's length (built by ``heurlens finetune
  --preset paper-length``);
- ``"smollm2"``: the offline pretrained decoder (SmolLM2-135M-Instruct, ``models/smollm2.py``);
- a local directory written by ``save_pretrained`` or a hub name: BERT-family sequence(-pair)
  classifiers, GPT-2 sequence classifiers, and next-token decoders of every architecture that
  TransformerLens bridges (Llama, Qwen2, GPT-NeoX, GPT-2, ...), through its own adapters;
- a dict: a small TL-native model booted from that config, no hub (tests, arithmetic).
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any, cast

import torch
from jaxtyping import Float
from safetensors import SafetensorError
from torch import Tensor, nn
from transformer_lens.factories.architecture_adapter_factory import SUPPORTED_ARCHITECTURES
from transformer_lens.model_bridge import TransformerBridge
from transformer_lens.model_bridge.sources import build_bridge_from_module
from transformer_lens.model_bridge.sources.native import boot as boot_native
from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

from heurlens.errors import HeurlensError
from heurlens.models.classifier import HookedClassifier, padded_right, wrap_bridge
from heurlens.models.nli_finetune import FINETUNE_RECORD, check_finetuned_files
from heurlens.models.settings import PAPER_LENGTH_MODEL
from heurlens.models.smollm2 import SMOLLM2, smollm2_dir
from heurlens.runtime.argument_checks import checked
from heurlens.runtime.devices import resolve_device
from heurlens.runtime.precision import weights_precision

BERT_FAMILY = {"bert"}
GPT2_FAMILY = {"gpt2"}


@checked
def load_model(name_or_path: str | Path | dict[str, Any] | TransformerBridge = "default", *,
               num_labels: int | None = None, attn_implementation: str = "sdpa", seed: int = 0,
               device: str | torch.device | None = None, dtype: str | torch.dtype | None = None) -> HookedClassifier:
    """Load a model with hook points per head (``blocks.{L}.attn.hook_z``) and per MLP (``hook_mlp_out``).

    Args:
        name_or_path: "default", "snli-long", "smollm2", a local HF directory, a hub name, a native config dict,
            or a ``TransformerBridge`` of one's own (a next-token model, ``wrap_bridge``).
        num_labels: for a native config, add a linear head with this many labels; for an HF
            encoder saved without a classifier, the size of a freshly initialised head.
        attn_implementation: "sdpa" (fast) or "eager" (needed for ``hook_pattern`` on HF models).
        seed: initialises native models and fresh heads.
        device: where the model runs: a torch device string ("cpu", "cuda", "cuda:1", "mps"); None:
            ``$HEURLENS_DEVICE``, else TransformerLens' choice ("cuda" when there is one). Checked before
            anything loads. A bridge passed in stays on the device it is on.
        dtype: the weights' precision, as TransformerLens' ``boot_transformers(dtype=)``: torch.bfloat16,
            torch.float16, torch.float32 or their names; None: as the checkpoint was saved (float32 for the
            default model and native configs). A bridge passed in keeps its own. Means, logits and masks stay
            float32 whatever the weights are.
    """
    if isinstance(name_or_path, TransformerBridge):
        return wrap_bridge(name_or_path)
    if isinstance(name_or_path, str) and not name_or_path.strip():
        raise HeurlensError("the model name is empty; give 'default', a model folder or a hub name (name_or_path=)")
    target, weights_dtype = resolve_device(device), weights_precision(dtype)
    model = _load(name_or_path, num_labels, attn_implementation, seed, weights_dtype)
    if weights_dtype is not None:
        model.to(weights_dtype)  # a native model's too, and the head: one precision for every weight
    if target != torch.device("cpu"):  # loaded on the CPU; the bridge's own .to keeps its cfg.device in step
        model.bridge.to(target)
        model.to(target)
    return model


def _load(name_or_path: str | Path | dict[str, Any], num_labels: int | None, attn_implementation: str,
          seed: int, dtype: torch.dtype | None) -> HookedClassifier:
    if isinstance(name_or_path, dict):
        return load_native(name_or_path, num_labels=num_labels, seed=seed)
    if str(name_or_path) == "default":
        from heurlens.models.default import default_model_dir
        return load_pretrained(default_model_dir(), attn_implementation=attn_implementation, model_id="default",
                               dtype=dtype)
    if str(name_or_path) == PAPER_LENGTH_MODEL:
        from heurlens.models.default import paper_length_model_dir
        return load_pretrained(paper_length_model_dir(), attn_implementation=attn_implementation,
                               model_id=PAPER_LENGTH_MODEL, dtype=dtype)
    if str(name_or_path) == SMOLLM2:
        return load_pretrained(smollm2_dir(), attn_implementation=attn_implementation, model_id=SMOLLM2, dtype=dtype)
    return load_pretrained(name_or_path, num_labels=num_labels, attn_implementation=attn_implementation, seed=seed,
                           dtype=dtype)


def load_native(config: dict[str, Any], num_labels: int | None = None, seed: int = 0) -> HookedClassifier:
    """A TL-native decoder from ``config`` (n_layers, d_model, n_heads, d_head, d_mlp, d_vocab, n_ctx, ...).

    With ``num_labels`` it classifies from the last token's final hidden state; without, it is a
    next-token model.
    """
    try:
        bridge = boot_native({"seed": seed, **config})
    except (TypeError, ValueError, KeyError) as error:
        raise HeurlensError(f"cannot build a native model from {config}: {error}") from error
    if num_labels is None:
        return HookedClassifier(bridge, model_id="native")
    torch.manual_seed(seed)
    head = torch.nn.Linear(bridge.cfg.d_model, num_labels)
    labels = tuple(f"label_{i}" for i in range(num_labels))
    return HookedClassifier(bridge, head, "last", "unembed.hook_in", labels, model_id="native")


def load_pretrained(name_or_path: str | Path, *, num_labels: int | None = None, attn_implementation: str = "sdpa",
                    model_id: str | None = None, seed: int = 0, dtype: torch.dtype | None = None) -> HookedClassifier:
    """A BERT-family or GPT-2 model from a local directory or the hub, bridged by TransformerLens; ``dtype``: the
    weights' precision (None: as saved)."""
    from transformers import AutoConfig, AutoTokenizer

    local = Path(name_or_path).expanduser()
    if local.exists():  # a local folder is identified by its absolute path, whatever was typed
        name_or_path, model_id = local.resolve(), model_id or str(local.resolve())
        if (local / FINETUNE_RECORD).is_file():
            check_finetuned_files(local)
    elif local.is_absolute() or str(name_or_path).startswith((".", "~")):  # a path, not a hub name
        raise HeurlensError(f"model folder {local} does not exist (moved or deleted?); give the folder where the model "
                            "is now as name_or_path= (a run folder's subnetworks match it by its weights, not its path)")
    else:
        model_id = model_id or str(name_or_path)
        _fail_fast_without_hub(model_id)
    try:
        config = AutoConfig.from_pretrained(str(name_or_path))
        tokenizer = AutoTokenizer.from_pretrained(str(name_or_path))
    except Exception as error:  # OSError offline / missing files, ValueError for unknown types
        raise HeurlensError(
            f"cannot load model {model_id!r}: not a directory written by save_pretrained, and not reachable "
            f"on the hub ({type(error).__name__}). Fix: pass a local model directory"
            + ("" if model_id == "default" else ", or use the embedded default (name_or_path=default)")) from error
    _check_tokenizer(tokenizer, model_id)
    architectures = config.architectures or []
    broken = next((LOW_PRECISION_REFUSED[a] for a in architectures if a in LOW_PRECISION_REFUSED), None)
    if broken is not None and dtype in (torch.bfloat16, torch.float16):
        raise HeurlensError(f"model {model_id!r} ({architectures[0]}) in {str(dtype).removeprefix('torch.')}: {broken}; "
                            "load it in float32 (leave out --weights-dtype / dtype=), and use --dtype bfloat16 for "
                            "the matrix products")
    torch.manual_seed(seed)
    if config.model_type in BERT_FAMILY:
        bridge = partial(_bridge_bert, name_or_path, config, tokenizer, num_labels)
    elif config.model_type in GPT2_FAMILY and (
            any(a.endswith("ForSequenceClassification") for a in architectures) or num_labels is not None):
        bridge = partial(_bridge_gpt2_classifier, name_or_path, config, tokenizer, num_labels)
    elif num_labels is None and config.model_type in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES:
        bridge = partial(_bridge_causal_lm, name_or_path, config, tokenizer)
    else:
        raise HeurlensError(
            f"model {model_id!r} is a {config.model_type!r} model; heurlens loads decoder LMs that TransformerLens "
            "bridges (Llama, Qwen2, GPT-NeoX, GPT-2, ...), BERT-family and GPT-2 classifiers, and native config dicts"
            + (" (a classification head only on BERT-family and GPT-2 models)" if num_labels is not None else ""))
    try:
        try:
            return bridge(attn_implementation, model_id, dtype or "auto")
        except ValueError as error:  # e.g. Gemma-2: no SDPA in transformers; eager attention computes the same
            if attn_implementation != "sdpa" or "scaled_dot_product_attention" not in str(error):
                raise
            return bridge("eager", model_id, dtype or "auto")
    except (OSError, ValueError, RuntimeError, SafetensorError) as error:  # missing, truncated or mismatched weights
        raise HeurlensError(
            f"cannot read the weights of model {model_id!r} ({type(error).__name__}: "
            f"{str(error).splitlines()[0][:160] if str(error) else ''}). Fix: save the model again with "
            "save_pretrained (config, weights and tokenizer in one folder)") from error


# architectures TransformerLens 4.3 cannot run in half precision (docs/architectures.md), and why
_OLMO_HALF = ("TransformerLens 4.3's attention multiplies OLMo's float32 attention weights (its norms compute in "
              "float32) with half-precision values and fails")
LOW_PRECISION_REFUSED = {"OlmoForCausalLM": _OLMO_HALF, "Olmo2ForCausalLM": _OLMO_HALF}

HUB_PROBE_SECONDS = 3.0


def _fail_fast_without_hub(name: str) -> None:
    """When the hub cannot be reached at all, put huggingface_hub in offline mode, so a model already in its
    cache still loads and any other name fails at once instead of after ~30 s of retries."""
    import socket
    from urllib.parse import urlparse

    from huggingface_hub import constants

    if constants.HF_HUB_OFFLINE:
        return
    host = urlparse(constants.ENDPOINT).hostname or ""
    try:
        socket.create_connection((host, 443), timeout=HUB_PROBE_SECONDS).close()
    except OSError:
        constants.HF_HUB_OFFLINE = True


def _check_tokenizer(tokenizer, model_id: str) -> None:
    """Refuse a tokenizer that knows only its special tokens: what ``AutoTokenizer`` builds, without a word
    of warning, for a model folder whose tokenizer files are missing (every word would be [UNK])."""
    if len(tokenizer) <= len(set(tokenizer.all_special_tokens)):
        raise HeurlensError(
            f"model {model_id!r} has no usable tokenizer (it knows only its {len(tokenizer)} special tokens: the "
            "tokenizer files are missing). Fix: save the tokenizer next to the weights "
            "(tokenizer.save_pretrained(folder)), or copy tokenizer.json / vocab.txt into the folder")


def _labels_of(config) -> tuple[str, ...]:
    return tuple(config.id2label[i] for i in range(config.num_labels))


def _bridge_bert(path, config, tokenizer, num_labels, attn, model_id, dtype) -> HookedClassifier:
    from transformers import BertForMaskedLM, BertForSequenceClassification

    if num_labels is not None and num_labels != config.num_labels:
        config.num_labels = num_labels
        config.id2label = {i: f"label_{i}" for i in range(num_labels)}
        config.label2id = {v: k for k, v in config.id2label.items()}
    classifier = BertForSequenceClassification.from_pretrained(str(path), config=config, attn_implementation=attn,
                                                               dtype=dtype)
    # The bridge needs the masked-LM module tree; it shares the classifier's encoder modules (and their dtype).
    shell = BertForMaskedLM._from_config(classifier.config, attn_implementation=attn).to(classifier.dtype)
    shell.bert.embeddings = classifier.bert.embeddings
    shell.bert.encoder = classifier.bert.encoder
    shell.tie_weights()
    bridge = build_bridge_from_module(shell.eval(), "BertForMaskedLM", hf_config=classifier.config,
                                      tokenizer=tokenizer, model_name=model_id)
    if classifier.bert.pooler is None:
        raise HeurlensError(f"model {model_id!r} has no pooler layer, which its classification head reads; "
                            "save it with BertForSequenceClassification so the pooler is included")
    head = BertPoolerHead(classifier.bert.pooler, classifier.dropout, classifier.classifier)
    return HookedClassifier(bridge, head, "first", "mlm_head.hook_in", _labels_of(classifier.config), model_id)


def _bridge_gpt2_classifier(path, config, tokenizer, num_labels, attn, model_id, dtype) -> HookedClassifier:
    from transformers import GPT2ForSequenceClassification, GPT2LMHeadModel

    if num_labels is not None:
        config.num_labels = num_labels
    tokenizer = padded_right(tokenizer)
    config.pad_token_id = tokenizer.pad_token_id
    classifier = GPT2ForSequenceClassification.from_pretrained(str(path), config=config, attn_implementation=attn,
                                                               dtype=dtype)
    shell = GPT2LMHeadModel._from_config(classifier.config, attn_implementation=attn).to(classifier.dtype)
    shell.transformer = classifier.transformer
    shell.tie_weights()
    bridge = build_bridge_from_module(shell.eval(), "GPT2LMHeadModel", hf_config=classifier.config,
                                      tokenizer=tokenizer, model_name=model_id)
    return HookedClassifier(bridge, classifier.score, "last", "unembed.hook_in", _labels_of(classifier.config), model_id)


def _bridge_causal_lm(path, config, tokenizer, attn, model_id, dtype) -> HookedClassifier:
    """Any decoder LM through TransformerLens' own architecture adapter (chosen by the HF architecture name);
    scored on the last real token's next-token logits."""
    from transformers import AutoModelForCausalLM

    architecture = (config.architectures or [MODEL_FOR_CAUSAL_LM_MAPPING_NAMES[config.model_type]])[0]
    if architecture not in SUPPORTED_ARCHITECTURES:
        raise HeurlensError(f"model {model_id!r} is a {architecture}, which this TransformerLens does not bridge; "
                            "use a model of an architecture it supports (Llama, Qwen2, GPT-NeoX, GPT-2, ...: the "
                            "list is transformer_lens.factories.architecture_adapter_factory.SUPPORTED_ARCHITECTURES)")
    model = AutoModelForCausalLM.from_pretrained(str(path), config=config, attn_implementation=attn, dtype=dtype)
    bridge = build_bridge_from_module(model.eval(), architecture, hf_config=config,
                                      tokenizer=padded_right(tokenizer), model_name=model_id)
    without = [layer for layer, block in enumerate(bridge.blocks) if "attn" not in getattr(block, "submodules", {})]
    if without:
        raise HeurlensError(f"model {model_id!r} is a {architecture}, whose blocks (layer {without[0]} and "
                            f"{len(without) - 1} more) have no attention heads (a state-space or recurrent model): "
                            "heurlens' units are attention heads and MLPs, so it cannot ablate, prune or score this "
                            "model; the architectures it was checked on are in docs/architectures.md")
    return HookedClassifier(bridge, model_id=model_id)


class BertPoolerHead(nn.Module):
    """HF ``BertForSequenceClassification``'s head: tanh(W_p h_[CLS] + b_p), dropout, then W_c . + b_c."""

    def __init__(self, pooler: nn.Module, dropout: nn.Module, classifier: nn.Linear):
        super().__init__()
        self.dense = cast(nn.Linear, pooler.dense)
        self.dropout = dropout
        self.classifier = classifier

    def forward(self, cls_hidden: Float[Tensor, "batch d_model"]) -> Float[Tensor, "batch label"]:
        return self.classifier(self.dropout(torch.tanh(self.dense(cls_hidden))))
