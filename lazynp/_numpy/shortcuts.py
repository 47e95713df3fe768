"""NumPy functions that NumPy writes in Python, in fewer steps for their common arguments.

Small arrays spend most of a NumPy call in its Python layers: ``numpy.roll`` of a 41x41
array takes ~8.7 us (itertools, dicts, zips around two slice copies), ``numpy.sum`` ~3.3 us
around a 1.1 us ``add.reduce``.  The execution policy (:mod:`lazynp._numpy.eager`) runs small
calls at once on the functions here instead: for the arguments each one knows (an exact
NumPy array, plain ints) it does the same NumPy operations NumPy's function ends up doing,
in the same order, so values, dtypes, memory layout and errors are NumPy's; for anything
else it calls NumPy's function.  ``tests/test_shortcuts.py`` compares each with NumPy's.
"""
from __future__ import annotations

import numpy as np

from .._base import native as _native


#: ``add.reduce(a, axis=-1)`` of a C-ordered float array whose last axis has 2 to 7
#: elements, computed in NumPy's order of additions without its per-row loop calls (a
#: (600, 4, 2) array: 46 -> 3 us); None where it does not apply or a float flag was raised.
_short_sum = _native.ext.short_sum if _native.ext is not None else None
_ndarray = np.ndarray
_NoValue = np._NoValue
_add_reduce = np.add.reduce
_empty_like = np.empty_like
_zeros = np.zeros
_np_roll, _np_sum, _np_zeros_like = np.roll, np.sum, np.zeros_like


def roll(a, shift, axis=None):
    """``numpy.roll``: for an int shift along one axis (or a 1-D array), the two slice
    copies NumPy's roll makes into ``empty_like(a)``."""
    if type(a) is _ndarray and type(shift) is int:
        ndim = a.ndim
        if axis is None and ndim == 1:
            axis = 0
        if type(axis) is int and -ndim <= axis < ndim:
            axis %= ndim
            offset = shift % (a.shape[axis] or 1)
            result = _empty_like(a)
            if offset:
                lead = (slice(None),) * axis
                result[lead + (slice(offset, None),)] = a[lead + (slice(None, -offset),)]
                result[lead + (slice(None, offset),)] = a[lead + (slice(-offset, None),)]
            else:
                result[...] = a
            return result
    return _np_roll(a, shift, axis)


def sum(a, axis=None, dtype=None, out=None, keepdims=_NoValue, initial=_NoValue,  # noqa: A001
        where=_NoValue):
    """``numpy.sum``: of a NumPy array, ``add.reduce`` with the arguments given (NumPy's
    ``_wrapreduction`` drops the ones left at their default)."""
    if type(a) is _ndarray and (keepdims is _NoValue or keepdims is False) and \
            initial is _NoValue and where is _NoValue:
        return _reduce_sum(a, axis, dtype, out, False)
    return _np_sum(a, axis=axis, dtype=dtype, out=out, keepdims=keepdims, initial=initial,
                   where=where)


def _reduce_sum(a, axis, dtype, out, keepdims):
    """``add.reduce(a, axis, dtype, out, keepdims)``, over a short last axis in C."""
    if _short_sum is not None and dtype is None and out is None and not keepdims and \
            (axis is None and a.ndim == 1 or type(axis) is int and
             (axis == -1 or axis == a.ndim - 1)):
        r = _short_sum(a)
        if r is not None:
            return r
    return _add_reduce(a, axis, dtype, out, keepdims)


def zeros_like(a, dtype=None, order="K", subok=True, shape=None, *, device=None):
    """``numpy.zeros_like``: of a C-ordered numeric NumPy array, ``zeros`` of its shape (the
    layout ``empty_like`` gives it, zero bytes as the copied 0 makes them)."""
    if type(a) is _ndarray and shape is None and device is None and order == "K" and \
            a.flags.c_contiguous:
        dt = a.dtype if dtype is None else np.dtype(dtype)
        if dt.kind in "biufc":
            return _zeros(a.shape, dt)
    return _np_zeros_like(a, dtype, order, subok, shape, device=device)


_intp = np.intp
_true_divide = np.true_divide
_f2, _f8 = np.dtype("f2"), np.dtype("f8")
_np_mean = np.mean


def mean(a, axis=None, dtype=None, out=None, keepdims=_NoValue, *, where=_NoValue):
    """``numpy.mean`` (and ``ndarray.mean``): of a non-empty NumPy array over all its axes or
    one, the ``add.reduce`` and the division by the count (a ``numpy.intp``) that NumPy's
    ``_mean`` makes."""
    if type(a) is _ndarray and out is None and (where is _NoValue or where is True) and \
            (axis is None or type(axis) is int and -a.ndim <= axis < a.ndim):
        items = a.size if axis is None else a.shape[axis]
        kind = a.dtype.kind
        if items and (dtype is not None or kind in "fciub" and a.dtype != _f2):
            if dtype is None and kind in "iub":
                dtype = _f8
            ret = _reduce_sum(a, axis, dtype, None, keepdims is not _NoValue and keepdims)
            rcount = _intp(items)
            if type(ret) is _ndarray:
                return _true_divide(ret, rcount, out=ret, casting="unsafe", subok=False)
            if hasattr(ret, "dtype"):
                return ret.dtype.type(ret / rcount)
            return ret / rcount
    kwargs = {}
    if keepdims is not _NoValue:
        kwargs["keepdims"] = keepdims
    if where is not _NoValue:
        kwargs["where"] = where
    return _np_mean(a, axis, dtype, out, **kwargs)


_np_histogram, _linspace, _bincount = np.histogram, np.linspace, np.bincount
_intp_dtype = np.dtype(np.intp)


def histogram(a, bins=10, range=None, density=None, weights=None):  # noqa: A002
    """``numpy.histogram``: of integers, into bins of a whole number of units over an int
    range, each value's bin is ``(v - lo) // width`` (``hi`` itself in the last), as NumPy's
    float arithmetic and edge comparisons find it: one integer division and a ``bincount``
    (NumPy's uniform-bin path takes 4-5 passes more: 80 -> 30 us for 16k uint8 pixels).
    The edges are NumPy's ``linspace``; they must be those integers exactly, else (and for
    anything else) NumPy's function runs."""
    if type(a) is _ndarray and a.dtype.kind in "iu" and a.dtype.itemsize <= 4 and \
            type(bins) is int and bins > 0 and weights is None and not density and \
            type(range) in (tuple, list) and len(range) == 2 and \
            type(range[0]) is int and type(range[1]) is int:
        lo, hi = range
        if lo < hi and (hi - lo) % bins == 0 and -(1 << 52) < lo and hi < (1 << 52):
            width = (hi - lo) // bins
            edges = _linspace(lo, hi, bins + 1, endpoint=True, dtype=_f8)
            if (edges == _np_arange_f8(lo, width, bins + 1)).all():
                v = a.reshape(-1).astype(_intp_dtype)
                info = np.iinfo(a.dtype)
                if lo > info.min or hi < info.max:
                    v = v[(v >= lo) & (v <= hi)]
                if lo:
                    v -= lo
                if width != 1:
                    v //= width
                if hi <= info.max:
                    np.minimum(v, bins - 1, out=v)      # (hi itself: the last bin)
                return _bincount(v, minlength=bins), edges
    return _np_histogram(a, bins, range, density, weights)


def _np_arange_f8(lo: int, width: int, n: int):
    return np.arange(n, dtype=_f8) * width + lo


#: The shortcuts by NumPy name (lazynp._numpy.namespace runs these instead of NumPy's).
BY_NAME = {f.__name__: f for f in (roll, sum, zeros_like, mean, histogram)}

#: The ndarray methods run by a shortcut (``method(value, *args, **kwargs)``).
METHODS = {"mean": mean, "sum": sum}
