"""Device memory, hiding which kind: CuPy arrays on a real GPU, Numba's simulated device
arrays under ``NUMBA_ENABLE_CUDASIM=1``.

Imported on the first use of a device (never by ``import lazynp``).  Every buffer lazynp
allocates is C-contiguous; views are (offset, shape, strides) geometries on a buffer,
realized with :func:`view`.
"""
from __future__ import annotations

import contextlib

import numpy as np

from ..devices.names import Device

_state: dict = {}


class DeviceUnavailable(RuntimeError):
    """A CUDA device was asked for where none can be used."""


def _load() -> dict:
    """Import Numba's CUDA target (and CuPy on a real GPU) once; which backend."""
    if _state:
        return _state
    try:
        from numba.core import config
        config.reload_config()      # (NUMBA_ENABLE_CUDASIM may be set after numba's import)
        from numba import cuda
    except ImportError as exc:      # pragma: no cover - numba-cuda missing
        raise DeviceUnavailable(
            "lazynp: CUDA devices need numba-cuda (pip install 'lazynp[gpu]'; "
            "NUMBA_ENABLE_CUDASIM=1 runs them on Numba's simulator)") from exc
    # (the simulator is chosen when numba.cuda is first imported, which may have been
    # before this call: ask the module that was imported)
    sim = cuda.is_available.__module__.endswith("simulator_init")
    cupy = None
    if not sim:
        try:
            available = cuda.is_available()
        except Exception:
            available = False
        if not available:
            raise DeviceUnavailable("lazynp: no CUDA GPU is usable here (NUMBA_ENABLE_CUDASIM=1 "
                                    "runs device code on Numba's simulator)")
        try:
            import cupy
        except ImportError as exc:
            raise DeviceUnavailable("lazynp: CUDA devices need CuPy on a real GPU "
                                    "(pip install 'lazynp[gpu]')") from exc
    _state.update(cuda=cuda, sim=sim, cupy=cupy)
    if sim:
        from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray
        _state["fake"] = FakeCUDAArray
    return _state


def simulated() -> bool:
    """True under Numba's CUDA simulator."""
    return _load()["sim"]


def library_arrays() -> bool:
    """True where NumPy's functions run on the device's buffers (CuPy arrays on a real
    GPU); False under the simulator, where they run on host copies (the tests' fake CuPy
    turns it on)."""
    return not _load()["sim"]


def cuda():
    return _load()["cuda"]


def device_count() -> int:
    st = _load()
    if st["sim"]:
        return 1
    return st["cupy"].cuda.runtime.getDeviceCount()


def check_device(dev: Device) -> None:
    if dev.index >= device_count():
        raise DeviceUnavailable(f"lazynp: device {dev.name} does not exist "
                                f"({device_count()} CUDA device(s))")


def device_context(dev: Device):
    """A context manager making ``dev`` current for Numba's launches and CuPy's calls
    (``cuda.gpus[i]`` and ``cupy.cuda.Device(i)``): kernels, streams and events of
    ``cuda:1`` must be made in device 1's context."""
    st = _load()
    n = st.get("count")
    if n is None:
        n = st["count"] = device_count()
    if n == 1:
        return _ONE_DEVICE          # (one context: nothing to select, no host cost)
    if st["sim"]:
        return st["cuda"].gpus[dev.index]
    return _BothContexts(st["cuda"].gpus[dev.index], st["cupy"].cuda.Device(dev.index))


_ONE_DEVICE = contextlib.nullcontext()


class _BothContexts:
    __slots__ = ("numba", "cupy")

    def __init__(self, numba_ctx, cupy_dev):
        self.numba = numba_ctx
        self.cupy = cupy_dev

    def __enter__(self):
        self.cupy.__enter__()
        try:
            self.numba.__enter__()
        except BaseException:
            self.cupy.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc):
        try:
            self.numba.__exit__(*exc)
        finally:
            self.cupy.__exit__(*exc)
        return False


def empty(dev: Device, shape: tuple, dtype) -> object:
    """An uninitialized C-contiguous buffer on ``dev``."""
    st = _load()
    if st["sim"]:
        return st["fake"](np.empty(shape, dtype))
    cp = st["cupy"]
    with cp.cuda.Device(dev.index):
        return cp.empty(shape, dtype)


def is_buffer(x) -> bool:
    """True for a device buffer of the current backend."""
    st = _load()
    return isinstance(x, st["fake"]) if st["sim"] else isinstance(x, st["cupy"].ndarray)


def view(buf, offset: int, shape: tuple, strides: tuple, dtype) -> object:
    """A strided view of ``buf`` (byte ``offset``, byte ``strides``)."""
    st = _load()
    dtype = np.dtype(dtype)
    if st["sim"]:
        return st["fake"](np.ndarray(shape, dtype, buffer=buf._ary, offset=offset,
                                     strides=strides))
    cp = st["cupy"]
    return cp.ndarray(shape, dtype, memptr=buf.data + offset, strides=strides)


def host_view(buf) -> np.ndarray:
    """Under the simulator, the NumPy array behind a device buffer (tests, host fallbacks
    that run as stream work)."""
    return buf._ary


def copy_host_to_device(dst, src: np.ndarray, stream) -> None:
    """Enqueue ``dst[...] = src`` (a host array) on ``stream`` (called from stream work)."""
    st = _load()
    if st["sim"]:
        np.copyto(dst._ary, src)
    else:
        dst.set(src, stream=stream.cupy)


def copy_device_to_host(dst: np.ndarray, src, stream) -> None:
    """Enqueue ``dst[...] = src`` (into a host array) on ``stream``."""
    st = _load()
    if st["sim"]:
        np.copyto(dst, src._ary)
    else:
        src.get(stream=stream.cupy, out=dst)


def copy_device_to_device(dst, src, stream) -> None:
    st = _load()
    if st["sim"]:
        np.copyto(dst._ary, src._ary)
    else:
        with stream.cupy:
            st["cupy"].copyto(dst, src)


_args: dict = {}


def kernel_arg(buf):
    """``buf`` as a Numba kernel argument (no host synchronize on the way).  Numba's
    wrappers are kept by (pointer, shape, strides, dtype): they hold no reference to the
    memory (the launch keeps ``buf`` alive until its kernel is done), so the same leaves
    read on every call of a loop are converted once."""
    st = _load()
    if st["sim"]:
        return buf
    key = (buf.data.ptr, buf.shape, buf.strides, buf.dtype.str)
    a = _args.get(key)
    if a is None:
        if len(_args) > 4096:
            _args.clear()
        a = _args[key] = st["cuda"].from_cuda_array_interface(
            buf.__cuda_array_interface__, owner=None, sync=False)
    return a


def interface(buf) -> dict:
    """``__cuda_array_interface__`` (version 3) of a buffer."""
    st = _load()
    if not st["sim"]:
        return buf.__cuda_array_interface__
    a = buf._ary
    return {"shape": a.shape, "typestr": a.dtype.str, "descr": a.dtype.descr,
            "data": (a.__array_interface__["data"][0], False),
            "strides": None if a.flags.c_contiguous else a.strides,
            "version": 3, "stream": None}


def from_foreign(x, dev: Device):
    """A buffer sharing the memory of another library's GPU array (CuPy, PyTorch, Numba):
    ``__cuda_array_interface__`` or DLPack (CuPy's ``asarray``: no copy), with the array's
    strides (it may not be C-contiguous)."""
    st = _load()
    if st["sim"]:
        if isinstance(x, st["fake"]):
            return x
        cai = getattr(x, "__cuda_array_interface__", None)
        if isinstance(cai, dict):       # (the simulator's device memory is the host's)
            return st["fake"](np.asarray(_HostInterface(cai, x)))
        raise TypeError("lazynp: under the simulator only Numba's simulated device arrays "
                        "and __cuda_array_interface__ objects can be wrapped")
    cp = st["cupy"]
    with cp.cuda.Device(dev.index):
        return cp.asarray(x)


class _HostInterface:
    """``__array_interface__`` from a ``__cuda_array_interface__`` (simulator only)."""

    def __init__(self, cai: dict, owner):
        self.__array_interface__ = {"data": cai["data"], "shape": tuple(cai["shape"]),
                                    "strides": cai.get("strides"), "typestr": cai["typestr"],
                                    "version": 3}
        self._owner = owner


def is_c_contiguous(buf) -> bool:
    """True for a C-contiguous buffer."""
    st = _load()
    if st["sim"]:
        return bool(buf._ary.flags.c_contiguous)
    return bool(buf.flags.c_contiguous)
