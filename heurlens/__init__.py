"""heurlens: find, compare, ablate and transfer subnetworks of trained models, on TransformerLens."""

from heurlens.ablation import ablate, ablation_hooks
from heurlens.data import generate_hans, load_pair_file, load_pair_task, load_snli
from heurlens.errors import HeurlensError
from heurlens.evaluate import EvalSet, accuracy, mean_kl, predict_logits, tokenize_pairs
from heurlens.means import UnitMeans, compute_means
from heurlens.models import HookedClassifier, load_model
from heurlens.pruning import PruneSettings, Subnetwork, accuracy_table, evaluate_subnetworks, prune
from heurlens.units import Unit, all_units, format_units, parse_units

__all__ = ["EvalSet", "HeurlensError", "HookedClassifier", "PruneSettings", "Subnetwork", "Unit", "UnitMeans", "ablate",
           "ablation_hooks", "accuracy", "accuracy_table", "all_units", "compute_means", "evaluate_subnetworks",
           "format_units", "generate_hans", "load_model", "load_pair_file", "load_pair_task", "load_snli", "mean_kl",
           "parse_units", "predict_logits", "prune", "tokenize_pairs"]
