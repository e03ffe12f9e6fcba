"""What one circuit call computes, as one settings object each, as TransformerLens passes a config in and takes a
result out: ``AttributionSettings`` (EAP or EAP-IG, at which level, with which ablation) and
``FaithfulnessSettings`` (the metric, the ablation outside a circuit, the grid of sizes, the cache). Both are checked
when made, so a library call refuses what the CLI refuses before any work. The functions that take them still take
their old keywords (``level=``, ``ig_steps=``, ``method=``; ``metric=``, ``method=``, ``grid=``, ``cache=``) until
heurlens 0.3.0, with a warning (``from_keywords``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, TypeVar, get_args

from heurlens.circuits.faithfulness_areas import MIB_GRID, check_grid
from heurlens.errors import HeurlensError
from heurlens.interventions.layouts import Level
from heurlens.interventions.scoring import Method, MethodName, as_method
from heurlens.protocols import Metric
from heurlens.runtime.caller_warnings import warn_at_caller
from heurlens.runtime.deprecations import STILL_WORKS, DeprecatedMethod

IG_STEPS = 5  # MIB's EAP-IG-inputs


class _Unset:
    """A keyword not given (an old keyword of a function that now takes a settings object)."""

    def __repr__(self) -> str:
        return "UNSET"


UNSET: Any = _Unset()


def check_attribution(level: Level, ig_steps: int | None, method: MethodName) -> None:
    """Refuse by name what attribution cannot do (checked before any work, by the CLI before the model loads)."""
    method = as_method(method)
    if level not in ("node", "edge"):
        raise HeurlensError(f"level {level!r}: attribute 'node' (heads and MLPs) or 'edge' (edges between them)")
    if ig_steps is not None and (isinstance(ig_steps, bool) or not isinstance(ig_steps, int)):
        raise HeurlensError(f"ig_steps={ig_steps!r}: give EAP-IG's number of steps as a whole number (MIB's "
                            f"{IG_STEPS}), or None for EAP")
    if ig_steps is not None and ig_steps < 1:
        raise HeurlensError(f"ig_steps={ig_steps}: EAP-IG needs one step or more (MIB's {IG_STEPS}); None is EAP")
    if ig_steps is not None and method != "corrupt":
        raise HeurlensError(f"EAP-IG integrates along the inputs from each corrupted prompt to its clean one, and the "
                            f"ablation is {method!r}: use corrupt ablation, or EAP (no ig_steps) with {method} ablation")


@dataclass(frozen=True)
class AttributionSettings:
    """One attribution: ``level`` "node" (heads and MLPs) or "edge"; ``ig_steps`` None for EAP (Syed et al. 2023),
    n for EAP-IG on the inputs (n points from the corrupted prompt to the clean one, MIB's 5; corrupt ablation);
    ``ablation``: what an ablated item carries, "corrupt" (its output on the corrupted prompt), "mean" or "zero";
    ``ig_points_per_pass``: EAP-IG's points run this many at a time, each pass over as many copies of the batch
    stacked (1: one pass per point, as MIB's code runs them; None: all in one pass, that many times the memory; on this
    project's CPU all in one pass was 0.84x as fast, benchmarks/eap_ig.py; not measured on a GPU)."""

    level: Level = "node"
    ig_steps: int | None = None
    ablation: MethodName = "corrupt"
    ig_points_per_pass: int | None = 1

    def __post_init__(self) -> None:
        _check_ablation(self.ablation, "attribution")
        check_attribution(self.level, self.ig_steps, self.ablation)
        per_pass = self.ig_points_per_pass
        if per_pass is not None and (isinstance(per_pass, bool) or not isinstance(per_pass, int) or per_pass < 1):
            raise HeurlensError(f"ig_points_per_pass={per_pass!r}: give how many of EAP-IG's points one pass runs, a "
                                "whole number from 1 (one pass per point, the least memory), or None (all in one pass)")
        object.__setattr__(self, "ablation", as_method(self.ablation))  # "interchange" is "corrupt", with a warning

    @property
    def label(self) -> str:
        """How tables name the method: "EAP" or "EAP-IG (n steps)"."""
        return "EAP" if self.ig_steps is None else f"EAP-IG ({self.ig_steps} steps)"


@dataclass(frozen=True)
class FaithfulnessSettings:
    """How circuits are scored: ``metric`` (``metric(scores, task)`` or ``metric(scores)`` to one number; None: the
    logit difference of a prompt task with distractors), ``ablation`` (what every item outside a circuit carries:
    "mean", "zero" or "corrupt"; None: "corrupt" on edges, MIB's patching, and "mean" on units), ``grid`` (the sizes,
    fractions kept, ascending in (0, 1]: MIB's ten) and ``cache`` (whether the full model's logits are read from and
    written to heurlens' cache; None: the default)."""

    metric: Metric | None = None
    ablation: MethodName | None = None
    grid: tuple[float, ...] = field(default=MIB_GRID)
    cache: bool | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "grid", check_grid(self.grid))
        if self.metric is not None and not callable(self.metric):
            raise HeurlensError(f"faithfulness setting metric = {self.metric!r} is not a function of the scores")
        if self.cache is not None and not isinstance(self.cache, bool):
            raise HeurlensError(f"faithfulness setting cache = {self.cache!r} is not True, False or None")
        if self.ablation is not None:
            _check_ablation(self.ablation, "faithfulness")
            object.__setattr__(self, "ablation", as_method(self.ablation))


S = TypeVar("S", AttributionSettings, FaithfulnessSettings)


def _check_ablation(ablation: object, kind: str) -> None:
    if ablation not in get_args(Method) + get_args(DeprecatedMethod):
        raise HeurlensError(f"{kind} setting ablation = {ablation!r} is not one of {', '.join(get_args(Method))}")


def from_keywords(settings: S | None, default: S, old: dict[str, Any], function: str) -> S:
    """``settings``, or ``default`` with the old keywords given (``old``: field name -> value, ``UNSET`` where not
    given) set on it, with a warning naming what to write instead; both at once are refused."""
    given = {name: value for name, value in old.items() if value is not UNSET}
    if not given:
        return default if settings is None else settings
    if settings is not None:
        raise HeurlensError(f"{function}(): give settings= or the keywords {', '.join(given)}, not both")
    kind = type(default).__name__
    warn_at_caller(f"{function}(..., {', '.join(f'{name}=' for name in given)}): pass settings={kind}("
                   f"{', '.join(f'{name}=...' for name in given)}) (the keywords {STILL_WORKS})", DeprecationWarning)
    return type(default)(**{**default.__dict__, **given})
