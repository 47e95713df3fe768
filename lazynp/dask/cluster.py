"""The dask.distributed client the chunked arrays run on.

``client=None`` (the default of ``lazynp.default_device("dask", ...)``): an embedded
:class:`distributed.LocalCluster` is started at the first flush that needs one and closed
by :func:`shutdown` (``lazynp.dask_shutdown()``) or at interpreter exit.  Its workers are
processes (one per core, one thread each: a fused Numba kernel holds no GIL, but the
benchmark reads peak *worker* memory, which only separate processes report), each told to
run its Numba kernels on one thread (``NUMBA_NUM_THREADS=1``: the cluster already keeps
every core busy).  ``LAZYNP_DASK_PROCESSES=0`` starts threads in this process instead.

A given ``client`` (``Client("tcp://...")``) is never closed here; at its first use lazynp's
worker settings (no buffer pool, serial kernels) are registered on its cluster as a
``WorkerPlugin`` (:mod:`lazynp.dask.workers`).
"""
from __future__ import annotations

import atexit
import os
import threading

from ..devices.options import dask_options

__all__ = ["client_for", "embedded_client", "shutdown"]

_lock = threading.RLock()
_embedded: dict = {"cluster": None, "client": None}


def embedded_client():
    """The embedded cluster's client, started on first use (see the module's docstring)."""
    with _lock:
        if _embedded["client"] is None:
            from distributed import Client, LocalCluster
            processes = os.environ.get("LAZYNP_DASK_PROCESSES", "1") != "0"
            n = max(1, os.cpu_count() or 1)
            kw = dict(n_workers=n, threads_per_worker=1, processes=processes,
                      dashboard_address=":0")
            if processes:
                kw["env"] = {"NUMBA_NUM_THREADS": "1", "LAZYNP_DASK_WORKER": "1"}
            cluster = LocalCluster(**kw)
            _embedded["cluster"] = cluster
            _embedded["client"] = Client(cluster, set_as_default=False)
            # (registered after distributed's own exit handlers, so it runs before them:
            # the workers are closed while the cluster's event loop still runs)
            atexit.register(shutdown)
        return _embedded["client"]


def client_for(client=None):
    """``client`` when given, else the innermost block's, else the embedded one."""
    if client is None:
        client = dask_options()["client"]
    if client is None:
        return embedded_client()
    from . import workers
    workers.register(client)        # (once per client: lazynp's settings on its workers)
    return client


def shutdown() -> bool:
    """Close the embedded cluster and its client (a given client is left open); True when
    one was running.  Chunked arrays whose values lived on it can no longer be read."""
    with _lock:
        client, cluster = _embedded["client"], _embedded["cluster"]
        _embedded["client"] = _embedded["cluster"] = None
    if client is None:
        return False
    try:
        client.close()
    finally:
        cluster.close()
    return True

