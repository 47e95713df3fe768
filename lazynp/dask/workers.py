"""lazynp's settings on the workers of any cluster its chunked arrays run on.

A chunk's result leaves its task, so a worker gains nothing from lazynp's buffer pool (it
would only raise the worker's memory with buffers no later task reuses), and the cluster
already keeps every core busy, so a chunk's Numba kernel runs serially.  The embedded
cluster's worker processes get these settings from their environment
(``LAZYNP_DASK_WORKER=1``, read by :func:`lazynp.dask.chunks.run_block`); a user's own
cluster (``client=Client("tcp://...")``) gets them from :class:`LazynpWorkerSettings`, a
``distributed.WorkerPlugin`` registered once per client at its first use
(:func:`register`), so workers that join later get it too.

A worker in the client's own process (``LocalCluster(processes=False)``) is left as it is:
its settings are the user's process's, which the user's own CPU arrays use too.
"""
from __future__ import annotations

import os
import weakref

from distributed import WorkerPlugin     # (imported by cluster.client_for, when dask is used)

__all__ = ["LazynpWorkerSettings", "register", "apply_worker_settings", "current_settings"]

#: the name the plugin is registered under (registering it again replaces it)
PLUGIN_NAME = "lazynp-worker-settings"
_registered: "weakref.WeakSet" = weakref.WeakSet()


def apply_worker_settings() -> None:
    """No buffer pool and serial kernels in this (worker) process."""
    from ..kernels import fused, pool
    pool.MAX_BYTES = 0
    fused.PARALLEL_MIN = fused.PARALLEL_MIN_WORK = 1 << 62


def current_settings() -> dict:
    """This process's settings (``client.run(current_settings)`` reads the workers')."""
    from ..kernels import fused, pool
    return {"pool_max_bytes": pool.MAX_BYTES, "parallel_min": fused.PARALLEL_MIN}


class LazynpWorkerSettings(WorkerPlugin):
    """Applies :func:`apply_worker_settings` on a worker in another process than the client
    that registered it."""

    name = PLUGIN_NAME

    def __init__(self, client_pid: int):
        self.client_pid = client_pid

    def setup(self, worker) -> None:
        if os.getpid() != self.client_pid:
            apply_worker_settings()


def register(client) -> None:
    """Register :class:`LazynpWorkerSettings` on ``client``'s cluster, once per client."""
    if client in _registered:
        return
    client.register_plugin(LazynpWorkerSettings(os.getpid()), name=PLUGIN_NAME)
    _registered.add(client)
