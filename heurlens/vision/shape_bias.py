"""The offline shape-bias experiment: Subtask Induction on textured Fashion-MNIST (Zhang et al. 2023,
Section 5 and Tables 1-2, scaled to a CPU).

1. *Base model* (the stand-in for an ImageNet-pretrained model): trained on garments whose texture
   matches their class 90% of the time, so both cues carry information.
2. *Shape subnetwork*: continuous sparsification on the base model (every parameter except the
   classifier, Appendix C.1) for classifying *mean-pooled* garments, where texture is gone.
3. *Downstream training* on a small set whose texture always matches the class (a perfect
   shortcut), each condition from its own starting point: Subtask Induction (the subnetwork copied
   into a re-initialised model and frozen), a random subnetwork of the same per-tensor size, from
   scratch, data mixture (the base model fine-tuned on the downstream set plus the mean-pooled
   discovery set) and linear probe (the base model, classifier only).
4. *Evaluation*: accuracy on textured test garments, on their mean-pooled versions, and on
   cue-conflict versions (shape accuracy, texture robustness, shape bias).

Every stage's result is written to the run folder as it finishes; running again with the same
settings resumes, reusing what is there.
"""

from __future__ import annotations

import copy
import re
from functools import partial
from pathlib import Path
from typing import cast

import pandas as pd
import torch
from safetensors.torch import load_file

from heurlens.errors import HeurlensError
from heurlens.runtime.cache import atomic_save_tensors
from heurlens.runtime.devices import resolve_device
from heurlens.runtime.distributed import Workers, run_each
from heurlens.runtime.run_folders import RunFolder
from heurlens.subtask.masks import DiscoverySettings, discover_subnetwork, masked_forward
from heurlens.subtask.transfer import transfer_condition
from heurlens.subtask.weight_subnetwork import WeightSubnetwork
from heurlens.training_helpers import shuffled_batches
from heurlens.vision.mean_pool import Felzenszwalb, mean_pool_images
from heurlens.vision.metrics import cue_conflict_scores, prediction_accuracy
from heurlens.vision.models import create_classifier
from heurlens.vision.settings import RESUMABLE_SETTINGS, SCORES, SHAPE_BIAS_CONDITIONS, ShapeBiasSettings
from heurlens.vision.textured_shapes import FASHION_CLASSES, textured_set
from heurlens.vision.training import classification_loss, predict, train_classifier


def classifier_name(model: torch.nn.Module) -> str:
    config = cast(dict, model.pretrained_cfg)  # timm's record of the model, with its head's name
    return str(config["classifier"])


class ShapeBiasRun:
    """The data, models and results of one experiment, kept in the run folder ``out`` (``self.folder``: its
    settings, and one stored stage for the base model, the subnetwork and each condition's scores)."""

    def __init__(self, settings: ShapeBiasSettings, out: Path, progress: bool = True,
                 device: str | torch.device | None = None):
        """``device``: where the models train (``heurlens.runtime.devices.resolve_device``: default a GPU when there is
        one); data, subnetworks and run files stay on the CPU, so a run resumes on another device."""
        self.settings, self.out, self.progress = settings, Path(out), progress
        self.folder = RunFolder(self.out, "shape-bias run")
        self.device = resolve_device(device)
        self._build_data()  # refuses sizes the data cannot hold before anything is written
        self.folder.record_settings(settings.to_dict(), RESUMABLE_SETTINGS)

    def _build_data(self) -> None:
        s, start = self.settings, 0
        sizes = {"pretrain": s.pretrain_size, "discovery": s.discovery_size, "downstream": s.downstream_size,
                 "validation": s.validation_size}
        split: dict[str, torch.Tensor] = {}
        self.split = split
        for name, size in sizes.items():
            split[name] = torch.arange(start, start + size, device="cpu")
            start += size
        if start > 60_000:
            raise HeurlensError(f"the sets need {start} training garments; Fashion-MNIST has 60,000")
        if s.test_size > 10_000:
            raise HeurlensError("test_size is at most 10,000 (the Fashion-MNIST test split)")
        self.downstream = textured_set("train", split["downstream"], 1.0, s.seed + 1)
        self.validation = textured_set("train", split["validation"], 1.0, s.seed + 2)
        discovery = textured_set("train", split["discovery"], s.pretrain_agreement, s.seed + 3)
        test_garments = torch.arange(s.test_size, device="cpu")
        self.test = textured_set("test", test_garments, 1.0, s.seed + 4)
        self.cue_conflict = textured_set("test", test_garments, 0.0, s.seed + 5)
        self.discovery_pooled = (mean_pool_images(discovery.images, Felzenszwalb(), progress=self.progress),
                                 discovery.shapes)
        self.test_pooled = mean_pool_images(self.test.images, Felzenszwalb(), progress=self.progress)

    def make_model(self, seed: int) -> torch.nn.Module:
        """A fresh classifier on the run's device, its weights drawn on the CPU (the same on every device)."""
        with torch.device("cpu"):
            model = create_classifier(self.settings.arch, len(FASHION_CLASSES), in_chans=1, img_size=28, seed=seed)
        return model.to(self.device)

    def evaluation_sets(self) -> dict:
        return {"validation": (self.validation.images, self.validation.shapes)}

    def scores(self, model) -> dict[str, float]:
        """Accuracy on textured and mean-pooled test garments, and the cue-conflict metrics."""
        conflict = cue_conflict_scores(predict(model, self.cue_conflict.images, device=self.device),
                                       self.cue_conflict.shapes, self.cue_conflict.textures)
        return {"original": prediction_accuracy(predict(model, self.test.images, device=self.device), self.test.shapes),
                "mean-pooled": prediction_accuracy(predict(model, self.test_pooled, device=self.device),
                                                   self.test.shapes),
                "cue-conflict accuracy": conflict["accuracy"], "cue-conflict robustness": conflict["robustness"],
                "shape bias": conflict["shape_bias"]}

    def base_model(self) -> torch.nn.Module:
        """The base model, trained on the 90%-texture-agreement set (or read back from the run)."""
        name, model = "base_model.safetensors", self.make_model(self.settings.seed)
        path = self.out / name

        def train() -> dict[str, torch.Tensor]:
            s = self.settings  # the pretraining set is painted only when the base model must be trained
            pretrain = textured_set("train", self.split["pretrain"], s.pretrain_agreement, s.seed)
            train_classifier(model, pretrain.images, pretrain.shapes, self.evaluation_sets(), "validation",
                             s.pretrain_epochs, seed=s.seed, progress=self.progress, desc="base model")
            return model.state_dict()

        model.load_state_dict(self.folder.stored(name, train, partial(atomic_save_tensors, path),
                                                 lambda: load_file(str(path))))
        return model.eval()

    def shape_subnetwork(self, base: torch.nn.Module) -> WeightSubnetwork:
        """Continuous sparsification on the base model for mean-pooled garments (or read back)."""
        stem = self.out / "shape_subnetwork"

        def discover() -> WeightSubnetwork:
            s = self.settings
            config = DiscoverySettings(epochs=s.discovery_epochs, l0_lambda=s.l0_lambda, lr=s.discovery_lr)
            batches = [(images.to(self.device), labels.to(self.device)) for images, labels in shuffled_batches(
                self.discovery_pooled, batch_size=32, generator=torch.Generator().manual_seed(s.seed))]
            base.eval()  # batch norm keeps the base model's statistics while masks train
            head = classifier_name(base) + "."
            # every layer's parameters (batch-norm scales and shifts included) but the classifier's
            masked = [rf"^{re.escape(name)}$" for name, _ in base.named_parameters() if not name.startswith(head)]
            return discover_subnetwork(base, classification_loss, batches, config, include=masked,
                                       description="mean-pooled garments", seed=s.seed, progress=self.progress)

        return self.folder.stored("shape_subnetwork.json", discover, lambda sub: sub.save(stem),
                                  lambda: WeightSubnetwork.load(stem))

    def condition(self, name: str, base: torch.nn.Module, subnetwork: WeightSubnetwork, repeat: int = 0) -> dict:
        """Train one downstream condition (its ``repeat``-th seed) and score it (or read its scores back)."""
        return self.folder.result(f"conditions/{name.replace(' ', '_')}-{repeat}.json",
                                  partial(self._trained_condition, name, base, subnetwork, repeat))

    def _trained_condition(self, name: str, base: torch.nn.Module, subnetwork: WeightSubnetwork, repeat: int) -> dict:
        s, frozen, trainable, seed = self.settings, None, None, self.settings.seed + repeat
        images, labels = self.downstream.images, self.downstream.shapes
        lr = 0.05
        if name in ("subtask induction", "random subnetwork", "from scratch"):
            kind = "random init" if name == "from scratch" else name  # transfer_condition's names
            model, frozen = transfer_condition(kind, subnetwork, base, self.make_model, seed + 10)
        else:
            model, _ = transfer_condition("full model", subnetwork, base, self.make_model, seed + 10)
            if name == "data mixture":
                images = torch.cat([images, self.discovery_pooled[0]])
                labels = torch.cat([labels, self.discovery_pooled[1]])
                lr = 0.01  # fine-tuning a trained model
            elif name == "linear probe":
                head = classifier_name(model) + "."
                trainable = lambda parameter: parameter.startswith(head)  # noqa: E731
            else:
                raise HeurlensError(f"unknown condition {name!r}; choose from {', '.join(SHAPE_BIAS_CONDITIONS)}")
        training = train_classifier(model, images, labels, self.evaluation_sets(), "validation", s.downstream_epochs,
                                    lr=lr, frozen=frozen, trainable=trainable, seed=seed, progress=self.progress,
                                    desc=f"{name} ({repeat + 1}/{s.downstream_seeds})")
        return {"condition": name, "seed": seed, "train images": len(labels), **self.scores(model),
                "best epoch": training.best_epoch}

    def run(self, conditions=SHAPE_BIAS_CONDITIONS, workers: Workers | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
        """(Table 1: every condition's scores, one row per condition and seed; Table 2: base model vs
        shape subnetwork). The downstream trainings (conditions x seeds) may run at once on Ray ``workers``."""
        base = self.base_model()
        subnetwork = self.shape_subnetwork(base)
        binary = {name: mask.float() for name, mask in subnetwork.masks.items()}
        base_scores, subnetwork_scores = self.scores(base), self.scores(masked_forward(base, binary))
        table2 = pd.DataFrame([{"model": "base model", "% parameters": 100.0, **base_scores},
                               {"model": "shape subnetwork", "% parameters": 100 * subnetwork.fraction_kept,
                                **subnetwork_scores}])
        runs = [(name, repeat) for name in conditions for repeat in range(self.settings.downstream_seeds)]
        shared = self
        if workers is not None:  # one progress bar over the runs, none inside the workers
            shared = copy.copy(self)
            shared.progress = False
        table1 = pd.DataFrame(run_each(_condition_scores, (shared, base, subnetwork), runs, workers,
                                       "downstream trainings", self.progress and workers is not None))
        return table1, table2


def _condition_scores(shared: tuple[ShapeBiasRun, torch.nn.Module, WeightSubnetwork], run: tuple[str, int]) -> dict:
    """One downstream training (condition name, repeat) of ``ShapeBiasRun.run``."""
    experiment, base, subnetwork = shared
    return experiment.condition(run[0], base, subnetwork, run[1])


def summary(table1: pd.DataFrame) -> pd.DataFrame:
    """Mean and standard deviation over seeds of every score, one row per condition (in %)."""
    grouped = table1.groupby("condition", sort=False)
    stats = grouped[list(SCORES)].agg(["mean", "std"])
    cells = {score: (100 * stats[score]["mean"]).round(1).astype(str) + " ± "
             + (100 * stats[score]["std"].fillna(0)).round(1).astype(str) for score in SCORES}
    return pd.DataFrame({"train images": grouped["train images"].first(), "seeds": grouped.size(), **cells}).reset_index()
