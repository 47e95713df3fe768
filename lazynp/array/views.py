"""View functions (reshape, transpose, diagonal, sliding_window_view, ...).

Each runs NumPy's own function on the array's shadow; when NumPy returns a view, the result
shares the Var (writes go through to the base), otherwise (a reshape NumPy must copy) it is
recorded as a copy op, exactly as NumPy decides.
"""
from __future__ import annotations

import numpy as np

from ..core import graph, policy as _policy
from .calls import function_op, lazy_call
from .indexing import _Slot, empty_like_shadow
from .ndarray import _data_offset, ndarray
from .operands import value_for_eager, wrap


def _in_shadow(var, sh: np.ndarray) -> bool:
    base = var.shadow
    off = _data_offset(sh, base)
    return 0 <= off < max(base.nbytes, 1) or sh.size == 0 and base.size == 0


def _views_shadow(sh: np.ndarray, shadow: np.ndarray) -> bool:
    """True when ``sh`` is ``shadow`` or a view NumPy made of it (its ``base`` chain, through
    ``as_strided``'s holder object, leads there)."""
    b = sh
    for _ in range(4):
        if b is shadow:
            return True
        b = getattr(b, "base", None)
        if b is None:
            return False
    return False


def view_from_start(arr, fn, *args, **kwargs):
    """:func:`view` for functions whose view starts at the array's own first element
    (transpose, broadcast_to, expand_dims...): the byte offset is the array's, so no buffer
    address is read (reading one through ``__array_interface__`` costs about 2 us)."""
    sh = fn(arr._get_shadow(), *args, **kwargs)
    if type(sh) is np.ndarray and sh.size and _views_shadow(sh, arr._var.shadow):
        g = arr._geom
        return arr._view_of(sh, 0 if g is None else g[0])
    return _finish_view(arr, fn, sh, args, kwargs)


def view(arr, fn, *args, **kwargs):
    """``fn(arr, *args, **kwargs)`` as a view of ``arr`` when NumPy makes one, else a copy."""
    return _finish_view(arr, fn, fn(arr._get_shadow(), *args, **kwargs), args, kwargs)


def _finish_view(arr, fn, sh, args: tuple, kwargs: dict):
    if type(sh) is not np.ndarray:
        sh = np.asarray(sh)
    if sh.size == 0:
        return empty_like_shadow(sh)
    if not _in_shadow(arr._var, sh):
        name = getattr(fn, "__name__", "view")
        return lazy_call(name, fn, (arr,) + args, kwargs, meta=lambda n, t: (sh.shape, sh.dtype))
    return arr._view_of(sh)


def views(arr, fn, *args, **kwargs) -> list:
    """Like :func:`view` for functions returning several views (split, broadcast_arrays)."""
    out = []
    for sh in fn(arr._get_shadow(), *args, **kwargs):
        out.append(arr._view_of(sh) if sh.size and _in_shadow(arr._var, sh)
                   else empty_like_shadow(sh))
    return out


def reshape(arr, shape, order="C", copy=None):
    """NumPy's reshape: a view when NumPy makes one (any order), else a copy."""
    sh = arr._get_shadow()
    try:
        r = sh.reshape(shape, order=order, copy=False)
    except ValueError:
        if copy is False:
            raise
        return _reshape_copy(arr, shape, order)
    if copy:
        return lazy_call("reshape", np.reshape, (arr, shape), {"order": order},
                         meta=lambda n, t: (r.shape, r.dtype))
    if r.size == 0:
        return empty_like_shadow(r)
    return arr._view_of(r)


def _copy_shape(size: int, shape):
    """The shape ``shape`` (an int or a tuple of ints, one of them may be -1) resolves to
    for ``size`` elements, or None when NumPy must say what is wrong with it."""
    if type(shape) is int:
        shape = (shape,)
    elif type(shape) is not tuple:
        return None
    known = 1
    unknown = -1
    for i, n in enumerate(shape):
        if type(n) is not int or n < -1 or n == -1 and unknown >= 0:
            return None
        if n == -1:
            unknown = i
        else:
            known *= n
    if unknown < 0:
        return shape if known == size else None
    if known == 0 or size % known:
        return None
    return shape[:unknown] + (size // known,) + shape[unknown + 1:]


def _reshape_copy(arr, shape, order: str):
    """``np.reshape(arr, shape, order=order)`` where NumPy copies (the shadow has no view of
    that shape): a recorded ``reshape`` call, as :func:`lazy_call` records it, with its
    template built here (stockham_fft reshapes a transposed view each step: 38 -> 18 us,
    NumPy's copy 15 us, for 32768 complex elements)."""
    res = _copy_shape(arr.size, shape)
    if res is None:
        # the error NumPy gives for a bad shape, else the shape of the copy
        res = np.broadcast_to(np.zeros((), arr.dtype), arr.shape).reshape(
            shape, order=order).shape
        return lazy_call("reshape", np.reshape, (arr, shape), {"order": order},
                         meta=lambda n, t: (res, arr.dtype))
    if not _policy.record_all:
        # a computed (or small pending) array: NumPy's copy at once, without the recorded
        # call's template (26.8 -> 16 us against NumPy's 14 us, 32768 complex elements)
        v = value_for_eager(arr)
        if v is not None:
            graph.STATS["ops_eager"] += 1
            return wrap(v.reshape(res, order=order), (v,))
    op = function_op("reshape", np.reshape, "opaque")
    tpl = ((_Slot(0), shape), {"order": order})
    return ndarray._from_node(graph.record(op, (arr._node(),), {"tpl": tpl}, res, arr.dtype),
                              False)
