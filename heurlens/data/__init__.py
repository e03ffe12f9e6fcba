"""NLI data that works offline (SNLI, HANS-style), loaders for the real sets, local files, and prompt tasks. Names are
imported on first use (``heurlens.lazy``)."""

from heurlens.lazy import lazy_exports

_EXPORTS = {"load_pair_file": ".files", "FOCUS_SUBCASES": ".hans", "HANS_LABELS": ".hans", "SUBCASES": ".hans",
            "generate_hans": ".hans", "load_pair_task": ".hub", "NLI_LABELS": ".snli", "load_snli": ".snli",
            "ioi_examples": ".prompt_tasks", "load_prompt_file": ".prompt_tasks", "prompt_metrics": ".prompt_tasks",
            "tokenize_prompt_task": ".prompt_tasks", "greater_than_examples": ".prompt_tasks",
            "induction_examples": ".prompt_tasks"}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
