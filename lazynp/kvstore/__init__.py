"""``lazynp.kvstore``: a key-value store of arrays for data-parallel training (MXNet's
KVStore), with its servers running as dask.distributed actors.

>>> import lazynp as np
>>> from lazynp import kvstore
>>> kv = kvstore.create("local")
>>> kv.init("w", np.zeros(3))
>>> kv.push("w", [np.ones(3), np.ones(3)])     # two replicas, summed before one update
>>> w = np.empty(3); kv.pull("w", out=w)      # w is pending until read
>>> print(w)
[2. 2. 2.]

Kinds: ``"local"`` (this process), ``"dist_sync"`` (a server sums one push of every worker,
runs the optimizer once, then answers the pulls of that round) and ``"dist_async"`` (each
push applied on arrival).  :func:`run_workers` runs a function on dask workers, each with
its own rank.  A lost server or worker process raises :class:`KVStoreError` naming it,
within the store's ``timeout``.

Modules: ``api`` (the interface and its checks), ``local``, ``dist`` (the actor-backed
store), ``server`` (the actor), ``shard`` (server state: rounds, ordering, updates),
``partition`` (key placement), ``optimizers``, ``bridge`` (the lazynp engine integration),
``faults`` (bounded waits, loss detection), ``cluster`` (processes, ``run_workers``),
``checkpoint`` (the file format), ``quiet`` (silences dask's logs in worker processes).
"""
from __future__ import annotations

from typing import Any

from .api import KINDS, KVStore
from .errors import KVStoreError
from .optimizers import SGD, Adam, Optimizer
from .partition import DEFAULT_BIG_ARRAY_BOUND

__all__ = ["create", "run_workers", "KVStore", "KVStoreError", "Optimizer", "SGD", "Adam",
           "KINDS"]


def create(kind: str = "local", client: Any = None, num_servers: int = 1, *,
           workers: int = 2, timeout: float = 60.0, poll_interval: float = 0.25,
           big_array_bound: int = DEFAULT_BIG_ARRAY_BOUND,
           cluster_kwargs: dict | None = None, connect_timeout: float = 10.0) -> KVStore:
    """Make a KVStore.

    Parameters
    ----------
    kind : {"local", "dist_sync", "dist_async"}
    client : distributed.Client or str, optional
        The dask cluster for the servers and workers (a client, or a scheduler address).
        None for ``dist_*``: start an embedded ``LocalCluster`` of processes (closed with
        the store).
    num_servers : int
        Server actors (``dist_*``).  Keys above ``big_array_bound`` elements are split
        evenly over all of them; others live on one, chosen by a hash of the key.
    workers : int
        Embedded cluster only: processes started for ranks besides the servers' (more are
        added by :func:`run_workers` when needed).
    timeout : float
        Longest wait (seconds) of any pull, push acknowledgement, barrier or init before a
        :class:`KVStoreError`; a lost process is reported sooner (about ``poll_interval``).
    poll_interval : float
        How often a waiting call checks that the processes it depends on are alive.
    big_array_bound : int
        Arrays with more elements than this are split across the servers.
    cluster_kwargs : dict, optional
        Extra arguments for the embedded ``LocalCluster``.
    connect_timeout : float
        With a scheduler address: seconds to reach the scheduler before a
        :class:`KVStoreError` (an address nobody listens at fails after this long).
    """
    if kind not in KINDS:
        raise ValueError(f"unknown KVStore kind {kind!r}; expected one of {KINDS}")
    if num_servers < 1:
        raise ValueError(f"num_servers must be >= 1, got {num_servers}")
    if kind == "local":
        from .local import LocalKVStore
        return LocalKVStore(big_array_bound)
    from .cluster import create_dist
    return create_dist(kind, client, num_servers, workers=workers, timeout=timeout,
                       poll_interval=poll_interval, big_array_bound=big_array_bound,
                       cluster_kwargs=cluster_kwargs, connect_timeout=connect_timeout)


def run_workers(fn, n: int, kv: KVStore, *args: Any, **kwargs: Any) -> list:
    """Run ``fn(kv, rank, *args)`` on ``n`` dask workers of ``kv``'s cluster; see
    :func:`lazynp.kvstore.cluster.run_workers`."""
    from .cluster import run_workers as _run
    return _run(fn, n, kv, *args, **kwargs)
