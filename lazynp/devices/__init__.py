"""Devices: names, the default device, the one placement rule, and the device hooks.

A device is ``"cpu"`` or ``"cuda:N"`` (:mod:`lazynp.devices.names`: :class:`Device`,
:func:`device`, :func:`placement`).  The CPU namespace reaches a device only through the
hooks below: each is one call, tried when a cheap flag says a device may be involved
(:data:`ACTIVE`, :data:`DEFAULTS_OPEN`, :data:`HOOK`), and each calls the backend's entry
point from the registry (:mod:`lazynp.devices.registry`).

The backend (:mod:`lazynp.cuda`) is a plug-in: :func:`activate` loads it on the first use of a
CUDA device (as tinygrad's ``Device`` loads ``runtime/ops_<x>.py``), and it registers itself
at its import.  Nothing here imports Numba's CUDA target or CuPy: the backend imports them on
the first use of a device array (:mod:`lazynp.cuda.memory`), so ``import lazynp`` never fails
or slows down without a GPU.
"""
from __future__ import annotations

import contextlib

import numpy as np

from .._base import native as _native
from ..core.policy import NOT_EAGER
from .names import (CPU, Device, device, device_of, foreign_device,  # noqa: F401
                    get_default_device, is_device_array, is_foreign_gpu_array, placement,
                    set_default_device)
from .options import dask_options, pop_dask_options, push_dask_options
from .registry import Backend, registered_backend

__all__ = ["Device", "device", "default_device", "get_default_device", "placement",
           "dask_shutdown", "to_zarr", "from_zarr"]


# --- the flags the CPU paths test before anything else -----------------------------------

#: True once a device array exists (the backend has loaded)
ACTIVE = False
#: the number of open :func:`default_device` blocks (creation functions test it)
DEFAULTS_OPEN = 0
#: ACTIVE or DEFAULTS_OPEN: the one flag the eager-first functions test (the C recorder
#: is told each change: :func:`_hook_changed`)
HOOK = False


def _hook_changed() -> None:
    """Tell the C eager-first functions :data:`HOOK`'s new value."""
    if _native.ext is not None:
        _native.ext.set_device_hook(HOOK)


_UNSET = object()


@contextlib.contextmanager
def default_device(spec, *, chunks=_UNSET, client=_UNSET):
    """``with lazynp.default_device("cuda:0"):`` creation functions without ``device=``
    put their arrays on that device (per thread).

    ``"dask"``: chunked arrays on a dask cluster; ``chunks`` (dask's ``chunks``: ``"auto"``,
    a size, a tuple) says how creation functions and ``asarray`` chunk, ``client`` (a
    ``distributed.Client``) which cluster runs them; ``None`` (the default): an embedded
    ``LocalCluster`` of this machine, started at the first flush that needs it and closed
    at exit or by :func:`dask_shutdown` (leaving the block does not close it: arrays made
    inside stay readable).
    """
    global DEFAULTS_OPEN, HOOK
    d = device(spec)
    if d.kind != "dask" and (chunks is not _UNSET or client is not _UNSET):
        raise TypeError(f"lazynp.default_device({d.name!r}): chunks= and client= are for "
                        f"the 'dask' device")
    if d.kind == "dask":
        activate("dask")
        push_dask_options("auto" if chunks is _UNSET else chunks,
                          None if client is _UNSET else client)
    old = set_default_device(d)
    DEFAULTS_OPEN += 1
    HOOK = True
    _hook_changed()
    try:
        yield d
    finally:
        DEFAULTS_OPEN -= 1
        HOOK = ACTIVE or DEFAULTS_OPEN > 0
        _hook_changed()
        set_default_device(old)
        if d.kind == "dask":
            pop_dask_options()


def activate(kind: str = "cuda") -> Backend:
    """Load the backend of ``kind`` (``"cuda"`` or ``"dask"``; once: it registers itself)
    and turn the device hooks on; returns the backend."""
    global ACTIVE, HOOK
    backend = registered_backend(kind)
    if backend is None:
        # the plug-in loads of the backends (listed in pyproject's ignore_imports)
        if kind == "dask":
            from ..dask import array as _dask_backend  # noqa: F401
        else:
            from ..cuda import array as _cuda_backend  # noqa: F401
        backend = registered_backend(kind)
    if not ACTIVE:
        ACTIVE = HOOK = True
        _hook_changed()
    return backend


def _backend(kind: str = "cuda") -> Backend:
    """The loaded backend of ``kind`` (the hooks call it once :data:`ACTIVE` is set)."""
    return registered_backend(kind)


def _kind_of(items) -> str:
    """The device kind of the first device array among ``items`` (nested lists and tuples
    walked); None when there is none."""
    for a in items:
        if getattr(type(a), "_lazynp_device_array", False):
            return a._device.kind
        if type(a) in (list, tuple):
            k = _kind_of(a)
            if k is not None:
                return k
    return None


def to_zarr(x, path, **kwargs) -> None:
    """Write the chunked (``"dask"``) array ``x`` to a zarr store at ``path``, chunk by
    chunk on the workers (nothing is gathered; ``kwargs``: dask's ``to_zarr``'s).

    Raises
    ------
    ImportError
        When zarr is not installed.
    TypeError
        When ``x`` is not a chunked array.
    """
    backend = activate("dask")
    if not is_device_array(x) or x._device.kind != "dask":
        raise TypeError(f"lazynp.to_zarr: a chunked (dask) array is needed, not "
                        f"{type(x).__name__}; make one with lazynp.asarray(x, device='dask')")
    backend.to_zarr(x, path, **kwargs)


def from_zarr(path, **kwargs):
    """The zarr store at ``path`` as a chunked (``"dask"``) array, read chunk by chunk on
    the workers.

    Raises
    ------
    ImportError
        When zarr is not installed.
    """
    return activate("dask").from_zarr(path, **kwargs)


def dask_shutdown() -> bool:
    """Close the embedded dask ``LocalCluster`` that chunked arrays started (a cluster of a
    given ``client=`` is left open); True when one was running.  Also runs at exit."""
    backend = registered_backend("dask")
    return bool(backend is not None and backend.shutdown())


# --- the hooks of the CPU namespace (each one call, after a cheap test of the flags) -------

def any_on_device(args, out=None) -> bool:
    """True when an operand (or ``out``) is a device array (lazynp ufunc hook)."""
    for a in args:
        if getattr(type(a), "_lazynp_device_array", False):
            return True
    if out is not None:
        for o in (out if isinstance(out, tuple) else (out,)):
            if getattr(type(o), "_lazynp_device_array", False):
                return True
    return False


def creation_target(spec):
    """The device (CUDA or dask) a creation function with ``device=spec`` puts its array
    on, or None for the CPU (``spec`` None: the default device)."""
    d = device(spec) if spec is not None else get_default_device()
    if d.kind != "cpu":
        activate(d.kind)
        return d
    return None


def create(kind: str, spec, shape: tuple, dtype, fill_value=None):
    """``zeros``/``ones``/``empty``/``full`` (``kind``) with ``device=spec`` (None: the
    default device) when that is a CUDA device; None for the CPU (the caller makes it).
    ``dtype`` None: ``fill_value``'s for ``full``, else float."""
    d = creation_target(spec)
    if d is None:
        return None
    if dtype is None:
        dtype = np.array(fill_value).dtype if kind == "full" else float
    return _backend(d.kind).create(kind, d, shape, dtype, fill_value)


def like_device(prototype, spec):
    """The device of ``*_like(prototype, device=spec)``: ``spec``, else the prototype's."""
    return spec if spec is not None or not ACTIVE or not is_device_array(prototype) else \
        prototype.device


def asarray(a, spec, dtype=None, copy=None):
    """``lazynp.asarray(a, device=spec)`` where ``spec`` or ``a`` names a CUDA device;
    None when the result is an ordinary (CPU) array made the usual way."""
    d = device(spec) if spec is not None else (a._device if is_device_array(a) else
                                               foreign_device(a) if is_foreign_gpu_array(a)
                                               else device("dask") if is_dask_array(a)
                                               else get_default_device())
    if d.kind == "cpu":
        if is_device_array(a):
            out = a.to_device("cpu")
            return out.astype(dtype) if dtype is not None and np.dtype(dtype) != out.dtype \
                else out
        return None
    return activate(d.kind).asarray(a, d, dtype, copy)


def is_dask_array(a) -> bool:
    """True for a ``dask.array.Array`` (without importing dask)."""
    t = type(a)
    return t.__name__ == "Array" and t.__module__.startswith("dask.array")


def create_range(name: str, args, kwargs, d):
    """``arange``/``linspace`` on the chunked device ``d`` (made chunk-wise on the
    workers), or None when its backend makes them from host values."""
    fn = activate(d.kind).create_range
    return None if fn is None else fn(name, args, kwargs)


def random_call(np_method, args, kwargs):
    """A NumPy ``Generator`` method's draw on the default device when that is chunked
    (``"dask"``), or None."""
    d = get_default_device()
    if d.kind != "dask":
        return None
    return activate(d.kind).random(np_method, args, kwargs)


def load_call(name: str, args, kwargs):
    """``load``/``fromfile``/``memmap`` of a file on the default device when that is
    chunked (``"dask"``): a chunked array read by the workers; None otherwise."""
    d = get_default_device()
    if d.kind != "dask":
        return None
    backend = activate(d.kind)
    arr = backend.load(name, args, kwargs, dask_options()["chunks"])
    return None if arr is None else backend.asarray(arr, d)


def ufunc_call(np_ufunc, args, out=None, *, where=True, dtype=None, signature=None):
    """``np_ufunc(*args, out=out)`` with an operand (or ``out``) on a device (the hook of
    lazynp's ufuncs)."""
    if where is not True or dtype is not None or signature is not None:
        raise NotImplementedError(f"lazynp: {np_ufunc.__name__}(where=, dtype=, "
                                  f"signature=) is not implemented on device arrays")
    kind = _kind_of(args) or _kind_of(out if isinstance(out, tuple) else (out,)) or "cuda"
    return _backend(kind).ufunc_call(np_ufunc, args, {"out": out})


def reduce(name: str, a, axis=None, dtype=None, out=None, keepdims=False, kw=None,
           where=True):
    """``numpy.<name>(a, ...)`` of a device array (the hook of lazynp's reductions)."""
    return _backend(a._device.kind).reduce(name, a, axis, dtype, out, keepdims, kw, where)


def evaluate(arrays) -> None:
    """Run what the device arrays among ``arrays`` need and wait for them (the device part
    of :func:`lazynp.evaluate`)."""
    if ACTIVE:
        by_kind: dict = {}
        for a in arrays:
            if is_device_array(a):
                by_kind.setdefault(a._device.kind, []).append(a)
        for kind, arrs in by_kind.items():
            _backend(kind).evaluate(arrs)


#: lazynp functions that take device arrays (through the namespace's device hooks)
_DEVICE_FUNCS = frozenset("""sum prod max amax min amin all any mean std var argmax argmin
    zeros ones empty full zeros_like ones_like empty_like full_like arange linspace logspace
    geomspace""".split())


def dispatch(name: str, np_fn, lazy_fn, args, kwargs):
    """The device path of a namespace function that first tries NumPy at once
    (:func:`lazynp._numpy.eager.eager_first`): when a device is involved (an operand on a
    device, ``device=``, an open :func:`default_device` block) its device version -- lazy
    for creation, reductions, ``where``, ``matmul``; otherwise NumPy's function run at once
    on the device's values (CuPy on a real GPU, the host under the simulator: counted) --
    else ``NOT_EAGER`` (the CPU path goes on)."""
    on_dev = ACTIVE and (_nested_on_device(args) or _nested_on_device(kwargs.values()))
    wants = kwargs.get("device") is not None or DEFAULTS_OPEN
    if not on_dev and not wants:
        return NOT_EAGER
    kind = (_kind_of(args) or _kind_of(tuple(kwargs.values())) or "cuda") if on_dev else None
    if on_dev and name == "matmul" and len(args) == 2 and not kwargs:
        return _backend(kind).matmul(*args)
    if on_dev and name == "where" and len(args) == 3 and not kwargs:
        return _backend(kind).where(*args)
    if on_dev and name == "copy" and len(args) == 1 and not kwargs:
        return args[0].copy()
    if name in _DEVICE_FUNCS:
        return lazy_fn(*args, **kwargs)
    if not on_dev:
        return NOT_EAGER            # (a function without device=: the CPU path)
    return _backend(kind).call_at_once(name, np_fn, args, kwargs)


def _nested_on_device(items) -> bool:
    for a in items:
        if getattr(type(a), "_lazynp_device_array", False):
            return True
        if type(a) in (list, tuple) and _nested_on_device(a):
            return True
    return False
