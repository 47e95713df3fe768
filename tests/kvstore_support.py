"""Shared helpers of the KVStore tests: hang guards, clusters, a NumPy reference MLP."""
from __future__ import annotations

import contextlib
import faulthandler
import logging
import sys
import time

import numpy


@contextlib.contextmanager
def hang_guard(seconds: float):
    """Fail loudly instead of hanging: after ``seconds`` dump every thread's stack and end
    the process (what pytest-timeout's thread method does, without the plugin)."""
    faulthandler.dump_traceback_later(seconds, exit=True, file=sys.stderr)
    try:
        yield
    finally:
        faulthandler.cancel_dump_traceback_later()


def start_cluster(n_workers: int):
    """A LocalCluster of ``n_workers`` one-thread processes and its client."""
    from distributed import Client, LocalCluster
    cluster = LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True,
                           dashboard_address=None, memory_limit=0,
                           silence_logs=logging.CRITICAL)
    client = Client(cluster, set_as_default=False)
    client.wait_for_workers(n_workers, timeout=60)
    return cluster, client


def stop_cluster(cluster, client) -> None:
    with hang_guard(60):
        try:
            client.close(timeout=20)
        finally:
            cluster.close(timeout=20)


def wait_workers(client, n: int, timeout: float = 180) -> None:
    """Until ``n`` workers are up again (a nanny restarts a killed worker)."""
    deadline = time.monotonic() + timeout
    while len(client.scheduler_info(n_workers=-1)["workers"]) < n:
        if time.monotonic() > deadline:
            raise TimeoutError(f"fewer than {n} dask workers after {timeout} s")
        time.sleep(0.1)


# --- an independent NumPy reference of the training example's MLP ------------------------

def mlp_grads(p: dict, X: numpy.ndarray, Y: numpy.ndarray) -> dict:
    """Backpropagation by hand for the MLP of ``lazynp.tools.train`` (mean cross-entropy)."""
    n = X.shape[0]
    h = numpy.tanh(X @ p["w1"] + p["b1"])
    z = h @ p["w2"] + p["b2"]
    z = z - z.max(axis=1, keepdims=True)
    e = numpy.exp(z)
    prob = e / e.sum(axis=1, keepdims=True)
    dz = (prob - Y) / n
    dh = dz @ p["w2"].T
    da = dh * (1.0 - h * h)
    return {"w1": X.T @ da, "b1": da.sum(axis=0), "w2": h.T @ dz, "b2": dz.sum(axis=0)}


def reference_training(steps: int, batch_size: int = 64, hidden: int = 64, lr: float = 0.1,
                       momentum: float = 0.9, seed: int = 0) -> dict:
    """Single-process SGD with momentum on the whole global batch, ``steps`` steps."""
    from lazynp.tools import train as _train
    Xtr, ytr, _, _, _ = _train.load_data(seed)
    cfg = _train.TrainConfig(batch_size=batch_size, hidden=hidden, seed=seed)
    p = _train.init_params(Xtr.shape[1], hidden, 10, seed)
    mom = {k: numpy.zeros_like(v) for k, v in p.items()}
    done = 0
    epoch = 0
    while done < steps:
        for idx in _train.epoch_batches(len(ytr), cfg, epoch):
            if done == steps:
                break
            g = mlp_grads(p, Xtr[idx], numpy.eye(10)[ytr[idx]])
            for k in p:
                mom[k] = momentum * mom[k] - lr * g[k]
                p[k] = p[k] + mom[k]
            done += 1
        epoch += 1
    return p
