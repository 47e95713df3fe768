"""Result shapes and dtypes of ops, computed the NumPy way (NumPy's errors for bad
operands) without touching the operands' data."""
from __future__ import annotations

import numpy as np

__all__ = ["matmul_meta"]


def matmul_meta(a, b, kw: dict) -> tuple:
    """Shape and dtype of ``matmul(a, b, **kw)`` (``a``, ``b``: anything with ``ndim``,
    ``shape`` and ``dtype``); raises NumPy's error for bad operands."""
    if a.ndim == 0 or b.ndim == 0:
        raise ValueError("matmul: Input operand %d does not have enough dimensions (has 0, "
                         "gufunc core with signature (n?,k),(k,m?)->(n?,m?) requires 1)"
                         % (0 if a.ndim == 0 else 1))
    # mini dummies: batch dims real (zero-stride), n and m -> 1, k real: NumPy's own errors
    am = np.broadcast_to(np.zeros((), a.dtype), a.shape[:-2] + (1, a.shape[-1])
                         if a.ndim >= 2 else a.shape)
    bm = np.broadcast_to(np.zeros((), b.dtype), b.shape[:-2] + (b.shape[-2], 1)
                         if b.ndim >= 2 else b.shape)
    r = np.matmul(am, bm, **kw)
    shape = list(r.shape)
    if a.ndim >= 2:
        shape[-2 if b.ndim >= 2 else -1] = a.shape[-2]
    if b.ndim >= 2:
        shape[-1] = b.shape[-1]
    return tuple(shape), r.dtype
