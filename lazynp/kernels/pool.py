"""Buffer pool: reuse freed output buffers of the same size.

Writing into a fresh large buffer pays a page fault per page (on this class of machine
about 3x the cost of writing into a reused one).  The pool keeps large buffers it handed
out; a buffer is free again when nothing but the pool references it (checked with the
reference count, so no hook on array death is needed).
"""
from __future__ import annotations

import sys
import threading

import numpy as np

from .._base import counters as _counters

#: buffers smaller than this come straight from NumPy
MIN_BYTES = 1 << 17
#: at most this many bytes are kept in the pool
MAX_BYTES = 2 << 30

_free: dict = {}      # nbytes -> list of uint8 base buffers
_total = 0
_lock = threading.Lock()
STATS = {"pool_hits": 0, "pool_misses": 0}

# references held when a buffer is idle: the list slot + getrefcount's argument + loop var
_IDLE_REFS = 3


def empty(shape: tuple, dtype) -> np.ndarray:
    """An uninitialized C-contiguous array, reusing an idle pooled buffer when possible."""
    global _total
    dtype = np.dtype(dtype)
    n = dtype.itemsize
    for s in shape:
        n *= s
    if n < MIN_BYTES or dtype.hasobject:     # (references are never pooled as bytes)
        return np.empty(shape, dtype)
    with _lock:
        bufs = _free.get(n)
        if bufs:
            for buf in bufs:
                if sys.getrefcount(buf) <= _IDLE_REFS:
                    STATS["pool_hits"] += 1
                    return buf.view(dtype).reshape(shape)
        STATS["pool_misses"] += 1
        buf = np.empty(n, np.uint8)
        if _total + n <= MAX_BYTES:
            _free.setdefault(n, []).append(buf)
            _total += n
        return buf.view(dtype).reshape(shape)


def fork_prepare() -> bool:
    """Before ``os.fork()``: hold the pool still (see :mod:`lazynp.core.lifecycle`)."""
    _lock.acquire()
    return True


def fork_done(child: bool) -> None:
    _lock.release()


def clear() -> None:
    """Drop every pooled buffer."""
    global _total
    with _lock:
        _free.clear()
        _total = 0


_counters.register_table(STATS)
