"""The ``heurlens`` click group; the commands live in ``commands_*`` modules."""

from __future__ import annotations

import click


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def cli() -> None:
    """heurlens: find, compare, ablate and transfer subnetworks of trained models."""
    import datasets
    import huggingface_hub
    import transformers

    # heurlens shows its own progress bars and errors; the libraries' per-file bars and retry
    # warnings are noise here (an unreachable hub ends in one heurlens error line).
    datasets.disable_progress_bars()
    transformers.utils.logging.disable_progress_bar()
    huggingface_hub.utils.logging.set_verbosity_error()
