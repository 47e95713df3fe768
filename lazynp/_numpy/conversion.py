"""Converting array-likes into lazynp arrays: :func:`asarray`, and NumPy's creation
functions whose values are known at the call (:func:`values_now`).

A list holding lazy arrays, while everything is recorded (inside ``grad``/``jit``/
``record()``, or the lazy policy), becomes a lazy stack of them (:func:`nested_array`) so
that a gradient flows through it: the joining functions it is built from (``expand_dims``,
``concatenate``, ``stack``) are here too, below the rest of the namespace.
"""
from __future__ import annotations

import numpy as np
from numpy.lib.array_utils import normalize_axis_index

from . import fallback as _fallback
from .eager import eager_versions
from .outarg import call_with_out
from .. import devices as _devices
from ..array import views as _views
from ..array.calls import lazy_call
from ..array.ndarray import ndarray
from ..array.operands import to_numpy
from ..core import graph, policy as _policy


def has_lazy(obj) -> bool:
    """True when ``obj`` is or (in nested lists/tuples) holds a lazynp array."""
    if isinstance(obj, ndarray):
        return True
    if type(obj) in (list, tuple):
        return any(has_lazy(x) for x in obj)
    return False


def recording(obj) -> bool:
    """Build from recorded ops: lazy inputs while everything is recorded."""
    return bool(_policy.record_all) and has_lazy(obj)


def standins(obj):
    """``obj`` with each lazy array replaced by zeros of its shape and dtype."""
    if isinstance(obj, ndarray):
        return np.zeros(obj.shape, obj.dtype)
    if type(obj) is list:
        return [standins(x) for x in obj]
    if type(obj) is tuple:
        return tuple(standins(x) for x in obj)
    return obj


def nested_array(obj, dtype=None, ndmin=0):
    """``numpy.array(obj)`` for lists/tuples holding lazy arrays, as a stack of them."""
    proto = np.array(standins(obj), dtype=dtype, ndmin=ndmin)   # NumPy's dtype and errors
    dt = proto.dtype

    def build(o):
        if isinstance(o, ndarray):
            return o.astype(dt)
        if type(o) in (list, tuple) and len(o) and has_lazy(o):
            return stack([build(x) for x in o])
        return asarray(np.array(to_numpy(o), dtype=dt))

    out = build(obj)
    return out.reshape(proto.shape) if out.shape != proto.shape else out


def _shareable(a, dtype) -> bool:
    """A NumPy array ``asarray`` can wrap without copying, sharing its memory as NumPy
    does: an exact ``numpy.ndarray``, C-contiguous (lazynp buffers are C-ordered), of the
    requested dtype."""
    return type(a) is np.ndarray and a.flags.c_contiguous and \
        (dtype is None or np.dtype(dtype) == a.dtype)


def asarray(a, dtype=None, order=None, *, device=None, copy=None, like=None):
    """Convert to a lazynp array: lazy arrays pass through, a C-contiguous NumPy array is
    wrapped sharing its memory (as NumPy's ``asarray``; work on it runs at once, so the
    NumPy array's later writes are seen as NumPy would see them), other data is copied."""
    if device is not None:                                   # (device hook)
        res = _devices.asarray(a, device, dtype, copy)
        if res is not None:
            return res
    if isinstance(a, ndarray):
        if dtype is not None and np.dtype(dtype) != a.dtype:
            if copy is False:
                raise ValueError("Unable to avoid copy while creating an array as requested.")
            return a.astype(dtype)
        return a.copy() if copy else a
    if _devices.HOOK and (_devices.is_device_array(a) or _devices.DEFAULTS_OPEN):
        res = _devices.asarray(a, None, dtype, copy)         # (device hook)
        if res is not None:
            return res
    if not copy and not _policy.record_all and _shareable(a, dtype):
        return ndarray._from_shared(a)    # (recording everything: a snapshot, below)
    if type(a) is not np.ndarray and _devices.is_foreign_gpu_array(a):
        return _devices.asarray(a, None, dtype, copy)       # (device hook: CuPy, torch...)
    if type(a) is not np.ndarray and _devices.is_dask_array(a):
        return _devices.asarray(a, None, dtype, copy)       # (device hook: dask.array)
    if recording(a):       # a list holding lazy arrays: a lazy stack
        return nested_array(a, dtype)
    if copy is False:
        res = np.asarray(to_numpy(a), dtype=dtype)     # NumPy's error when a copy is needed
        if not res.flags.c_contiguous:
            raise ValueError("lazynp.asarray(copy=False): lazynp arrays are C-ordered; this "
                             "array would need a copy")
    value = np.array(to_numpy(a), dtype=dtype, order="C", copy=True)
    return ndarray._from_node(graph.leaf(value))


def values_now(np_fn, recorded=None):
    """Creation functions whose values are known at the call: run NumPy now, wrap a leaf.
    ``recorded``: the version built from recorded ops, taken for lazy endpoints while
    everything is recorded (differentiable)."""
    lazy = recorded

    def f(*args, **kwargs):
        device = kwargs.pop("device", None)
        if device is not None or _devices.DEFAULTS_OPEN:     # (device hook)
            d = _devices.creation_target(device)
            if d is not None:
                if d.kind == "dask" and np_fn.__name__ in ("arange", "linspace"):
                    return _devices.create_range(np_fn.__name__, args, kwargs, d)
                return _devices.asarray(np_fn(*to_numpy(args), **to_numpy(kwargs)), d)
        if lazy is not None and recording(args[:2]):
            return lazy(*args, **kwargs)        # lazy endpoints: recorded (differentiable)
        res = np_fn(*to_numpy(args), **to_numpy(kwargs))
        if isinstance(res, tuple):
            res = tuple(ndarray._from_node(graph.leaf(np.asarray(r, order="C"))) for r in res)
        else:
            res = ndarray._from_node(graph.leaf(np.asarray(res, order="C")))
        return _fallback.forced("numpy." + np_fn.__name__, (args, kwargs), res)
    f.__name__ = np_fn.__name__
    f.__doc__ = np_fn.__doc__
    return f


def is_numpy_subclass(a) -> bool:
    """Is ``a`` an instance of a NumPy ndarray subclass (``numpy.ma.MaskedArray``, a user's
    subclass)?  lazynp's view functions give those to NumPy, which keeps their class (and a
    masked array's mask) as lazynp's arrays cannot."""
    return isinstance(a, np.ndarray) and type(a) is not np.ndarray


def expand_dims(a, axis):
    if is_numpy_subclass(a):
        return np.expand_dims(a, axis)
    return _views.view_from_start(asarray(a), np.expand_dims, axis)


_PY_SCALARS = (bool, int, float, complex)


def concatenate(arrays, axis=0, out=None, *, dtype=None, casting="same_kind"):
    """Lazy ``numpy.concatenate``."""
    _check_count(arrays)
    if out is not None:
        kw = {"axis": axis, "casting": casting}
        if dtype is not None:
            kw["dtype"] = dtype
        return call_with_out("concatenate", np.concatenate, (arrays,), kw, out)
    arrays = list(arrays)
    arrs = [asarray(a) for a in arrays]
    if not arrs:
        raise ValueError("need at least one array to concatenate")
    # with axis=None, bare Python scalars stay weakly typed (NEP 50) as in NumPy's call
    # (the flattened arrays are joined the same way, with axis=None)
    weak = axis is None
    if axis is None:
        arrs = [a.reshape(-1) for a in arrs]
        axis = 0
    tw = [np.zeros(tuple(s if i == axis or (axis < 0 and i == a.ndim + axis) else min(s, 1)
                         for i, s in enumerate(a.shape)) if a.ndim else (), a.dtype)
          for a in arrs]
    kw = {"casting": casting} if dtype is None else {"dtype": dtype, "casting": casting}
    if weak:
        tw = [a if type(a) in _PY_SCALARS else t for a, t in zip(arrays, tw)]
        arrs = [a if type(a) in _PY_SCALARS else t for a, t in zip(arrays, arrs)]
        dt = np.concatenate(tw, axis=None, **kw).dtype      # NumPy's errors
        shape = (sum(1 if type(a) in _PY_SCALARS else a.shape[0] for a in arrs),)
        res = lazy_call("concatenate", np.concatenate, (arrs,), dict(kw, axis=None),
                        meta=lambda n, t: (shape, dt))
        if out is not None:
            out[...] = res
            return out
        return res
    np.concatenate(tw, axis=axis, **kw)  # NumPy's errors (ndim, dtype casting)
    nd = arrs[0].ndim
    ax = normalize_axis_index(axis, nd)
    for i, a in enumerate(arrs[1:], 1):
        for d in range(nd):
            if d != ax and a.shape[d] != arrs[0].shape[d]:
                raise ValueError("all the input array dimensions except for the concatenation "
                                 f"axis must match exactly, but along dimension {d}, the array "
                                 f"at index 0 has size {arrs[0].shape[d]} and the array at "
                                 f"index {i} has size {a.shape[d]}")
    dt = np.concatenate(tw, axis=axis, **kw).dtype
    shape = list(arrs[0].shape)
    shape[ax] = sum(a.shape[ax] for a in arrs)
    res = lazy_call("concatenate", np.concatenate, (arrs,), dict(kw, axis=ax),
                    meta=lambda n, t: (tuple(shape), dt))
    if out is not None:
        out[...] = res
        return out
    return res


concat = concatenate


def _check_count(arrays) -> None:
    """NumPy's checks of ``concatenate``'s sequence before any work: more arrays than a C int
    counts is a ValueError (never a list of 2**31 references)."""
    try:
        n = len(arrays)
    except TypeError:
        return
    if n > _MAX_INTC:
        raise ValueError(f"concatenate() only supports up to {_MAX_INTC} arrays but got {n}.")


_MAX_INTC = int(np.iinfo(np.intc).max)


def stack(arrays, axis=0, out=None, *, dtype=None, casting="same_kind"):
    if out is not None:
        kw = {"axis": axis, "casting": casting}
        if dtype is not None:
            kw["dtype"] = dtype
        return call_with_out("stack", np.stack, (arrays,), kw, out)
    arrs = [asarray(a) for a in arrays]
    if not arrs:
        raise ValueError("need at least one array to stack")
    if any(a.shape != arrs[0].shape for a in arrs):
        raise ValueError("all input arrays must have the same shape")
    ax = normalize_axis_index(axis, arrs[0].ndim + 1)
    return concatenate([expand_dims(a, ax) for a in arrs], axis=ax, out=out, dtype=dtype,
                       casting=casting)


globals().update(eager_versions(globals()))     # (concatenate, concat, stack)


class NpzFile(np.lib.npyio.NpzFile):
    """NumPy's ``NpzFile`` (what ``load`` gives for a ``.npz`` file) whose members are
    lazynp arrays, as ``load`` of a ``.npy`` file gives one."""

    def __getitem__(self, key):
        return _fallback.wrap_result(super().__getitem__(key))


def load(file, mmap_mode=None, allow_pickle=False, fix_imports=True, encoding="ASCII", *,
         max_header_size=10000):
    """``numpy.load``: a lazynp array for a ``.npy`` file, an ``NpzFile`` of lazynp arrays
    for a ``.npz`` file (NumPy's reading, its errors; counted as a fallback)."""
    if _devices.DEFAULTS_OPEN and mmap_mode in (None, "r"):       # (device hook)
        res = _devices.load_call("load", (file,), {})
        if res is not None:
            return res
    res = _fallback.call_numpy(np.load, "load", (file,),
                               {"mmap_mode": mmap_mode, "allow_pickle": allow_pickle,
                                "fix_imports": fix_imports, "encoding": encoding,
                                "max_header_size": max_header_size})
    if type(res) is np.lib.npyio.NpzFile:
        res.__class__ = NpzFile
    return res


load.__doc__ = (load.__doc__ or "") + "\n" + (np.load.__doc__ or "")


def fromfile(file, dtype=float, count=-1, sep="", offset=0, *, like=None):
    """``numpy.fromfile`` (NumPy's reading, counted as a fallback); inside
    ``default_device("dask")`` a raw binary file is read chunk by chunk on the workers."""
    if _devices.DEFAULTS_OPEN and not sep:                          # (device hook)
        res = _devices.load_call("fromfile", (file, dtype),
                                 {"count": count, "offset": offset})
        if res is not None:
            return res
    return _fallback.call_numpy(np.fromfile, "fromfile", (file,),
                                {"dtype": dtype, "count": count, "sep": sep,
                                 "offset": offset})
_concatenate_eager_first = concatenate


def concatenate(arrays, /, axis=0, out=None, *, dtype=None, casting="same_kind"):
    """``numpy.concatenate``: NumPy at once or recorded (the count of arrays is checked
    before either walks them)."""
    _check_count(arrays)
    if out is None and dtype is None and casting == "same_kind":
        return _concatenate_eager_first(arrays, axis)
    return _concatenate_eager_first(arrays, axis, out=out, dtype=dtype, casting=casting)


concatenate._lazynp_eager = _concatenate_eager_first._lazynp_eager
concat = concatenate
