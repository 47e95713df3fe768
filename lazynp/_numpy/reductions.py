"""Recording reductions and scans (shape/dtype rules at record time, NumPy's errors)."""
from __future__ import annotations

import warnings

import numpy as np

from ..array.ndarray import ndarray
from numpy.lib.array_utils import normalize_axis_index

from .. import devices as _devices
from .conversion import asarray
from ..core import graph
from ..array.calls import lazy_call
from ..array.operands import operand
from ..ops import reductions as R

_NoValue = np._NoValue


def _asarray(a):
    if type(a) is ndarray:
        return a
    return asarray(a)


_meta_cache: dict = {}


def reduction(name: str, fn, array, axis=None, dtype=None, out=None, keepdims=False,
              where=True, kw=None):
    """Record ``fn(array, axis=..., dtype=..., keepdims=..., **kw)`` as a lazy reduction."""
    if _devices.ACTIVE and _devices.is_device_array(array):          # (device hook)
        return _devices.reduce(name, array, axis, dtype, out, keepdims, kw, where)
    a = _asarray(array)
    args_kw = dict(kw) if kw else {}
    if axis is not None or name.endswith(".reduce"):
        args_kw["axis"] = axis
    if dtype is not None:
        args_kw["dtype"] = np.dtype(dtype)
    if keepdims:
        # (the caller's value: NumPy's probe raises its TypeError for keepdims="x")
        args_kw["keepdims"] = keepdims
    if "mean" in args_kw:         # var/std(mean=...): an array argument, NumPy runs it all
        return _opaque(name, fn, a, args_kw, where, out)
    if where is not True:
        # shape/identity errors of the where mask: probe on zero-stride dummies of the
        # real shapes (rare path)
        wv = where._value() if isinstance(where, ndarray) else np.asarray(where)
        dummy = np.broadcast_to(np.zeros((), a.dtype), a.shape)
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            dt = np.asarray(fn(dummy, where=np.broadcast_to(wv, wv.shape), **args_kw)).dtype
        shape = R.reduced_shape(a.shape, axis, keepdims)
    else:
        # (result dtype and shape depend only on these: cached, as probing costs ~5 us)
        try:
            key = (name, fn, a.shape, a.dtype, axis, keepdims, tuple(args_kw.items()))
            meta = _meta_cache.get(key)
        except TypeError:       # an unhashable argument: NumPy's error comes from the probe
            key = meta = None
        if meta is None:
            meta = (R.probe_dtype(name, fn, a.shape, a.dtype, args_kw),
                    R.reduced_shape(a.shape, axis, keepdims))
            if key is not None:
                if len(_meta_cache) > 10_000:
                    _meta_cache.clear()
                _meta_cache[key] = meta
        dt, shape = meta
    args = (a._node(),)
    if where is not True:
        args += (operand(where),)
    node = graph.record(R.generic_op(name, fn), args, _with_where_flag(args_kw, where), shape, dt)
    res = ndarray._from_node(node, scalar=(shape == () and out is None and
                                           not (keepdims and name in R.ARRAY_WHEN_KEEPDIMS)))
    if out is not None:
        _check_out(out, shape, name)
        if np.dtype(out.dtype) != dt:
            # NumPy computes into ``out``'s dtype (a sum accumulates there, a mean divides
            # there): the same call into a buffer of that dtype
            res = _into(name, fn, a, args_kw, where, out, shape)
        out[...] = res
        return out
    return res


def _reduce_into(x, *, fn, out_dtype, out_shape, **kw):
    res = np.empty(out_shape, out_dtype)
    fn(x, out=res, **kw)
    return res


def _into(name, fn, a, args_kw, where, out, shape, result_shape=None):
    """``fn(a, out=<array of out's dtype>, **args_kw)``, recorded (NumPy's errors now).
    ``result_shape(input shape)``: the shape of the result (default: the reduction's)."""
    kw = dict(args_kw)
    if where is not True:
        kw["where"] = where
    if result_shape is None:
        def result_shape(s):
            return R.reduced_shape(s, kw.get("axis"), kw.get("keepdims", False))
    t = R.twin(a.shape, a.dtype)
    probe = {k: v for k, v in kw.items() if k != "where"}
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fn(t, out=np.empty(result_shape(t.shape), out.dtype), **probe)
    return lazy_call(name + ":out", _reduce_into, (a,),
                     dict(kw, fn=fn, out_dtype=np.dtype(out.dtype), out_shape=shape),
                     meta=lambda nodes, tpl: (shape, np.dtype(out.dtype)))


def _opaque(name, fn, a, args_kw, where, out):
    """A reduction NumPy runs with all its arguments (array-valued keywords)."""
    kw = dict(args_kw)
    if where is not True:
        kw["where"] = where
    res = lazy_call(name, fn, (a,), kw)
    if out is None:
        return res
    _check_out(out, res.shape, name)
    if np.dtype(out.dtype) != res.dtype:
        res = lazy_call(name + ":out", _reduce_into, (a,),
                        dict(kw, fn=fn, out_dtype=np.dtype(out.dtype), out_shape=res.shape))
    out[...] = res
    return out


def _check_out(out, shape, name) -> None:
    if not isinstance(out, ndarray) and not isinstance(out, np.ndarray):
        raise TypeError("output must be an array")
    if out.shape != shape:
        if len(out.shape) != len(shape):
            raise ValueError(f"output parameter for reduction operation {name} has the wrong "
                             f"number of dimensions: Found {len(out.shape)} but expected "
                             f"{len(shape)}")
        raise ValueError(f"output parameter for reduction operation {name} has a non-matching "
                         f"shape: Found {out.shape} but expected {shape}")


def _with_where_flag(args_kw: dict, where) -> dict:
    if where is True:
        return args_kw or None
    d = dict(args_kw)
    d["_where"] = True
    return d


def _scan_shape(shape: tuple, axis) -> tuple:
    if axis is None or (len(shape) == 0 and axis in (0, -1)):
        n = 1
        for s in shape:
            n *= s
        return (n,)
    normalize_axis_index(axis, len(shape))
    return shape


def scan(name: str, array, axis=None, dtype=None, out=None):
    """Record a cumulative op (cumsum, cumprod, nancumsum, nancumprod)."""
    a = _asarray(array)
    fn = R.SCANS[name]
    args_kw = {}
    if axis is not None:
        args_kw["axis"] = axis
    if dtype is not None:
        args_kw["dtype"] = np.dtype(dtype)
    shape = _scan_shape(a.shape, axis)
    dt = R.probe_dtype(name, fn, a.shape if a.ndim else (1,), a.dtype, args_kw)
    if out is not None and out.shape == shape and np.dtype(out.dtype) != dt:
        # NumPy accumulates in out's dtype (casts, one ComplexWarning): the same call
        out[...] = _into(name, fn, a, args_kw, True, out, shape,
                         lambda s: _scan_shape(s, axis))
        return out
    node = graph.record(R.SCAN_OPS[name], (a._node(),), args_kw or None, shape, dt)
    res = ndarray._from_node(node)
    if out is not None:
        if out.shape != shape:
            raise ValueError("provided out is the wrong size for the accumulation.")
        out[...] = res
        return out
    return res


def accumulate(np_ufunc, array, axis=0, dtype=None, out=None):
    """Record ``ufunc.accumulate``."""
    a = _asarray(array)
    if a.ndim == 0:
        raise TypeError("cannot accumulate on a scalar")
    normalize_axis_index(axis, a.ndim)
    args_kw = {"axis": axis}
    if dtype is not None:
        args_kw["dtype"] = np.dtype(dtype)
    name = f"{np_ufunc.__name__}.accumulate"
    dt = R.probe_dtype(name, np_ufunc.accumulate, a.shape, a.dtype, args_kw)
    node = graph.record(R.generic_op(name, np_ufunc.accumulate), (a._node(),), args_kw,
                        a.shape, dt)
    res = ndarray._from_node(node)
    if out is not None:
        if out.shape != a.shape:
            raise ValueError("provided out is the wrong size for the accumulation.")
        out[...] = res
        return out
    return res
