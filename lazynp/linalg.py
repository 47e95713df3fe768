"""``lazynp.linalg``: lazy ``inv``, ``solve``, ``det``, ``slogdet``, ``cholesky``, ``eigh``,
``eigvalsh``, ``norm`` (NumPy's LAPACK through NumPy); the rest falls back to NumPy.

Errors that depend on the values (``LinAlgError: Singular matrix``) are NumPy's, at the call:
these functions run at once under the default policy, and where they are recorded (the
``lazy`` policy) inside a ``try``/``with`` block they run at the call too; otherwise the
error is raised when the result is read, with the recording line in a note (docs/policy-and-explain.md).
"""
from __future__ import annotations

import sys

import numpy as _np
from numpy.lib.array_utils import normalize_axis_tuple

from ._numpy import namespace as _ns
from ._numpy.conversion import asarray as _asarray, recording
from ._numpy.eager import eager_first
from ._numpy import fallback as _fallback
from ._numpy.fallback import FallbackModule
from .array.calls import lazy_call
from .array.operands import to_numpy

LinAlgError = _np.linalg.LinAlgError


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


_SVDResult = type(_np.linalg.svd(_np.eye(1)))
_EigResult = type(_np.linalg.eig(_np.eye(1)))


def svd(a, full_matrices=True, compute_uv=True, hermitian=False):
    a = _asarray(a)
    if a.ndim < 2:
        raise LinAlgError(f"{a.ndim}-dimensional array given. Array must be at least "
                          "two-dimensional")
    m, n = a.shape[-2:]
    k = min(m, n)
    batch = a.shape[:-2]
    tw = _np.linalg.svd(_np.eye(1, dtype=a.dtype))
    kw = {"full_matrices": full_matrices, "compute_uv": compute_uv, "hermitian": hermitian}
    if not compute_uv:
        return lazy_call("linalg.svd", _np.linalg.svd, (a,), kw,
                         meta=lambda nd, t: (batch + (k,), tw[1].dtype))
    ku, kv = (m, n) if full_matrices else (k, k)
    u, s, vh = lazy_call("linalg.svd", _np.linalg.svd, (a,), kw,
                         meta=lambda nd, t: [(batch + (m, ku), tw[0].dtype),
                                             (batch + (k,), tw[1].dtype),
                                             (batch + (kv, n), tw[2].dtype)], nout=3)
    return _SVDResult(u, s, vh)


_QRResult = type(_np.linalg.qr(_np.eye(1)))


def qr(a, mode="reduced"):
    """Lazy for ``mode='reduced'`` of a matrix stack; NumPy's otherwise."""
    a = _asarray(a)
    if mode != "reduced" or a.ndim < 2 or 0 in a.shape[-2:]:
        return _fallback.call_numpy(_np.linalg.qr, "linalg.qr", (a,), {"mode": mode})
    m, n = a.shape[-2:]
    k = min(m, n)
    tw = _np.linalg.qr(_np.eye(1, dtype=a.dtype))
    q, r = lazy_call("linalg.qr", _np.linalg.qr, (a,), {"mode": mode},
                     meta=lambda nd, t: [(a.shape[:-2] + (m, k), tw[0].dtype),
                                         (a.shape[:-2] + (k, n), tw[1].dtype)], nout=2)
    return _QRResult(q, r)


def lstsq(a, b, rcond=None):
    """NumPy's ``lstsq``; while recording with lazy inputs, built from lazy ops (the
    solution through ``pinv``; the rank is read from the values) so that it carries a
    gradient."""
    if not recording([a, b]):
        return _fallback.call_numpy(_np.linalg.lstsq, "linalg.lstsq", (a, b), {"rcond": rcond})
    a, b = _asarray(a), _asarray(b)
    proto = _np.linalg.lstsq(_np.zeros(a.shape, a.dtype), _np.zeros(b.shape, b.dtype),
                             rcond=rcond)                  # NumPy's errors and dtypes
    m, n = a.shape
    av = to_numpy(a)
    eps = _np.finfo(av.dtype).eps
    cutoff = (max(m, n) * eps) if rcond is None else rcond
    sv = svd(a, compute_uv=False)
    sv_now = _np.linalg.svd(av, compute_uv=False)
    rank = int(_np.sum(sv_now > cutoff * sv_now.max(initial=0.0)))
    x = _ns.matmul(pinv(a, rcond=cutoff), b)
    if rank == n and m > n:
        r = b - _ns.matmul(a, x)
        resid = _ns.sum(_ns.real(r * _ns.conjugate(r)), axis=0)
        resid = _ns.reshape(resid, (1,)) if b.ndim == 1 else resid
    else:
        resid = _ns.zeros((0,), proto[1].dtype)
    return x.astype(proto[0].dtype), resid.astype(proto[1].dtype), _np.int32(rank), \
        sv.astype(proto[3].dtype)


def svdvals(x, /):
    return svd(x, compute_uv=False)


def pinv(a, rcond=None, hermitian=False, *, rtol=_np._NoValue):
    a = _asarray(a)
    kw = {"hermitian": hermitian}
    if rcond is not None:
        kw["rcond"] = rcond
    if rtol is not _np._NoValue:
        kw["rtol"] = rtol
    dt = _np.linalg.pinv(_np.eye(1, dtype=a.dtype)).dtype if a.ndim >= 2 else None
    if dt is None:
        _np.linalg.pinv(_np.zeros(a.shape, a.dtype))         # NumPy's error
    return lazy_call("linalg.pinv", _np.linalg.pinv, (a,), kw,
                     meta=lambda nd, t: (a.shape[:-2] + a.shape[-1:] + a.shape[-2:-1], dt))


def _eig_dtypes(a):
    """eig's output dtypes depend on the values (real when every eigenvalue is real):
    NumPy runs on the values (the input is computed now)."""
    w, v = _np.linalg.eig(to_numpy(a))
    return w.dtype, v.dtype


def eig(a):
    a = _asarray(a)
    _square_twin(a)
    wd, vd = _eig_dtypes(a)
    w, v = lazy_call("linalg.eig", _np.linalg.eig, (a,), {},
                     meta=lambda nd, t: [(a.shape[:-1], wd), (a.shape, vd)], nout=2)
    return _EigResult(w, v)


def eigvals(a):
    a = _asarray(a)
    _square_twin(a)
    wd, _ = _eig_dtypes(a)
    return lazy_call("linalg.eigvals", _np.linalg.eigvals, (a,), {},
                     meta=lambda nd, t: (a.shape[:-1], wd))


# the array API names of the namespace's functions (lazy through it)
def matmul(x1, x2, /):
    return _ns.matmul(x1, x2)


def matrix_transpose(x, /):
    return _ns.matrix_transpose(x)


def tensordot(x1, x2, /, *, axes=2):
    return _ns.tensordot(x1, x2, axes=axes)


def vecdot(x1, x2, /, *, axis=-1):
    x1, x2 = _asarray(x1), _asarray(x2)
    # NumPy's errors and result dtype (a plain sum would widen small integers: uint8 -> uint64)
    dtype = _np.linalg.vecdot(_np.zeros(x1.shape, x1.dtype), _np.zeros(x2.shape, x2.dtype),
                              axis=axis).dtype
    return _ns.sum(_ns.conjugate(x1) * x2, axis=axis, dtype=dtype)


def trace(x, /, *, offset=0, dtype=None):
    return _ns.trace(_asarray(x), offset, -2, -1, dtype)


def diagonal(x, /, *, offset=0):
    return _ns.diagonal(_asarray(x), offset, -2, -1)


def cross(x1, x2, /, *, axis=-1):
    x1, x2 = _asarray(x1), _asarray(x2)
    _np.linalg.cross(_np.zeros(x1.shape, x1.dtype), _np.zeros(x2.shape, x2.dtype), axis=axis)
    return _ns.cross(x1, x2, axis=axis)


def outer(x1, x2, /):
    x1, x2 = _asarray(x1), _asarray(x2)
    _np.linalg.outer(_np.zeros(x1.shape, x1.dtype), _np.zeros(x2.shape, x2.dtype))
    return _ns.outer(x1, x2)


def vector_norm(x, /, *, axis=None, keepdims=False, ord=2):
    x = _asarray(x)
    _np.linalg.vector_norm(_np.zeros(tuple(min(s, 1) for s in x.shape), x.dtype), axis=axis,
                           keepdims=keepdims, ord=ord)     # NumPy's errors
    if axis is None:
        r = norm(_ns.reshape(x, (-1,)), ord=ord)
        return _ns.reshape(r, (1,) * x.ndim) if keepdims else r
    axes = normalize_axis_tuple(axis, x.ndim)
    if len(axes) == 1:
        return norm(x, ord=ord, axis=axes[0], keepdims=keepdims)
    rest = [i for i in range(x.ndim) if i not in axes]
    moved = _ns.moveaxis(x, axes, range(x.ndim - len(axes), x.ndim))
    r = norm(_ns.reshape(moved, tuple(x.shape[i] for i in rest) + (-1,)), ord=ord, axis=-1)
    if keepdims:
        r = _ns.reshape(r, tuple(1 if i in axes else x.shape[i] for i in range(x.ndim)))
    return r


def matrix_norm(x, /, *, keepdims=False, ord="fro"):
    return norm(x, ord=ord, axis=(-2, -1), keepdims=keepdims)


def cond(x, p=None):
    """``numpy.linalg.cond`` from recorded ops (so ``grad`` goes through it): the ratio of
    the extreme singular values for ``p`` in ``None, 2, -2``, else
    ``norm(x, p) * norm(inv(x), p)``; NaN from a singular matrix becomes inf, as NumPy's."""
    x = _asarray(x)
    if not recording([x]):
        return _fallback.call_numpy(_np.linalg.cond, "linalg.cond", (x, p), {})
    _np.linalg.cond(_np.eye(x.shape[-1], dtype=x.dtype) if x.ndim >= 2 and
                    x.shape[-1] == x.shape[-2] else _np.zeros(x.shape, x.dtype), p)
    if p is None or p == 2 or p == -2:
        s = svd(x, compute_uv=False)
        r = s[..., 0] / s[..., -1] if p != -2 else s[..., -1] / s[..., 0]
    else:
        r = norm(x, p, axis=(-2, -1)) * norm(inv(x), p, axis=(-2, -1))
    bad = _ns.logical_and(_ns.isnan(r), _ns.logical_not(_ns.any(_ns.isnan(x), axis=(-2, -1))))
    return _ns.where(bad, _np.inf, r)


cond._lazynp_fallback = True      # (NumPy's function outside transforms: lazynp.stats counts it)


def _with_eager(name, fn):
    """The execution policy: NumPy's own function at once on computed arguments
    (lazynp/_eager.py); the lazy ``fn`` otherwise."""
    return eager_first(getattr(_np.linalg, name), fn, "opaque")


_LAZY = {name: (obj if name == "LinAlgError" else _with_eager(name, obj))
         for name, obj in dict(globals()).items()
         if name in ("inv", "cholesky", "solve", "det", "slogdet", "eigh", "eigvalsh", "norm",
                     "svd", "svdvals", "pinv", "eig", "eigvals", "qr", "lstsq", "matmul",
                     "matrix_transpose",
                     "tensordot", "vecdot", "trace", "diagonal", "cross", "outer",
                     "vector_norm", "matrix_norm", "LinAlgError")}
_LAZY["cond"] = cond      # (its own NumPy fallback outside transforms)
sys.modules[__name__] = FallbackModule(__name__, _np.linalg, _LAZY)
