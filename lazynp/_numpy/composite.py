"""Construction functions built from recorded lazynp ops when their inputs are lazy and
everything is recorded (inside ``grad``/``jit``/``record()``, or the lazy policy), so that a
gradient flows through them: ``linspace``/``logspace``/``geomspace`` with lazy endpoints,
``r_``/``c_``, ``append``, ``insert``, ``block``, ``put``, ``place``... (``array``/
``asarray`` of lists holding lazy arrays: :mod:`lazynp._numpy.conversion`).  They are
written with the namespace's functions (:mod:`lazynp._numpy.namespace`, below this module).

Outside those conditions each function is NumPy's own (values forced), as before.  Shapes,
dtypes and errors come from NumPy run on zero-valued stand-ins of the lazy inputs.
"""
from __future__ import annotations

import numpy as np

from . import namespace as ns
from .conversion import has_lazy, nested_array, recording, standins, values_now
from .eager import eager_versions
from . import fallback as _fallback
from .fallback import wrap_result
from .outarg import call_with_out
from ..core import policy as _policy
from ..array.operands import to_numpy
from ..array.ndarray import ndarray

__all__ = ["linspace", "logspace", "geomspace", "r_", "c_", "append", "insert", "block", "put",
           "place", "gradient", "real_if_close", "polyadd", "polysub", "polymul", "polyder",
           "polyint", "compress", "extract", "asarray_chkfinite", "sort_complex"]


# --- ranges -----------------------------------------------------------------------------------

def _recorded_linspace(start, stop, num=50, endpoint=True, retstep=False, dtype=None, axis=0,
                       *, device=None):
    num = int(np.asarray(num).item()) if not isinstance(num, int) else num
    if num < 0:
        np.linspace(0.0, 1.0, num)         # NumPy's error
    proto = np.linspace(standins(start), standins(stop), num, endpoint, True, dtype, axis)
    dt = proto[0].dtype
    start = ns.asarray(start) * 1.0
    stop = ns.asarray(stop) * 1.0
    div = (num - 1) if endpoint else num
    delta = stop - start
    y = ns.reshape(ns.arange(0, num, dtype=delta.dtype if delta.dtype.kind == "c" else
                             np.result_type(delta.dtype, float)),
                   (-1,) + (1,) * delta.ndim)
    step = delta / div if div > 0 else None
    if step is not None:
        y = y * step + start
    else:
        y = y * delta + start
    if endpoint and num > 1:
        y = ns.concatenate([y[:-1], ns.expand_dims(stop + ns.zeros_like(y[-1]), 0)], axis=0)
    if axis != 0:
        y = ns.moveaxis(y, 0, axis)
    if dt.kind in "iu":
        y = ns.floor(y)
    y = y.astype(dt)
    if retstep:
        return y, (step if step is not None else ns.asarray(np.nan))
    return y


def _recorded_logspace(start, stop, num=50, endpoint=True, base=10.0, dtype=None, axis=0):
    nd = np.broadcast(*[standins(a) for a in (start, stop, base)]).ndim
    start, stop, base = (ns.reshape(a, (1,) * (nd - a.ndim) + a.shape)
                         for a in (ns.asarray(start), ns.asarray(stop), ns.asarray(base)))
    y = _recorded_linspace(start, stop, num=num, endpoint=endpoint, axis=axis)
    ret = ns.power(ns.expand_dims(base, axis), y)
    return ret if dtype is None else ret.astype(dtype)


def _recorded_geomspace(start, stop, num=50, endpoint=True, dtype=None, axis=0):
    np.geomspace(standins(start) + 1, standins(stop) + 1, num, endpoint, dtype, axis)
    start = ns.asarray(start) * 1.0
    stop = ns.asarray(stop) * 1.0
    if bool(ns.any(start == 0)) or bool(ns.any(stop == 0)):
        raise ValueError("Geometric sequence cannot include zero")
    dt = np.result_type(start.dtype, stop.dtype, float(num), np.zeros((), dtype).dtype)
    dtype = dt if dtype is None else np.dtype(dtype)
    start, stop = start.astype(dt), stop.astype(dt)
    sign = ns.sign(start)
    start, stop = start / sign, stop / sign
    res = _recorded_logspace(ns.log10(start), ns.log10(stop), num=num, endpoint=endpoint,
                             base=10.0, dtype=dt)
    if num > 0:
        first = ns.expand_dims(ns.broadcast_to(start, res.shape[1:]), 0)
        if num > 1 and endpoint:
            last = ns.expand_dims(ns.broadcast_to(stop, res.shape[1:]), 0)
            res = ns.concatenate([first, res[1:-1], last]) if num > 2 else \
                ns.concatenate([first, last])
        else:
            res = ns.concatenate([first, res[1:]])
    res = sign * res
    if axis != 0:
        res = ns.moveaxis(res, 0, axis)
    return res.astype(dtype)


linspace = values_now(np.linspace, _recorded_linspace)
logspace = values_now(np.logspace, _recorded_logspace)
geomspace = values_now(np.geomspace, _recorded_geomspace)


# --- concatenation ---------------------------------------------------------------------------

class _Concatenator:
    """``r_``/``c_``: NumPy's object, except when lazy arrays are given while everything is
    recorded: then a lazy ``concatenate`` of the items (slices and scalars as NumPy reads
    them; string directives and matrix output stay NumPy's and force the items)."""

    def __init__(self, np_obj, axis, ndmin, trans1d):
        self._np = np_obj
        self._axis, self._ndmin, self._trans1d = axis, ndmin, trans1d

    def __getitem__(self, key):
        items = key if isinstance(key, tuple) else (key,)
        lazy = has_lazy(list(items))
        if not lazy:
            return self._np[key]
        if not _policy.record_all or any(isinstance(k, str) for k in items):
            res = wrap_result(self._np[to_numpy(key)])
            return _fallback.forced("numpy." + type(self._np).__name__, key, res)
        return self._lazy(items)

    def __len__(self):
        return 0

    def _lazy(self, items):
        objs, kinds = [], []
        for item in items:
            if isinstance(item, slice):
                a = ns.asarray(self._np[item])
                kinds.append(a.dtype)
            elif type(item) in (int, float, complex, bool) or isinstance(item, np.generic):
                a = ns.asarray(np.array(item, ndmin=self._ndmin))
                kinds.append(item)
                objs.append(a)
                continue
            else:
                a = ns.asarray(item) if isinstance(item, ndarray) else nested_array(item) \
                    if has_lazy(item) else ns.asarray(np.asarray(item))
                kinds.append(a.dtype)
            if a.ndim < self._ndmin:
                k2 = self._ndmin - a.ndim
                a = ns.reshape(a, (1,) * k2 + a.shape)
                if self._trans1d != -1:
                    k1 = self._trans1d if self._trans1d >= 0 else self._trans1d + k2 + 1
                    d = list(range(self._ndmin))
                    a = ns.transpose(a, d[:k1] + d[k2:] + d[k1:k2])
            objs.append(a)
        dt = np.result_type(*kinds)
        return ns.concatenate([o.astype(dt) for o in objs], axis=self._axis)


r_ = _Concatenator(np.r_, 0, 1, -1)
c_ = _Concatenator(np.c_, -1, 2, 0)


def append(arr, values, axis=None):
    """NumPy's ``append``: a lazy ``concatenate``."""
    arr = nested_array(arr) if recording(arr) and not isinstance(arr, ndarray) \
        else ns.asarray(arr)
    values = nested_array(values) if recording(values) and not isinstance(values, ndarray) \
        else ns.asarray(values)
    if axis is None:
        if arr.ndim != 1:
            arr = ns.ravel(arr)
        values = ns.ravel(values)
        axis = arr.ndim - 1
    return ns.concatenate((arr, values), axis=axis)


def insert(arr, obj, values, axis=None):
    """NumPy's ``insert``; with lazy arrays while everything is recorded, a gather from
    ``arr`` and ``values`` at positions NumPy's ``insert`` finds on index arrays."""
    if not recording([arr, values]):
        return _fallback.call_numpy(np.insert, "insert", (arr, obj, values), {"axis": axis})
    arr = ns.asarray(arr) if isinstance(arr, ndarray) or not has_lazy(arr) else \
        nested_array(arr)
    vals = ns.asarray(values) if isinstance(values, ndarray) or not has_lazy(values) else \
        nested_array(values)
    ia = np.arange(1, arr.size + 1, dtype=np.intp).reshape(arr.shape)
    iv = -np.arange(1, vals.size + 1, dtype=np.intp).reshape(vals.shape)
    where = np.insert(ia, to_numpy(obj), iv, axis=axis)     # NumPy's placement and errors
    from_arr = np.where(where > 0, where - 1, 0)
    from_vals = np.where(where < 0, -where - 1, 0)
    a = ns.take(ns.ravel(arr), from_arr)
    v = ns.take(ns.ravel(vals).astype(arr.dtype), from_vals) if vals.size else ns.zeros_like(a)
    return ns.where(where > 0, a, v)


def block(arrays):
    """NumPy's ``block``: nested lazy ``concatenate`` calls when lazy arrays are given while
    everything is recorded."""
    if not recording(arrays):
        return _fallback.call_numpy(np.block, "block", (arrays,), {})
    proto = np.block(standins(arrays))          # NumPy's shape, dtype and errors

    def depth(o):
        return 1 + depth(o[0]) if type(o) is list and o else 0

    list_nd = depth(arrays)
    nd = proto.ndim

    def build(o, level):
        if type(o) is list:
            return ns.concatenate([build(x, level + 1) for x in o], axis=-(list_nd - level))
        a = ns.asarray(o)
        return ns.reshape(a, (1,) * (nd - a.ndim) + a.shape)

    return build(arrays, 0).astype(proto.dtype)


def put(a, ind, v, mode="raise"):
    """NumPy's ``put``: a lazy write through ``a``'s flat view."""
    if not isinstance(a, ndarray):
        raise TypeError("argument 1 must be numpy.ndarray, not " + type(a).__name__)
    if not recording([a, v]) or mode != "raise":
        return _fallback.call_numpy(np.put, "put", (a, ind, v), {"mode": mode})
    ind = np.asarray(to_numpy(ind), dtype=np.intp).ravel()
    v = ns.ravel(ns.asarray(v) if isinstance(v, ndarray) else nested_array(v)
                 if has_lazy(v) else ns.asarray(np.asarray(v)))
    if ind.size == 0 or v.size == 0:
        return None
    vals = ns.take(v, np.arange(ind.size) % v.size)
    flat = ns.reshape(a, -1)
    if flat._var is not a._var:
        raise NotImplementedError("lazynp.put: a non-contiguous target under a transform")
    flat[ind] = vals
    return None


def place(arr, mask, vals):
    """NumPy's ``place``: a lazy masked write (``vals`` repeated as needed)."""
    if not recording([arr, vals]):
        return _fallback.call_numpy(np.place, "place", (arr, mask, vals), {})
    m = np.asarray(to_numpy(mask), dtype=bool)
    n = int(m.sum())
    v = ns.ravel(ns.asarray(vals))
    if n == 0:
        return None
    if v.size == 0:
        raise ValueError("Cannot insert from an empty array!")
    arr[m] = ns.take(v, np.arange(n) % v.size)
    return None


def gradient(f, *varargs, axis=None, edge_order=1):
    """NumPy's ``gradient`` with scalar spacings, from lazy slices (differentiable); other
    spacings (coordinate arrays) are NumPy's."""
    if not recording([f]) or any(np.ndim(v) != 0 or isinstance(v, ndarray) for v in varargs):
        return _fallback.call_numpy(np.gradient, "gradient", (f,) + varargs,
                          {"axis": axis, "edge_order": edge_order})
    f = ns.asarray(f)
    proto = np.gradient(np.zeros(f.shape, f.dtype), *varargs, axis=axis,
                        edge_order=edge_order)           # NumPy's errors and dtype
    axes = list(range(f.ndim)) if axis is None else \
        [a % f.ndim for a in ((axis,) if np.ndim(axis) == 0 else axis)]
    dxs = list(varargs) if len(varargs) == len(axes) else list(varargs) * len(axes) \
        if varargs else [1.0] * len(axes)
    out = []
    for ax, dx in zip(axes, dxs):
        def sl(a, b=None):
            s = [slice(None)] * f.ndim
            s[ax] = slice(a, b)
            return tuple(s)
        mid = (f[sl(2, None)] - f[sl(None, -2)]) / (2.0 * dx)
        if edge_order == 1:
            first = (f[sl(1, 2)] - f[sl(0, 1)]) / dx
            last = (f[sl(-1, None)] - f[sl(-2, -1)]) / dx
        else:
            first = (-1.5 * f[sl(0, 1)] + 2.0 * f[sl(1, 2)] - 0.5 * f[sl(2, 3)]) / dx
            last = (0.5 * f[sl(-3, -2)] - 2.0 * f[sl(-2, -1)] + 1.5 * f[sl(-1, None)]) / dx
        out.append(ns.concatenate([first, mid, last], axis=ax))
    dt = (proto[0] if isinstance(proto, (tuple, list)) else proto).dtype
    out = [o.astype(dt) for o in out]
    return tuple(out) if isinstance(proto, (tuple, list)) else out[0]


def real_if_close(a, tol=100):
    """NumPy's ``real_if_close``: the real part (a view) when every imaginary part is within
    ``tol`` machine epsilons of zero (decided on the values)."""
    if not recording([a]):
        return _fallback.call_numpy(np.real_if_close, "real_if_close", (a,), {"tol": tol})
    a = ns.asarray(a)
    if a.dtype.kind != "c":
        return a
    if tol > 1:
        tol = np.finfo(a.dtype).eps * tol
    if bool(ns.all(ns.abs(ns.imag(a)) < tol)):
        return ns.real(a)
    return a


# --- polynomials (NumPy's formulas on lazy arrays while recording) ----------------------------

def _poly_fallback(name, args, kwargs=None):
    return _fallback.call_numpy(getattr(np, name), name, args, kwargs or {})


def _poly_pair(a1, a2):
    a1, a2 = ns.atleast_1d(ns.asarray(a1)), ns.atleast_1d(ns.asarray(a2))
    diff = a2.shape[0] - a1.shape[0]
    if diff > 0:
        a1 = ns.concatenate([ns.zeros(diff, a1.dtype), a1])
    elif diff < 0:
        a2 = ns.concatenate([ns.zeros(-diff, a2.dtype), a2])
    return a1, a2


def polyadd(a1, a2):
    if not recording([a1, a2]) or isinstance(a1, np.poly1d) or isinstance(a2, np.poly1d):
        return _poly_fallback("polyadd", (a1, a2))
    a1, a2 = _poly_pair(a1, a2)
    return a1 + a2


def polysub(a1, a2):
    if not recording([a1, a2]) or isinstance(a1, np.poly1d) or isinstance(a2, np.poly1d):
        return _poly_fallback("polysub", (a1, a2))
    a1, a2 = _poly_pair(a1, a2)
    return a1 - a2


def polymul(a1, a2):
    if not recording([a1, a2]) or isinstance(a1, np.poly1d) or isinstance(a2, np.poly1d):
        return _poly_fallback("polymul", (a1, a2))
    return ns.convolve(ns.atleast_1d(ns.asarray(a1)), ns.atleast_1d(ns.asarray(a2)))


def polyder(p, m=1):
    if not recording([p]) or isinstance(p, np.poly1d):
        return _poly_fallback("polyder", (p, m))
    m = int(m)
    if m < 0:
        raise ValueError("Order of derivative must be positive (see polyint)")
    p = ns.asarray(p)
    for _ in range(m):
        n = p.shape[0] - 1
        p = p[:-1] * np.arange(n, 0, -1)
    return p


def polyint(p, m=1, k=None):
    if not recording([p, k]) or isinstance(p, np.poly1d):
        return _poly_fallback("polyint", (p, m, k))
    m = int(m)
    if m < 0:
        raise ValueError("Order of integral must be positive (see polyder)")
    k = ns.zeros(m) if k is None else ns.atleast_1d(ns.asarray(k))
    if k.shape[0] == 1 and m > 1:
        k = ns.broadcast_to(k, (m,))
    if k.shape[0] < m:
        raise ValueError("k must be a scalar or a rank-1 array of length 1 or >m.")
    p = ns.asarray(p)
    for i in range(m):
        p = ns.concatenate([p / np.arange(p.shape[0], 0, -1), k[i:i + 1].astype(
            np.result_type(p.dtype, float))])
    return p


# --- selections decided by constant conditions --------------------------------------------------

def _forcing_call(np_fn, args, kwargs):
    """NumPy's ``np_fn`` on the forced values (a data-dependent shape), wrapped."""
    return _fallback.forced("numpy." + np_fn.__name__, (args, kwargs), wrap_result(
        np_fn(*to_numpy(args), **to_numpy(kwargs))))


def compress(condition, a, axis=None, out=None):
    """NumPy's ``compress``: a lazy ``take`` of the positions ``condition`` selects (the
    condition is read now) while recording."""
    if out is not None:
        return call_with_out("compress", np.compress, (condition, a), {"axis": axis}, out)
    if not recording([condition, a]):
        return _forcing_call(np.compress, (condition, a), {"axis": axis})
    a = ns.asarray(a)
    c = np.asarray(to_numpy(condition))
    proto = np.compress(c, np.zeros(a.shape, a.dtype), axis=axis)    # NumPy's errors
    idx = np.nonzero(c.ravel()[:a.size if axis is None else a.shape[axis]])[0]
    res = ns.take(ns.ravel(a), idx) if axis is None else ns.take(a, idx, axis=axis)
    return res.reshape(proto.shape) if res.shape != proto.shape else res


def extract(condition, arr):
    """NumPy's ``extract``: a lazy ``take`` of the flat positions where ``condition`` holds
    (read now) while recording."""
    if not recording([condition, arr]):
        return _forcing_call(np.extract, (condition, arr), {})
    arr = ns.asarray(arr)
    c = np.asarray(to_numpy(condition))
    idx = np.nonzero(c.ravel())[0]
    idx = idx[idx < arr.size]
    return ns.take(ns.ravel(arr), idx)


def asarray_chkfinite(a, dtype=None, order=None):
    """NumPy's ``asarray_chkfinite``: the values are checked now; the array stays lazy
    (and differentiable) while recording."""
    if not recording([a]):
        return _fallback.call_numpy(np.asarray_chkfinite, "asarray_chkfinite", (a,),
                          {"dtype": dtype, "order": order})
    a = ns.asarray(a, dtype=dtype) if isinstance(a, ndarray) else nested_array(a, dtype)
    if a.dtype.kind in "fc" and not bool(ns.all(ns.isfinite(a))):
        raise ValueError("array must not contain infs or NaNs")
    return a


def sort_complex(a):
    """NumPy's ``sort_complex`` (lexicographic on real, then imaginary part): a lazy
    ``take_along_axis`` by NumPy's argsort of the values (read now) while recording."""
    if not recording([a]):
        return _fallback.call_numpy(np.sort_complex, "sort_complex", (a,), {})
    a = ns.asarray(a)
    proto = np.sort_complex(np.zeros(a.shape, a.dtype))
    perm = np.argsort(np.asarray(to_numpy(a)), axis=-1, kind="stable")
    return ns.take_along_axis(a, perm, -1).astype(proto.dtype)


# --- functions that call back -------------------------------------------------------------

def apply_along_axis(func1d, axis: int, arr, *args, **kwargs):
    """``numpy.apply_along_axis``: NumPy's loop over the 1-d slices, each given to
    ``func1d`` as a lazynp array (NumPy gives ``func1d`` arrays of the caller's kind: code
    written for lazynp arrays, ``x.view(lazynp.ndarray)``, works on them); the slices of a
    NumPy subclass instance stay of its class, as in NumPy."""
    def on_lazynp_slice(x, *a, **k):
        return func1d(ns.asarray(x) if type(x) is np.ndarray else x, *a, **k)
    return _fallback.call_numpy(np.apply_along_axis, "apply_along_axis",
                                (on_lazynp_slice, axis, arr) + args, kwargs)


__all__ += ["apply_along_axis"]


from .poly_recorded import roots, poly, polydiv, polyfit  # noqa: E402
from .sets_recorded import (unique, unique_values, unique_counts, unique_inverse,  # noqa: E402
                            unique_all, intersect1d, union1d, histogram, histogram_bin_edges)
__all__ += ["roots", "poly", "polydiv", "polyfit", "unique", "unique_values", "unique_counts",
            "unique_inverse", "unique_all", "intersect1d", "union1d", "histogram",
            "histogram_bin_edges"]

globals().update(eager_versions(globals()))    # (compress, extract and the ranges)
