"""heurlens: find, compare, ablate and transfer subnetworks of trained models, on TransformerLens.

The names below are imported on first use (``heurlens.runtime.lazy``): ``import heurlens`` is instant. The
``TYPE_CHECKING`` block gives a type checker the same names with their real signatures."""

from typing import TYPE_CHECKING

from heurlens.runtime.deprecations import redirect_moved_modules
from heurlens.runtime.lazy import lazy_exports

__version__ = "0.2.0"  # the one place it is written: pyproject.toml reads it (tool.setuptools.dynamic)

_EXPORTS = {
    "ablate": ".interventions.ablation", "ablated": ".interventions.ablation",
    "ablation_hooks": ".interventions.ablation",
    "generate_hans": ".data", "load_pair_file": ".data", "load_pair_task": ".data", "load_snli": ".data",
    "HeurlensError": ".errors",
    "EvalSet": ".evaluate", "accuracy": ".evaluate", "mean_kl": ".evaluate", "predict_logits": ".evaluate",
    "tokenize_pairs": ".evaluate",
    "UnitMeans": ".interventions.means", "compute_means": ".interventions.means",
    "HookedClassifier": ".models", "load_model": ".models", "wrap_bridge": ".models",
    "HookedModel": ".protocols", "ModelLike": ".protocols", "Metric": ".protocols", "Loss": ".protocols",
    "Task": ".protocols", "is_hooked_model": ".protocols", "is_task": ".protocols",
    "PruneSettings": ".pruning", "Subnetwork": ".pruning", "accuracy_table": ".pruning",
    "evaluate_subnetworks": ".pruning", "prune": ".pruning",
    "TokenSet": ".tasks", "token_batches": ".tasks", "tokenize_texts": ".tasks",
    "Unit": ".interventions.units", "all_units": ".interventions.units", "as_units": ".interventions.units",
    "format_units": ".interventions.units", "parse_units": ".interventions.units",
    "single_unit_scan": ".analysis", "group_superadditivity": ".analysis", "head_detector_scores": ".analysis",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
redirect_moved_modules()  # ``import heurlens.units`` and the other documented old paths still work, with a warning

if TYPE_CHECKING:  # what the lazy names are, for type checkers and editors (never run)
    from heurlens.analysis.ablation_studies import group_superadditivity as group_superadditivity
    from heurlens.analysis.ablation_studies import single_unit_scan as single_unit_scan
    from heurlens.analysis.head_detector import head_detector_scores as head_detector_scores
    from heurlens.data.files import load_pair_file as load_pair_file
    from heurlens.data.hans import generate_hans as generate_hans
    from heurlens.data.hub import load_pair_task as load_pair_task
    from heurlens.data.snli import load_snli as load_snli
    from heurlens.errors import HeurlensError as HeurlensError
    from heurlens.evaluate import EvalSet as EvalSet
    from heurlens.evaluate import accuracy as accuracy
    from heurlens.evaluate import mean_kl as mean_kl
    from heurlens.evaluate import predict_logits as predict_logits
    from heurlens.evaluate import tokenize_pairs as tokenize_pairs
    from heurlens.interventions.ablation import ablate as ablate
    from heurlens.interventions.ablation import ablated as ablated
    from heurlens.interventions.ablation import ablation_hooks as ablation_hooks
    from heurlens.interventions.means import UnitMeans as UnitMeans
    from heurlens.interventions.means import compute_means as compute_means
    from heurlens.interventions.units import Unit as Unit
    from heurlens.interventions.units import all_units as all_units
    from heurlens.interventions.units import as_units as as_units
    from heurlens.interventions.units import format_units as format_units
    from heurlens.interventions.units import parse_units as parse_units
    from heurlens.models.classifier import HookedClassifier as HookedClassifier
    from heurlens.models.classifier import wrap_bridge as wrap_bridge
    from heurlens.models.loading import load_model as load_model
    from heurlens.protocols import HookedModel as HookedModel
    from heurlens.protocols import Loss as Loss
    from heurlens.protocols import Metric as Metric
    from heurlens.protocols import ModelLike as ModelLike
    from heurlens.protocols import Task as Task
    from heurlens.protocols import is_hooked_model as is_hooked_model
    from heurlens.protocols import is_task as is_task
    from heurlens.pruning.evaluation import accuracy_table as accuracy_table
    from heurlens.pruning.evaluation import evaluate_subnetworks as evaluate_subnetworks
    from heurlens.pruning.runs import prune as prune
    from heurlens.pruning.settings import PruneSettings as PruneSettings
    from heurlens.pruning.subnetwork import Subnetwork as Subnetwork
    from heurlens.tasks import TokenSet as TokenSet
    from heurlens.tasks import token_batches as token_batches
    from heurlens.tasks import tokenize_texts as tokenize_texts
