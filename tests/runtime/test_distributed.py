"""Runs on Ray workers (heurlens.runtime.distributed): same results as in process, nothing lost when a worker dies."""

import os
import signal
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import pytest
import torch

from heurlens.errors import HeurlensError, for_command_line
from heurlens.runtime.distributed import (
    CONNECT_SECONDS,
    Workers,
    check_cluster_address,
    check_gpus,
    import_ray,
    run_each,
    threads_per_worker,
    workers_from_options,
)


def test_threads_per_worker_share_the_cores_without_oversubscribing():
    assert threads_per_worker(2, 2, 2) == 1  # this CPU, 2 workers: one thread each
    assert threads_per_worker(1, 2, 2) == 2
    assert threads_per_worker(3, 2, 2) == 1  # more workers than cores: still one each
    assert threads_per_worker(4, 64, 16) == 16  # a cluster of 4 x 16 cores: never more than one node holds
    assert threads_per_worker(8, 64, 16) == 8


def test_options_and_missing_ray_are_answered_clearly(monkeypatch):
    assert workers_from_options(None, None) is None  # no Ray at all

    with _loopback_server(b"\x00\x00\x00\x04\x00\x00\x00\x00\x00") as address:  # answers as gRPC: a head
        assert workers_from_options(2, address) == Workers(2, address)
        assert workers_from_options(2, address, 0.5, "cpu").gpus_per_worker == 0.5  # the cluster's GPUs: asked later
    with pytest.raises(HeurlensError, match="--ray-address needs --workers"):
        workers_from_options(None, "auto")
    with pytest.raises(HeurlensError, match="--gpus-per-worker needs --workers"):
        workers_from_options(None, None, 1)
    # GPUs per task: 1 by default when the command runs on CUDA, 0 on the CPU, or as given
    assert workers_from_options(2, None, None, "cpu").gpus_per_worker == 0
    if not torch.cuda.is_available():  # Ray on this machine alone: more GPUs than it has are refused at once
        with pytest.raises(HeurlensError, match="--gpus-per-worker 0.5: Ray runs on this machine, which has 0"):
            workers_from_options(2, None, 0.5, "cpu")
    with pytest.raises(HeurlensError, match="0 or more"):
        Workers(2, gpus_per_worker=-1)
    with pytest.raises(HeurlensError, match="at least 1"):
        Workers(0)
    monkeypatch.setitem(sys.modules, "ray", None)  # as if Ray were not installed
    with pytest.raises(HeurlensError, match="install.sh installs it"):
        import_ray()
    assert run_each(pow, 2, [3, 4], None, progress=False) == [8, 16]  # in process: the plain loop, no Ray


@contextmanager
def _loopback_server(answer: bytes | None):
    """A server on 127.0.0.1 that reads what each client sends and answers ``answer`` (None: stays silent)."""
    import socket

    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()

        def serve():
            while True:
                try:
                    connection, _ = server.accept()
                except OSError:  # closed
                    return
                with connection:
                    connection.recv(64)
                    if answer is not None:
                        connection.sendall(answer)
                        continue
                    connection.settimeout(CONNECT_SECONDS + 2)
                    try:
                        connection.recv(1)  # silent until the client gives up
                    except OSError:
                        pass

        thread = threading.Thread(target=serve, daemon=True)
        thread.start()
        yield f"127.0.0.1:{server.getsockname()[1]}"


def test_an_address_where_something_other_than_ray_answers_is_refused_at_once():
    """A port where an HTTP server (``python -m http.server``) or a silent program listens passed the old check, and
    Ray then hung (issue 63): only a server that answers HTTP/2's preface, as Ray's GCS does, is taken for a head."""
    http = b"HTTP/1.0 400 Bad request\r\nContent-Type: text/html\r\n\r\n<!DOCTYPE HTML>"
    for answer in (http, None):
        with _loopback_server(answer) as address:
            started = time.monotonic()
            with pytest.raises(HeurlensError, match=f"--ray-address {address}: something answers there, but not a "
                                                    "Ray cluster's head"):
                workers_from_options(2, address)
            assert time.monotonic() - started < CONNECT_SECONDS + 1


def test_the_librarys_workers_address_is_checked_before_ray_starts(local_ray):
    """``Workers(count, address)`` from a researcher's own code went straight to ``ray.init``, which hung on a port
    where something other than Ray answers."""
    with _loopback_server(b"HTTP/1.0 400 Bad request\r\n\r\n") as address:
        with pytest.raises(HeurlensError, match=f"Workers\\(address=...\\) {address}: something answers there, but "
                                                "not a Ray cluster's head.*leave out address="):
            run_each(pow, 2, [3], Workers(2, address), progress=False)
    assert not local_ray.is_initialized()


def test_a_real_ray_head_passes_the_address_check(local_ray):
    """Ray's own GCS (started here, reached on loopback) answers the probe."""
    context = local_ray.init(num_cpus=1, include_dashboard=False, configure_logging=False)
    port = int(context.address_info["gcs_address"].rsplit(":", 1)[1])
    check_cluster_address(f"127.0.0.1:{port}")
    local_ray.shutdown()


def _fails_on_three(shared, item):
    if item == 3:
        raise HeurlensError("three is refused")
    return shared + item


@pytest.fixture(scope="module")
def local_ray():
    ray = pytest.importorskip("ray")
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # workers cannot import this test module
    yield ray
    ray.shutdown()


def test_gpu_workers_a_cluster_cannot_hold_are_refused_before_anything_waits(local_ray):
    with pytest.raises(HeurlensError, match=r"Workers\(gpus_per_worker=1\): no node of the Ray cluster has that many "
                                           r"GPUs \(GPUs per node: 0\)") as refused:  # the library's terms
        run_each(pow, 2, [3], Workers(1, gpus_per_worker=1), progress=False)
    assert for_command_line(str(refused.value)).startswith(  # the command line's
        "--gpus-per-worker 1: no node of the Ray cluster has that many GPUs (GPUs per node: 0); use "
        "--gpus-per-worker 0 (and --device cpu)")
    check_gpus(0.5, [0, 1])  # half a GPU each: a node with one GPU holds two such tasks
    with pytest.raises(HeurlensError, match="GPUs per node: 1, 1"):
        check_gpus(2, [1, 1])


def test_a_task_error_reaches_the_caller_as_itself(local_ray):
    assert run_each(_fails_on_three, 10, [1, 2], Workers(2), progress=False) == [11, 12]
    with pytest.raises(HeurlensError, match="three is refused"):
        run_each(_fails_on_three, 10, [1, 2, 3], Workers(2), progress=False)


def _ends_its_worker_once(tried: Path, item: int) -> int:
    """``item`` squared; the first try of item 1 ends its worker's process (no exception: the process is gone)."""
    marker = tried / f"item-{item}"
    if item == 1 and not marker.exists():
        marker.touch()
        os._exit(1)
    return item * item


def test_a_dead_workers_news_goes_to_stderr_and_stdout_keeps_only_the_callers_output(local_ray, tmp_path, capfd):
    """Ray's driver prints its raylet's messages (a worker died, its task run again) on stdout, where they corrupted a
    ``heurlens ablate --scan --json --workers 2`` table printed after them; run_each puts them on stderr."""
    assert run_each(_ends_its_worker_once, tmp_path, [1, 2], Workers(2), progress=False) == [1, 4]
    out, err = capfd.readouterr()
    assert (tmp_path / "item-1").exists() and "worker died" in err  # the worker did die, and Ray said so
    assert out == ""


def _kill_first_busy_worker(killed: list[int], stop: threading.Event) -> None:
    """SIGKILL the first Ray worker process seen running a task (Ray titles it ray::<task function>)."""
    import psutil

    while not stop.is_set() and not killed:
        for process in psutil.process_iter(["pid", "cmdline"]):
            if any("ray::_run_with_threads" in part for part in process.info["cmdline"] or []):
                os.kill(process.info["pid"], signal.SIGKILL)
                killed.append(process.info["pid"])
                return
        time.sleep(0.05)


def test_prune_on_two_ray_workers_matches_in_process_and_survives_a_killed_worker(local_ray, tiny_bert_dir, tmp_path):
    from heurlens.data.snli import load_snli
    from heurlens.evaluate import tokenize_pairs
    from heurlens.models import load_model
    from heurlens.pruning import PruneSettings, prune

    model = load_model(tiny_bert_dir)
    data = tokenize_pairs("snli-train", load_snli("train", limit=128, seed=0), model.tokenizer, 32)
    config = PruneSettings(total_steps=60, warmup_steps=40, lr_log_alpha=0.3, log_alpha_init=0.0)
    here = prune(model, data, sparsity=0.5, seeds=range(4), out=tmp_path / "here", config=config, progress=False)

    killed: list[int] = []
    stop = threading.Event()
    killer = threading.Thread(target=_kill_first_busy_worker, args=(killed, stop))
    killer.start()
    try:
        on_ray = prune(model, data, sparsity=0.5, seeds=range(4), out=tmp_path / "ray", config=config, progress=False,
                       workers=Workers(2))
    finally:
        stop.set()
        killer.join()
    assert killed, "no busy Ray worker was seen: the kill never happened"
    assert [s.seed for s in on_ray] == [0, 1, 2, 3]
    for a, b in zip(here, on_ray):  # the same subnetworks (one thread per worker vs this process' threads)
        assert a.kept == b.kept
        torch.testing.assert_close(a.log_alpha_heads, b.log_alpha_heads, rtol=1e-4, atol=1e-4)
    files = sorted(p.relative_to(tmp_path / "ray").as_posix() for p in (tmp_path / "ray").rglob("*") if p.is_file())
    assert files == [".heurlens.lock", *[f"sparsity-0.50/seed-{s:02d}.{ext}" for s in range(4)
                                          for ext in ("json", "safetensors")], "unit-means.safetensors"]


def test_a_warm_started_joint_ranking_run_on_two_ray_workers_matches_in_process(local_ray, tmp_path):
    """Edge masks with node masks beside them, trained for a ranking and warm-started from EAP (issue 76's recipe),
    on the planted path: two Ray workers give each seed the circuit, the edge log_alpha and the node log_alpha of the
    run in this process (the warm start and the node masks travel with the job). Broken by dropping the warm start
    from the workers' job: failed."""
    from planted_edges import N_EDGES, build_planted_edges_model, planted_edges_task

    from heurlens.circuits.attribution import attribution_ranking
    from heurlens.circuits.settings import AttributionSettings
    from heurlens.data.prompt_tasks import logit_difference
    from heurlens.models import load_model
    from heurlens.pruning import PruneSettings, prune

    model, data = load_model(str(build_planted_edges_model(tmp_path / "planted"))), planted_edges_task()
    eap = attribution_ranking(model, data, logit_difference, AttributionSettings("edge"), progress=False)
    config = PruneSettings(level="edge", ablation="corrupt", total_steps=40, train_for="ranking", node_sparsity=0.5)
    runs = {where: prune(model, data, sparsity=1 - 3 / N_EDGES, seeds=range(2), out=tmp_path / where, config=config,
                         progress=False, warm_start=eap, workers=workers)
            for where, workers in (("here", None), ("ray", Workers(2)))}
    for a, b in zip(runs["here"], runs["ray"]):
        assert sorted(map(str, a.edges)) == sorted(map(str, b.edges)) and len(a.edges) == 3
        torch.testing.assert_close(a.log_alpha_edges, b.log_alpha_edges, rtol=1e-4, atol=1e-4)
        assert a.metrics["final_node_sparsity"] == pytest.approx(b.metrics["final_node_sparsity"], abs=1e-4)
        assert a.hyperparameters["node_sparsity"] == b.hyperparameters["node_sparsity"] == 0.5


def test_pair_interactions_on_ray_are_the_hand_derived_ones(local_ray):
    from hand_model import build_hand_model, one_sequence

    from heurlens.analysis.ablation_studies import group_superadditivity, single_unit_scan
    from heurlens.evaluate import EvalSet
    from heurlens.interventions.units import Unit

    model, sequence = build_hand_model(), one_sequence([3, 3, 3, 3, 2])  # test_analysis_ablation's derivation
    data = EvalSet("hand", sequence.batches, torch.tensor([0]), sequence.label_names)
    h0, h1, mlp = Unit(0, 0), Unit(0, 1), Unit(0, None)
    summary, interactions = group_superadditivity(model, [h0, h1, mlp], [data], means=None, method="zero", progress=False,
                                                  workers=Workers(2))
    assert interactions.set_index("pair")["interaction"].to_dict() == {
        "L0.H0,L0.H1": 0.0, "L0.H0,L0.MLP": 1.0, "L0.H1,L0.MLP": 0.0}
    scan = single_unit_scan(model, [h0, h1, mlp], [data], means=None, method="zero", progress=False, workers=Workers(2))
    assert list(scan["ablated"]) == ["L0.H0", "L0.H1", "L0.MLP"] and (scan["accuracy"] == 1.0).all()


def test_tiny_transfer_sweep_on_ray_matches_in_process(local_ray, tmp_path):
    from heurlens.subtask.sweep import SweepSettings, run_sweep

    settings = SweepSettings(max_value=12, t1_epochs=2, discovery_epochs=2, disambiguation=(0, 5, 20),
                             l0_lambdas=(1e-5, 1e-3), conditions=("subtask induction", "random init"),
                             transfer_epochs=2)
    here = run_sweep(tmp_path / "here", settings, progress=False)
    on_ray = run_sweep(tmp_path / "ray", settings, progress=False, workers=Workers(2))
    assert on_ray[["condition", "disambiguation", "seed"]].equals(here[["condition", "disambiguation", "seed"]])
    # one thread per worker against this process' threads: the same runs up to float rounding (144 test rows)
    assert (on_ray["test_accuracy"] - here["test_accuracy"]).abs().max() <= 1 / 144
    assert sorted(p.name for p in (tmp_path / "ray" / "candidates").iterdir()) == sorted(
        p.name for p in (tmp_path / "here" / "candidates").iterdir())
