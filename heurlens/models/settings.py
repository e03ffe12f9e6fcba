"""How the default model is fine-tuned, kept apart from the training code so that the CLI can build
``heurlens finetune``'s options without importing torch."""

from __future__ import annotations

from dataclasses import dataclass, field


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
    eval_examples: int = field(default=2000, metadata={"help": "SNLI validation pairs scored after training.",
                                                       "min": 1})

    def slug(self) -> str:
        n = "all" if self.train_examples is None else str(self.train_examples)
        return f"minilm-snli-n{n}-e{self.epochs}-b{self.batch_size}-lr{self.learning_rate:g}-s{self.seed}"
