"""A stack of outer products written in one pass (vmap's per-example weight gradient).

``einsum("...ik,...kj->...ij", a, b, out=out)`` with ``k`` of length 1 is what vmap records
for a dense layer's per-example weight gradient (lazynp/autograd/batching.py): for the
784-256-10 MLP and 256 examples, 411 MB written.  NumPy's einsum first zeroes ``out`` and
then adds each product to it: two passes over the memory.  The kernel here writes each
element once, as ``a * b + 0.0``, which is einsum's ``0.0 + a * b`` bit for bit (the sum
from zero turns a product's ``-0.0`` into ``+0.0``; every other value, NaN and infinities
included, is the product itself).  It is compiled in the background like a fused kernel
(:func:`lazynp.kernels.cpu.get_kernel`); until it is ready, NumPy's einsum runs.
"""
from __future__ import annotations

import numpy as np

from ..kernels import cpu as _cpu

SUBSCRIPTS = "...ik,...kj->...ij"

SOURCE = "\n".join([
    "from numba import njit",
    "",
    "",
    "@njit(nogil=True, cache=True, error_model='numpy')",
    "def kernel(a, b, out, lo, hi):",
    "    for s in range(lo, hi):",
    "        for i in range(out.shape[1]):",
    "            x = a[s, i, 0]",
    "            for j in range(out.shape[2]):",
    "                out[s, i, j] = x * b[s, 0, j] + 0.0",
    "",
])

_DTYPES = (np.dtype(np.float64), np.dtype(np.float32))


def row_writer(args: tuple, kwargs: dict, out: np.ndarray):
    """``write(lo, hi)``: rows ``lo:hi`` of ``np.einsum(*args, out=out)`` written in one
    pass, when the call is a stack of outer products of C-ordered float32/float64 arrays
    of ``out``'s dtype and the kernel is compiled; else None (the caller runs NumPy's
    einsum; the first such call queues the compile)."""
    if len(args) != 3 or kwargs or args[0] != SUBSCRIPTS:
        return None
    a, b = args[1], args[2]
    if type(a) is not np.ndarray or type(b) is not np.ndarray or out.ndim != 3 or \
            a.shape != out.shape[:2] + (1,) or b.shape != (out.shape[0], 1, out.shape[2]) or \
            not a.dtype == b.dtype == out.dtype or out.dtype not in _DTYPES or \
            not (a.flags.c_contiguous and b.flags.c_contiguous and out.flags.c_contiguous) or \
            not out.flags.writeable or np.may_share_memory(out, a) or \
            np.may_share_memory(out, b):
        return None
    kernel = _cpu.get_kernel(SOURCE, (a, b, out, 0, 0))
    if kernel is None:
        return None

    def write(lo: int, hi: int) -> None:
        kernel(a, b, out, lo, hi)
    return write
