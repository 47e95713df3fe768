"""Chunked arrays against a real ``dask scheduler`` + ``dask worker`` pair started on
localhost as subprocesses (``client=Client("tcp://127.0.0.1:PORT")``), and faults: a worker
killed during a flush (dask recomputes its chunks: the result is still right), and a result
that cannot be computed (a clear error at the read, not a hang).  The processes are always
killed at the end.
"""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

distributed = pytest.importorskip("distributed")
da = pytest.importorskip("dask.array")

import lazynp as lnp  # noqa: E402

os.environ["LAZYNP_DASK_PROGRESS"] = "0"
_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _dask_cli() -> list:
    exe = shutil.which("dask", path=os.path.dirname(sys.executable)) or shutil.which("dask")
    return [exe] if exe else [sys.executable, "-m", "distributed.cli.dask"]


@pytest.fixture(scope="module")
def remote_client():
    port = _free_port()
    addr = f"tcp://127.0.0.1:{port}"
    env = dict(os.environ, PYTHONPATH=_ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
               LAZYNP_DASK_PROGRESS="0", NUMBA_NUM_THREADS="1",
               # a task whose worker dies once is not retried on another (the fault test's
               # "cannot be computed"); a worker killed with tasks in flight still is
               DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES="1")
    procs = []
    client = None
    try:
        procs.append(subprocess.Popen(
            _dask_cli() + ["scheduler", "--host", "127.0.0.1", "--port", str(port),
                           "--no-dashboard"], env=env,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True))
        procs.append(subprocess.Popen(
            _dask_cli() + ["worker", addr, "--nworkers", "2", "--nthreads", "1",
                           "--no-dashboard", "--memory-limit", "1GiB"], env=env,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True))
        client = distributed.Client(addr, timeout=60, set_as_default=False)
        client.wait_for_workers(2, timeout=120)
        yield client
    finally:
        if client is not None:
            client.close()
        for p in procs:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait(timeout=30)


def _program(m, a, b, c, d, e):
    """W1, W2, a row softmax, a matmul: the same code for NumPy and lazynp."""
    w1 = a * b + c * d - e * 0.5
    w2 = (a * b + c).sum()
    z = a - a.max(axis=1, keepdims=True)
    s = m.exp(z)
    soft = s / s.sum(axis=1, keepdims=True)
    g = (a.T @ b) / a.shape[0]
    return w1, w2, soft, g


def test_same_program_on_a_remote_scheduler(remote_client):
    rng = np.random.default_rng(0)
    arrs = [rng.standard_normal((200, 30)) for _ in range(5)]
    want = _program(np, *arrs)
    with lnp.default_device("dask", chunks=(50, 30), client=remote_client):
        xs = [lnp.asarray(v) for v in arrs]
        got = _program(lnp, *xs)
        for g, w in zip(got, want):
            assert g.device == "dask"
            v = np.asarray(g)
            assert v.dtype == np.asarray(w).dtype
            np.testing.assert_allclose(v, w, rtol=1e-10, atol=1e-12)
    # the chunks ran on the remote workers' processes, with lazynp's kernels
    ran = remote_client.run(lambda: __import__("lazynp.kernels.cpu", fromlist=["STATS"])
                            .STATS["fused_groups_run"])
    assert sum(ran.values()) > 0


def test_worker_killed_during_a_flush_is_recomputed(remote_client):
    a = np.arange(48 * 10, dtype=np.float64).reshape(48, 10)
    slow = da.from_array(a, chunks=(4, 10)).map_blocks(lambda blk: (time.sleep(0.4), blk)[1],
                                                        dtype=a.dtype)
    with lnp.default_device("dask", client=remote_client):
        x = lnp.asarray(slow)
        y = (x * 2 + 1).sum(axis=1)
        out, err = [], []

        def read():
            try:
                out.append(np.asarray(y))
            except Exception as e:        # (reported below)
                err.append(e)
        t = threading.Thread(target=read)
        t.start()
        pids = remote_client.run(os.getpid)
        deadline = time.time() + 60
        while time.time() < deadline and not any(remote_client.processing().values()):
            time.sleep(0.05)
        busy = [w for w, tasks in remote_client.processing().items() if tasks]
        assert busy, "no task started"
        os.kill(pids[busy[0]], signal.SIGKILL)
        t.join(timeout=180)
        assert not t.is_alive(), "the read hung after a worker died"
        assert not err, err
        np.testing.assert_array_equal(out[0], (a * 2 + 1).sum(axis=1))
    remote_client.wait_for_workers(2, timeout=120)    # (the nanny restarted it)


def test_lazynps_worker_settings_reach_a_users_own_cluster(remote_client):
    # (these workers were started without LAZYNP_DASK_WORKER: the WorkerPlugin registered
    # at the client's first use switches the buffer pool off and runs kernels serially)
    with lnp.default_device("dask", client=remote_client):
        np.testing.assert_array_equal(np.asarray(lnp.asarray(da.ones(8, chunks=4)) + 1),
                                      np.full(8, 2.0))
    from lazynp.dask.workers import current_settings
    settings = remote_client.run(current_settings)
    assert len(settings) >= 2
    assert all(v["pool_max_bytes"] == 0 and v["parallel_min"] >= 1 << 62
               for v in settings.values()), settings


def test_result_that_cannot_be_computed_raises_at_the_read(remote_client):
    a = np.ones((8, 4))
    # a chunk whose every run kills its worker: dask gives up (KilledWorker)
    doomed = da.from_array(a, chunks=(4, 4)).map_blocks(
        lambda blk: os._exit(1) if blk.shape[0] else blk, dtype=a.dtype)
    with lnp.default_device("dask", client=remote_client):
        y = lnp.asarray(doomed) * 2
        t0 = time.time()
        with pytest.raises(RuntimeError, match="could not be computed"):
            np.asarray(y)
        assert time.time() - t0 < 120
    remote_client.wait_for_workers(2, timeout=120)
