"""The settings of the offline shape-bias experiment (Subtask Induction paper, Section 5) and the small timm
architectures it trains, kept apart from the training code so that the CLI can build its options without
importing torch."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from heurlens.runtime.settings_checks import check_settings

SMALL_ARCHITECTURES: dict[str, tuple[str, dict[str, Any]]] = {
    "resnet18-quarter": ("resnet18", {"channels": (16, 32, 64, 128)}),
    "vit-tiny-4layer": ("vit_tiny_patch16_224", {"patch_size": 4, "depth": 4}),
}

SHAPE_BIAS_CONDITIONS = ("subtask induction", "random subnetwork", "from scratch", "data mixture", "linear probe")
SCORES = ("original", "mean-pooled", "cue-conflict accuracy", "cue-conflict robustness", "shape bias")
RESUMABLE_SETTINGS = {"downstream_seeds"}  # a run may be continued with more seeds


@dataclass(frozen=True)
class ShapeBiasSettings:
    """The offline shape-bias experiment; each field is also an option of ``heurlens shape-bias``."""

    arch: str = field(default="resnet18-quarter", metadata={
        "help": "The small timm model trained on 28x28 garments.", "choices": sorted(SMALL_ARCHITECTURES)})
    pretrain_size: int = field(default=12_000, metadata={"help": "Training garments of the base model.", "min": 1})
    pretrain_agreement: float = field(default=0.9, metadata={
        "help": "How often a base-model training garment wears its class's texture.", "min": 0, "max": 1.0})
    pretrain_epochs: int = field(default=8, metadata={"help": "Epochs of the base model.", "min": 1})
    discovery_size: int = field(default=2_000, metadata={
        "help": "Mean-pooled garments the subnetwork is found on.", "min": 1})
    discovery_epochs: int = field(default=30, metadata={"help": "Epochs of subnetwork discovery.", "min": 1})
    discovery_lr: float = field(default=0.01, metadata={"help": "Adam learning rate of the mask.", "min_open": True})
    l0_lambda: float = field(default=1e-7, metadata={
        "help": "L0 penalty of discovery (the middle of the paper's 1e-6, 1e-7, 1e-8)."})
    downstream_size: int = field(default=2_000, metadata={
        "help": "Training garments of the downstream task (texture always agrees with the class).", "min": 1})
    downstream_epochs: int = field(default=15, metadata={"help": "Epochs of each downstream condition.", "min": 1})
    downstream_seeds: int = field(default=3, metadata={
        "help": "Times each condition is trained (fresh initialisation, shuffling).", "min": 1})
    validation_size: int = field(default=1_000, metadata={"help": "Garments model selection is done on.", "min": 1})
    test_size: int = field(default=2_000, metadata={"help": "Test garments.", "min": 1})
    seed: int = field(default=0, metadata={"help": "Seed of the data split and the base model."})

    def __post_init__(self) -> None:
        check_settings(self, "shape-bias setting")

    def to_dict(self) -> dict:
        return asdict(self)
