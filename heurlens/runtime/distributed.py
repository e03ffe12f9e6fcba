"""Independent runs (seeds x sparsities, conditions x sample counts, heads) in this process or on Ray workers.

``run_each(work, shared, items, workers)`` returns ``[work(shared, item) for item in items]``. Without
``workers`` that is exactly the loop, in this process, and Ray is never imported. With
``Workers(count=N)`` each item is a Ray task: ``shared`` (the model, data, reference logits...) is put
into Ray's object store once and read by every task, at most N tasks run at once, each with
``cores // N`` torch threads so that N workers do not oversubscribe the machine, and one progress bar
counts finished tasks. ``work`` must write its own result atomically when it writes one (every run
folder of heurlens does), so a task whose worker dies leaves no partial file; Ray runs the task again
(``max_retries``), and whatever finished before is found on disk by the next call, as without Ray.

Ray is started on this machine (``ray.init()``), or joins the cluster at ``Workers.address`` (or at
``RAY_ADDRESS``, which Ray itself reads); on a cluster the run folder must be on a file system every
node sees.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from heurlens.errors import HeurlensError
from heurlens.runtime.progress import progress_bar

Shared = TypeVar("Shared")
Item = TypeVar("Item")
Result = TypeVar("Result")

TASK_RETRIES = 3  # Ray re-runs a task whose worker process died this many times


@dataclass(frozen=True)
class Workers:
    """How many runs at once on Ray, and where: ``address`` None starts Ray on this machine (or joins the
    cluster named by ``RAY_ADDRESS``); "auto" (the cluster this machine is a node of) or "HOST:PORT" (its head)
    joins a running cluster. ``gpus_per_worker``: the GPUs each task asks Ray for (Ray then gives the task its
    own ``CUDA_VISIBLE_DEVICES``, so "cuda" is that GPU); 0 for CPU work."""

    count: int
    address: str | None = None
    gpus_per_worker: float = 0

    def __post_init__(self) -> None:
        if self.count < 1:
            raise HeurlensError(f"Workers(count) must be at least 1 (got {self.count})")
        if not 0 <= self.gpus_per_worker < float("inf"):
            raise HeurlensError(f"Workers(gpus_per_worker=) must be 0 or more (got {self.gpus_per_worker})")


def workers_from_options(count: int | None, address: str | None, gpus_per_worker: float | None = None,
                         device: str | None = None) -> Workers | None:
    """The CLI's ``--workers N``, ``--ray-address A`` and ``--gpus-per-worker G``: None (in process) when no
    --workers is given. G defaults to 1 when the command's ``device`` (``--device``, resolved as
    ``heurlens.runtime.devices.resolve_device``) is CUDA, else 0."""
    if count is None:
        for given, name in ((address, "--ray-address"), (gpus_per_worker, "--gpus-per-worker")):
            if given is not None:
                raise HeurlensError(f"{name} needs --workers N: say how many runs may go at once")
        return None
    given_as = "--ray-address "
    if address is None and os.environ.get("RAY_ADDRESS", "").strip():  # Ray reads it: checked as --ray-address is
        address, given_as = os.environ["RAY_ADDRESS"].strip(), "RAY_ADDRESS="
    if address is not None:
        check_cluster_address(address, given_as)
    if gpus_per_worker is None:
        from heurlens.runtime.devices import resolve_device

        gpus_per_worker = 1 if resolve_device(device).type == "cuda" else 0
    if address is None and gpus_per_worker:  # Ray on this machine alone: its GPUs are known before anything starts
        import torch

        here = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if gpus_per_worker > here:
            raise HeurlensError(f"--gpus-per-worker {gpus_per_worker:g}: Ray runs on this machine, which has {here} "
                                "GPU(s) torch can use, so no task could start; give --gpus-per-worker 0 (CPU workers) "
                                "or --ray-address of a cluster with GPUs")
    return Workers(count, address, gpus_per_worker)


CONNECT_SECONDS = 3.0


def check_cluster_address(address: str, given_as: str = "--ray-address ") -> None:
    """Refuse, in one line and within a few seconds, a cluster address nothing answers at, before any work:
    "auto" needs a cluster started on this machine (``ray start``), "HOST:PORT" something listening there.
    Ray Client addresses (ray://) need ``ray[client]``, which heurlens does not install. ``given_as``: how the
    message names where the address came from (the option, or the environment's ``RAY_ADDRESS=``)."""
    start_one = "start one with `ray start --head` on the head node (and `ray start --address HEAD:6379` on the others)"
    leave_out = ("unset RAY_ADDRESS" if given_as.startswith("RAY_ADDRESS") else
                 "leave out address=" if given_as.startswith("Workers") else "leave out --ray-address")
    if address.startswith("ray://"):
        raise HeurlensError(f"{given_as}{address}: Ray Client addresses need the ray[client] extra, which heurlens "
                            "does not install; run heurlens on a node of the cluster with --ray-address auto, or give "
                            "the head's HOST:6379")
    if address == "auto":
        record = Path(os.environ.get("RAY_TMPDIR", "/tmp")) / "ray" / "ray_current_cluster"
        if not record.is_file():
            raise HeurlensError(f"{given_as}auto: no Ray cluster was started on this machine; {start_one}, or "
                                f"{leave_out} to run the workers on this machine alone")
        address = record.read_text().strip()
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise HeurlensError(f"{given_as}{address}: give auto or the head's HOST:PORT (e.g. 10.0.0.5:6379)")
    try:
        speaks_grpc = _answers_http2(host.strip("[]"), int(port))
    except OSError as error:
        raise HeurlensError(f"{given_as}{address}: no Ray cluster answers there ({error.strerror or 'timed out'}); "
                            f"{start_one}, or check the address ({leave_out}: the workers run on this machine)") from error
    if not speaks_grpc:
        raise HeurlensError(f"{given_as}{address}: something answers there, but not a Ray cluster's head (its GCS "
                            f"speaks gRPC; this did not): give the head's GCS port (6379 unless `ray start --head "
                            f"--port` said otherwise), or {leave_out} to run the workers on this machine")


_HTTP2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])  # + an empty SETTINGS frame
_SETTINGS_FRAME = 4


def _answers_http2(host: str, port: int) -> bool:
    """Whether the server at host:port answers an HTTP/2 connection preface with a SETTINGS frame, as every gRPC
    server (Ray's GCS) does first; an HTTP/1 server, or one that stays silent for ``CONNECT_SECONDS``, does not.
    OSError when nothing listens there."""
    with socket.create_connection((host, port), timeout=CONNECT_SECONDS) as connection:
        connection.sendall(_HTTP2_PREFACE)
        header = b""
        try:
            while len(header) < 9:
                chunk = connection.recv(9 - len(header))
                if not chunk:
                    break
                header += chunk
        except OSError:  # silent past the timeout, or reset
            return False
    return len(header) == 9 and header[3] == _SETTINGS_FRAME


def import_ray():
    """Ray, or a HeurlensError that says how to install it."""
    try:
        import ray
    except ImportError as error:
        raise HeurlensError("Workers(count) run on Ray, which is not installed: bash install.sh installs it, or "
                            "pip install -e '.[ray]'; without them everything runs in this process") from error
    return ray


def threads_per_worker(count: int, cluster_cpus: float, smallest_node_cpus: float) -> int:
    """Torch threads for each of ``count`` workers: the cluster's cores shared out, at least 1, at most one
    node's cores (a task runs on one node)."""
    return max(1, min(int(cluster_cpus // count), int(smallest_node_cpus)))


def check_gpus(gpus_per_worker: float, node_gpus: Sequence[float]) -> None:
    """Refuse GPU workers that no node of the cluster can hold (Ray would wait for them forever)."""
    if gpus_per_worker and max(node_gpus, default=0) < gpus_per_worker:
        raise HeurlensError(f"Workers(gpus_per_worker={gpus_per_worker:g}): no node of the Ray cluster has that many "
                            f"GPUs (GPUs per node: {', '.join(f'{g:g}' for g in node_gpus) or 'none'}); use "
                            "Workers(gpus_per_worker=0) (and device=cpu), or a cluster with GPUs")


def start_ray(ray: Any, workers: Workers, progress: bool) -> None:
    """``ray.init`` for ``workers``, keeping the process's own SIGTERM handler: Ray's driver puts one of its own in
    place (``sys.exit(15)``), so a SIGTERM while or after Ray starts would end the run without heurlens' "aborted"
    line and exit status; a SIGTERM that Ray's handler turned into an exit is delivered to the process's handler."""
    own = signal.getsignal(signal.SIGTERM)
    main_thread = threading.current_thread() is threading.main_thread()
    try:
        ray.init(address=workers.address, num_cpus=None if workers.address or os.environ.get("RAY_ADDRESS")
                 else os.cpu_count(), include_dashboard=False, log_to_driver=progress, configure_logging=False)
    except SystemExit as stop:
        if stop.code != signal.SIGTERM or not main_thread or own is None:
            raise
        signal.signal(signal.SIGTERM, own)
        signal.raise_signal(signal.SIGTERM)  # the process's own handler now (heurlens': "aborted (SIGTERM)")
        raise
    finally:
        if main_thread and own is not None:
            signal.signal(signal.SIGTERM, own)


def run_each(work: Callable[[Shared, Item], Result], shared: Shared, items: Sequence[Item],
             workers: Workers | None = None, desc: str = "runs", progress: bool = True) -> list[Result]:
    """``[work(shared, item) for item in items]``, here or as Ray tasks (see the module docstring).

    ``work`` must be a module-level function (Ray pickles it by reference); results come back in the
    order of ``items``."""
    if workers is None or not items:
        return [work(shared, item) for item in progress_bar(items, desc=desc, unit="run", disable=not progress)]
    with contextlib.redirect_stdout(sys.stderr):  # Ray prints its raylet's news (a worker died) on stdout
        return _run_on_ray(work, shared, items, workers, desc, progress)


def _run_on_ray(work: Callable[[Shared, Item], Result], shared: Shared, items: Sequence[Item], workers: Workers,
                desc: str, progress: bool) -> list[Result]:
    """``run_each``'s Ray tasks, the driver's stdout on stderr meanwhile, so that stdout carries only what the caller
    prints (a command's ``--json`` table)."""
    ray = import_ray()
    if not ray.is_initialized():
        if workers.address is not None:  # the library's way in; the CLI checked its --ray-address already
            check_cluster_address(workers.address, "Workers(address=...) ")
        start_ray(ray, workers, progress)
    alive = [node["Resources"] for node in ray.nodes() if node["Alive"]]
    nodes = [resources.get("CPU", 0) for resources in alive]
    threads = threads_per_worker(workers.count, sum(nodes), min(nodes))
    check_gpus(workers.gpus_per_worker, [resources.get("GPU", 0) for resources in alive])
    remote = ray.remote(num_cpus=threads, num_gpus=workers.gpus_per_worker,
                        max_retries=TASK_RETRIES)(_run_with_threads)
    shared_ref = ray.put(shared)
    waiting = list(range(len(items)))
    running: dict[Any, int] = {}
    results: dict[int, Result] = {}
    with progress_bar(total=len(items), desc=desc, unit="run", disable=not progress) as bar:
        while waiting or running:
            while waiting and len(running) < workers.count:
                index = waiting.pop(0)
                running[remote.remote(work, shared_ref, items[index], threads)] = index
            done, _ = ray.wait(list(running), num_returns=1)
            for ref in done:
                index = running.pop(ref)
                try:
                    results[index] = ray.get(ref)
                except ray.exceptions.RayTaskError as error:  # the task's own exception, as in process
                    for other in running:
                        ray.cancel(other)
                    raise (error.cause if isinstance(error.cause, Exception) else error) from None
                bar.update()
    return [results[index] for index in range(len(items))]


def _run_with_threads(work: Callable[[Shared, Item], Result], shared: Shared, item: Item, threads: int) -> Result:
    """One Ray task: ``work(shared, item)`` with ``threads`` torch threads."""
    import torch

    torch.set_num_threads(threads)
    return work(shared, item)
