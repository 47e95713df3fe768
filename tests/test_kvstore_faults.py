"""Faults: a worker or server process killed with SIGKILL gives a KVStoreError naming it on
every waiting call, within the store's timeout; sync rounds are never applied twice or
lost; training resumes from its last checkpoint with the uninterrupted result."""
from __future__ import annotations

import os
import signal
import sys
import threading
import time

import cloudpickle
import numpy
import pytest

import lazynp as np
from lazynp import _train, kvstore
from lazynp.kvstore import KVStoreError, SGD

from kvstore_support import hang_guard, start_cluster, stop_cluster, wait_workers

cloudpickle.register_pickle_by_value(sys.modules[__name__])

TIMEOUT = 10.0       # the stores' timeout: every fault must be reported within it
N_WORKERS = 4


@pytest.fixture(scope="module")
def client():
    with hang_guard(120):
        cluster, client = start_cluster(N_WORKERS)
    yield client
    stop_cluster(cluster, client)


@pytest.fixture(autouse=True)
def _guard(client):
    with hang_guard(120):
        wait_workers(client, N_WORKERS)       # a killed worker is restarted by its nanny
        yield


def _store(client, servers=1, kind="dist_sync"):
    return kvstore.create(kind, client=client, num_servers=servers, timeout=TIMEOUT)


def test_a_killed_worker_mid_epoch_then_resume_from_the_checkpoint(client, tmp_path):
    ck = str(tmp_path / "ck.npz")
    full = _train.train(workers=2, epochs=2, client=client, progress=False, timeout=TIMEOUT)
    t = time.monotonic()
    with pytest.raises(KVStoreError) as err:
        _train.train(workers=2, epochs=2, client=client, progress=False, timeout=TIMEOUT,
                     checkpoint=ck, step_hook=_train.KillAt(rank=1, epoch=1, step=3))
    elapsed = time.monotonic() - t
    assert "lost worker rank 1" in str(err.value) and "pid" in str(err.value), err.value
    assert elapsed < 2 * TIMEOUT, elapsed      # includes the whole first epoch
    wait_workers(client, N_WORKERS)
    resumed = _train.train(workers=2, epochs=2, client=client, progress=False,
                           timeout=TIMEOUT, resume=ck)
    assert [h["epoch"] for h in resumed.history] == [2]
    for k in _train.KEYS:
        numpy.testing.assert_array_equal(resumed.params[k], full.params[k])


def _rounds_then_die(kv, rank, kill_step):
    w = np.empty(4)
    for step in range(10):
        if rank == 1 and step == kill_step:
            # pushes are sent in the background: without this wait, the push of "v" of the
            # last round could still be unsent when the process dies (its round then never
            # completes, and the count of rounds below would depend on timing)
            kv.wait()
            os.kill(os.getpid(), signal.SIGKILL)
        kv.push("w", np.full(4, float(rank + 1)))
        kv.push("v", np.full(2, 1.0))
        kv.pull("w", out=w)
        numpy.asarray(w)
    return "done"


def test_sync_rounds_are_neither_lost_nor_applied_twice_when_a_worker_dies(client):
    with _store(client, servers=2) as kv:
        kv.init(["w", "v"], [numpy.zeros(4), numpy.zeros(2)])
        kv.set_optimizer(SGD(0.5))
        t = time.monotonic()
        with pytest.raises(KVStoreError, match="lost worker rank 1"):
            kvstore.run_workers(_rounds_then_die, 2, kv, 3)
        assert time.monotonic() - t < TIMEOUT
        info = {k: v for i in kv.info() for k, v in i["updates"].items()}
        assert info == {("w", 0): 3, ("v", 0): 3}      # rounds 1-3 complete, round 4 never
        numpy.testing.assert_array_equal(numpy.asarray(kv.pull("w")), numpy.full(4, -4.5))
        # the store goes on: a new run of workers starts from the state left behind
        wait_workers(client, N_WORKERS)
        assert kvstore.run_workers(_rounds_then_die, 2, kv, -1) == ["done", "done"]
        numpy.testing.assert_array_equal(numpy.asarray(kv.pull("w")), numpy.full(4, -19.5))


def _wait_for_the_dead(kv, rank, where, path):
    kv.init("w", numpy.zeros(3))
    if rank == 1:
        time.sleep(0.5)
        os.kill(os.getpid(), signal.SIGKILL)
    t = time.monotonic()
    try:
        if where == "pull":
            kv.push("w", np.ones(3))
            numpy.asarray(kv.pull("w"))        # the round waits for rank 1's push
        else:
            kv.barrier()
    except KVStoreError as exc:
        with open(path, "w") as f:
            f.write(f"{time.monotonic() - t:.3f}\n{exc}")
        raise
    return "no error"


@pytest.mark.parametrize("where", ["pull", "barrier"])
def test_every_waiting_call_raises_naming_the_lost_worker(client, tmp_path, where):
    path = str(tmp_path / "rank0.txt")
    with _store(client) as kv:
        t = time.monotonic()
        with pytest.raises(KVStoreError, match="lost worker rank 1"):
            kvstore.run_workers(_wait_for_the_dead, 2, kv, where, path)
        assert time.monotonic() - t < TIMEOUT
        deadline = time.monotonic() + TIMEOUT
        while not os.path.exists(path) and time.monotonic() < deadline:
            time.sleep(0.05)
        waited, message = open(path).read().split("\n", 1)
        assert "worker rank 1" in message and "KVStoreError" not in message, message
        assert float(waited) < TIMEOUT


def _slow_rounds(kv, rank):
    w = np.empty(2_000_000)
    for _ in range(400):
        kv.push("big", np.ones(2_000_000))
        kv.pull("big", out=w)
        numpy.asarray(w)
        time.sleep(0.02)


def test_a_killed_server_fails_the_run_and_every_later_call(client):
    with _store(client, servers=2) as kv:
        kv.init("big", numpy.zeros(2_000_000))       # split over both servers
        victim = kv.servers[1]
        threading.Timer(1.5, os.kill, (victim.pid, signal.SIGKILL)).start()
        t = time.monotonic()
        with pytest.raises(KVStoreError, match=f"lost server 1 .*pid {victim.pid}"):
            kvstore.run_workers(_slow_rounds, 2, kv)
        assert time.monotonic() - t < 1.5 + TIMEOUT
        with pytest.raises(KVStoreError, match="lost server 1"):
            kv.pull("big")


def test_a_driver_waiting_on_a_killed_server_gets_the_error_within_the_timeout(client):
    with _store(client, servers=1) as kv:
        kv.init(0, numpy.zeros(10))
        kv.push(0, numpy.ones(10))
        numpy.testing.assert_array_equal(numpy.asarray(kv.pull(0)), numpy.ones(10))
        pid = kv.servers[0].pid
        os.kill(pid, signal.SIGKILL)
        t = time.monotonic()
        kv.push(0, numpy.ones(10))
        with pytest.raises(KVStoreError, match=f"server 0 .*pid {pid}"):
            kv.wait()                                  # the push's acknowledgement
        with pytest.raises(KVStoreError, match=f"server 0 .*pid {pid}"):
            numpy.asarray(kv.pull(0))
        with pytest.raises(KVStoreError, match=f"server 0 .*pid {pid}"):
            kv.barrier()
        assert time.monotonic() - t < TIMEOUT
