"""NumPy functions that NumPy writes in Python, in fewer steps for their common arguments.

Small arrays spend most of a NumPy call in its Python layers: ``numpy.roll`` of a 41x41
array takes ~8.7 us (itertools, dicts, zips around two slice copies), ``numpy.sum`` ~3.3 us
around a 1.1 us ``add.reduce``.  The execution policy (:mod:`lazynp._eager`) runs small
calls at once on the functions here instead: for the arguments each one knows (an exact
NumPy array, plain ints) it does the same NumPy operations NumPy's function ends up doing,
in the same order, so values, dtypes, memory layout and errors are NumPy's; for anything
else it calls NumPy's function.  ``tests/test_shortcuts.py`` compares each with NumPy's.
"""
from __future__ import annotations

import numpy as np

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
    if type(a) is _ndarray and keepdims is _NoValue and initial is _NoValue and \
            where is _NoValue:
        return _add_reduce(a, axis, dtype, out)
    return _np_sum(a, axis=axis, dtype=dtype, out=out, keepdims=keepdims, initial=initial,
                   where=where)


def zeros_like(a, dtype=None, order="K", subok=True, shape=None, *, device=None):
    """``numpy.zeros_like``: of a C-ordered numeric NumPy array, ``zeros`` of its shape (the
    layout ``empty_like`` gives it, zero bytes as the copied 0 makes them)."""
    if type(a) is _ndarray and shape is None and device is None and order == "K" and \
            a.flags.c_contiguous:
        dt = a.dtype if dtype is None else np.dtype(dtype)
        if dt.kind in "biufc":
            return _zeros(a.shape, dt)
    return _np_zeros_like(a, dtype, order, subok, shape, device=device)


#: The shortcuts by NumPy name (lazynp._namespace runs these instead of NumPy's).
BY_NAME = {f.__name__: f for f in (roll, sum, zeros_like)}
