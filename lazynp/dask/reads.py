"""Gathering a chunked array's values: the reads (``numpy.asarray``, ``float``, printing,
``to_device("cpu")``).

A read (:func:`read`) computes the lowered dask graph on the array's client (a large
value is persisted there first, a small one kept here afterwards) and waits at most
``LAZYNP_DASK_TIMEOUT`` seconds (default 3600): a value that cannot be computed (a lost
worker's chunks that dask could not recompute, a closed cluster, a task that raised)
raises ``RuntimeError`` naming the cause instead of hanging.  A flush still running after
``LAZYNP_DASK_PROGRESS_AFTER`` seconds (default 3) shows dask's progress bar, unless
``LAZYNP_DASK_PROGRESS=0`` (the tests set it).
"""
from __future__ import annotations

import os

import numpy as np

__all__ = ["gather", "read", "timeout", "progress_enabled", "small_bytes"]


def small_bytes() -> int:
    """Values up to this many bytes (``LAZYNP_DASK_SMALL_BYTES``, default 16 MiB) are kept
    on this side once read; larger ones stay persisted on the cluster."""
    return int(os.environ.get("LAZYNP_DASK_SMALL_BYTES", str(16 << 20)))


def read(node, arr, client) -> np.ndarray:
    """The value of a chunked array's ``node`` (lowered to ``arr``) as a NumPy array.

    A small value (a scalar, a reduced vector: :func:`small_bytes`) is gathered and kept in
    ``node.host``: later reads do not reach the cluster.  A large one is first persisted
    on the cluster (``node.value`` becomes the persisted array: later reads and later work
    on it do not recompute it), then gathered."""
    if node.host is not None:
        return node.host.copy()
    nbytes = node.dtype.itemsize
    for s in node.shape:
        nbytes *= s
    if nbytes <= small_bytes():
        v = gather(arr, client, node.dtype)
        node.host = v
        return v.copy()
    node.value = arr = client.persist(arr)
    return gather(arr, client, node.dtype)


def timeout() -> float:
    """Seconds a read waits for its value (``LAZYNP_DASK_TIMEOUT``, default 3600)."""
    return float(os.environ.get("LAZYNP_DASK_TIMEOUT", "3600"))


def progress_enabled() -> bool:
    """Whether long flushes show a progress bar (``LAZYNP_DASK_PROGRESS``, default on)."""
    return os.environ.get("LAZYNP_DASK_PROGRESS", "1") != "0"


def _result(fut, client, limit: float):
    """``fut``'s value; dask's progress bar once it has run ``LAZYNP_DASK_PROGRESS_AFTER``
    seconds (in a console the bar returns when ``fut`` is done; in a notebook it is a
    widget)."""
    if progress_enabled():
        after = min(limit, float(os.environ.get("LAZYNP_DASK_PROGRESS_AFTER", "3")))
        try:
            return fut.result(timeout=after)
        except TimeoutError:
            pass
        from distributed import progress
        try:
            progress(fut, scheduler=client.scheduler.address)
        except Exception:           # (a bar that cannot be drawn never fails the read)
            pass
    return fut.result(timeout=limit)


def gather(arr, client, dtype) -> np.ndarray:
    """The values of the dask array ``arr``, computed on ``client``.

    Raises
    ------
    RuntimeError
        When the value cannot be computed or does not come within :func:`timeout`.
    """
    from . import fp_warnings
    fp_warnings.listen(client)
    try:
        fut = client.compute(arr)
    except Exception as e:
        raise RuntimeError(f"lazynp: a chunked (dask) array's value cannot be computed: "
                           f"{type(e).__name__}: {e}") from e
    limit = timeout()
    try:
        value = _result(fut, client, limit)
    except TimeoutError as e:
        fut.cancel()
        raise RuntimeError(f"lazynp: a chunked (dask) array's value did not come within "
                           f"{limit:g} s (LAZYNP_DASK_TIMEOUT); is the cluster alive?") from e
    except Exception as e:
        raise RuntimeError(f"lazynp: a chunked (dask) array's value could not be computed "
                           f"(its chunks failed or were lost and could not be recomputed): "
                           f"{type(e).__name__}: {e}") from e
    fp_warnings.issue_pending(client)
    value = np.asarray(value)
    return value if value.dtype == dtype else value.astype(dtype)
