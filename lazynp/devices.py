"""Devices: names, the default device, and the one placement rule.

A device is ``"cpu"`` or ``"cuda:N"`` (the array API's names; ``"cuda"`` means
``"cuda:0"``).  This module is the one place that decides *which device runs a node*:
:func:`placement` looks at an op's operands and answers with a device, or raises the
``ValueError`` (naming both devices) that CuPy and PyTorch raise for operands on two
devices.  Python scalars and NumPy scalars belong to no device.

Nothing here imports Numba's CUDA target or CuPy: they are imported on the first use of a
device array (:mod:`lazynp.cuda.memory`), so ``import lazynp`` never fails or
slows down without a GPU.
"""
from __future__ import annotations

import contextlib
import threading

import numpy as np

from ._base import native as _native

__all__ = ["Device", "device", "default_device", "get_default_device", "placement"]


class Device:
    """A device: ``kind`` (``"cpu"`` or ``"cuda"``) and ``index``.  Compares equal to its
    name, so ``a.device == "cuda:0"`` holds."""

    __slots__ = ("kind", "index", "name")

    def __init__(self, kind: str, index: int = 0):
        self.kind = kind
        self.index = index
        self.name = "cpu" if kind == "cpu" else f"cuda:{index}"

    def __repr__(self) -> str:
        return f"device({self.name!r})"

    def __str__(self) -> str:
        return self.name

    def __eq__(self, other) -> bool:
        if isinstance(other, Device):
            return other.name == self.name
        if isinstance(other, str):
            try:
                return device(other).name == self.name
            except ValueError:
                return False
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self.name)

    @property
    def is_cuda(self) -> bool:
        return self.kind == "cuda"


CPU = Device("cpu")
_cache: dict = {"cpu": CPU}


def device(spec) -> Device:
    """The :class:`Device` named by ``spec``: ``"cpu"``, ``"cuda"``, ``"cuda:N"``, an int
    (a CUDA device number) or a :class:`Device`.

    Raises
    ------
    ValueError
        For any other name.
    """
    if isinstance(spec, Device):
        return spec
    if spec is None:
        return get_default_device()
    d = _cache.get(spec)
    if d is not None:
        return d
    if isinstance(spec, (int, np.integer)) and not isinstance(spec, bool):
        if spec < 0:
            raise ValueError(f"lazynp: invalid device number {spec}")
        d = Device("cuda", int(spec))
    elif isinstance(spec, str):
        s = spec.strip().lower()
        if s == "cpu":
            d = CPU
        elif s in ("cuda", "gpu"):
            d = Device("cuda", 0)
        elif s.startswith(("cuda:", "gpu:")) and s.split(":", 1)[1].isdigit():
            d = Device("cuda", int(s.split(":", 1)[1]))
        else:
            raise ValueError(f"lazynp: unknown device {spec!r} (use 'cpu', 'cuda' or "
                             f"'cuda:N')")
    else:
        dev = getattr(spec, "id", None)      # a CuPy Device object
        if isinstance(dev, int):
            return device(dev)
        raise ValueError(f"lazynp: unknown device {spec!r} (use 'cpu', 'cuda' or 'cuda:N')")
    _cache[spec] = d
    return d


_local = threading.local()


def get_default_device() -> Device:
    """The device new arrays go to when no ``device=`` is given (``"cpu"`` unless inside
    :func:`default_device`)."""
    return getattr(_local, "device", CPU)


@contextlib.contextmanager
def default_device(spec):
    """``with lazynp.default_device("cuda:0"):`` creation functions without ``device=``
    put their arrays on that device (per thread)."""
    global DEFAULTS_OPEN, HOOK
    d = device(spec)
    old = get_default_device()
    _local.device = d
    DEFAULTS_OPEN += 1
    HOOK = True
    _hook_changed()
    try:
        yield d
    finally:
        DEFAULTS_OPEN -= 1
        HOOK = ACTIVE or DEFAULTS_OPEN > 0
        _hook_changed()
        _local.device = old


def device_of(x):
    """The device of an operand: a :class:`Device` for arrays (lazynp's, NumPy's, CuPy's,
    anything with ``__cuda_array_interface__``), None for Python and NumPy scalars."""
    if getattr(type(x), "_lazynp_device_array", False):
        return x._device
    if isinstance(x, (bool, int, float, complex, np.generic)) or x is None:
        return None
    if hasattr(x, "__cuda_array_interface__"):
        return foreign_device(x)
    return CPU


def foreign_device(x) -> Device:
    """The device of another library's GPU array (CuPy's ``.device.id``, else 0)."""
    dev = getattr(x, "device", None)
    idx = getattr(dev, "id", None)
    return Device("cuda", idx) if isinstance(idx, int) and idx > 0 else device("cuda:0")


def placement(args, name: str = "operation") -> Device:
    """Which device runs an op on ``args`` (arrays and scalars): the device every array
    operand lives on.

    Raises
    ------
    ValueError
        When array operands live on two devices (the message names both).
    """
    found = None
    for a in args:
        d = device_of(a)
        if d is None:
            continue
        if found is None:
            found = d
        elif d != found:
            raise ValueError(f"lazynp: {name}: operands are on two devices, {found.name} "
                             f"and {d.name}; move one with .to_device(...)")
    return CPU if found is None else found


def is_foreign_gpu_array(x) -> bool:
    """True for another library's GPU array (``__cuda_array_interface__``: CuPy, PyTorch,
    Numba; Numba's simulated device arrays too)."""
    t = type(x)
    return hasattr(t, "__cuda_array_interface__") or getattr(t, "__cuda_ndarray__", False)


def is_device_array(x) -> bool:
    """True for a lazynp array on a CUDA device (cheap: a class attribute)."""
    return getattr(type(x), "_lazynp_device_array", False)


# --- the hooks of the CPU namespace (cheap tests, then the device path) --------------------

#: True once a device array exists: the CPU paths test this flag before anything else
ACTIVE = False
#: the number of open :func:`default_device` blocks (creation functions test it)
DEFAULTS_OPEN = 0
#: ACTIVE or DEFAULTS_OPEN: the one flag the eager-first functions test
HOOK = False


def activate() -> None:
    global ACTIVE, HOOK
    ACTIVE = HOOK = True
    _hook_changed()


def _hook_changed() -> None:
    """Tell the C eager-first functions :data:`HOOK`'s new value."""
    if _native.ext is not None:
        _native.ext.set_device_hook(HOOK)


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
    """The CUDA device a creation function with ``device=spec`` puts its array on, or None
    for the CPU (``spec`` None: the default device)."""
    d = device(spec) if spec is not None else get_default_device()
    if d.kind == "cuda":
        activate()
        return d
    return None


def create(kind: str, dev: Device, shape: tuple, dtype, fill_value=None):
    """``zeros``/``ones``/``empty``/``full`` on a CUDA device."""
    from .cuda import array as device_array
    if kind == "empty":
        return device_array.empty(shape, dtype, dev)
    if kind != "full":
        fill_value = 0 if kind == "zeros" else 1
    return device_array.full(shape, fill_value, dtype, dev)


def asarray(a, spec, dtype=None, copy=None):
    """``lazynp.asarray(a, device=spec)`` where ``spec`` or ``a`` names a CUDA device;
    None when the result is an ordinary (CPU) array made the usual way."""
    from .cuda import array as device_array
    d = device(spec) if spec is not None else (a._device if is_device_array(a) else
                                               foreign_device(a) if is_foreign_gpu_array(a)
                                               else get_default_device())
    if d.kind != "cuda":
        if is_device_array(a):
            out = a.to_device("cpu")
            return out.astype(dtype) if dtype is not None and np.dtype(dtype) != out.dtype \
                else out
        return None
    activate()
    return device_array.asarray(a, d, dtype, copy)


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
    from .array.operands import NOT_EAGER
    on_dev = ACTIVE and (_nested_on_device(args) or _nested_on_device(kwargs.values()))
    wants = kwargs.get("device") is not None or DEFAULTS_OPEN
    if not on_dev and not wants:
        return NOT_EAGER
    if on_dev and name == "matmul" and len(args) == 2 and not kwargs:
        from .cuda.array import matmul
        return matmul(*args)
    if on_dev and name == "where" and len(args) == 3 and not kwargs:
        from .cuda.array import where
        return where(*args)
    if on_dev and name == "copy" and len(args) == 1 and not kwargs:
        return args[0].copy()
    if name in _DEVICE_FUNCS:
        return lazy_fn(*args, **kwargs)
    if not on_dev:
        return NOT_EAGER            # (a function without device=: the CPU path)
    from .cuda.array import call_at_once
    return call_at_once(name, np_fn, args, kwargs)


def _nested_on_device(items) -> bool:
    for a in items:
        if getattr(type(a), "_lazynp_device_array", False):
            return True
        if type(a) in (list, tuple) and _nested_on_device(a):
            return True
    return False
