"""NLI data that works offline (SNLI, HANS-style), loaders for the real sets, local files, and prompt tasks. Names are
imported on first use (``heurlens.runtime.lazy``)."""

from typing import TYPE_CHECKING

from heurlens.runtime.lazy import lazy_exports

_EXPORTS = {"load_pair_file": ".files", "FOCUS_SUBCASES": ".hans", "HANS_LABELS": ".hans", "SUBCASES": ".hans",
            "generate_hans": ".hans", "load_pair_task": ".hub", "NLI_LABELS": ".snli", "load_snli": ".snli",
            "ioi_examples": ".prompt_generators", "load_prompt_file": ".prompt_tasks", "prompt_metrics": ".prompt_tasks",
            "tokenize_prompt_task": ".prompt_tasks", "greater_than_examples": ".prompt_generators",
            "induction_examples": ".prompt_generators"}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

if TYPE_CHECKING:  # the lazy names' real types, for type checkers and editors (never run)
    from heurlens.data.files import load_pair_file as load_pair_file
    from heurlens.data.hans import FOCUS_SUBCASES as FOCUS_SUBCASES
    from heurlens.data.hans import HANS_LABELS as HANS_LABELS
    from heurlens.data.hans import SUBCASES as SUBCASES
    from heurlens.data.hans import generate_hans as generate_hans
    from heurlens.data.hub import load_pair_task as load_pair_task
    from heurlens.data.prompt_generators import greater_than_examples as greater_than_examples
    from heurlens.data.prompt_generators import induction_examples as induction_examples
    from heurlens.data.prompt_generators import ioi_examples as ioi_examples
    from heurlens.data.prompt_tasks import load_prompt_file as load_prompt_file
    from heurlens.data.prompt_tasks import prompt_metrics as prompt_metrics
    from heurlens.data.prompt_tasks import tokenize_prompt_task as tokenize_prompt_task
    from heurlens.data.snli import NLI_LABELS as NLI_LABELS
    from heurlens.data.snli import load_snli as load_snli
