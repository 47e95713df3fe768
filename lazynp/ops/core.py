"""Op records of NumPy's own operations that several layers record: the parts of a
multi-output result, ufunc calls with keywords, creation, copy, cast, ``where`` and
``clip``.  Each is a NumPy fact (its reference implementation is NumPy's function); so is
:func:`matmul_meta`, the shape and dtype rule of ``matmul`` (host and device arrays)."""
from __future__ import annotations

import numpy as np

from .registry import Op, register


def _tuple_get_impl(t, i):
    return t[i]


#: output ``i`` of a multi-output node (a ufunc with several outputs, ``linalg.svd``...)
TUPLE_GET = register(Op("tuple_get", "index", _tuple_get_impl, raises_on_values=False,
                       batch="tuple_get"))


def _call_impl(*vals, ufunc, kw, has_where):
    if has_where:
        return ufunc(*vals[:-1], where=vals[-1], **kw)
    return ufunc(*vals, **kw)


#: a ufunc called with keywords (``dtype=``, ``where=``...) or several outputs
UFUNC_CALL = register(Op("ufunc_call", "elementwise", _call_impl, batch="elementwise"))


def _creation(name: str, np_fn) -> Op:
    def impl(shape, dtype, **kw):
        return np_fn(shape, dtype=dtype, **kw)
    impl.__name__ = name
    return register(Op(name, "creation", impl, raises_on_values=False))


ZEROS = _creation("zeros", np.zeros)
ONES = _creation("ones", np.ones)
EMPTY = _creation("empty", np.empty)
FULL = register(Op("full", "creation", lambda shape, dtype, fill_value:
                   np.full(shape, fill_value, dtype=dtype)))
EYE = register(Op("eye", "creation", lambda N, M, k, dtype: np.eye(N, M, k, dtype=dtype)))
COPY = register(Op("copy", "elementwise", lambda x: np.array(x, copy=True), expr="{0}",
                   inplace=(0,), impl_out=lambda out, x: np.copyto(out, x),
                   raises_on_values=False, batch="elementwise"))
ASTYPE = register(Op("astype", "elementwise", lambda x, dtype: x.astype(dtype), expr="{0}",
                     fp_errors_only=True, batch="elementwise"))
WHERE = register(Op("where", "elementwise", np.where, expr="({1} if {0} else {2})",
                    raises_on_values=False, batch="elementwise"))
CLIP = register(Op("clip", "elementwise", lambda x, lo, hi: np.clip(x, lo, hi),
                   expr="min(max({0}, {1}), {2})", raises_on_values=False,
                   batch="elementwise"))


def matmul_meta(a, b, kw: dict) -> tuple:
    """Shape and dtype of ``matmul(a, b, **kw)`` for operands with ``ndim``, ``shape`` and
    ``dtype``; raises NumPy's error for bad operands."""
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
