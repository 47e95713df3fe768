"""``lazynp.linalg``: lazy ``inv``, ``solve``, ``det``, ``slogdet``, ``cholesky``, ``eigh``,
``eigvalsh``, ``norm`` (NumPy's LAPACK through NumPy); the rest falls back to NumPy.

Errors that depend on the values (``LinAlgError: Singular matrix``) are NumPy's, at the call:
these functions run at once under the default policy, and where they are recorded (the
``lazy`` policy) inside a ``try``/``with`` block they run at the call too; otherwise the
error is raised when the result is read, with the recording line in a note (README).
"""
from __future__ import annotations

import sys

import numpy as _np
from numpy.lib.array_utils import normalize_axis_tuple

from ._fallback import FallbackModule
from ._functions import lazy_call

LinAlgError = _np.linalg.LinAlgError


def _asarray(a):
    from ._namespace import asarray
    return asarray(a)


def _square_twin(a):
    """Identity matrices with ``a``'s dtype, batch dims -> 1: NumPy's dtype and errors."""
    if a.ndim < 2:
        raise LinAlgError(f"{a.ndim}-dimensional array given. Array must be at least "
                          "two-dimensional")
    if a.shape[-1] != a.shape[-2]:
        raise LinAlgError("Last 2 dimensions of the array must be square")
    return _np.broadcast_to(_np.eye(1, dtype=a.dtype), (1,) * (a.ndim - 2) + (1, 1))


def inv(a):
    a = _asarray(a)
    dt = _np.linalg.inv(_square_twin(a)).dtype
    return lazy_call("linalg.inv", _np.linalg.inv, (a,), {}, meta=lambda n, t: (a.shape, dt))


def cholesky(a, /, *, upper=False):
    a = _asarray(a)
    dt = _np.linalg.cholesky(_square_twin(a)).dtype
    return lazy_call("linalg.cholesky", _np.linalg.cholesky, (a,), {"upper": upper},
                     meta=lambda n, t: (a.shape, dt))


def solve(a, b):
    a, b = _asarray(a), _asarray(b)
    tw = _square_twin(a)
    m = a.shape[-1]
    if b.ndim == 1:
        if b.shape[0] != m:
            _np.linalg.solve(_np.eye(m), _np.zeros(b.shape))  # NumPy's message
        shape = a.shape[:-1]
        dt = _np.linalg.solve(tw, _np.zeros((1,), b.dtype)).dtype
    else:
        if b.shape[-2] != m:
            _np.linalg.solve(_np.eye(m), _np.zeros(b.shape[-2:]))
        batch = _np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
        shape = batch + b.shape[-2:]
        dt = _np.linalg.solve(_np.eye(1, dtype=a.dtype), _np.zeros((1, 1), b.dtype)).dtype
    return lazy_call("linalg.solve", _np.linalg.solve, (a, b), {},
                     meta=lambda n, t: (shape, dt))


def det(a):
    a = _asarray(a)
    dt = _np.linalg.det(_square_twin(a)).dtype
    return lazy_call("linalg.det", _np.linalg.det, (a,), {},
                     meta=lambda n, t: (a.shape[:-2], dt), scalar=True)


_SlogdetResult = type(_np.linalg.slogdet(_np.eye(1)))
_EighResult = type(_np.linalg.eigh(_np.eye(1)))


def slogdet(a):
    a = _asarray(a)
    r = _np.linalg.slogdet(_square_twin(a))
    shape = a.shape[:-2]
    sign, logdet = lazy_call("linalg.slogdet", _np.linalg.slogdet, (a,), {},
                             meta=lambda n, t: [(shape, r[0].dtype), (shape, r[1].dtype)], nout=2)
    if shape == ():
        sign._scalar = logdet._scalar = True
    return _SlogdetResult(sign, logdet)


def eigh(a, UPLO="L"):
    a = _asarray(a)
    r = _np.linalg.eigh(_square_twin(a))
    w, v = lazy_call("linalg.eigh", _np.linalg.eigh, (a,), {"UPLO": UPLO},
                     meta=lambda n, t: [(a.shape[:-1], r[0].dtype), (a.shape, r[1].dtype)],
                     nout=2)
    return _EighResult(w, v)


def eigvalsh(a, UPLO="L"):
    a = _asarray(a)
    dt = _np.linalg.eigvalsh(_square_twin(a)).dtype
    return lazy_call("linalg.eigvalsh", _np.linalg.eigvalsh, (a,), {"UPLO": UPLO},
                     meta=lambda n, t: (a.shape[:-1], dt))


def norm(x, ord=None, axis=None, keepdims=False):
    x = _asarray(x)
    nd = x.ndim
    twin0 = _np.zeros(tuple(0 if s == 0 else 1 for s in x.shape), x.dtype)
    _np.linalg.norm(twin0 if not (axis is None and ord is None and nd > 2) else twin0.ravel(),
                    ord, axis, keepdims)   # NumPy's errors, in NumPy's order
    if axis is None:
        axes = tuple(range(nd))
        if ord is not None and nd > 2:
            raise ValueError("Improper number of dimensions to norm.")
    else:
        axes = normalize_axis_tuple(axis, nd)
    twin = _np.zeros(tuple(0 if s == 0 else 1 for s in x.shape), x.dtype)
    if axis is None and ord is None and nd > 2:
        dt = _np.linalg.norm(twin.ravel()).dtype
    else:
        dt = _np.linalg.norm(twin, ord, axis, keepdims).dtype
    shape = tuple(1 if i in axes else s for i, s in enumerate(x.shape)) if keepdims else \
        tuple(s for i, s in enumerate(x.shape) if i not in axes)
    return lazy_call("linalg.norm", _np.linalg.norm, (x,),
                     {"ord": ord, "axis": axis, "keepdims": keepdims},
                     meta=lambda n, t: (shape, dt), scalar=True)


def _with_eager(name, fn):
    """The execution policy: NumPy's own function at once on computed arguments
    (lazynp/_eager.py); the lazy ``fn`` otherwise."""
    from ._eager import eager_first
    return eager_first(getattr(_np.linalg, name), fn, "opaque")


_LAZY = {name: (obj if name == "LinAlgError" else _with_eager(name, obj))
         for name, obj in dict(globals()).items()
         if name in ("inv", "cholesky", "solve", "det", "slogdet", "eigh", "eigvalsh", "norm",
                     "LinAlgError")}
sys.modules[__name__] = FallbackModule(__name__, _np.linalg, _LAZY)
