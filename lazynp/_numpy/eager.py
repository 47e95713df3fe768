"""Running a call at once on NumPy, when the execution policy (:mod:`lazynp.core.policy`) says so.

An eager call is NumPy's own function applied to the computed values of its lazy
arguments: its result (values, dtype, scalar type), errors and warnings are NumPy's, at the
user's line.  Only functions that return fresh data are run this way (a function that
returns a view of its argument, or writes into one, must go through lazynp's view and write
machinery, which keeps the storage shared).
"""
from __future__ import annotations

import functools
import inspect

import numpy as np

from ..core import policy as _policy
from . import shortcuts as _shortcuts
from .._base import split as _split
from .._base import native as _native
from .. import devices as _devices
from ..array.operands import (NOT_EAGER, PY_SCALARS, array_like_value, eager_operand,
                              value_for_eager, wrap)
from ..core import graph as _graph
from ..core.graph import STATS
from ..array.ndarray import ndarray
from ..ops.elementwise import UFUNC_OPS as _UFUNC_OPS

__all__ = ["NOT_EAGER", "try_call", "wrap", "eager_first", "try_method"]


def _unwrap(x, acc: list):
    """``x`` with computed lazy arrays replaced by their values; records the largest
    array size seen in ``acc[0]``; NOT_EAGER when a large lazy array is pending (a small
    one is computed now)."""
    if isinstance(x, ndarray):
        v = value_for_eager(x)
        if v is None:
            return NOT_EAGER
        n = _policy.counted_size(v)
        if n > acc[0]:
            acc[0] = n
        acc.append(v)
        return v
    t = type(x)
    if t is np.ndarray:
        n = _policy.counted_size(x)
        if n > acc[0]:
            acc[0] = n
        acc.append(x)
        return x
    if (t is list or t is tuple) and x and any(isinstance(v, (ndarray, list, tuple)) for v in x):
        out = []
        for v in x:
            u = _unwrap(v, acc)
            if u is NOT_EAGER:
                return NOT_EAGER
            out.append(u)
        return out if t is list else tuple(out)
    return x if t in PY_SCALARS else array_like_value(x)   # (__array__ giving a lazynp array)


def _unwrap_call(args: tuple, kwargs: dict, acc: list):
    """``(values of args, values of kwargs)`` for a call run at once (see :func:`_unwrap`),
    or NOT_EAGER."""
    vals = []
    for a in args:
        v = _unwrap(a, acc)
        if v is NOT_EAGER:
            return NOT_EAGER
        vals.append(v)
    kw = {}
    for k, a in kwargs.items():
        v = _unwrap(a, acc)
        if v is NOT_EAGER:
            return NOT_EAGER
        kw[k] = v
    return vals, kw


def try_call(fn, args: tuple, kwargs: dict, kind: str = "opaque", base=None):
    """``fn(*args, **kwargs)`` run now by NumPy when the policy allows it (every lazy
    argument computed, the work small for ``kind``); NOT_EAGER when it must be recorded.
    A lazy ``out=`` is not taken here (the recorded path writes it).  ``base``: a NumPy
    array ``fn`` is a method of (a result sharing its memory is copied)."""
    if _policy.record_all:
        return NOT_EAGER
    if kwargs.get("out") is not None:
        return NOT_EAGER
    acc = [0] if base is None else [_policy.counted_size(base), base]
    unwrapped = _unwrap_call(args, kwargs, acc)
    if unwrapped is NOT_EAGER or not _policy.sized_ok(kind, acc[0]):
        return NOT_EAGER
    vals, kw = unwrapped
    res = _split.run(fn, vals, kw) if acc[0] >= _split.SPLIT_MIN_ROWS else fn(*vals, **kw)
    if fn in _split.BLAS_FUNCTIONS:
        _split.note_blas_for(vals)
    _count()
    return wrap(res, acc[1:])


def _count() -> None:
    STATS["ops_eager"] += 1


def try_ufunc(uf, args: tuple, out, kw: dict):
    """NumPy ufunc ``uf(*args, out=out, **kw)`` at once, or NOT_EAGER.  A lazy ``out`` (or
    tuple of them) is written through :func:`lazynp.core.graph.writable_view` and returned as
    NumPy returns its ``out``."""
    if out is None:
        if not kw and _joins_pending_tree(uf, args):
            return NOT_EAGER
        return eager_call(uf, args, kw, "elementwise")
    outs = out if type(out) is tuple else (out,)
    acc = [0]
    unwrapped = _unwrap_call(args, kw, acc)
    if unwrapped is NOT_EAGER:
        return NOT_EAGER
    vals, kwv = unwrapped
    size = acc[0]
    for o in outs:
        if o is not None and isinstance(o, ndarray):
            size = max(size, _policy.counted_size(o))
    if not _policy.sized_ok("elementwise", size) and not all(_shared(o) for o in outs):
        return NOT_EAGER     # (a write into a buffer the caller holds runs now: shared)
    targets = []
    for o in outs:
        if isinstance(o, ndarray):
            t = _graph.writable_view(o, o.size)
            if t is None:
                return NOT_EAGER
            targets.append(t)
        else:
            targets.append(o)
    uf(*vals, out=tuple(targets), **kwv)
    _count()
    return out


def _joins_pending_tree(uf, args: tuple) -> bool:
    """Does plain call ``uf(*args)`` read a pending lazy array of the size that records into
    tree kernels (``a * x + np.float64(c)``: NumPy scalars, NumPy arrays and such operands
    come here rather than through the ufunc's recording fast path)?  Then the recorder
    decides, as it does for ``a * x + c``: the op joins the array's tree kernel, or the
    array is computed and the op runs at once (lazynp.core.policy.decide); running it at once
    here would compute the pending tree alone and cut the chain."""
    for a in args:
        if isinstance(a, ndarray) and a._eager_value() is None:
            op = _UFUNC_OPS.get(uf.__name__)
            if op is None:
                return False
            if _policy.decide(op, _policy.counted_size(a)) == _policy.TREE:
                return True
    return False


def _shared(o) -> bool:
    """``o`` is a lazynp array whose buffer the caller holds too (see graph.run_now)."""
    if not isinstance(o, ndarray):
        return False
    v = o._v
    return bool(o._ext) if v is None else v.head.exported is True


def try_method(arr, name: str, args: tuple, kwargs: dict, kind: str):
    """``arr.name(*args, **kwargs)`` by NumPy's own method on ``arr``'s value, or NOT_EAGER."""
    if _policy.record_all:
        return NOT_EAGER
    v = value_for_eager(arr)
    if v is None or not _policy.sized_ok(kind, _policy.counted_size(v)):
        return NOT_EAGER
    shortcut = _shortcuts.METHODS.get(name)
    if args or kwargs:
        if shortcut is not None:
            return try_call(shortcut, (v,) + args, kwargs, "opaque", v)
        return try_call(getattr(v, name), args, kwargs, "opaque", v)
    res = shortcut(v) if shortcut is not None else getattr(v, name)()
    _count()
    return wrap(res, (v,))


def eager_first(np_fn, lazy_fn, kind: str = "opaque"):
    """``lazy_fn`` behind a first attempt to run NumPy's ``np_fn`` at once (for functions
    that return fresh data)."""
    if _native.ext is not None:
        f = _native.ext.EagerFirst(np_fn, lazy_fn, kind)    # (the same, in C)
        functools.update_wrapper(f, lazy_fn)
        f._lazynp_eager = np_fn
        _numpy_signature(f, lazy_fn)
        return f
    name = np_fn.__name__

    @functools.wraps(lazy_fn)
    def f(*args, **kwargs):
        if _devices.HOOK or kwargs and "device" in kwargs:    # (device hook)
            r = _devices.dispatch(name, np_fn, lazy_fn, args, kwargs)
            if r is not NOT_EAGER:
                return r
        if not _policy.record_all:
            r = eager_call(np_fn, args, kwargs, kind)
            if r is not NOT_EAGER:
                return r
        return lazy_fn(*args, **kwargs)
    f._lazynp_eager = np_fn
    _numpy_signature(f, lazy_fn)
    return f


def _numpy_signature(f, lazy_fn) -> None:
    """Give ``f`` NumPy's signature where ``lazy_fn`` takes ``(*args, **kwargs)`` (a
    generic recorder: ``inspect.signature(lazynp.take)`` is NumPy's, as is the call)."""
    try:
        params = list(inspect.signature(lazy_fn).parameters.values())
    except (TypeError, ValueError):
        return
    if [p.kind for p in params] != [inspect.Parameter.VAR_POSITIONAL,
                                    inspect.Parameter.VAR_KEYWORD]:
        return
    np_fn = getattr(np, getattr(lazy_fn, "__name__", ""), None)
    try:
        f.__signature__ = inspect.signature(np_fn)
    except (TypeError, ValueError):
        pass


#: The namespace functions that return fresh data, by the work kind the policy sizes them
#: with: they try NumPy at once first (:func:`eager_versions`).  View functions and
#: functions that write into an argument are not here: they go through the view and write
#: machinery, which keeps storage shared.  ("opaque": NumPy at once at any size, nothing to
#: fuse: percentile and quantile too, whose recorded versions took twice NumPy's time on
#: 2.4M elements.)
EAGER_KINDS = {
    "reduction": """sum prod nansum nanprod max amax min amin all any mean nanmean std var
        nanstd nanvar median nanmedian count_nonzero ptp argmax argmin nanargmax nanargmin
        nanmax nanmin average cumsum cumprod nancumsum nancumprod diff ediff1d""",
    "elementwise": """where clip nan_to_num round around isclose sinc i0 angle fix polyval
        interp copy""",
    "opaque": """allclose array_equal argpartition argsort argwhere bincount choose
        column_stack compress concat concatenate convolve corrcoef correlate cov cross
        diagflat digitize dot dstack einsum extract flatnonzero histogram histogram2d
        histogram_bin_edges histogramdd hstack inner intersect1d isin kron lexsort matmul
        percentile nanpercentile quantile nanquantile
        nonzero pad partition repeat roll searchsorted select setdiff1d setxor1d sort
        stack take take_along_axis tensordot tile tril triu union1d unique unique_all
        unique_counts unique_inverse unique_values vander vdot vstack row_stack tri eye
        identity zeros ones empty full zeros_like ones_like empty_like full_like arange
        linspace logspace geomspace indices trapezoid""",
}
_KIND_OF = {name: kind for kind, names in EAGER_KINDS.items() for name in names.split()}


def eager_versions(functions: dict) -> dict:
    """The eager-first versions (:func:`eager_first`) of the lazy functions in
    ``functions`` (a module's globals) that :data:`EAGER_KINDS` names, by name; those
    already eager-first (imported from a lower module) are left out.  NumPy's function
    tried first is the shortcut (:mod:`lazynp._numpy.shortcuts`) when there is one."""
    out = {}
    for name, fn in functions.items():
        kind = _KIND_OF.get(name)
        if kind is None or not hasattr(np, name) or hasattr(fn, "_lazynp_eager"):
            continue
        np_fn = _shortcuts.BY_NAME.get(name) or getattr(np, name)
        out[name] = eager_first(np_fn, fn, kind)
    return out


# The C versions of try_call and try_method (same decisions; they hand the cases they do not
# take to the Python versions above).
eager_call = try_call
eager_method = try_method
if _native.ext is not None:
    _native.ext.configure_eager(not_eager=NOT_EAGER, try_call=try_call,
                                    try_method=try_method, wrap=wrap)
    _native.ext.configure_device_hook(dispatch=_devices.dispatch)  # (device hook)
    _native.ext.set_device_hook(_devices.HOOK)
    eager_call = _native.ext.eager_call
    eager_method = _native.ext.eager_method
