"""How the default model is fine-tuned, kept apart from the training code so that the CLI can build
``heurlens finetune``'s options without importing torch."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from heurlens.runtime.settings_checks import check_settings


@dataclass(frozen=True)
class FinetuneSettings:
    """How the default model is fine-tuned (AdamW, linear decay, max length 128 as in the Heuristic Core paper, App. A)."""

    train_examples: int | None = field(default=8000, metadata={  # None: all ~100k SNLI training pairs (--full)
        "help": "SNLI training pairs to fine-tune on.", "option": "--examples", "min": 1})
    epochs: int = field(default=1, metadata={"help": "Epochs over the training pairs.", "min": 1})
    batch_size: int = field(default=32, metadata={"help": "Pairs per AdamW step.", "min": 1})
    learning_rate: float = field(default=5e-5, metadata={"help": "AdamW's peak learning rate (linear decay).",
                                                         "option": "--lr", "min_open": True})
    max_length: int = field(default=128, metadata={"help": "Tokens per pair at most.", "min": 1})
    seed: int = field(default=0, metadata={"help": "Seed of the head's initialisation and the data order."})
    warmup_ratio: float = field(default=0.06, metadata={
        "help": "Fraction of the steps over which the learning rate warms up linearly from 0.", "max": 1.0})
    length_batches: bool = field(default=False, metadata={
        "help": "Batches of pairs of similar length (less padding: 1.6x faster steps on a CPU, "
                "benchmarks/finetune_step.py); the batches' order stays random."})

    def __post_init__(self) -> None:
        check_settings(self, "fine-tuning setting")

    def slug(self) -> str:
        n = "all" if self.train_examples is None else str(self.train_examples)
        slug = f"minilm-snli-n{n}-e{self.epochs}-b{self.batch_size}-lr{self.learning_rate:g}-s{self.seed}"
        if self.warmup_ratio != 0.06:  # the default model's cache path stays what it was before these settings
            slug += f"-w{self.warmup_ratio:g}"
        return slug + ("-lenbatch" if self.length_batches else "")

    @classmethod
    def paper_length(cls) -> FinetuneSettings:
        """The Heuristic Core paper's fine-tuning (App. A: batch 32, lr 2e-5, Adam, max length 128, no warm-up
        named) scaled to the ~100k SNLI pairs shipped offline: 3 epochs, about 9,400 steps (the paper: 5 epochs of
        MNLI, 61,360 steps), in length-sorted batches."""
        return dataclasses.replace(cls(), train_examples=None, epochs=3, learning_rate=2e-5, warmup_ratio=0.0,
                                   length_batches=True)


PRESETS = {"default": FinetuneSettings, "paper-length": FinetuneSettings.paper_length}
PAPER_LENGTH_MODEL = "snli-long"  # load_model's name for the paper-length fine-tune (cached once built)
CHECKPOINT_EVERY_PAPER = 500  # the paper's checkpoint and evaluation interval (Appendix A)
