"""``roots``, ``poly``, ``polydiv`` and ``polyfit`` built from recorded lazynp ops (NumPy's
own formulas) when their inputs are lazy and everything is recorded (inside ``grad``/
``jit``/``record()``), so that a gradient flows through them; NumPy's functions otherwise.

Decisions NumPy takes on the values (leading and trailing zeros of ``roots``' input, the
real result of ``poly`` of conjugate pairs, ``polydiv``'s stripped remainder, ``polyfit``'s
rank warning) are taken on the values now, as a shape would be; the results are lazy.
``roots`` and ``poly`` of a matrix go through ``linalg.eigvals`` and ``polyfit`` through
``linalg.pinv`` (recorded by name: their gradient rules apply).
"""
from __future__ import annotations

import warnings

import numpy as np

from . import namespace as ns
from . import fallback as _fallback
from .conversion import recording
from ..array.calls import lazy_call
from ..array.operands import to_numpy

__all__ = ["roots", "poly", "polydiv", "polyfit"]


def _numpy(name, args, kwargs=None):
    return _fallback.call_numpy(getattr(np, name), name, args, kwargs or {})


def _eigvals(a):
    w = np.linalg.eigvals(to_numpy(a))          # (its dtype depends on the values)
    return lazy_call("linalg.eigvals", np.linalg.eigvals, (a,), {},
                     meta=lambda n, t: (w.shape, w.dtype))


def roots(p):
    """NumPy's ``roots``: the eigenvalues of the companion matrix."""
    if not recording([p]) or isinstance(p, np.poly1d):
        return _numpy("roots", (p,))
    p = ns.atleast_1d(ns.asarray(p))
    if p.ndim != 1:
        raise ValueError("Input must be a rank-1 array.")
    nonzero = np.nonzero(np.asarray(to_numpy(ns.not_equal(p, 0))))[0]
    if len(nonzero) == 0:
        return ns.asarray(np.array([]))
    trailing = p.shape[0] - int(nonzero[-1]) - 1
    p = p[int(nonzero[0]):int(nonzero[-1]) + 1]
    if p.dtype.kind not in "fc":
        p = p.astype(float)
    n = p.shape[0]
    if n > 1:
        first = -p[1:] / p[0]
        companion = ns.concatenate([ns.reshape(first, (1, n - 1)),
                                    ns.asarray(np.eye(n - 2, n - 1, dtype=first.dtype))])
        r = _eigvals(companion)
    else:
        r = ns.asarray(np.array([], dtype=p.dtype))
    if trailing:
        r = ns.concatenate([r, ns.zeros(trailing, r.dtype)])
    return r


def poly(seq_of_zeros):
    """NumPy's ``poly``: the coefficients of ``prod(x - z)`` (of a square matrix's
    eigenvalues)."""
    if not recording([seq_of_zeros]):
        return _numpy("poly", (seq_of_zeros,))
    seq = ns.atleast_1d(ns.asarray(seq_of_zeros))
    sh = seq.shape
    if len(sh) == 2 and sh[0] == sh[1] and sh[0] != 0:
        seq = _eigvals(seq)
    elif len(sh) == 1:
        if seq.dtype != object:
            seq = seq.astype(np.mintypecode(seq.dtype.char))
    else:
        raise ValueError("input must be 1d or non-empty square 2d array.")
    if seq.shape[0] == 0:
        return 1.0
    dt = seq.dtype
    a = ns.ones((1,), dtype=dt)
    one = ns.ones((1,), dtype=dt)
    for k in range(seq.shape[0]):
        a = ns.convolve(a, ns.concatenate([one, -seq[k:k + 1]]), mode="full")
    if a.dtype.kind == "c":
        zs = np.asarray(to_numpy(seq_of_zeros), complex)
        if np.all(np.sort(zs) == np.sort(zs.conjugate())):
            a = ns.real(a) * 1.0
    return a


def polydiv(u, v):
    """NumPy's ``polydiv``: long division; the remainder's leading (close to) zeros are
    stripped on the values."""
    if not recording([u, v]) or isinstance(u, np.poly1d) or isinstance(v, np.poly1d):
        return _numpy("polydiv", (u, v))
    u = ns.atleast_1d(ns.asarray(u)) + 0.0
    v = ns.atleast_1d(ns.asarray(v)) + 0.0
    dt = np.result_type(u.dtype, v.dtype)
    m, n = u.shape[0] - 1, v.shape[0] - 1
    scale = 1.0 / v[0]
    r = u.astype(dt)
    qs = []
    for k in range(0, m - n + 1):
        d = scale * r[k]
        qs.append(ns.reshape(d, (1,)))
        r = ns.concatenate([r[:k], r[k:k + n + 1] - d * v, r[k + n + 1:]])
    q = ns.concatenate(qs) if qs else ns.zeros((1,), dt)
    while r.shape[-1] > 1 and bool(ns.allclose(r[0], 0, rtol=1e-14)):
        r = r[1:]
    return q, r


def polyfit(x, y, deg, rcond=None, full=False, w=None, cov=False):
    """NumPy's ``polyfit`` (``full=False``, ``cov=False``): least squares on the scaled
    Vandermonde matrix through its pseudo-inverse (the cutoff ``rcond`` of NumPy's
    ``lstsq``)."""
    if not recording([x, y, w]) or full or cov:
        return _numpy("polyfit", (x, y, deg), {"rcond": rcond, "full": full, "w": w,
                                               "cov": cov})
    order = int(deg) + 1
    x = ns.asarray(x) + 0.0
    y = ns.asarray(y) + 0.0
    np.polyfit(np.zeros(x.shape, x.dtype) + np.arange(x.size).reshape(x.shape),
               np.zeros(y.shape, y.dtype), deg, rcond,
               w=None if w is None else np.ones(np.shape(w)))        # NumPy's errors
    if rcond is None:
        rcond = x.shape[0] * np.finfo(x.dtype).eps
    lhs = ns.expand_dims(x, 1) ** np.arange(order - 1, -1, -1, dtype=float)
    rhs = y
    if w is not None:
        w = ns.asarray(w) + 0.0
        lhs = lhs * ns.expand_dims(w, 1)
        rhs = rhs * (ns.expand_dims(w, 1) if rhs.ndim == 2 else w)
    scale = ns.sqrt(ns.sum(lhs * lhs, axis=0))
    lhs = lhs / scale
    s = np.linalg.svd(to_numpy(lhs), compute_uv=False)
    if int(np.sum(s > rcond * s[0])) != order:
        warnings.warn("Polyfit may be poorly conditioned", np.exceptions.RankWarning,
                      stacklevel=2)
    pinv = lazy_call("linalg.pinv", np.linalg.pinv, (lhs,), {"rcond": rcond},
                     meta=lambda n, t: ((lhs.shape[1], lhs.shape[0]), lhs.dtype))
    c = ns.matmul(pinv, rhs)
    return (c.T / scale).T


for _f in (roots, poly, polydiv, polyfit):
    _f._lazynp_fallback = True      # (NumPy's function outside transforms: lazynp.stats counts it)
