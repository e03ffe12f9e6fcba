"""The ``heurlens`` click group; the commands live in ``commands_*`` modules."""

from __future__ import annotations

import os
import sys

import click

from heurlens import __version__

# heurlens shows its own progress bars and errors; the libraries' per-file bars and retry warnings are noise
# here (an unreachable hub ends in one heurlens error line). Set before the libraries load (they read these
# once), so that the CLI need not import them to quiet them.
QUIET_LIBRARIES = {"HF_DATASETS_DISABLE_PROGRESS_BARS": "1", "HF_HUB_DISABLE_PROGRESS_BARS": "1",
                   "HF_HUB_VERBOSITY": "error"}


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "-V", "--version", prog_name="heurlens", message="%(prog)s %(version)s")
@click.option("-q", "--quiet", is_flag=True, help="No progress bars (they go to stderr; results to stdout either way).")
def cli(quiet: bool) -> None:
    """heurlens: find, compare, ablate and transfer subnetworks of trained models."""
    from heurlens.runtime.progress import set_quiet

    set_quiet(quiet)
    for variable, value in QUIET_LIBRARIES.items():
        os.environ.setdefault(variable, value)
    # libraries imported already (the CLI called from Python, as the tests do) have read them: tell those directly
    if "datasets" in sys.modules:
        sys.modules["datasets"].disable_progress_bars()
    if "transformers" in sys.modules:
        sys.modules["transformers"].utils.logging.disable_progress_bar()
    if "huggingface_hub" in sys.modules:
        sys.modules["huggingface_hub"].utils.logging.set_verbosity_error()
