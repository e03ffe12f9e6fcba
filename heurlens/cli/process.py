"""The ``heurlens`` command's process: fewer garbage collections, and no interpreter teardown at the end.

A model command imports torch, transformers and TransformerLens, which make about 1.5 million Python objects.
CPython's cyclic collector runs each time 700 new objects outlive a collection and now and then rescans them
all: 0.5-0.7 s of the README command's import time on this project's 2-core CPU. Collecting every 10,000 instead
keeps that off and still frees cycles in a long run. After the command, the interpreter's teardown frees the
modules' objects one by one and collects once more: 1.0-1.5 s for nothing, as the process ends anyway
(benchmarks/main_command.py measures both). So the command's exit, once every ``atexit`` handler has run (Ray's
shutdown, temporary folders, logging's flush), flushes stdout and stderr and ends the process with its exit
status. Only the command does this (``command_line``): ``heurlens.cli.main`` called from Python (tests,
notebooks) leaves the interpreter as it is.
"""

from __future__ import annotations

import atexit
import gc
import os
import sys
from collections.abc import Callable

GC_THRESHOLD = (10_000, 10, 10)  # CPython's default is (700, 10, 10)


def run_as_command(main: Callable[[], None]) -> None:
    """``main()`` as the whole process: the collector tuned, and the exit status kept for ``_end``."""
    gc.set_threshold(*GC_THRESHOLD)
    status: list[int] = []
    atexit.register(_end, status)  # registered first, so it runs after every other exit handler
    try:
        main()
    except SystemExit as stop:
        status.append(_exit_status(stop.code))
        raise
    except KeyboardInterrupt:
        status.append(130)
        raise
    except BaseException:
        status.append(1)  # Python prints the traceback before the exit handlers run
        raise
    status.append(0)


def _exit_status(code: object) -> int:
    """The status ``sys.exit(code)`` ends a process with: None is 0, an int itself, anything else (a message,
    which Python prints) 1."""
    if code is None:
        return 0
    return code if isinstance(code, int) else 1


def _end(status: list[int]) -> None:
    """The last exit handler: flush what the command printed and end the process without tearing it down."""
    if not status:
        return
    if "logging" in sys.modules:  # its own exit handler may have been registered before this one
        sys.modules["logging"].shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe (heurlens ... | head) or stream: nothing left to say there
            pass
    os._exit(status[0])
