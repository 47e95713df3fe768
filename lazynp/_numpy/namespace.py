"""NumPy's public functions, implemented lazily.

Each function checks its arguments the NumPy way (shape/dtype rules raise NumPy's exception
at the user's line) and records one op.  Anything not here falls back to NumPy (see
:mod:`lazynp._numpy.fallback`).
"""
from __future__ import annotations

import builtins
import inspect
import operator

import warnings

import numpy as np
from numpy.lib.array_utils import normalize_axis_index, normalize_axis_tuple

from . import conversion as _conversion, eager as _eager, fallback as _fallback, \
    outarg as _outarg, reductions as _reductions
from ..core import policy as _policy, graph
from ..array import views as _views
from .. import devices as _devices
from .conversion import asarray, concat, concatenate, expand_dims, stack  # (public here too)
from .conversion import is_numpy_subclass as _is_numpy_subclass
from ..array.calls import _fill_deep, dummy, function_op, lazy_call, twin
from ..array.indexing import _Slot
from ..array.operands import broadcast_shapes, key_of, operand, shape_of, to_numpy
from .ufunc import UFUNCS, give_gufunc_face
from ..array.ndarray import ndarray
from ..ops import elementwise as ew
from ..ops.core import CLIP as _CLIP, COPY as _COPY, EMPTY as _EMPTY, EYE as _EYE, \
    FULL as _FULL, ONES as _ONES, WHERE as _WHERE, ZEROS as _ZEROS, matmul_meta
from ..ops.registry import Op, register

_NoValue = np._NoValue
_bmax, _bany = builtins.max, builtins.any      # (the names are the namespace's max and any)


# --- creation ------------------------------------------------------------------------------

def _shape_arg(shape) -> tuple:
    if isinstance(shape, ndarray):
        shape = shape.tolist()
    try:
        out = (operator.index(shape),)
    except TypeError:
        out = tuple(operator.index(s) for s in shape)
    if _bany(s < 0 for s in out):
        raise ValueError("negative dimensions are not allowed")
    return out


def _new(op, shape, dtype, device, **params):
    if device is not None or _devices.DEFAULTS_OPEN:         # (device hook)
        on_device = _devices.create(op.name, device, shape, dtype)
        if on_device is not None:
            return on_device
    dtype = np.dtype(float if dtype is None else dtype)
    node = graph.record(op, (), dict(shape=shape, dtype=dtype, **params), shape, dtype)
    return ndarray._from_node(node)


def zeros(shape, dtype=None, order="C", *, device=None, like=None):
    return _new(_ZEROS, _shape_arg(shape), dtype, device)


def ones(shape, dtype=None, order="C", *, device=None, like=None):
    return _new(_ONES, _shape_arg(shape), dtype, device)


def empty(shape, dtype=None, order="C", *, device=None, like=None):
    return _new(_EMPTY, _shape_arg(shape), dtype, device)


def full(shape, fill_value, dtype=None, order="C", *, like=None, device=None):
    if device is not None or _devices.DEFAULTS_OPEN:         # (device hook)
        on_device = _devices.create("full", device, _shape_arg(shape), dtype, fill_value)
        if on_device is not None:
            return on_device
    if isinstance(fill_value, ndarray) or (not np.isscalar(fill_value) and
                                           np.ndim(to_numpy(fill_value)) > 0):
        dt = np.result_type(asarray(fill_value).dtype) if dtype is None else np.dtype(dtype)
        out = empty(shape, dt)
        out[...] = fill_value
        return out
    if dtype is None:
        dtype = np.array(fill_value).dtype
    dtype = np.dtype(dtype)
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")      # (a cast warning comes when it runs)
        # NumPy's conversion errors, as np.full converts (-1.0 into uint8 is 255)
        np.copyto(np.empty((), dtype), fill_value, casting="unsafe")
    shape = _shape_arg(shape)
    node = graph.record(_FULL, (), {"shape": shape, "dtype": dtype, "fill_value": fill_value},
                        shape, dtype)
    return ndarray._from_node(node)


def _like_shape(a, shape):
    return a.shape if shape is None else _shape_arg(shape)


def zeros_like(a, dtype=None, order="K", subok=True, shape=None, *, device=None):
    a = asarray(a)
    return zeros(_like_shape(a, shape), a.dtype if dtype is None else dtype,
                 device=_devices.like_device(a, device))


def ones_like(a, dtype=None, order="K", subok=True, shape=None, *, device=None):
    a = asarray(a)
    return ones(_like_shape(a, shape), a.dtype if dtype is None else dtype,
                device=_devices.like_device(a, device))


def empty_like(prototype, /, dtype=None, order="K", subok=True, shape=None, *, device=None):
    a = asarray(prototype)
    return empty(_like_shape(a, shape), a.dtype if dtype is None else dtype,
                 device=_devices.like_device(a, device))


def full_like(a, fill_value, dtype=None, order="K", subok=True, shape=None, *, device=None):
    a = asarray(a)
    return full(_like_shape(a, shape), fill_value, a.dtype if dtype is None else dtype,
                device=_devices.like_device(a, device))


asanyarray = asarray


def ascontiguousarray(a, dtype=None, *, like=None):
    a = asarray(a, dtype=dtype)
    if not a.ndim:
        return a.reshape(1)
    return a if a.flags.c_contiguous else a.copy()


def asfortranarray(a, dtype=None, *, like=None):
    """Values as NumPy's ``asfortranarray``; lazynp buffers are C-ordered (docs/numpy-differences.md)."""
    a = asarray(a, dtype=dtype)
    return a if a.flags.f_contiguous else a.copy()


def array(object, dtype=None, *, copy=True, order="K", subok=False, ndmin=0, like=None,
          device=None):
    """Create a lazynp array (NumPy's ``array``; copies by default; ``device``: as
    :func:`asarray`'s)."""
    if device is not None or _devices.DEFAULTS_OPEN or \
            _devices.ACTIVE and _devices.is_device_array(object):     # (device hook)
        res = _devices.asarray(object if ndmin <= np.ndim(object) or
                               _devices.is_device_array(object) else
                               np.array(object, ndmin=ndmin), device, dtype, copy)
        if res is not None:
            return res
    if isinstance(object, ndarray):
        out = object.astype(dtype) if dtype is not None and np.dtype(dtype) != object.dtype \
            else (object.copy() if copy else object)
        if out.ndim < ndmin:
            out = out.reshape((1,) * (ndmin - out.ndim) + out.shape)
        return out
    if copy is False or copy is None:
        if type(object) is np.ndarray and object.ndim >= ndmin:
            return asarray(object, dtype, copy=copy)
    if not _policy.record_all and _plain_numbers(object):
        # (the common literal: no lazy array to find; a transform watches new leaves)
        return ndarray._from_value(np.array(object, dtype=dtype, copy=True, order="C",
                                            ndmin=ndmin))
    if _conversion.recording(object):  # a list holding lazy arrays: a lazy stack
        return _conversion.nested_array(object, dtype, ndmin)
    value = np.array(to_numpy(object), dtype=dtype, copy=True, order="C", ndmin=ndmin)
    return ndarray._from_node(graph.leaf(value))


_NUMBER_TYPES = frozenset((int, float, bool, complex))


def _plain_numbers(obj) -> bool:
    """A list or tuple of Python numbers, or of such lists or tuples (a matrix literal)."""
    t = type(obj)
    if t is not list and t is not tuple or not obj:
        return False
    numbers = _NUMBER_TYPES
    if type(obj[0]) in numbers:
        for v in obj:
            if type(v) not in numbers:
                return False
        return True
    for row in obj:
        if type(row) is not list and type(row) is not tuple:
            return False
        for v in row:
            if type(v) not in numbers:
                return False
    return True


def copy(a, order="K", subok=False):
    a = asarray(a)
    return ndarray._from_node(graph.record(_COPY, (a._node(),), None, a.shape, a.dtype))


arange = _conversion.values_now(np.arange)
indices = _conversion.values_now(np.indices)
tri = _conversion.values_now(np.tri)
frombuffer = _conversion.values_now(np.frombuffer)
fromiter = _conversion.values_now(np.fromiter)
fromstring = _conversion.values_now(np.fromstring)


def eye(N, M=None, k=0, dtype=float, order="C", *, device=None, like=None):
    dtype = np.dtype(dtype)
    N = operator.index(N)
    M = N if M is None else operator.index(M)
    if N < 0 or M < 0:
        raise ValueError("negative dimensions are not allowed")
    node = graph.record(_EYE, (), {"N": N, "M": M, "k": operator.index(k), "dtype": dtype},
                        (N, M), dtype)
    return ndarray._from_node(node)


def identity(n, dtype=None, *, like=None):
    return eye(n, dtype=float if dtype is None else dtype)


def meshgrid(*xi, copy=True, sparse=False, indexing="xy"):
    def meta(nodes, tpl):
        # shapes and dtypes from a view-only grid of zero-stride dummies (a copying grid of
        # the dummies would allocate and fill every output once more)
        a, k = _fill_deep(tpl, [dummy(n) for n in nodes])
        return [(g.shape, g.dtype) for g in np.meshgrid(*a, **dict(k, copy=False))]
    # NumPy 2 returns a tuple (1.x: a list)
    return tuple(lazy_call("meshgrid", np.meshgrid, xi,
                           {"copy": copy, "sparse": sparse, "indexing": indexing},
                           meta=meta,
                           nout=len(xi))) if xi else ()


def tril(m, k=0):
    return lazy_call("tril", np.tril, (asarray(m),), {"k": k})


def triu(m, k=0):
    return lazy_call("triu", np.triu, (asarray(m),), {"k": k})


def diag(v, k=0):
    v = asarray(v)
    if v.ndim == 2:
        return _views.view(v, np.diag, k)   # NumPy: a read-only view of the diagonal
    return lazy_call("diag", np.diag, (v,), {"k": k})


def diagflat(v, k=0):
    return lazy_call("diagflat", np.diagflat, (asarray(v),), {"k": k})


class _GridProxy:
    def __init__(self, grid):
        self._grid = grid

    def __getitem__(self, key):
        return _fallback.forced("numpy.mgrid", key,
                                _fallback.wrap_result(self._grid[to_numpy(key)]))


mgrid = _GridProxy(np.mgrid)
ogrid = _GridProxy(np.ogrid)


# --- elementwise beyond ufuncs -------------------------------------------------------------

def where(condition, x=_NoValue, y=_NoValue):
    """``where(cond, x, y)`` is lazy; ``where(cond)`` is ``nonzero`` (forces)."""
    if x is _NoValue and y is _NoValue:
        return nonzero(condition)
    if x is _NoValue or y is _NoValue:
        raise ValueError("either both or neither of x and y should be given")
    ops = [operand(condition), operand(x), operand(y)]
    keys = tuple(key_of(o) for o in ops)
    dt = _where_dtype(keys)
    shape = broadcast_shapes(*[shape_of(o) for o in ops])
    node = graph.record(_WHERE, tuple(ops), None, shape, dt)
    return ndarray._from_node(node, shape == () and False)


_where_cache: dict = {}


def _probe(k):
    return np.empty(0, dtype=k) if isinstance(k, np.dtype) else k(0)


def _where_dtype(keys):
    dt = _where_cache.get(keys)
    if dt is None:
        dt = np.where(_probe(keys[0]), _probe(keys[1]), _probe(keys[2])).dtype
        _where_cache[keys] = dt
    return dt


def clip(a, a_min=_NoValue, a_max=_NoValue, out=None, *, min=_NoValue, max=_NoValue, **kwargs):
    """Lazy ``numpy.clip`` (NumPy 2 semantics, including ``min=``/``max=``)."""
    lo = a_min if a_min is not _NoValue else (None if min is _NoValue else min)
    hi = a_max if a_max is not _NoValue else (None if max is _NoValue else max)
    if a_min is not _NoValue and min is not _NoValue:
        raise TypeError("Passed `min` and `a_min`, only one of which may be given.")
    if out is not None:
        return _outarg.call_with_out("clip", np.clip, (a, lo, hi), kwargs, out)
    ops = [operand(a), operand(lo) if lo is not None else None,
           operand(hi) if hi is not None else None]
    probes = [(o if type(o) in (bool, int, float, complex) else _probe(key_of(o)))
              if o is not None else None for o in ops]
    dt = np.clip(*probes, **kwargs).dtype
    shape = broadcast_shapes(*[shape_of(o) for o in ops if o is not None])
    if kwargs:
        return lazy_call("clip", np.clip, (a, lo, hi), kwargs)
    return ndarray._from_node(graph.record(_CLIP, tuple(ops), None, shape, dt), shape == ())


def nan_to_num(x, copy=True, nan=0.0, posinf=None, neginf=None):
    x = asarray(x)
    res = lazy_call("nan_to_num", np.nan_to_num, (x,),
                    {"nan": nan, "posinf": posinf, "neginf": neginf},
                    meta=lambda n, t: (x.shape, x.dtype), kind="elementwise")
    if not copy:
        x[...] = res
        return x
    return res


def round(a, decimals=0, out=None):
    if out is not None:
        return _outarg.call_with_out("round", np.round, (a, decimals), {}, out)
    a = asarray(a)
    res = lazy_call("round", np.round, (a,), {"decimals": decimals},
                    meta=lambda n, t: (a.shape, np.round(twin(n[0])).dtype), kind="elementwise",
                    scalar=True)
    return res


around = round


def real(val):
    a = asarray(val)
    if a.dtype.kind == "c":
        return _views.view(a, np.real)
    return a


def imag(val):
    a = asarray(val)
    if a.dtype.kind == "c":
        return _views.view(a, np.imag)
    z = zeros(a.shape, a.dtype)
    z.flags.writeable = False   # NumPy: the imaginary part of a real array is read-only
    return z


def isclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    return lazy_call("isclose", np.isclose, (asarray(a), asarray(b)),
                     {"rtol": rtol, "atol": atol, "equal_nan": equal_nan}, kind="elementwise",
                     scalar=True)


def allclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False) -> bool:
    return bool(all(isclose(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan)))


def array_equal(a1, a2, equal_nan=False) -> bool:
    a1, a2 = asarray(a1), asarray(a2)
    if a1.shape != a2.shape:
        return False
    if not equal_nan:
        return bool(all(a1 == a2))
    return bool(all((a1 == a2) | (isnan(a1) & isnan(a2))))


# --- reductions ------------------------------------------------------------------------------

def _red(name):
    fn = getattr(np, name)

    def f(a, axis=None, dtype=None, out=None, keepdims=False, initial=_NoValue, where=True):
        kw = {} if initial is _NoValue else {"initial": initial}
        return _reductions.reduction(name, fn, a, axis, dtype, out, keepdims, where, kw)
    f.__name__ = name
    f.__doc__ = fn.__doc__
    return f


sum = _red("sum")
prod = _red("prod")
nansum = _red("nansum")
nanprod = _red("nanprod")


def _red_minmax(name):
    fn = getattr(np, name)

    def f(a, axis=None, out=None, keepdims=False, initial=_NoValue, where=True):
        kw = {} if initial is _NoValue else {"initial": initial}
        return _reductions.reduction(name, fn, a, axis, None, out, keepdims, where, kw)
    f.__name__ = name
    f.__doc__ = fn.__doc__
    return f


max = amax = _red_minmax("max")
min = amin = _red_minmax("min")


def _red_bool(name):
    fn = getattr(np, name)

    def f(a, axis=None, out=None, keepdims=False, *, where=True):
        return _reductions.reduction(name, fn, a, axis, None, out, keepdims, where)
    f.__name__ = name
    return f


all = _red_bool("all")
any = _red_bool("any")


def mean(a, axis=None, dtype=None, out=None, keepdims=False, *, where=True):
    return _reductions.reduction("mean", np.mean, a, axis, dtype, out, keepdims, where)


def nanmean(a, axis=None, dtype=None, out=None, keepdims=False, *, where=True):
    return _reductions.reduction("nanmean", np.nanmean, a, axis, dtype, out, keepdims, where)


def _red_var(name):
    fn = getattr(np, name)

    def f(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=True, mean=_NoValue,
          correction=_NoValue):
        kw = {"ddof": ddof} if ddof else {}
        if correction is not _NoValue:
            kw["correction"] = correction
        if mean is not _NoValue:
            kw["mean"] = mean
        return _reductions.reduction(name, fn, a, axis, dtype, out, keepdims, where, kw)
    f.__name__ = name
    return f


std = _red_var("std")
var = _red_var("var")
nanstd = _red_var("nanstd")
nanvar = _red_var("nanvar")


def _red_arg(name):
    fn = getattr(np, name)

    def f(a, axis=None, out=None, *, keepdims=False):
        if axis is not None and not isinstance(axis, (int, np.integer)):
            raise TypeError(f"'{type(axis).__name__}' object cannot be interpreted as an integer")
        return _reductions.reduction(name, fn, a, axis, None, out, keepdims)
    f.__name__ = name
    return f


argmax = _red_arg("argmax")
argmin = _red_arg("argmin")
nanargmax = _red_arg("nanargmax")
nanargmin = _red_arg("nanargmin")


def _red_nanminmax(name):
    fn = getattr(np, name)

    def f(a, axis=None, out=None, keepdims=False, initial=_NoValue, where=True):
        kw = {} if initial is _NoValue else {"initial": initial}
        return _reductions.reduction(name, fn, a, axis, None, out, keepdims, where, kw)
    f.__name__ = name
    return f


nanmax = _red_nanminmax("nanmax")
nanmin = _red_nanminmax("nanmin")


def ptp(a, axis=None, out=None, keepdims=False):
    return _reductions.reduction("ptp", np.ptp, a, axis, None, out, keepdims)


def median(a, axis=None, out=None, overwrite_input=False, keepdims=False):
    return _reductions.reduction("median", np.median, a, axis, None, out, keepdims)


def nanmedian(a, axis=None, out=None, overwrite_input=False, keepdims=False):
    if out is not None:     # (NumPy's nanmedian broadcasts into an out with more dimensions)
        return _outarg.call_with_out("nanmedian", np.nanmedian, (a,),
                                     {"axis": axis, "keepdims": keepdims}, out)
    return _reductions.reduction("nanmedian", np.nanmedian, a, axis, None, out, keepdims)


def count_nonzero(a, axis=None, *, keepdims=False):
    res = _reductions.reduction("count_nonzero", np.count_nonzero, a, axis, None, None, keepdims)
    return res


def cumsum(a, axis=None, dtype=None, out=None):
    return _reductions.scan("cumsum", a, axis, dtype, out)


def cumprod(a, axis=None, dtype=None, out=None):
    return _reductions.scan("cumprod", a, axis, dtype, out)


def nancumsum(a, axis=None, dtype=None, out=None):
    return _reductions.scan("nancumsum", a, axis, dtype, out)


def nancumprod(a, axis=None, dtype=None, out=None):
    return _reductions.scan("nancumprod", a, axis, dtype, out)


def average(a, axis=None, weights=None, returned=False, *, keepdims=False):
    a = asarray(a)
    if weights is None:
        avg = mean(a, axis=axis, keepdims=keepdims)
        scl = a.size / avg.size if avg.size else 0
        if returned and not isinstance(avg, ndarray):    # (NumPy's scalar: so is scl)
            return avg, avg.dtype.type(scl)
        return (avg, full(avg.shape, scl, avg.dtype)) if returned else avg
    return lazy_call("average", np.average, (a,), {"axis": axis, "weights": asarray(weights),
                                                   "returned": returned, "keepdims": keepdims},
                     scalar=True, nout=2 if returned else 0)


# --- contractions ---------------------------------------------------------------------------

_matmul_cache: dict = {}
_SLOT0, _SLOT1 = _Slot(0), _Slot(1)


def matmul(x1, x2, /, out=None, *, dtype=None, casting="same_kind", order="K", subok=True,
           signature=None, axes=None, axis=None):
    """Lazy ``numpy.matmul`` (BLAS through NumPy)."""
    if type(x1) is ndarray and type(x2) is ndarray and out is None and dtype is None:
        # (the common call, shapes seen before: what lazy_call records, without its walk)
        meta = _matmul_cache.get((x1.shape, x2.shape, x1.dtype, x2.dtype, None))
        if meta is not None:
            node = graph.record(function_op("matmul", np.matmul, "contraction"),
                                (x1._node(), x2._node()), {"tpl": ((_SLOT0, _SLOT1), {})},
                                meta[0], meta[1])
            return ndarray._from_node(node, meta[0] == ())
    a, b = asarray(x1), asarray(x2)
    kw = {} if dtype is None else {"dtype": dtype}
    if out is not None:
        kw = dict(kw, casting=casting, order=order, subok=subok)
        if signature is not None:
            kw["signature"] = signature
        if axes is not None:
            kw["axes"] = axes
        if axis is not None:
            kw["axis"] = axis
        return _outarg.call_with_out("matmul", np.matmul, (a, b), kw, out, kind="contraction",
                                     probe_args=_contracted_once(a, b))
    key = (a.shape, b.shape, a.dtype, b.dtype, dtype)
    meta = _matmul_cache.get(key)       # shapes and dtypes decide the result's (or an error)
    if meta is None:
        if len(_matmul_cache) > 10_000:
            _matmul_cache.clear()
        meta = _matmul_cache[key] = matmul_meta(a, b, kw)
    return lazy_call("matmul", np.matmul, (a, b), kw, kind="contraction",
                     meta=lambda n, t: meta, scalar=True)


def _contracted_once(a, b) -> tuple:
    """Zero-stride stand-ins for ``a`` and ``b`` with the contracted axis of length one: the
    product's shape and dtype (and NumPy's checks of ``out``) without its work."""
    sa = a.shape[:-1] + (1,) if a.ndim else ()
    sb = b.shape[:-2] + (1,) + b.shape[-1:] if b.ndim >= 2 else (1,) * b.ndim
    return (np.broadcast_to(np.zeros((), a.dtype), sa),
            np.broadcast_to(np.zeros((), b.dtype), sb))


def dot(a, b, out=None):
    """Lazy ``numpy.dot``."""
    a, b = asarray(a), asarray(b)
    if out is not None:
        if a.ndim and b.ndim:
            dot(a, b)                                       # (shape errors first)
        return _outarg.call_with_out("dot", np.dot, (a, b), {}, out, kind="contraction",
                                     probe_args=_contracted_once(a, b) if a.ndim and b.ndim
                                     else None)
    if a.ndim == 0 or b.ndim == 0:
        res = multiply(a, b)
    else:
        k_a = a.shape[-1]
        k_b = b.shape[-2] if b.ndim >= 2 else b.shape[0]
        if k_a != k_b:
            raise ValueError(f"shapes {a.shape} and {b.shape} not aligned: {k_a} (dim "
                             f"{a.ndim - 1}) != {k_b} (dim {_bmax(b.ndim - 2, 0)})")
        dt = np.dot(twin(a._node()) if a.size else np.zeros((1,) * a.ndim, a.dtype),
                    np.zeros((1,) * b.ndim, b.dtype)).dtype
        shape = a.shape[:-1] + b.shape[:-2] + b.shape[-1:] if b.ndim >= 2 else a.shape[:-1]
        res = lazy_call("dot", np.dot, (a, b), {}, kind="contraction",
                        meta=lambda n, t: (shape, dt), scalar=True)
    return res


def vdot(a, b):
    a, b = asarray(a), asarray(b)
    return lazy_call("vdot", np.vdot, (a, b), {}, kind="contraction", scalar=True)


def inner(a, b):
    return lazy_call("inner", np.inner, (asarray(a), asarray(b)), {}, kind="contraction",
                     scalar=True)


def outer(a, b, out=None):
    if out is not None:
        return _outarg.call_with_out("outer", np.outer, (a, b), {}, out, kind="contraction")
    if _devices.HOOK:       # (device hook: a device array's outer, as the eager-first functions)
        r = _devices.dispatch("outer", np.outer, outer, (a, b), {})
        if r is not _eager.NOT_EAGER:
            return r
    a, b = asarray(a), asarray(b)
    if not _policy.record_all and a.size * b.size < _policy.EAGER_MAX_ELEMS:
        r = _eager.eager_call(np.outer, (a, b), {}, "opaque")
        if r is not _eager.NOT_EAGER:
            return r
    # NumPy's own definition, a multiply of the raveled operands broadcast against each
    # other, recorded as one: the work is the result's size (the operands are small), and the
    # product fuses with the elementwise work around it (``A += outer(u, v)``: one pass).
    a, b = ravel(a), ravel(b)
    return UFUNCS["multiply"]._call_py(a[:, None], b[None, :])


def tensordot(a, b, axes=2):
    """Lazy ``numpy.tensordot``."""
    a, b = asarray(a), asarray(b)
    try:
        iter(axes)
    except TypeError:
        n = operator.index(axes)
        axes_a = list(range(a.ndim - n, a.ndim)) if n else []
        axes_b = list(range(0, n))
    else:
        axes_a, axes_b = axes
        axes_a = [axes_a] if isinstance(axes_a, (int, np.integer)) else list(axes_a)
        axes_b = [axes_b] if isinstance(axes_b, (int, np.integer)) else list(axes_b)
    am_shape = tuple(s if (i in axes_a or i - a.ndim in axes_a) else 1 for i, s in enumerate(a.shape))
    bm_shape = tuple(s if (i in axes_b or i - b.ndim in axes_b) else 1 for i, s in enumerate(b.shape))
    r = np.tensordot(np.zeros(am_shape, a.dtype), np.zeros(bm_shape, b.dtype), axes=axes)
    na = [i % a.ndim for i in axes_a] if a.ndim else []
    nb = [i % b.ndim for i in axes_b] if b.ndim else []
    shape = tuple(s for i, s in enumerate(a.shape) if i not in na) + \
        tuple(s for i, s in enumerate(b.shape) if i not in nb)
    return lazy_call("tensordot", np.tensordot, (a, b), {"axes": axes}, kind="contraction",
                     meta=lambda n, t: (shape, r.dtype))


def einsum(*operands, out=None, optimize=False, **kwargs):
    """Lazy ``numpy.einsum`` (subscripts form; other forms are recorded generically)."""
    if out is not None:
        return _outarg.call_with_out("einsum", np.einsum, operands,
                                     dict(kwargs, optimize=optimize), out, kind="contraction")
    if operands and isinstance(operands[0], str) and "..." not in operands[0]:
        subs = operands[0].replace(" ", "")
        arrs = [asarray(o) for o in operands[1:]]
        ins, _, outs = subs.partition("->")
        in_specs = ins.split(",")
        if len(in_specs) != len(arrs):
            raise ValueError("more operands provided to einstein sum function than specified "
                             "in the subscripts string" if len(arrs) > len(in_specs) else
                             "fewer operands provided to einstein sum function than specified "
                             "in the subscripts string")
        if "->" not in subs:
            counts: dict = {}
            for c in ins.replace(",", ""):
                counts[c] = counts.get(c, 0) + 1
            outs = "".join(sorted(c for c, n in counts.items() if n == 1))
        sizes: dict = {}
        seen: dict = {}
        diagonal_mismatch = False     # a label repeated in one operand must not broadcast
        for spec, arr in zip(in_specs, arrs):
            own: dict = {}
            for c, sz in zip(spec, arr.shape):
                seen.setdefault(c, set()).add(sz)
                diagonal_mismatch |= own.setdefault(c, sz) != sz
        if diagonal_mismatch or \
                _bany(len(v - {1}) > 1 or (0 in v and len(v) > 1) for v in seen.values()):
            # inconsistent label sizes: NumPy's error, from zero-stride dummies
            np.einsum(subs, *[np.broadcast_to(np.zeros((), a.dtype), a.shape) for a in arrs],
                      **kwargs)
        for spec, arr in zip(in_specs, arrs):
            if len(spec) != arr.ndim:
                break
            for c, s in zip(spec, arr.shape):
                if s != 1 or c not in sizes:
                    sizes[c] = s if c not in sizes or sizes[c] == 1 else sizes[c]
        else:
            minis = [np.broadcast_to(np.zeros((), arr.dtype),
                                     tuple(1 if c in outs else s for c, s in zip(spec, arr.shape)))
                     for spec, arr in zip(in_specs, arrs)]
            r = np.einsum(subs, *minis, **kwargs)
            shape = tuple(sizes[c] for c in outs)
            res = lazy_call("einsum", np.einsum, (subs, *arrs), dict(kwargs, optimize=optimize),
                            kind="contraction", meta=lambda n, t: (shape, r.dtype), scalar=True)
            if out is not None:
                out[...] = res
                return out
            return res
    res = lazy_call("einsum", np.einsum, operands, dict(kwargs, optimize=optimize),
                    kind="contraction", scalar=True)
    if out is not None:
        out[...] = res
        return out
    return res


def trace(a, offset=0, axis1=0, axis2=1, dtype=None, out=None):
    """``numpy.trace`` (``lazynp.trace`` of a Python function traces it into a
    :class:`lazynp.Symbol`: the face, lazynp/__init__.py, dispatches)."""
    if out is not None:
        return _outarg.call_with_out("trace", np.trace, (a, offset, axis1, axis2, dtype), {},
                                     out)
    r = _eager.try_call(np.trace, (a, offset, axis1, axis2, dtype), {}, "reduction")
    if r is not _eager.NOT_EAGER:
        return r
    return sum(diagonal(a, offset, axis1, axis2), axis=-1, dtype=dtype)


def cross(a, b, axisa=-1, axisb=-1, axisc=-1, axis=None):
    return lazy_call("cross", np.cross, (asarray(a), asarray(b)),
                     {"axisa": axisa, "axisb": axisb, "axisc": axisc, "axis": axis})


def kron(a, b):
    return lazy_call("kron", np.kron, (asarray(a), asarray(b)), {})


# --- views ----------------------------------------------------------------------------------

def reshape(a, /, shape=_NoValue, order="C", *, newshape=_NoValue, copy=None):
    """``numpy.reshape`` (``newshape=`` where the installed NumPy still takes it)."""
    if newshape is not _NoValue:
        if not _RESHAPE_TAKES_NEWSHAPE:
            raise TypeError("reshape() got an unexpected keyword argument 'newshape'")
        if shape is _NoValue:
            shape = newshape
    if shape is _NoValue:
        raise TypeError("reshape() missing 1 required positional argument: 'shape'")
    if _is_numpy_subclass(a):
        return np.reshape(a, shape, order=order, copy=copy)
    return _views.reshape(asarray(a), shape, order=order, copy=copy)


_RESHAPE_TAKES_NEWSHAPE = "newshape" in inspect.signature(np.reshape).parameters


def ravel(a, order="C"):
    if _is_numpy_subclass(a):
        return np.ravel(a, order)
    a = asarray(a)
    if order == "C" and a.flags.c_contiguous:
        return _views.reshape(a, -1)
    return _views.view(a, np.ravel, order)


def transpose(a, axes=None):
    if _is_numpy_subclass(a):
        return np.transpose(a, axes)
    return _views.view_from_start(asarray(a), np.transpose, axes)


def permute_dims(a, axes=None):
    return transpose(a, axes)


def matrix_transpose(x, /):
    return asarray(x).mT


def swapaxes(a, axis1, axis2):
    if _is_numpy_subclass(a):
        return np.swapaxes(a, axis1, axis2)
    return _views.view_from_start(asarray(a), np.swapaxes, axis1, axis2)


def moveaxis(a, source, destination):
    if _is_numpy_subclass(a):
        return np.moveaxis(a, source, destination)
    return _views.view_from_start(asarray(a), np.moveaxis, source, destination)


def rollaxis(a, axis, start=0):
    if _is_numpy_subclass(a):
        return np.rollaxis(a, axis, start)
    return _views.view_from_start(asarray(a), np.rollaxis, axis, start)


def squeeze(a, axis=None):
    if _is_numpy_subclass(a):
        return np.squeeze(a, axis)
    return _views.view_from_start(asarray(a), np.squeeze, axis)


def broadcast_to(array, shape, subok=False):
    return _views.view_from_start(asarray(array), np.broadcast_to, shape)


def broadcast_arrays(*args, subok=False):
    arrs = [asarray(a) for a in args]
    shape = broadcast_shapes(*[a.shape for a in arrs])
    return tuple(broadcast_to(a, shape) for a in arrs)


def diagonal(a, offset=0, axis1=0, axis2=1):
    if _is_numpy_subclass(a):
        return np.diagonal(a, offset, axis1, axis2)
    return _views.view(asarray(a), np.diagonal, offset, axis1, axis2)


_REVERSED, _WHOLE = slice(None, None, -1), slice(None)
#: flip's index for every axis of an array of each number of dimensions NumPy allows
_ALL_REVERSED = tuple((_REVERSED,) * n for n in range(65))


def flip(m, axis=None):
    """NumPy's ``flip``: the reversed slice NumPy's own ``flip`` indexes with, taken by
    lazynp's indexing (a view; about 1.7 us less than NumPy's function on the shadow and
    the view machinery, which a small-vector loop calls every step)."""
    if type(m) is not ndarray:          # (a lazynp array needs neither check)
        if _is_numpy_subclass(m):
            return np.flip(m, axis)
        m = asarray(m)
    ndim = m.ndim
    if ndim == 0:
        return _views.view(m, np.flip, axis)
    if axis is None:
        return m[_ALL_REVERSED[ndim]]
    indexer = [_WHOLE] * ndim
    for ax in normalize_axis_tuple(axis, ndim):
        indexer[ax] = _REVERSED
    return m[tuple(indexer)]


def flipud(m):
    if _is_numpy_subclass(m):
        return np.flipud(m)
    m = asarray(m)
    if m.ndim < 1:
        return _views.view(m, np.flipud)
    return m[_REVERSED, ...]


def fliplr(m):
    if _is_numpy_subclass(m):
        return np.fliplr(m)
    m = asarray(m)
    if m.ndim < 2:
        return _views.view(m, np.fliplr)
    return m[:, ::-1]


def rot90(m, k=1, axes=(0, 1)):
    if _is_numpy_subclass(m):
        return np.rot90(m, k, axes)
    return _views.view(asarray(m), np.rot90, k, axes)


def atleast_1d(*arys):
    res = [asarray(a) if asarray(a).ndim >= 1 else asarray(a).reshape(1) for a in arys]
    return res[0] if len(res) == 1 else tuple(res)


def atleast_2d(*arys):
    res = [_views.view_from_start(asarray(a), np.atleast_2d) for a in arys]
    return res[0] if len(res) == 1 else tuple(res)


def atleast_3d(*arys):
    res = [_views.view_from_start(asarray(a), np.atleast_3d) for a in arys]
    return res[0] if len(res) == 1 else tuple(res)


def sliding_window_view(x, window_shape, axis=None, *, subok=False, writeable=False):
    return _views.view_from_start(asarray(x), np.lib.stride_tricks.sliding_window_view,
                                  window_shape, axis, writeable=writeable)


def as_strided(x, shape=None, strides=None, subok=False, writeable=True):
    return _views.view(asarray(x), np.lib.stride_tricks.as_strided, shape, strides,
                       writeable=writeable)


def split(ary, indices_or_sections, axis=0):
    if _is_numpy_subclass(ary):
        return np.split(ary, indices_or_sections, axis)
    return _views.views(asarray(ary), np.split, indices_or_sections, axis)


def array_split(ary, indices_or_sections, axis=0):
    if _is_numpy_subclass(ary):
        return np.array_split(ary, indices_or_sections, axis)
    return _views.views(asarray(ary), np.array_split, indices_or_sections, axis)


def hsplit(ary, indices_or_sections):
    if _is_numpy_subclass(ary):
        return np.hsplit(ary, indices_or_sections)
    return _views.views(asarray(ary), np.hsplit, indices_or_sections)


def vsplit(ary, indices_or_sections):
    if _is_numpy_subclass(ary):
        return np.vsplit(ary, indices_or_sections)
    return _views.views(asarray(ary), np.vsplit, indices_or_sections)


def dsplit(ary, indices_or_sections):
    if _is_numpy_subclass(ary):
        return np.dsplit(ary, indices_or_sections)
    return _views.views(asarray(ary), np.dsplit, indices_or_sections)


def unstack(x, /, *, axis=0):
    x = asarray(x)
    axis = normalize_axis_index(axis, x.ndim)
    return tuple(x[(slice(None),) * axis + (i,)] for i in range(x.shape[axis]))


# --- copies ----------------------------------------------------------------------------------

def vstack(tup, *, dtype=None, casting="same_kind"):
    return concatenate([atleast_2d(a) for a in tup], axis=0, dtype=dtype, casting=casting)


row_stack = vstack


def hstack(tup, *, dtype=None, casting="same_kind"):
    arrs = [atleast_1d(a) for a in tup]
    axis = 0 if arrs and arrs[0].ndim == 1 else 1
    return concatenate(arrs, axis=axis, dtype=dtype, casting=casting)


def dstack(tup):
    return concatenate([atleast_3d(a) for a in tup], axis=2)


def column_stack(tup):
    arrs = [asarray(a) for a in tup]
    return concatenate([a.reshape(-1, 1) if a.ndim < 2 else a for a in arrs], axis=1)


def _generic(name, kind="opaque", scalar=False):
    np_fn = getattr(np, name)
    with_out = _outarg.takes_out(np_fn)

    def f(*args, **kwargs):
        if with_out:
            args, kwargs, out = _outarg.split_out(np_fn, args, kwargs)
            if out is not None:
                return _outarg.call_with_out(name, np_fn, args, kwargs, out)
        args = tuple(asarray(a) if i == 0 else a for i, a in enumerate(args))
        return lazy_call(name, np_fn, args, kwargs, kind=kind, scalar=scalar)
    f.__name__ = name
    f.__doc__ = np_fn.__doc__
    return f


_roll_generic = _generic("roll")


def _roll1_impl(x, *, shift, axis):
    """``numpy.roll(x, shift, axis)`` for one axis: two slice copies (no index arrays)."""
    n = x.shape[axis]
    out = np.empty(x.shape, x.dtype)
    s = shift % n if n else 0
    head = (slice(None),) * axis
    out[head + (slice(s, None),)] = x[head + (slice(None, n - s),)]
    out[head + (slice(None, s),)] = x[head + (slice(n - s, None),)]
    return out


_ROLL1 = register(Op("roll1", "opaque", _roll1_impl, raises_on_values=False))


def roll(a, shift, axis=None):
    """``numpy.roll``; an integer shift along one integer axis of a lazynp array is one op
    of its own (cheap to record and to run: stencil programs roll many times)."""
    if type(a) is ndarray and type(shift) is int and type(axis) is int:
        ax = normalize_axis_index(axis, a.ndim)
        return ndarray._from_node(graph.record(_ROLL1, (a._node(),),
                                               {"shift": shift, "axis": ax}, a.shape, a.dtype))
    return _roll_generic(a, shift, axis=axis)


roll.__doc__ = np.roll.__doc__
tile = _generic("tile")
_repeat_lazy = _generic("repeat")


def repeat(a, repeats, axis=None):
    """Lazy when ``repeats`` is an integer; array repeats decide the shape (forces them)."""
    if isinstance(repeats, ndarray):
        repeats = repeats._value()
    return _repeat_lazy(a, repeats, axis=axis)


pad = _generic("pad")
take = _generic("take", scalar=True)
take_along_axis = _generic("take_along_axis")
sort = _generic("sort")
argsort = _generic("argsort")
_diff_lazy = _generic("diff")


def diff(a, n=1, axis=-1, prepend=_NoValue, append=_NoValue):
    if n == 0:
        return a if isinstance(a, ndarray) else asarray(a)   # NumPy returns the input
    kw = {"n": n, "axis": axis}
    if prepend is not _NoValue:
        kw["prepend"] = prepend
    if append is not _NoValue:
        kw["append"] = append
    return _diff_lazy(a, **kw)
searchsorted = _generic("searchsorted", scalar=True)
interp = _generic("interp", scalar=True)
ediff1d = _generic("ediff1d")
resize = _generic("resize")
trapezoid = _generic("trapezoid", scalar=True)
convolve = _generic("convolve")
correlate = _generic("correlate")
cov = _generic("cov")
corrcoef = _generic("corrcoef")
partition = _generic("partition")
argpartition = _generic("argpartition")
select = _generic("select")
choose = _generic("choose")
angle = _generic("angle", kind="elementwise")
sinc = _generic("sinc", kind="elementwise")
i0 = _generic("i0", kind="elementwise")
fix = _generic("fix", kind="elementwise", scalar=True)
quantile = _generic("quantile", scalar=True)
percentile = _generic("percentile", scalar=True)
nanquantile = _generic("nanquantile", scalar=True)
nanpercentile = _generic("nanpercentile", scalar=True)
vander = _generic("vander")
unwrap = _generic("unwrap")


def cumulative_sum(x, /, *, axis=None, dtype=None, out=None, include_initial=False):
    return _cumulative(cumsum, 0, x, axis, dtype, out, include_initial, np.cumulative_sum)


def cumulative_prod(x, /, *, axis=None, dtype=None, out=None, include_initial=False):
    return _cumulative(cumprod, 1, x, axis, dtype, out, include_initial, np.cumulative_prod)


def _cumulative(scan_fn, initial, x, axis, dtype, out, include_initial, np_fn):
    """NumPy 2's ``cumulative_sum``/``cumulative_prod``: the scan, with the initial value
    prepended when asked."""
    if out is not None:
        return _outarg.call_with_out(np_fn.__name__, np_fn, (x,),
                                     {"axis": axis, "dtype": dtype,
                                      "include_initial": include_initial}, out)
    x = asarray(x)
    probe = np_fn(np.zeros((1,) * _bmax(x.ndim, 1) if x.ndim else (), x.dtype), axis=axis,
                  dtype=dtype, include_initial=include_initial)    # NumPy's errors, dtype
    if x.ndim == 0:
        x = x.reshape(1)
    ax = 0 if axis is None else normalize_axis_index(axis, x.ndim)
    res = scan_fn(x, axis=ax, dtype=dtype).astype(probe.dtype, copy=False)
    if include_initial:
        shp = list(res.shape)
        shp[ax] = 1
        res = concatenate([full(tuple(shp), initial, probe.dtype), res], axis=ax)
    return res
polyval = _generic("polyval")
lexsort = _generic("lexsort")


def fill_diagonal(a, val, wrap=False) -> None:
    """Write ``val`` on ``a``'s main diagonal (a lazy write through a strided view)."""
    a = asarray(a)
    if a.ndim < 2:
        raise ValueError("array must be at least 2-d")
    if a.ndim > 2 and len(set(a.shape)) != 1:
        raise ValueError("All dimensions of input must be of equal length")
    flat = a.reshape(-1) if a.flags.c_contiguous else None
    if flat is None or wrap:
        _fallback.call_numpy(np.fill_diagonal, "fill_diagonal", (a, val), {"wrap": wrap})
        return
    if a.ndim == 2:
        step = a.shape[1] + 1
        end = a.shape[1] * a.shape[1]
    else:
        step = 1 + int(np.cumprod(a.shape[:-1]).sum())
        end = None
    flat[:end:step] = val


def astype(x, dtype, /, *, copy=True, device=None, casting="unsafe"):
    """NumPy's ``astype`` function: ``x`` cast to ``dtype``, on ``device`` when given."""
    res = asarray(x).astype(dtype, copy=copy, casting=casting)
    return res if device is None else res.to_device(device)


def from_dlpack(x, /, *, device=None, copy=None):
    """NumPy's ``from_dlpack``: the array of a DLPack producer ``x``, sharing its memory
    unless ``copy`` (as :func:`asarray` shares a NumPy array's); a lazynp ``x`` is taken as
    :func:`asarray` takes it.  ``device``: where the result lives (NumPy: ``'cpu'``)."""
    if device is not None and _devices.device(device) != _devices.CPU:
        return from_dlpack(x, copy=copy).to_device(device)
    if isinstance(x, ndarray):
        return asarray(x, copy=copy)
    return asarray(np.from_dlpack(x, copy=copy), copy=False if copy is False else None)


# --- data-dependent: these force their inputs -----------------------------------------------

def _forcing(name):
    np_fn = getattr(np, name)

    def f(*args, **kwargs):
        return _fallback.forced("numpy." + name, (args, kwargs), _fallback.wrap_result(
            np_fn(*to_numpy(args), **to_numpy(kwargs))))
    f.__name__ = name
    f.__doc__ = np_fn.__doc__
    return f


nonzero = _forcing("nonzero")
flatnonzero = _forcing("flatnonzero")
argwhere = _forcing("argwhere")
unique = _forcing("unique")
unique_values = _forcing("unique_values")
unique_counts = _forcing("unique_counts")
unique_inverse = _forcing("unique_inverse")
unique_all = _forcing("unique_all")
bincount = _forcing("bincount")
histogram = _forcing("histogram")
histogram2d = _forcing("histogram2d")
histogramdd = _forcing("histogramdd")
histogram_bin_edges = _forcing("histogram_bin_edges")
digitize = _forcing("digitize")
trim_zeros = _forcing("trim_zeros")
isin = _forcing("isin")
intersect1d = _forcing("intersect1d")
union1d = _forcing("union1d")
setdiff1d = _forcing("setdiff1d")
setxor1d = _forcing("setxor1d")
triu_indices = _forcing("triu_indices")
tril_indices = _forcing("tril_indices")
diag_indices = _forcing("diag_indices")
triu_indices_from = _forcing("triu_indices_from")
tril_indices_from = _forcing("tril_indices_from")
unravel_index = _forcing("unravel_index")
ravel_multi_index = _forcing("ravel_multi_index")


def shape(a):
    return asarray(a).shape if isinstance(a, ndarray) else np.shape(a)


def ndim(a):
    return a.ndim if isinstance(a, ndarray) else np.ndim(a)


def size(a, axis=None):
    if isinstance(a, ndarray):
        return a.size if axis is None else a.shape[axis]
    return np.size(a, axis)


def result_type(*arrays_and_dtypes):
    return np.result_type(*[a.dtype if isinstance(a, ndarray) else a for a in arrays_and_dtypes])


def can_cast(from_, to, casting="safe"):
    return np.can_cast(from_.dtype if isinstance(from_, ndarray) else from_, to, casting)


def min_scalar_type(a):
    return np.min_scalar_type(to_numpy(a))


def iscomplexobj(x):
    return x.dtype.kind == "c" if isinstance(x, ndarray) else np.iscomplexobj(x)


def isrealobj(x):
    return not iscomplexobj(x)


def isscalar(element):
    return False if isinstance(element, ndarray) else np.isscalar(element)


def copyto(dst, src, casting="same_kind", where=True):
    if not isinstance(dst, ndarray):
        np.copyto(dst, to_numpy(src), casting=casting, where=to_numpy(where))
        return
    if np.isscalar(src):
        np.copyto(np.empty((), dst.dtype), src, casting=casting)  # NumPy's casting errors
    src = asarray(src) if not np.isscalar(src) else src
    if where is True:
        if isinstance(src, ndarray) and not np.can_cast(src.dtype, dst.dtype, casting):
            raise TypeError(f"Cannot cast array data from {src.dtype!r} to {dst.dtype!r} "
                            f"according to the rule '{casting}'")
        dst[...] = src
    else:
        dst[...] = where_(where, src, dst)


where_ = where

# ufuncs by name (add, exp, ...) and NumPy's aliases
_UFUNC_NAMES = {}
for _n, _u in sorted(vars(np).items()):    # (not dir(np): see lazynp._numpy.ufunc.UFUNCS)
    if isinstance(_u, np.ufunc) and _u.signature is None:
        _UFUNC_NAMES[_n] = UFUNCS[_u.__name__]
globals().update(_UFUNC_NAMES)

# --- the execution policy: functions that return fresh data try NumPy at once first ----------
globals().update(_eager.eager_versions(globals()))
give_gufunc_face(matmul, np.matmul)

__all_lazy__ = [n for n in list(globals()) if not n.startswith("_") and n not in
                ("builtins", "operator", "np", "graph", "Op", "register", "ndarray",
                 "lazy_call", "twin", "broadcast_shapes", "key_of", "operand", "shape_of",
                 "to_numpy", "UFUNCS", "ew", "normalize_axis_index", "normalize_axis_tuple",
                 "annotations", "where_")]
