"""Automatic persisting: a dask graph that grows with each step of a time loop is
persisted on the cluster once it is large, as a dask user calls ``x = x.persist()`` every
k steps.

A chunked array made by dask.array's functions or a write (a stencil step
``u[1:-1] = ...``, ``x @ w``, ``x[i] = v``: :func:`lazynp.dask.lower.leaf`) whose graph
holds more than :func:`max_tasks` tasks (estimated as its layers times its blocks), or more
than :func:`max_layers` layers, and that fits a quarter of the workers' memory, is handed
to ``client.persist``: the work behind it starts
on the cluster at once (the loop goes on meanwhile: ``persist`` does not wait), and the
array's graph becomes its chunks' futures.  So k follows from the graph's size: a step of
4,000 tasks (100 chunks of a stencil) is persisted every 25 steps at the default 100,000
tasks; a step over one chunk after 1,000 steps.  ``LAZYNP_DASK_PERSIST_TASKS=0`` turns it
off.

Chains of recorded elementwise ops and reductions do not grow the dask graph while they
are pending: they are fused at the read (one task per chunk for any number of
elementwise steps).
"""
from __future__ import annotations

import os

__all__ = ["maybe_persist", "max_tasks", "max_layers", "STATS"]

#: how many arrays were persisted automatically (tests and ``explain``-style checks)
STATS = {"auto_persists": 0}


def max_tasks() -> int:
    """Tasks above which a graph is persisted (``LAZYNP_DASK_PERSIST_TASKS``, default
    100,000; 0: never)."""
    return int(os.environ.get("LAZYNP_DASK_PERSIST_TASKS", "100000"))


def max_layers() -> int:
    """Layers above which a graph is persisted (``LAZYNP_DASK_PERSIST_LAYERS``, default
    1,000: many steps over few chunks)."""
    return int(os.environ.get("LAZYNP_DASK_PERSIST_LAYERS", "1000"))


def maybe_persist(arr, client):
    """``arr`` persisted on ``client``'s cluster when its graph is large (see the module),
    else ``arr`` itself."""
    limit = max_tasks()
    if limit <= 0:
        return arr
    layers = len(arr.dask.layers)
    if layers < 2:
        return arr
    blocks = 1
    for c in arr.chunks:
        blocks *= len(c)
    if layers * blocks <= limit and layers <= max_layers():
        return arr
    from . import cluster
    c = cluster.client_for(client)
    if arr.nbytes > _room(c):
        return arr          # (out of core: a persisted array must fit the workers' memory)
    STATS["auto_persists"] += 1
    return c.persist(arr)


def _room(client) -> float:
    """A quarter of the workers' memory limits together (infinite when unknown)."""
    try:
        workers = client.scheduler_info()["workers"].values()
        total = sum(w.get("memory_limit") or 0 for w in workers)
    except Exception:
        return float("inf")
    return total / 4 if total else float("inf")
