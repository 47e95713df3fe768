"""Device names, the default device, and the one placement rule.

A device is ``"cpu"``, ``"cuda:N"`` (the array API's names; ``"cuda"`` means
``"cuda:0"``) or ``"dask"`` (chunked arrays on a dask cluster).  :func:`placement` is the
one place that decides *which device runs a node*: it looks at an op's operands and
answers with a device, or raises the ``ValueError``
(naming both devices) that CuPy and PyTorch raise for operands on two devices.  Python
scalars and NumPy scalars belong to no device.

The device backend (:mod:`lazynp.cuda`) imports this module, never :mod:`lazynp.devices`'
front, which loads the backend.
"""
from __future__ import annotations

import threading

import numpy as np

__all__ = ["Device", "CPU", "device", "get_default_device", "set_default_device", "device_of",
           "foreign_device", "placement", "is_foreign_gpu_array", "is_device_array"]


class Device(str):
    """A device: ``kind`` (``"cpu"``, ``"cuda"`` or ``"dask"``) and ``index``.  It is the
    string of its name, so ``a.device == "cuda:0"`` holds and NumPy's functions take
    ``device('cpu')`` where they take ``"cpu"`` (``numpy.zeros(3, device=a.device)``)."""

    def __new__(cls, kind: str, index: int = 0):
        name = kind if kind in ("cpu", "dask") else f"cuda:{index}"
        self = super().__new__(cls, name)
        self.kind = kind
        self.index = index
        self.name = name
        return self

    def __reduce__(self):
        return (Device, (self.kind, self.index))

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

    def __ne__(self, other) -> bool:
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    def __hash__(self) -> int:
        return hash(self.name)

    @property
    def is_cuda(self) -> bool:
        return self.kind == "cuda"


CPU = Device("cpu")
_cache: dict = {"cpu": CPU}


def device(spec) -> Device:
    """The :class:`Device` named by ``spec``: ``"cpu"``, ``"cuda"``, ``"cuda:N"``,
    ``"dask"``, an int (a CUDA device number) or a :class:`Device`.

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
        elif s == "dask":
            d = Device("dask")
        elif s in ("cuda", "gpu"):
            d = Device("cuda", 0)
        elif s.startswith(("cuda:", "gpu:")) and s.split(":", 1)[1].isdigit():
            d = Device("cuda", int(s.split(":", 1)[1]))
        else:
            raise ValueError(f"lazynp: unknown device {spec!r} (use 'cpu', 'cuda', "
                             f"'cuda:N' or 'dask')")
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
    :func:`lazynp.default_device`)."""
    return getattr(_local, "device", CPU)


def set_default_device(d: Device) -> Device:
    """Make ``d`` this thread's default device; returns the one it replaces."""
    old = get_default_device()
    _local.device = d
    return old


def device_of(x):
    """The device of an operand: a :class:`Device` for arrays (lazynp's, NumPy's, CuPy's,
    anything with ``__cuda_array_interface__``), None for Python and NumPy scalars."""
    if getattr(type(x), "_lazynp_device_array", False):
        return x._device
    if isinstance(x, (bool, int, float, complex, np.generic)) or x is None:
        return None
    if is_foreign_gpu_array(x):
        return foreign_device(x)
    return CPU


_DLPACK_CUDA = (2, 3, 13)        # (kDLCUDA, kDLCUDAHost, kDLCUDAManaged)


def foreign_device(x) -> Device:
    """The CUDA device of another library's GPU array: DLPack's ``__dlpack_device__()``,
    else ``.device`` (CuPy's and JAX's ``.id``, PyTorch's ``.index``), else a Numba device
    array's context (a simulated one: ``cuda:0``).

    Raises
    ------
    ValueError
        When the array does not say which device it is on.
    """
    dl = getattr(x, "__dlpack_device__", None)
    if dl is not None:
        try:
            kind, idx = dl()
        except Exception:
            kind = idx = None
        if kind in _DLPACK_CUDA and isinstance(idx, (int, np.integer)):
            return Device("cuda", int(idx))
    dev = getattr(x, "device", None)
    idx = getattr(dev, "id", None)
    if idx is None and getattr(dev, "type", None) == "cuda":
        idx = getattr(dev, "index", None)
    if isinstance(idx, (int, np.integer)) and not isinstance(idx, bool):
        return Device("cuda", int(idx))
    data = getattr(x, "gpu_data", None)              # a Numba device array
    ctx = getattr(data, "context", None)
    idx = getattr(getattr(ctx, "device", None), "id", None)
    if isinstance(idx, int):
        return Device("cuda", idx)
    if getattr(type(x), "__cuda_ndarray__", False) and hasattr(x, "_ary"):
        return Device("cuda", 0)                     # (Numba's simulator: one device)
    raise ValueError(f"lazynp: cannot tell which CUDA device a {type(x).__name__} is on; "
                     f"pass device='cuda:N'")


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
    if getattr(t, "_lazynp_device_array", False):
        return False                    # (lazynp's own; reading its interface would wait)
    if getattr(t, "__cuda_ndarray__", False):
        return True
    if not hasattr(t, "__cuda_array_interface__"):
        return False
    # (the instance decides: a CPU torch.Tensor or jax.Array has the property on its type,
    # which raises for it)
    try:
        return isinstance(x.__cuda_array_interface__, dict)
    except Exception:
        return False


def is_device_array(x) -> bool:
    """True for a lazynp array on a CUDA device (cheap: a class attribute)."""
    return getattr(type(x), "_lazynp_device_array", False)
