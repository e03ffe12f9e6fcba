"""heurlens: find, compare, ablate and transfer subnetworks of trained models, on TransformerLens.

The names below are imported on first use (``heurlens.lazy``): ``import heurlens`` is instant."""

from heurlens.lazy import lazy_exports

_EXPORTS = {
    "ablate": ".ablation", "ablation_hooks": ".ablation",
    "generate_hans": ".data", "load_pair_file": ".data", "load_pair_task": ".data", "load_snli": ".data",
    "HeurlensError": ".errors",
    "EvalSet": ".evaluate", "accuracy": ".evaluate", "mean_kl": ".evaluate", "predict_logits": ".evaluate",
    "tokenize_pairs": ".evaluate",
    "UnitMeans": ".means", "compute_means": ".means",
    "HookedClassifier": ".models", "load_model": ".models",
    "PruneSettings": ".pruning", "Subnetwork": ".pruning", "accuracy_table": ".pruning",
    "evaluate_subnetworks": ".pruning", "prune": ".pruning",
    "Unit": ".units", "all_units": ".units", "format_units": ".units", "parse_units": ".units",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
