"""The one exception type a user of heurlens is meant to read, and how its messages name what to change.

A message names what the caller can change in the caller's terms. The library's are Python's: ``out=``,
``device=cpu``, ``PruneSettings(total_steps=...)``, ``Workers(count)``. The command line shows the same message
with the flags that set those (``--out``, ``--device cpu``, ``--steps ...``, ``--workers``): ``for_command_line``,
applied by the CLI to every error and warning it prints."""

from __future__ import annotations

import re


class HeurlensError(Exception):
    """A mistake the user can fix; the message says what was wrong and what to do.

    The CLI prints it as one line (no traceback), in its own terms (``for_command_line``), and exits with
    status 2.
    """


# (library term, command-line term), the first that matches a place wins: calls before bare keywords
_COMMAND_LINE_TERMS = [
    (r"load_model\(dtype=([^)]*)\)", r"--weights-dtype \1"),
    (r"PruneSettings\(total_steps=([^)]*)\)", r"--steps \1"),
    (r"PruneSettings\(warmup_steps=([^)]*)\)", r"--warmup-steps \1"),
    (r"PruneSettings\(log_alpha_init=([^)]*)\)", r"--log-alpha-init \1"),
    (r"PruneSettings\(lr_log_alpha=([^)]*)\)", r"--lr-log-alpha \1"),
    (r"PruneSettings\(extend_steps=([^)]*)\)", r"--extend-steps \1"),
    (r"PruneSettings\(penalty=([^)]*)\)", r"--penalty \1"),
    (r"Workers\(count\)", "--workers"),
    (r"Workers\(gpus_per_worker=([^)]*)\)", r"--gpus-per-worker \1"),
    (r"Workers\(address=([^)]*)\)", r"--ray-address \1"),
    *((rf"(?<![\w.-]){name}=(?!=)", f"{flag} ") for name, flag in (
        ("out", "--out"), ("device", "--device"), ("dtype", "--dtype"), ("name_or_path", "--model"),
        ("task", "--task"), ("core", "--core"), ("n_per_subcase", "--per-subcase"), ("rows", "--rows"),
        ("seeds", "--seeds"))),
]


def for_command_line(message: str) -> str:
    """``message`` with each argument named in the library's terms written as the command-line flag that sets it
    (``out=`` -> ``--out``, ``PruneSettings(total_steps=...)`` -> ``--steps ...``)."""
    for library, command_line in _COMMAND_LINE_TERMS:
        message = re.sub(library, command_line, message)
    return re.sub(r" +([,;:)])", r"\1", re.sub(r" {2,}", " ", message)).rstrip()
