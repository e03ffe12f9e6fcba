"""A pruned subnetwork: which heads and MLPs it keeps, how it was found, and how to save it.

Saved as ``NAME.json`` (human-readable: kept/pruned units, sparsities, seed, model id and weight
fingerprint, data id, hyper-parameters, metrics) plus ``NAME.safetensors`` (the trained log_alphas).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Literal

import torch
from jaxtyping import Float
from torch import Tensor

from heurlens.errors import HeurlensError
from heurlens.interventions.graph import EdgeLayout
from heurlens.interventions.nodes import Edge
from heurlens.interventions.units import Unit, UnitLayout, format_units, parse_units
from heurlens.protocols import PreparedModel
from heurlens.pruning.hard_concrete import BETA, HardConcrete
from heurlens.pruning.records import load_record
from heurlens.runtime.cache import atomic_save_tensors, atomic_write_json

THRESHOLD_GRID = [round(0.05 * i, 2) for i in range(21)]  # [0, 1], stride 0.05 (Heuristic Core paper, App. B)
SPARSITY_TOLERANCE = 0.05  # a subnetwork whose masks miss the target by more is flagged (``Subnetwork.missed_target``)


def shortest_decimals(value: float, least: int, most: int) -> str:
    """``value`` with the fewest decimals, at least ``least``, that write it to 1e-9, else with ``most``: how run
    folders and tables name a target, so that two targets never share a name."""
    for decimals in range(least, most):
        text = f"{value:.{decimals}f}"
        if abs(float(text) - value) < 1e-9:
            return text
    return f"{value:.{most}f}"


def target_percent(sparsity: float) -> str:
    """A target as a percentage with the decimals it needs and no more ('50%', '99.5%', '66.6667%' for 2/3), so
    that two targets never share a table's label (as they never share a run folder)."""
    return f"{shortest_decimals(100 * sparsity, 0, 4)}%"


@dataclass
class Subnetwork:
    """A subnetwork of heads and MLPs found by pruning (the Heuristic Core paper, Section 2): the units it keeps,
    the model it was pruned from, and how it was found.

    Attributes:
        kept: the heads and MLPs kept (every other unit is mean-ablated); ``pruned`` lists the others.
        n_layers: the model's layers. n_heads: its heads per layer.
        target_sparsity: the fraction of units asked to be pruned; achieved_sparsity: the fraction pruned.
        threshold: the mask value at which the trained masks were cut to 0/1 (``discretize``).
        seed: the seed of the run. model_id, model_fingerprint: the model (``fingerprint()``); data_id: the data.
        hyperparameters: the run's settings; metrics: the last training step's loss (``final_train_kl``), the
            binary subnetwork's over the pruning data (``subnetwork_train_kl``; ``_loss`` for another loss), the
            masks' expected and grid sparsity, time, ``missed_target``.
        log_alpha_heads: the trained hard-concrete log alpha, ``[layer, head]``; log_alpha_mlps: ``[layer]``.
    """

    kept: list[Unit]
    n_layers: int
    n_heads: int
    target_sparsity: float
    achieved_sparsity: float
    threshold: float
    seed: int
    model_id: str
    model_fingerprint: str
    data_id: str
    hyperparameters: dict = field(default_factory=dict)
    metrics: dict = field(default_factory=dict)
    log_alpha_heads: Float[Tensor, "layer head"] | None = None
    log_alpha_mlps: Float[Tensor, " layer"] | None = None

    @property
    def label(self) -> str:
        """How tables name it: target sparsity and seed, e.g. '50% seed 2' ('99.5% seed 0')."""
        return f"{target_percent(self.target_sparsity)} seed {self.seed}"

    @property
    def missed_target(self) -> bool:
        """Whether it missed the target by more than the tolerance when it was pruned: its achieved sparsity, or
        with the top-k discretisation (which always keeps the target's count) its masks' (``grid_sparsity``)."""
        return bool(self.metrics.get("missed_target"))

    def missed_target_message(self) -> str:
        """What went wrong and what to change: too little pruned (the masks started too high for the steps
        given), or too much (units the loss barely depends on fell together past the target), and the extension
        (``PruneSettings.extend_steps``) where it was not used, or what its use says. With the top-k discretisation the
        subnetwork has its target size, and the message is about the masks' own sparsity."""
        reached = self.achieved_sparsity
        missed = f"subnetwork {self.label} reached sparsity {reached:.2f}, not its target {self.target_sparsity:.2f}: "
        if self.hyperparameters.get("discretization", "top-k") == "top-k" and "grid_sparsity" in self.metrics:
            reached = float(self.metrics["grid_sparsity"])
            missed = (f"subnetwork {self.label} keeps its target size, but no threshold on its masks' keep-"
                      f"probabilities comes nearer the target {self.target_sparsity:.2f} than {reached:.2f} (the paper's "
                      "grid), so the top-k cut chose among units the masks had not told apart: ")
        extended = self.metrics.get("extension_steps")
        if extended:
            expected = self.metrics.get("final_expected_sparsity")
            if isinstance(expected, int | float) and abs(expected - self.target_sparsity) > SPARSITY_TOLERANCE:
                return missed + (f"its masks trained on for {extended} steps more, the limit, and stayed off target, "
                                 f"their expected sparsity still at {expected:.2f}: they had not finished moving "
                                 "toward the target (give a larger PruneSettings(extend_steps=), or prune to a "
                                 "sparsity nearer the one reached)")
            return missed + (f"its masks trained on for {extended} steps more, the limit, and stayed off target: they do "
                             "not tell apart the units the cut chose among, most likely units the loss depends on "
                             "equally little (a larger PruneSettings(extend_steps=) may settle them, or not)")
        if reached < self.target_sparsity:
            start, warm = self.hyperparameters.get("log_alpha_init"), self.hyperparameters.get("init_from")
            lower = (f"PruneSettings(log_alpha_init={float(start) - 3:g}); these started at {float(start):g}"
                     if isinstance(start, int | float) else "a lower PruneSettings(log_alpha_init=)")
            if warm and isinstance(start, int | float):  # a warm start: log_alpha_init |s| / max |s|, 0 up
                lower = (f"PruneSettings(log_alpha_init={float(start) - 3:g}); these started from {warm}'s scores, "
                         f"log_alpha 0 to {float(start):g}")
            remedy = ("the masks did not move far enough. Train longer (PruneSettings(total_steps=...)) or start the "
                      f"masks lower ({lower})")
        else:
            remedy = ("more units fell below the threshold together than the target allows (the loss depends little "
                      "on them). Train longer after the warm-up (PruneSettings(total_steps=) larger than "
                      "PruneSettings(warmup_steps=)) or prune to the sparsity reached")
        return missed + remedy + (". Or let the seeds whose masks end off target train on, PruneSettings(extend_steps="
                                  "1000), surest with PruneSettings(penalty=quadratic) (docs/pruning.md)")

    def discretized(self, method: str) -> Subnetwork:
        """The same trained masks (log_alpha) made binary another way (``discretize``: "top-k", "global-threshold",
        "per-layer"), with the units it was allowed to prune; recorded in its hyper-parameters."""
        from heurlens.pruning.objective import prunable_units

        if self.log_alpha_heads is None or self.log_alpha_mlps is None:
            raise HeurlensError(f"subnetwork {self.label} has no trained log_alpha to cut again (only subnetworks found "
                                "by heurlens prune carry them)")
        prunable = prunable_units(UnitLayout(self.n_layers, self.n_heads), self.hyperparameters.get("units", "all"))
        kept, achieved, threshold = discretize(self.log_alpha_heads, self.log_alpha_mlps, self.target_sparsity, method,
                                               prunable)
        return replace(self, kept=kept, achieved_sparsity=achieved, threshold=threshold,
                       hyperparameters={**self.hyperparameters, "discretization": method})

    @property
    def level(self) -> Literal["node", "edge"]:
        """What it keeps: units ("node"; an ``EdgeCircuit``: edges)."""
        return "node"

    def keep_mask(self) -> Float[Tensor, " mask"]:
        """The flat keep mask it sets on a model (``heurlens.interventions.circuits``): 1 at its units."""
        return UnitLayout(self.n_layers, self.n_heads).keep_mask(self.kept)

    def kept_edges(self, layout: EdgeLayout) -> list[Edge]:
        """Its units as edges of ``layout``: every edge between them (``EdgeLayout.edges_between``)."""
        return layout.edges_between(self.kept)

    @property
    def pruned(self) -> list[Unit]:
        """The units it does not keep (replaced by their means), in layer order."""
        return [u for u in UnitLayout(self.n_layers, self.n_heads).units() if u not in set(self.kept)]

    @property
    def kept_heads(self) -> list[Unit]:
        """The heads it keeps (its MLPs left out)."""
        return [u for u in self.kept if not u.is_mlp]

    def check_model(self, model: PreparedModel, known: tuple[str, ...] | None = None) -> None:
        """Refuse a model other than the one this subnetwork was pruned from (``known``: the model's
        ``known_fingerprints()``, when the caller checks several subnetworks)."""
        if self.model_fingerprint not in (known or model.known_fingerprints()):
            raise HeurlensError(
                f"this subnetwork was pruned from model {self.model_id!r} (fingerprint {self.model_fingerprint}), "
                f"not from {model.model_id!r} (fingerprint {model.fingerprint()}); load that model instead"
                + (" (the same name: were its weights loaded in another precision, or changed? load them as they "
                   "were pruned, e.g. load_model(dtype=))" if self.model_id == model.model_id else ""))

    def to_json(self) -> dict:
        """What ``NAME.json`` holds: every field but the log alphas, with ``kept`` and ``pruned`` as unit strings."""
        record = {k: v for k, v in asdict(self).items() if not k.startswith("log_alpha")}
        record["kept"] = format_units(self.kept)
        record["pruned"] = format_units(self.pruned)
        return record

    def save(self, stem: Path) -> None:
        """Write ``stem.safetensors`` then ``stem.json``, each atomically: the JSON marks it complete."""
        if self.log_alpha_heads is None or self.log_alpha_mlps is None:
            raise HeurlensError(f"subnetwork {stem} has no trained log_alpha to save (only subnetworks found by "
                                "heurlens prune carry them)")
        stem.parent.mkdir(parents=True, exist_ok=True)
        tensors = {"log_alpha_heads": self.log_alpha_heads.contiguous(), "log_alpha_mlps": self.log_alpha_mlps.contiguous()}
        atomic_save_tensors(stem.with_suffix(".safetensors"), tensors)
        atomic_write_json(stem.with_suffix(".json"), self.to_json())

    @classmethod
    def load(cls, path: Path) -> Subnetwork:
        """Read ``stem.json`` (+ ``stem.safetensors``), a unit subnetwork or an edge circuit by what the record holds
        (``heurlens.pruning.records``); a file that cannot be read whole is refused with a HeurlensError naming it
        and how to train that seed again."""
        return load_record(path)

    @classmethod
    def from_record(cls, record: dict, tensors: dict[str, Tensor] | None) -> Subnetwork:
        """The subnetwork of a JSON record and its log_alphas (``load_record`` hands unit records here)."""
        record = {**record, "kept": parse_units(record["kept"], record["n_layers"], record["n_heads"])
                  if record["kept"] else []}
        if tensors is not None:  # a tensors file without both log_alphas is refused
            record |= {k: tensors[k] for k in ("log_alpha_heads", "log_alpha_mlps")}
        return cls(**record)

def per_layer_soft_mask(log_alpha_heads: Float[Tensor, "layer head"], log_alpha_mlps: Float[Tensor, " layer"]
                        ) -> tuple[Float[Tensor, "layer head"], Float[Tensor, " layer"]]:
    """The released code's deterministic mask (``deterministic_z_from_log_alpha``), per group of units (the
    heads of one layer; each MLP alone): soft = sigmoid(log_alpha / beta * 0.8), then the
    round(expected number of zeros) smallest entries of the group, n - sum_i P(z_i > 0), set to 0.
    Returns (heads, MLPs) like the log_alphas."""
    factor = 0.8
    groups = [log_alpha_heads[layer] for layer in range(len(log_alpha_heads))] + [m[None] for m in log_alpha_mlps]
    masks = []
    for log_alpha in groups:
        soft = torch.sigmoid(log_alpha / BETA * factor)
        expected_zeros = len(log_alpha) - HardConcrete.keep_probability(log_alpha).sum()
        zeros = int(torch.round(expected_zeros).item())
        if zeros > 0:
            soft[torch.topk(soft, k=zeros, largest=False).indices] = 0
        masks.append(soft)
    return torch.stack(masks[:len(log_alpha_heads)]), torch.cat(masks[len(log_alpha_heads):])


def discretize(log_alpha_heads: Tensor, log_alpha_mlps: Tensor, target: float,
               method: str = "top-k", prunable: Tensor | None = None) -> tuple[list[Unit], float, float]:
    """Binary mask: keep the units whose score exceeds a threshold.

    With ``method="top-k"`` (Edge Pruning's binary search for the threshold, done exactly by sorting) the
    k = round((1 - target) n) units with the highest log_alpha are kept, so the achieved sparsity is the target to
    within one unit; log_alpha orders the units as their keep-probability does, without the probability's
    saturation at 1.0, and the threshold reported is the keep-probability halfway between the last unit kept and
    the first dropped. With ``"global-threshold"`` (the Heuristic Core paper, Appendix B) the score is the
    keep-probability P(z > 0) = sigmoid(log_alpha - beta log(-l / r)), and with ``"per-layer"`` the released
    code's ``per_layer_soft_mask``; both search the threshold on THRESHOLD_GRID for the achieved sparsity closest
    to the target (ties go to the threshold nearest 0.5), which can miss it by several units. ``prunable`` (a flat
    boolean vector in the layout's order): only those units may be dropped, and the sparsity is the fraction of
    them dropped. Returns (kept units, achieved sparsity, threshold).
    """
    layout = UnitLayout(*log_alpha_heads.shape)
    log_alpha = layout.join(log_alpha_heads, log_alpha_mlps).float()
    with torch.no_grad():
        if method == "top-k":
            keep, achieved, threshold = top_k(log_alpha, target, prunable)
            return layout.units_where(keep), achieved, threshold
        if method == "per-layer":
            score = layout.join(*per_layer_soft_mask(log_alpha_heads, log_alpha_mlps))
        elif method == "global-threshold":
            score = HardConcrete.keep_probability(log_alpha)
        else:
            raise HeurlensError(f"unknown discretization {method!r}; use 'top-k', 'global-threshold' or 'per-layer'")
        keep, achieved, threshold = grid_threshold(score, target, prunable)
    return layout.units_where(keep), achieved, threshold


def grid_threshold(score: Float[Tensor, " mask"], target: float, prunable: Tensor | None = None
                   ) -> tuple[Tensor, float, float]:
    """``discretize``'s grid search on a flat vector of scores: the threshold on THRESHOLD_GRID whose sparsity over
    the ``prunable`` entries is closest to ``target`` (ties: nearest 0.5). Returns (keep mask, sparsity, threshold);
    entries that may not be pruned are kept."""
    may_drop = torch.ones_like(score, dtype=torch.bool) if prunable is None else prunable

    def sparsity_at(threshold: float) -> float:
        return 1 - int((score[may_drop] > threshold).sum()) / int(may_drop.sum())

    threshold = min(THRESHOLD_GRID, key=lambda t: (abs(sparsity_at(t) - target), abs(t - 0.5)))
    return (score > threshold) | ~may_drop, sparsity_at(threshold), threshold


def top_k(log_alpha: Float[Tensor, " mask"], target: float, prunable: Tensor | None = None
          ) -> tuple[Tensor, float, float]:
    """``discretize``'s "top-k" on a flat vector (units or edges): the round((1 - target) n) prunable entries of
    highest log_alpha kept (ties: the lower index first), every entry that may not be pruned kept too. Returns (keep
    mask, sparsity, threshold: the keep-probability halfway between the last entry kept and the first dropped)."""
    may_drop = torch.ones_like(log_alpha, dtype=torch.bool) if prunable is None else prunable
    candidates = may_drop.nonzero().flatten()
    n_keep = round((1 - target) * len(candidates))
    order = candidates[torch.sort(log_alpha[candidates], descending=True, stable=True).indices]
    keep = ~may_drop
    keep[order[:n_keep]] = True
    probability = HardConcrete.keep_probability(log_alpha[order].double())
    last_kept = float(probability[n_keep - 1]) if n_keep > 0 else 1.0
    first_dropped = float(probability[n_keep]) if n_keep < len(order) else 0.0
    return keep, 1 - n_keep / len(candidates), (last_kept + first_dropped) / 2
