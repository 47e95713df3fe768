"""Reductions and scans: one table line each (name: NumPy reference, fusion epilogue).

Output dtypes come from the NumPy function itself, probed once per signature on a *twin*:
an array with the input's dtype whose dimensions are min(size, 1).  The twin raises the
same errors as the real input (bad axis, zero-size reduction without identity) and gives
the same result dtype, without touching the real data.
"""
from __future__ import annotations

import warnings

import numpy as np
from numpy.lib.array_utils import normalize_axis_tuple

from .._base import split as _split
from .registry import Op, register

# name: (NumPy function, fusion epilogue identity or None)
REDUCTIONS = {
    "sum": (np.sum, "add"), "prod": (np.prod, "multiply"), "mean": (np.mean, "add"),
    "std": (np.std, None), "var": (np.var, None),
    "max": (np.max, "maximum"), "min": (np.min, "minimum"),
    "argmax": (np.argmax, None), "argmin": (np.argmin, None),
    "all": (np.all, "logical_and"), "any": (np.any, "logical_or"),
    "nansum": (np.nansum, None), "nanprod": (np.nanprod, None), "nanmean": (np.nanmean, None),
    "nanstd": (np.nanstd, None), "nanvar": (np.nanvar, None),
    "nanmax": (np.nanmax, None), "nanmin": (np.nanmin, None),
    "nanargmax": (np.nanargmax, None), "nanargmin": (np.nanargmin, None),
    "ptp": (np.ptp, None), "median": (np.median, None), "nanmedian": (np.nanmedian, None),
    "count_nonzero": (np.count_nonzero, None),
}
SCANS = {"cumsum": np.cumsum, "cumprod": np.cumprod, "nancumsum": np.nancumsum,
         "nancumprod": np.nancumprod}


def _call(fn):
    def impl(*vals, _where=False, **kw):
        if _where:
            return fn(vals[0], where=vals[1], **kw)
        return _split.run(fn, vals, kw)     # (independent rows of large work: two threads)
    impl.__name__ = getattr(fn, "__name__", "reduce")
    return impl


#: reductions that never warn or raise on values (sums overflow, means of empty or all-NaN
#: slices warn, ``nanargmax`` of an all-NaN slice raises: ``Op.raises_on_values``)
SILENT = frozenset({"all", "any", "argmax", "argmin", "count_nonzero", "max", "min"})
#: reductions whose value-dependent warnings are only floating-point ones (np.errstate)
FP_ONLY = frozenset({"sum", "prod", "cumsum", "cumprod", "nansum", "nanprod", "nancumsum",
                     "nancumprod", "ptp", "mean", "std", "var"})

#: reductions whose ``axis=None`` means the flattened input (no tuple of axes): an index
#: into it, or a scan of it (the batching rule flattens each example: :attr:`Op.batch`)
FLAT_WHEN_NO_AXIS = frozenset({"argmax", "argmin", "nanargmax", "nanargmin"})

REDUCTION_OPS = {name: register(Op(name, "reduction", _call(fn), extra={"epilogue": epi},
                                   raises_on_values=name not in SILENT,
                                   fp_errors_only=name in FP_ONLY,
                                   batch="reduction_flat" if name in FLAT_WHEN_NO_AXIS
                                   else "reduction"))
                 for name, (fn, epi) in REDUCTIONS.items()}
SCAN_OPS = {name: register(Op(name, "reduction", _call(fn), fp_errors_only=name in FP_ONLY,
                              batch="reduction_flat"))
            for name, fn in SCANS.items()}

_GENERIC: dict = {}


def generic_op(name: str, fn) -> Op:
    """Op for a ufunc method (``add.reduce``...) or another reduction-like function."""
    op = _GENERIC.get(name)
    if op is None:
        op = REDUCTION_OPS.get(name) or SCAN_OPS.get(name)
        if op is None:
            # (``ufunc.reduce``: tuple axes; ``ufunc.accumulate``: one axis, a scan)
            batch = "reduction" if name.endswith(".reduce") else \
                "reduction_flat" if name.endswith(".accumulate") else None
            op = register(Op(name, "reduction", _call(fn), batch=batch))
        _GENERIC[name] = op
    return op


_meta_cache: dict = {}


def twin(shape: tuple, dtype) -> np.ndarray:
    return np.zeros(tuple(0 if s == 0 else 1 for s in shape), dtype)


#: Reductions whose ``keepdims=True`` result is a 0-d array, not NumPy's scalar, even when
#: it has no dimension (NumPy's median of a 0-d array: ``array(2.)``; sum gives ``2.0``).
ARRAY_WHEN_KEEPDIMS = frozenset(("median", "nanmedian"))


def probe_dtype(name: str, fn, shape: tuple, dtype, args_kw: dict):
    """Result dtype of ``fn(x, **args_kw)`` for ``x`` of ``shape``/``dtype``; NumPy's errors."""
    try:
        key = (name, dtype, tuple(s == 0 for s in shape), len(shape),
               tuple(sorted(args_kw.items())))
        hash(key)
    except TypeError:
        key = None
    if key is not None:
        hit = _meta_cache.get(key)
        if hit is not None:
            return hit
    t = twin(shape, dtype)
    if t.dtype.hasobject and t.size:
        # (a zero would make an object sum look like an int64 one: NumPy's object loops
        # give the elements' own type, which an element no number converts to shows)
        from fractions import Fraction
        t[...] = Fraction(0)
    # silent: NumPy's warnings (e.g. "Mean of empty slice") come when the reduction runs
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with np.errstate(all="ignore"):
            res = fn(t, **args_kw)
    dt = np.asarray(res).dtype
    if key is not None:
        _meta_cache[key] = dt
    return dt


def reduced_shape(shape: tuple, axis, keepdims: bool) -> tuple:
    ndim = len(shape)
    if ndim == 0 and axis in (0, -1, (0,), (-1,), ()):
        return ()       # NumPy accepts axis 0/-1 on 0-d arrays
    if axis is None:
        axes = tuple(range(ndim))
    else:
        axes = normalize_axis_tuple(axis, ndim)
    if keepdims:
        return tuple(1 if i in axes else s for i, s in enumerate(shape))
    return tuple(s for i, s in enumerate(shape) if i not in axes)


def reduced_axes(params, nd: int) -> tuple:
    """The sorted, non-negative axes a reduction node with ``params`` reduces over an
    ``nd``-dimensional operand (all of them when ``axis`` is None)."""
    axis = (params or {}).get("axis")
    if axis is None:
        return tuple(range(nd))
    if not isinstance(axis, tuple):
        axis = (axis,)
    return tuple(sorted(a % nd for a in axis))
