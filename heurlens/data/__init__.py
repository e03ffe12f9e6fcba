"""NLI data that works offline (SNLI, HANS-style), loaders for the real sets, and local files."""

from heurlens.data.files import load_pair_file
from heurlens.data.hans import FOCUS_SUBCASES, HANS_LABELS, SUBCASES, generate_hans
from heurlens.data.hub import load_pair_task
from heurlens.data.snli import NLI_LABELS, load_snli

__all__ = ["FOCUS_SUBCASES", "HANS_LABELS", "NLI_LABELS", "SUBCASES", "generate_hans", "load_pair_file",
           "load_pair_task", "load_snli"]
