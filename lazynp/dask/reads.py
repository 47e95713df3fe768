"""Gathering a chunked array's values: the reads (``numpy.asarray``, ``float``, printing,
``to_device("cpu")``).

A read computes the lowered dask graph on the array's client and waits at most
``LAZYNP_DASK_TIMEOUT`` seconds (default 3600): a value that cannot be computed (a lost
worker's chunks that dask could not recompute, a closed cluster, a task that raised)
raises ``RuntimeError`` naming the cause instead of hanging.  A flush still running after
``LAZYNP_DASK_PROGRESS_AFTER`` seconds (default 3) shows dask's progress bar, unless
``LAZYNP_DASK_PROGRESS=0`` (the tests set it).
"""
from __future__ import annotations

import os

import numpy as np

__all__ = ["gather", "timeout", "progress_enabled"]


def timeout() -> float:
    """Seconds a read waits for its value (``LAZYNP_DASK_TIMEOUT``, default 3600)."""
    return float(os.environ.get("LAZYNP_DASK_TIMEOUT", "3600"))


def progress_enabled() -> bool:
    """Whether long flushes show a progress bar (``LAZYNP_DASK_PROGRESS``, default on)."""
    return os.environ.get("LAZYNP_DASK_PROGRESS", "1") != "0"


def gather(arr, client, dtype) -> np.ndarray:
    """The values of the dask array ``arr``, computed on ``client``.

    Raises
    ------
    RuntimeError
        When the value cannot be computed or does not come within :func:`timeout`.
    """
    from distributed import wait
    try:
        fut = client.compute(arr)
    except Exception as e:
        raise RuntimeError(f"lazynp: a chunked (dask) array's value cannot be computed: "
                           f"{type(e).__name__}: {e}") from e
    limit = timeout()
    try:
        if progress_enabled():
            after = float(os.environ.get("LAZYNP_DASK_PROGRESS_AFTER", "3"))
            try:    # (distributed's wait raises TimeoutError when the time is up)
                wait(fut, timeout=min(after, limit), return_when="ALL_COMPLETED")
            except TimeoutError:
                from distributed import progress
                progress(fut)
        value = fut.result(timeout=limit)
    except TimeoutError as e:
        fut.cancel()
        raise RuntimeError(f"lazynp: a chunked (dask) array's value did not come within "
                           f"{limit:g} s (LAZYNP_DASK_TIMEOUT); is the cluster alive?") from e
    except Exception as e:
        raise RuntimeError(f"lazynp: a chunked (dask) array's value could not be computed "
                           f"(its chunks failed or were lost and could not be recomputed): "
                           f"{type(e).__name__}: {e}") from e
    value = np.asarray(value)
    return value if value.dtype == dtype else value.astype(dtype)
