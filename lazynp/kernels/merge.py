"""The merge of two stably argsorted halves of a 1-D array (``np.argsort(kind="stable")`` on
two threads, lazynp._base.split): one compiled Numba loop.

A stable sort's result is unique (equal keys keep their order), so sorting each half and
merging them, the left half first on ties, gives NumPy's indices exactly.  Floating-point
keys order as NumPy's sorts do: NaN after every number, NaNs in their order.
"""
from __future__ import annotations

import numpy as np

from . import cpu

_SOURCE = """\
import numpy as np
from numba import njit


@njit(nogil=True, cache=True)
def kernel(keys, lo, hi, cut, out):
    a = 0
    b = 0
    k = 0
    n1 = lo.shape[0]
    n2 = hi.shape[0]
    while a < n1 and b < n2:
        x = keys[lo[a]]
        y = keys[hi[b] + cut]
        if y < x or ({nan} and x != x and y == y):
            out[k] = hi[b] + cut
            b += 1
        else:
            out[k] = lo[a]
            a += 1
        k += 1
    while a < n1:
        out[k] = lo[a]
        a += 1
        k += 1
    while b < n2:
        out[k] = hi[b] + cut
        b += 1
        k += 1
"""
_SOURCES = {True: _SOURCE.format(nan="True"), False: _SOURCE.format(nan="False")}
_IDX = np.empty(0, np.intp)


def mergeable(keys: np.ndarray) -> bool:
    """A 1-D C-ordered array of native booleans, integers or float32/64 (what the kernel
    compares as NumPy does)."""
    dt = keys.dtype
    return keys.ndim == 1 and keys.flags.c_contiguous and dt.isnative and \
        (dt.kind in "biu" or dt.kind == "f" and dt.itemsize in (4, 8))


def kernel_for(keys: np.ndarray):
    """The compiled merge for ``keys``' type, or None while it compiles (in the
    background: the caller sorts in one call meanwhile)."""
    return cpu.get_kernel(_SOURCES[keys.dtype.kind == "f"], (keys, _IDX, _IDX, 0, _IDX))


def merge(kernel, keys: np.ndarray, lo: np.ndarray, hi: np.ndarray, cut: int) -> np.ndarray:
    """The stable argsort of ``keys`` from the stable argsorts ``lo`` of ``keys[:cut]`` and
    ``hi`` of ``keys[cut:]``."""
    out = np.empty(keys.shape[0], np.intp)
    kernel(keys, lo, hi, cut, out)
    return out
