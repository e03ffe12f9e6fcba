"""The settings of one pruning run (Heuristic Core paper, Appendix B), kept apart from the training code so
that the CLI can build its options without importing torch.

``PruneSettings.released()`` is the recipe of the authors' released code (princeton-nlp/Heuristic-Core,
``src/pruning/prune-glue.py`` and ``modeling_pert.py``) setting by setting; docs/pruning.md
compares it with heurlens' default.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, replace
from typing import Literal

from heurlens.errors import HeurlensError
from heurlens.pruning.schedule import paper_steps, scaled_steps
from heurlens.runtime.deprecations import ablation_name
from heurlens.runtime.precision import Precision
from heurlens.runtime.settings_checks import check_settings

# what each level of pruning needs of the other settings (edges: top-k over every edge, Edge Pruning's cut)
_LEVEL_NEEDS = {"node": (), "edge": (("discretization", "top-k"), ("units", "all"))}


@dataclass(frozen=True)
class PruneSettings:
    """Hyper-parameters of one pruning run.

    Steps: ``total_steps`` / ``warmup_steps`` when given; otherwise ``step_budget`` decides:
    "paper-epochs" keeps Appendix B's ~3 epochs and warm-up fraction on the data at hand,
    "paper-steps" runs Appendix B's step counts as they are (9,300 at 50%), whatever the data size; with
    "paper-epochs" at least ``settle_steps`` follow the warm-up. Then, with ``extend_steps``, the seeds whose masks are
    still off target train on, up to that many steps more (``heurlens.pruning.train``).
    """

    lr_log_alpha: float = field(default=0.1, metadata={"help": "Learning rate of log_alpha.",
                                                        "min_open": True})
    lr_lambda: float = field(default=1.0, metadata={
        "help": "Learning rate of the Lagrange multipliers (ascent).", "min_open": True})
    total_steps: int | None = field(default=None, metadata={
        "help": "Optimizer steps (default: from --step-budget).", "option": "--steps", "min": 1})
    warmup_steps: int | None = field(default=None, metadata={
        "help": "Steps over which the target sparsity rises from 0 (default: Appendix B's fraction).", "min": 1})
    settle_steps: int = field(default=0, metadata={
        "help": "Without --steps: at least this many steps at the target after the warm-up (more steps when the "
                "budget leaves fewer), for the masks to settle on it.", "min": 0})
    extend_steps: int = field(default=0, metadata={
        "help": "After the step budget, up to this many more steps at the target, 25 at a time, for each seed whose "
                "masks are still off target (the subnetwork would be flagged: no threshold of the paper's grid within "
                "0.05 of the target); each subnetwork records the steps it took (extension_steps).", "min": 0})
    log_alpha_init: float = field(default=10.0, metadata={
        "help": "Mean of log_alpha at the start: 10 (the released code's) starts every unit fully on, 0 half on.",
        "min": None})
    log_alpha_init_std: float = field(default=0.01, metadata={"help": "Spread of log_alpha at the start."})
    weight_decay: float = field(default=0.0, metadata={
        "help": "AdamW's decoupled weight decay on log_alpha and the multipliers (0: plain Adam)."})
    lr_schedule: Literal["constant", "linear"] = field(default="constant", metadata={
        "help": "linear: the learning rate rises over --lr-warmup-steps, then falls to 0 at the last step."})
    lr_warmup_steps: int = field(default=0, metadata={"help": "Learning-rate warm-up of --lr-schedule linear."})
    max_grad_norm: float | None = field(default=None, metadata={
        "help": "Clip the gradient norm of log_alpha and the multipliers together (default: no clipping).",
        "min_open": True})
    grad_accumulation: int = field(default=1, metadata={
        "help": "Micro-batches per optimizer step, each with its own mask draw.", "min": 1})
    penalty: Literal["lagrangian", "quadratic"] = field(default="lagrangian", metadata={
        "help": "lagrangian: the paper's lambda1 (t - s) + lambda2 (t - s)^2, both multipliers ascended; quadratic: "
                "lambda2 (t - s)^2 alone (lambda1 held at 0), a restoring force as large as the gap that does not "
                "wind up while the masks cannot yet move (docs/pruning.md)."})
    sparsity_estimate: Literal["expected", "sampled"] = field(default="expected", metadata={
        "help": "Model sparsity in the Lagrangian: expected (1 - E[L0]/n) or sampled (1 - sum(z)/n of the draw)."})
    dropout: bool = field(default=False, metadata={
        "help": "Train the masks with the model in train mode (dropout on); the reference stays in eval mode."})
    step_budget: Literal["paper-epochs", "paper-steps"] = field(default="paper-epochs", metadata={
        "help": "Without --steps: Appendix B's ~3 epochs on this data, or its step counts (9,300 at 50%)."})
    discretization: Literal["top-k", "global-threshold", "per-layer"] = field(default="top-k", metadata={
        "help": "Binary mask: top-k keeps the units of highest log_alpha, as many as the target leaves (the target to "
                "one unit); global-threshold: the paper's grid of thresholds on P(z > 0) over all units (the default "
                "before 2026-11-26); per-layer: the released per-layer soft mask."})
    units: Literal["all", "heads", "mlps"] = field(default="all", metadata={
        "help": "Which units pruning may drop: all (heads and MLPs), heads or mlps; the others are always kept, and "
                "the sparsity counts the prunable ones."})
    ablation: Literal["mean", "corrupt", "interchange"] = field(default="mean", metadata={
        "help": "What a pruned unit is replaced by: its mean (the paper's), or corrupt: its activation on the "
                "example's corrupted prompt, position by position (Edge Pruning's; a task with corrupted prompts). "
                "interchange: corrupt's name before, deprecated."})
    level: Literal["node", "edge"] = field(default="node", metadata={
        "help": "What the masks prune: node (heads and MLPs, the Heuristic Core's) or edge (which component reads "
                "which other's output, Edge Pruning's; a pruned edge carries its writer's output on the corrupted "
                "prompt with --ablation corrupt, Edge Pruning's, or its mean with mean; needs a decoder "
                "TransformerLens splits per head, and a sparsity over edges, e.g. 0.95)."})
    objective: Literal["kl", "logit-diff", "logit-diff-max"] = field(default="kl", metadata={
        "help": "What the masks are trained to keep: kl, the full model's output distribution (KL, the Heuristic "
                "Core's); logit-diff, the task's logit difference of answer and distractors kept at the full model's "
                "(MIB's metric; a prompt task with distractors); logit-diff-max, that logit difference made as large "
                "as the circuit can make it (what MIB's CPR rewards, f above 1 included; CMD charges the overshoot)."})
    train_for: Literal["target", "ranking"] = field(default="target", metadata={
        "help": "target: the masks train towards the sparsity asked (the Lagrangian, the paper's); ranking: every "
                "draw keeps a budget drawn from MIB's circuit sizes (0.1% to 50%) through a relaxed top-k of "
                "log_alpha, so the masks' order is trained at every size, as MIB's faithfulness curve cuts it "
                "(pruning.ranking_budgets); the subnetwork is still cut at the sparsity asked."})
    node_sparsity: float | None = field(default=None, metadata={
        "help": "Edge level: node masks beside the edge masks (Edge Pruning's), one per head and MLP, trained towards "
                "this fraction of the units pruned with their own Lagrangian; an edge is kept only while its writer's "
                "and reader's nodes are (default: edge masks alone).", "max": 1})
    init_from: str | None = field(default=None, metadata={
        "help": "An attribution run folder (heurlens attribute, the same model and level) whose scores set the masks' "
                "start: log_alpha = log_alpha_init |s| / max |s| (the MIB shared task's warm start; default: every "
                "mask at log_alpha_init).", "option": "--init-from"})
    dtype: Precision = field(default="float32", metadata={
        "help": "Precision of the model's matrix products while the masks train and in the evaluation "
                "(torch.autocast; log_alpha, the multipliers and the KL stay float32): bfloat16 or float16 on a "
                "GPU; bfloat16 also on a CPU with AVX-512 BF16 or AMX, where a SmolLM2 mask step ran ~3x faster."})

    def __post_init__(self) -> None:
        """Refuse NaN and infinite values and values outside each field's range up front."""
        check_settings(self, "pruning setting")
        object.__setattr__(self, "ablation", ablation_name(self.ablation))  # "interchange" is "corrupt", with a warning
        if self.extend_steps and self.lr_schedule == "linear":
            raise HeurlensError("extend_steps (--extend-steps) trains on after the last step, where the linear learning-"
                                "rate schedule has reached 0 and the masks no longer move: use lr_schedule='constant' "
                                "or extend_steps=0")
        if self.train_for == "ranking" and self.discretization != "top-k":
            raise HeurlensError(f"masks trained for a ranking (train_for='ranking') are cut by their order, and "
                                f"discretization={self.discretization!r} cuts by their keep-probabilities, which such "
                                "masks leave free: use discretization='top-k' (--discretization top-k)")
        if self.extend_steps and self.train_for == "ranking":
            raise HeurlensError("extend_steps (--extend-steps) trains on the seeds whose masks are off their target, and "
                                "masks trained for a ranking (train_for='ranking') have none but the budget of each "
                                "draw: give more total_steps (--steps) instead")
        if self.node_sparsity is not None and self.level != "edge":
            raise HeurlensError(f"node_sparsity={self.node_sparsity} (--node-sparsity) trains node masks beside edge "
                                "masks; unit masks are node masks already: give their target as the sparsity, or "
                                "prune edges (level='edge', --level edge)")
        wrong = [f"{name}={getattr(self, name)!r}" for name, needed in _LEVEL_NEEDS[self.level]
                 if getattr(self, name) != needed]
        if wrong:
            raise HeurlensError(f"edge-level pruning ({', '.join(wrong)}) keeps the top-k edges of every edge: use "
                                "discretization='top-k' (--discretization top-k) and units='all'")

    @classmethod
    def released(cls, **changes) -> PruneSettings:
        """The released code's recipe: log_alpha from N(10, 0.01), AdamW (weight decay 0.01) with lr 0.1 /
        1, 200 warm-up steps then linear decay to 0, gradient clipping at 1.0, 4 micro-batches per step,
        the sampled sparsity, dropout on, Appendix B's step counts, per-layer discretisation. Meant for
        batches of 32 (32 x 4 = 128, as released)."""
        return replace(cls(log_alpha_init=10.0, weight_decay=0.01, lr_schedule="linear", lr_warmup_steps=200,
                           max_grad_norm=1.0, grad_accumulation=4, sparsity_estimate="sampled", dropout=True,
                           step_budget="paper-steps", discretization="per-layer"), **changes)

    def steps_for(self, sparsity: float, n_examples: int, batch_size: int) -> tuple[int, int]:
        """(warm-up, total) optimizer steps; a given total without a warm-up keeps Appendix B's warm-up fraction."""
        paper_warmup, paper_total = paper_steps(sparsity)
        if self.total_steps:
            warmup, total = max(1, round(self.total_steps * paper_warmup / paper_total)), self.total_steps
        elif self.step_budget == "paper-steps":
            warmup, total = paper_warmup, paper_total
        else:
            warmup, total = scaled_steps(sparsity, n_examples, batch_size * self.grad_accumulation)
        warmup = min(self.warmup_steps or warmup, total)
        if self.step_budget == "paper-epochs" and not self.total_steps:  # the data-scaled budget grows to settle
            total = max(total, warmup + self.settle_steps)
        return warmup, total

    def to_dict(self) -> dict:
        """The settings as recorded in each subnetwork; ``units``, ``ablation``, ``level``, ``dtype``, ``penalty``,
        ``settle_steps``, ``extend_steps``, ``objective``, ``init_from``, ``train_for`` and ``node_sparsity`` only
        when not what run folders written before they existed used, so those still match their own settings."""
        settings = asdict(self)
        for name, default in (("units", "all"), ("ablation", "mean"), ("level", "node"), ("dtype", "float32"),
                              ("penalty", "lagrangian"), ("settle_steps", 0), ("extend_steps", 0),
                              ("objective", "kl"), ("init_from", None), ("train_for", "target"),
                              ("node_sparsity", None)):
            if settings[name] == default:
                del settings[name]
        return settings


def checked_targets(sparsity: float | Iterable[float]) -> list[float]:
    """``prune``'s ``sparsity`` as a list of targets, each in [0, 1) and given once (-0.0 read as 0.0)."""
    sparsities = [float(s) + 0.0 for s in ([sparsity] if isinstance(sparsity, (int, float)) else sparsity)]
    for target in sparsities:
        if not 0 <= target < 1:
            raise HeurlensError(f"sparsity {target} is outside [0, 1): it is the fraction of units to prune")
    if len(set(sparsities)) < len(sparsities):
        twice = sorted({target for target in sparsities if sparsities.count(target) > 1})
        raise HeurlensError(f"sparsity {', '.join(map(str, twice))} is given twice; give each target once (more "
                            "seeds: seeds=range(n))")
    return sparsities


def checked_seeds(seeds: Iterable[int]) -> list[int]:
    """``prune``'s ``seeds`` as a list, each a whole number 0 or above (not a bool)."""
    seeds = list(seeds)
    wrong = next((seed for seed in seeds if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0), None)
    if wrong is not None:
        raise HeurlensError(f"seed {wrong!r}: give each seed as a whole number 0 or above (seeds=range(3), [0, 1])")
    return seeds
