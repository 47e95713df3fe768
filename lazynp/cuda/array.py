"""Arrays on a CUDA device: ``lazynp.asarray(x, device="cuda")``.

A :class:`DeviceArray` is a handle on a device storage Var plus a view geometry, like
``lazynp.ndarray`` on the CPU, and as lazy: operators, lazynp's ufuncs and reductions
*record* device nodes (:mod:`lazynp.cuda.runtime`) that run as fused Numba CUDA
kernels on the device's streams when a value is needed.  It is its own class (as CuPy's
array is not NumPy's): ``isinstance(a, lazynp.ndarray)`` is False for it.

Printing, ``numpy.asarray``, ``float()``, ``tolist()`` copy to the host (forcing points).
An op whose array operands live on two devices raises ``ValueError`` naming both
(:func:`lazynp.devices.placement`).
"""
from __future__ import annotations

import importlib
import operator

import numpy as np
from numpy.lib.stride_tricks import as_strided

from ..array.ndarray import ndarray
from ..array.operands import broadcast_shapes
from ..core.graph import leaf
from ..devices import names
from ..devices.array_methods import DeviceArrayMethods
from ..devices.names import Device
from ..devices.registry import Backend, register_backend
from ..ops import elementwise as ew
from ..ops import reductions as R
from ..ops.registry import OPS, Op, register
from ..ops.core import matmul_meta
from . import codegen, memory, runtime


_SCALARS = (bool, int, float, complex)


class DeviceArray(DeviceArrayMethods):
    """A lazy array on a CUDA device (``device``: ``"cuda:N"``)."""

    __slots__ = ("_var", "_geom", "_device", "__weakref__")
    _MADE_WITH = ("device arrays with lazynp.asarray(x, device='cuda') or a creation "
                  "function's device= argument")

    @classmethod
    def _from_node(cls, node) -> "DeviceArray":
        self = object.__new__(cls)
        self._var = runtime.DeviceVar(node)
        self._geom = None
        self._device = node.device
        return self

    def _view(self, off: int, shape: tuple, strides: tuple, dtype) -> "DeviceArray":
        v = object.__new__(type(self))
        v._var = self._var
        v._geom = (off, tuple(shape), tuple(strides), np.dtype(dtype))
        v._device = self._device
        return v

    def _node(self):
        g = self._geom
        if g is None:
            return self._var.head
        return runtime.view_node(self._var.head, *g)

    # --- metadata ----------------------------------------------------------------------
    @property
    def shape(self) -> tuple:
        g = self._geom
        return self._var.head.shape if g is None else g[1]

    @property
    def dtype(self) -> np.dtype:
        g = self._geom
        return self._var.head.dtype if g is None else g[3]

    @property
    def strides(self) -> tuple:
        g = self._geom
        if g is not None:
            return g[2]
        return runtime._c_strides(self.shape, self.itemsize)

    @property
    def device(self) -> Device:
        return self._device

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of unsized object")
        return self.shape[0]

    # --- moving between devices and libraries ------------------------------------------
    def to_device(self, device, /, *, stream=None) -> "DeviceArray":
        """A copy on ``device`` (``"cpu"``: a ``lazynp.ndarray``); self if already there.

        ``stream`` (an integer handle as in ``__cuda_array_interface__``, or a CuPy or
        PyTorch stream): the stream the caller will use the result on; it is made to wait
        for the value (no host wait).  Not allowed for ``"cpu"`` (the copy to the host
        waits for the value)."""
        d = names.device(device)
        if stream is not None and d.kind == "cpu":
            raise ValueError("lazynp: to_device('cpu', stream=...): a stream is for device "
                             "targets (the copy to the host waits for the value)")
        if d == self._device:
            out = self
        elif d.kind == "cpu":
            return ndarray._from_node(leaf(self._host()))
        else:
            out = from_host(self._host(), d)
        if stream is not None:
            runtime.order_consumer(out._node(), stream)
        return out

    def get(self) -> np.ndarray:
        """The value as a NumPy array (a host copy; CuPy's name)."""
        return self._host()

    def _host(self) -> np.ndarray:
        return runtime.download(self._node())

    def __array__(self, dtype=None, copy=None):
        if copy is False:
            raise ValueError("lazynp: a device array cannot be seen as a NumPy array "
                             "without a copy (copy=False)")
        v = self._host()
        return v if dtype is None else v.astype(dtype, copy=False)

    def __array_namespace__(self, /, *, api_version=None):
        """The Array API namespace: ``lazynp``."""
        if api_version is not None and api_version not in _API_VERSIONS:
            raise ValueError(f"lazynp: unsupported Array API version {api_version!r} "
                             f"(supported: {', '.join(_API_VERSIONS)})")
        # (the package's face sits above this layer: looked up at call time)
        return importlib.import_module("lazynp")

    @property
    def __cuda_array_interface__(self) -> dict:
        """Version 3 of the interface, after the host has waited for the value (so any
        consumer stream may read it: ``stream`` is None)."""
        n = self._node()
        runtime.wait(n)
        return memory.interface(runtime.realize(n))

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        """The DLPack protocol.

        ``stream``: the consumer's stream (an integer: 1 the legacy default stream, 2 the
        per-thread one, else a ``cudaStream_t``; None: the legacy default stream; -1: the
        host waits instead); it is made to wait for the value.  ``dl_device``: this array's
        device, or ``(kDLCPU, 0)`` for a host copy (unless ``copy=False``).  ``copy=True``:
        the capsule holds a copy.  ``max_version``: passed to the buffer's own exporter.

        Raises
        ------
        BufferError
            For another ``dl_device``, or ``copy=False`` where a copy is needed.
        """
        here = self.__dlpack_device__()
        if dl_device is not None and tuple(dl_device) != here:
            if tuple(dl_device) == (1, 0) and copy is not False:
                return _dlpack_of(self._host(), max_version, None)
            raise BufferError(f"lazynp: __dlpack__: cannot export a {self._device.name} "
                              f"array to DLPack device {tuple(dl_device)}"
                              + (" without a copy" if tuple(dl_device) == (1, 0) else ""))
        src = self.copy() if copy else self
        n = src._node()
        if memory.simulated() or stream == -1:
            runtime.wait(n)          # (the simulator's consumer is the host)
        else:
            runtime.order_consumer(n, 1 if stream is None else stream)
        buf = runtime.realize(n)
        if memory.simulated():
            return _dlpack_of(memory.host_view(buf), max_version, stream)
        return _dlpack_of(buf, max_version, stream)

    def __dlpack_device__(self) -> tuple:
        if memory.simulated():
            return (1, 0)                   # (the simulator's memory is the host's)
        return (2, self._device.index)      # (kDLCUDA, device)

    def attach_grad(self, grad_req: str = "write", stype=None):
        """Not on device arrays: ``autograd.record()``/``backward()`` run on the CPU graph.

        Raises
        ------
        NotImplementedError
            Always (``lazynp.grad(f)(x)`` and the other transforms take device arrays).
        """
        raise NotImplementedError("lazynp: attach_grad (autograd.record/backward) is not "
                                  "implemented on device arrays; use lazynp.grad(f)(x), "
                                  "value_and_grad, vjp or jacobian, which take them")

    def block_until_ready(self) -> "DeviceArray":
        """Run what this array needs and wait for it (JAX's name)."""
        runtime.wait(self._node())
        return self

    # --- forcing points ------------------------------------------------------------------
    def __repr__(self) -> str:
        r = repr(self._host())
        return r[:-1] + f", device='{self._device.name}')"

    def __str__(self) -> str:
        return str(self._host())

    def __format__(self, spec: str) -> str:
        return format(self._host(), spec) if self.ndim == 0 else format(str(self), spec)

    def __float__(self) -> float:
        return float(self._host())

    def __int__(self) -> int:
        return int(self._host())

    def __complex__(self) -> complex:
        return complex(self._host())

    def __index__(self) -> int:
        return operator.index(self._host()[()]) if self.ndim == 0 else \
            operator.index(self._host())

    def __bool__(self) -> bool:
        return bool(self._host())

    def item(self, *args):
        return self._host().item(*args)

    def tolist(self):
        return self._host().tolist()

    def __iter__(self):
        if not self.shape:
            raise TypeError("iteration over a 0-d array")
        for i in range(self.shape[0]):
            yield self[i]

    # --- views -------------------------------------------------------------------------
    def _view_from(self, shadow: np.ndarray, base: np.ndarray) -> "DeviceArray":
        off = shadow.__array_interface__["data"][0] - base.__array_interface__["data"][0]
        return self._view(off, shadow.shape, shadow.strides, shadow.dtype)

    def _geometry_op(self, fn) -> "DeviceArray":
        base = _GeomBase(self._var.head)
        s = base.view_of(self._geom)
        out = fn(s)
        if not isinstance(out, np.ndarray) or not np.shares_memory(out, base.array) and \
                out.size:
            return None
        return self._view_from(out, base.array)

    def __getitem__(self, key):
        if _basic_index(key):
            k = key if isinstance(key, tuple) else (key,)
            if not any(i is Ellipsis for i in k):
                k = k + (Ellipsis,)          # (integers alone: a 0-d view, not a scalar)
            v = self._geometry_op(lambda s: s[k])
            if v is not None:
                return v
        if memory.library_arrays():
            # (CuPy's indexing on the device: the index is uploaded, nothing downloaded)
            return call_at_once("getitem", _getitem,
                                (self, _device_key(key, self.shape, self._device)), {})
        return _fallback_call("getitem", lambda x: x[_host_key(key)], (self,))

    def __setitem__(self, key, value):
        if not _basic_index(key):
            raise NotImplementedError("lazynp: device arrays take only basic indices in "
                                      "assignments (integers, slices, ..., None)")
        target = self if key is Ellipsis or key == () else self[key]
        if not isinstance(target, DeviceArray) or target._var is not self._var:
            raise NotImplementedError("lazynp: this assignment needs a view of a device array")
        _write(target, value)

    @property
    def T(self) -> "DeviceArray":
        return self.transpose()

    @property
    def mT(self) -> "DeviceArray":
        return self.swapaxes(-1, -2)

    def transpose(self, *axes) -> "DeviceArray":
        if len(axes) == 1 and (axes[0] is None or isinstance(axes[0], (tuple, list))):
            axes = axes[0]
        return self._geometry_op(lambda s: s.transpose(axes or None))

    def swapaxes(self, a1: int, a2: int) -> "DeviceArray":
        return self._geometry_op(lambda s: s.swapaxes(a1, a2))

    def reshape(self, *shape, order="C") -> "DeviceArray":
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        if order != "C":
            raise NotImplementedError("lazynp: device arrays reshape in C order only")

        def fn(s):
            r = s.reshape(shape)
            return r if np.shares_memory(r, s) or not r.size else None
        v = self._geometry_op(fn)
        if v is not None:
            return v
        return self.copy().reshape(shape)

    def ravel(self) -> "DeviceArray":
        return self.reshape(-1)

    def flatten(self) -> "DeviceArray":
        return self.copy().reshape(-1)

    def squeeze(self, axis=None) -> "DeviceArray":
        return self._geometry_op(lambda s: s.squeeze(axis))

    # --- elementwise -------------------------------------------------------------------
    def copy(self) -> "DeviceArray":
        return _unary_op(OPS["copy"], self, self.dtype)

    def astype(self, dtype, copy: bool = True) -> "DeviceArray":
        dtype = np.dtype(dtype)
        if dtype == self.dtype and not copy:
            return self
        return _record(OPS["astype"], (self._node(),), {"dtype": dtype}, self.shape, dtype,
                       self._device)


_API_VERSIONS = ("2021.12", "2022.12", "2023.12", "2024.12")


def _dlpack_of(buf, max_version, stream):
    """``buf.__dlpack__`` with the arguments it was given (a BufferError naming the one
    the buffer's library does not take)."""
    kw = {} if max_version is None else {"max_version": max_version}
    if stream is not None and not memory.simulated():
        kw["stream"] = stream
    try:
        return buf.__dlpack__(**kw)
    except TypeError as exc:
        raise BufferError(f"lazynp: __dlpack__({', '.join(kw)}=...) is not supported by "
                          f"{type(buf).__module__}.{type(buf).__name__}: {exc}") from exc


def _size(shape) -> int:
    s = 1
    for d in shape:
        s *= d
    return s


class _GeomBase:
    """A C-ordered NumPy array of a head's shape and dtype on a tiny real buffer whose
    strides pretend to cover it (views of it are never read)."""

    def __init__(self, head):
        dt = head.dtype
        n = _size(head.shape)
        strides = runtime._c_strides(head.shape, dt.itemsize)
        self.array = as_strided(np.zeros(1, dt), shape=head.shape, strides=strides) \
            if n else np.empty(head.shape, dt)

    def view_of(self, geom) -> np.ndarray:
        if geom is None:
            return self.array
        off, shape, strides, dt = geom
        base = self.array
        ptr = base.__array_interface__["data"][0] + off
        return np.asarray(_Interface(ptr, shape, strides, dt, base))


class _Interface:
    def __init__(self, ptr, shape, strides, dt, base):
        self.__array_interface__ = {"data": (ptr, False), "shape": tuple(shape),
                                    "strides": tuple(strides), "typestr": dt.str,
                                    "descr": dt.descr, "version": 3}
        self._base = base


def _basic_index(key) -> bool:
    items = key if isinstance(key, tuple) else (key,)
    for k in items:
        if k is None or k is Ellipsis or isinstance(k, slice):
            continue
        if isinstance(k, (bool, np.bool_)):
            return False
        if isinstance(k, (int, np.integer)):
            continue
        return False
    return True


def _getitem(x, key):
    return x[key]


def _device_key(key, shape: tuple, dev: Device):
    """An advanced index for CuPy: host arrays (NumPy arrays, lists) uploaded to ``dev``,
    and integer arrays checked against their axis, as NumPy does (CuPy wraps an
    out-of-bounds index around instead of raising): a host array on the host, a device
    array by a device reduction whose one boolean is read back."""
    items = key if isinstance(key, tuple) else (key,)
    for k in items:
        if isinstance(k, ndarray):                       # (a CPU lazynp array)
            raise ValueError(f"lazynp: getitem: operands are on two devices, cpu and "
                             f"{dev.name}; move one with .to_device(...)")
    items = [np.asarray(k) if isinstance(k, np.ndarray) or type(k) is list else k
             for k in items]
    _check_index_bounds(items, shape)
    out = tuple(from_host(k, dev) if isinstance(k, np.ndarray) else k for k in items)
    return out if isinstance(key, tuple) else out[0]


def _consumed(k) -> int:
    """How many axes of the indexed array an index item takes."""
    if k is None:
        return 0
    if isinstance(k, (np.ndarray, DeviceArray)) and k.dtype == np.bool_:
        return max(k.ndim, 1) if k.ndim else 0
    return 1


def _check_index_bounds(items: list, shape: tuple) -> None:
    n_ell = sum(1 for k in items if k is Ellipsis)
    if n_ell > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    used = sum(_consumed(k) for k in items if k is not Ellipsis)
    if used > len(shape):
        raise IndexError(f"too many indices for array: array is {len(shape)}-dimensional, "
                         f"but {used} were indexed")
    axis = 0
    for k in items:
        if k is Ellipsis:
            axis += len(shape) - used
            continue
        if isinstance(k, (np.ndarray, DeviceArray)) and k.dtype.kind in "iu":
            n = shape[axis]
            if isinstance(k, np.ndarray):
                bad = k.size and (k.min() < -n or k.max() >= n)
            else:
                bad = bool(((k < -n) | (k >= n)).any())     # (one boolean read back)
            if bad:
                raise IndexError(f"index out of bounds for axis {axis} with size {n}")
        axis += _consumed(k)


def _host_key(key):
    if isinstance(key, DeviceArray):
        return key._host()
    if isinstance(key, tuple):
        return tuple(_host_key(k) for k in key)
    return key


# --- recording ---------------------------------------------------------------------------------

def _record(op, args, params, shape, dtype, device) -> DeviceArray:
    return DeviceArray._from_node(runtime.record(op, args, params, tuple(shape), dtype, device))


def _operand(x, dev: Device):
    if isinstance(x, DeviceArray):
        return x._node()
    if type(x) in _SCALARS or isinstance(x, np.generic):
        return x
    raise TypeError(f"lazynp: unsupported operand {type(x).__name__} for a device array")


def _unary_op(op, a: DeviceArray, dtype) -> DeviceArray:
    return _record(op, (a._node(),), None, a.shape, dtype, a._device)


def ufunc_call(np_ufunc, args, kwargs=None) -> DeviceArray:
    """``np_ufunc(*args)`` with an operand on a device (the hook of ``lazynp``'s ufuncs)."""
    name = np_ufunc.__name__
    kwargs = {k: v for k, v in (kwargs or {}).items() if v is not None}
    out = kwargs.pop("out", None)
    if kwargs:
        raise NotImplementedError(f"lazynp: {name} on device arrays takes no keyword "
                                  f"arguments {sorted(kwargs)}")
    dev = names.placement(args + ((out,) if isinstance(out, DeviceArray) else ()), name)
    op = ew.UFUNC_OPS.get(name)
    if op is None or np_ufunc.nout != 1:
        raise NotImplementedError(f"lazynp: {name} is not implemented on device arrays")
    if len(args) != np_ufunc.nin:
        raise TypeError(f"{name}() takes {np_ufunc.nin} positional arguments but "
                        f"{len(args)} were given")
    ops = [_operand(a, dev) for a in args]
    keys = tuple(type(o) if type(o) in _SCALARS else o.dtype for o in ops)
    ew.check_python_int(np_ufunc, args, keys)
    dt = ew.result_dtypes(np_ufunc, keys)[0]
    shape = broadcast_shapes(*[o.shape if hasattr(o, "shape") and not
                               isinstance(o, np.generic) else () for o in ops])
    if np_ufunc is np.power and keys[0] != float and isinstance(keys[0], np.dtype):
        ew.check_int_power(keys[0], args[1], shape)
    codegen.check_op(op, keys, dt,
                     np_ufunc is np.power and type(ops[1]) is not runtime.DeviceNode)
    res = _record(op, tuple(ops), None, shape, dt, dev)
    if out is not None:
        if isinstance(out, tuple):
            out = out[0]
        if not isinstance(out, DeviceArray):
            raise ValueError(f"lazynp: {name}: out= must be an array on {dev.name}")
        out[...] = res
        return out
    return res


def _binary(np_ufunc, reflected: bool = False):
    def f(self, other):
        if not isinstance(other, (DeviceArray, np.ndarray, np.generic) + _SCALARS) and \
                not hasattr(other, "_node") and not hasattr(other, "__array__"):
            return NotImplemented
        return ufunc_call(np_ufunc, (other, self) if reflected else (self, other))
    return f


def _inplace(np_ufunc):
    def f(self, other):
        res = ufunc_call(np_ufunc, (self, other))
        if res.dtype != self.dtype and not np.can_cast(res.dtype, self.dtype, "same_kind"):
            probe = [np.empty(0, self.dtype),
                     other if type(other) in _SCALARS else np.empty(0, other.dtype)]
            np_ufunc(*probe, out=np.empty(0, self.dtype))   # NumPy's UFuncTypeError
        _write(self, res)
        return self
    return f


_DUNDERS = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "truediv": np.true_divide,
            "floordiv": np.floor_divide, "mod": np.remainder, "pow": np.power,
            "and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor,
            "lshift": np.left_shift, "rshift": np.right_shift}
for _n, _u in _DUNDERS.items():
    setattr(DeviceArray, f"__{_n}__", _binary(_u))
    setattr(DeviceArray, f"__r{_n}__", _binary(_u, True))
    setattr(DeviceArray, f"__i{_n}__", _inplace(_u))
for _n, _u in {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
               "gt": np.greater, "ge": np.greater_equal}.items():
    setattr(DeviceArray, f"__{_n}__", _binary(_u))
DeviceArray.__hash__ = None


def _write(target: DeviceArray, value) -> None:
    """``target[...] = value`` (target: an array or a view of one)."""
    dev = names.placement((target, value), "setitem")
    v = _operand(value, dev) if not isinstance(value, (list, tuple, np.ndarray)) else None
    if v is None:
        raise ValueError(f"lazynp: setitem: a host value on {dev.name}; move it with "
                         f"lazynp.asarray(value, device='{dev.name}')")
    vs = v.shape if not isinstance(v, (np.generic,) + _SCALARS) else ()
    if broadcast_shapes(target.shape, vs) != target.shape:
        raise ValueError(f"could not broadcast input array from shape {vs} into shape "
                         f"{target.shape}")
    var = target._var
    old = var.head
    if target._geom is None:
        geom = (0, old.shape, runtime._c_strides(old.shape, old.dtype.itemsize), old.dtype)
    else:
        geom = target._geom
    node = runtime.record(_SETITEM, (old, v), {"offset": geom[0], "shape": geom[1],
                                             "strides": geom[2], "dtype": geom[3]},
                        old.shape, old.dtype, dev)
    var.set_head(node)


def _setitem_impl(base, value, offset, shape, strides, dtype):  # the NumPy reference
    np.ndarray(shape, dtype, buffer=base, offset=offset, strides=strides)[...] = value
    return base


_SETITEM = OPS.get("device_setitem") or register(Op("device_setitem", "write", _setitem_impl,
                                                     inplace=(0,), raises_on_values=False))


def reduce(name: str, a: DeviceArray, axis=None, dtype=None, out=None, keepdims=False,
           kw=None, where=True) -> DeviceArray:
    """``numpy.<name>(a, axis, dtype, keepdims)`` on a device array (recorded)."""
    if name not in R.REDUCTIONS:
        raise NotImplementedError(f"lazynp: {name} is not implemented on device arrays")
    if where is not True:
        raise NotImplementedError(f"lazynp: {name}(where=...) is not implemented on device "
                                  f"arrays")
    fn = getattr(np, name)
    args_kw = dict(kw or {})
    if axis is not None:
        args_kw["axis"] = axis if not isinstance(axis, list) else tuple(axis)
    if dtype is not None:
        args_kw["dtype"] = np.dtype(dtype)
    if keepdims:
        args_kw["keepdims"] = True
    dt = R.probe_dtype(name, fn, a.shape, a.dtype, args_kw)      # NumPy's errors
    shape = R.reduced_shape(a.shape, args_kw.get("axis"), keepdims)
    res = _record(R.generic_op(name, fn), (a._node(),), args_kw or None, shape, dt, a._device)
    if out is not None:
        out[...] = res
        return out
    return res


def _matmul_impl(a, b):
    return np.matmul(a, b)


_MATMUL = OPS.get("device_matmul") or register(Op("device_matmul", "contraction", _matmul_impl,
                                                   raises_on_values=False))


def matmul(a, b) -> DeviceArray:
    dev = names.placement((a, b), "matmul")
    if not isinstance(a, DeviceArray) or not isinstance(b, DeviceArray):
        raise ValueError("matmul: scalar operands are not allowed")
    shape, dt = matmul_meta(a, b, {})
    return _record(_MATMUL, (a._node(), b._node()), None, shape, dt, dev)


def where(condition, x, y) -> DeviceArray:
    """``numpy.where(condition, x, y)`` on device arrays (an elementwise op: it fuses)."""
    dev = names.placement((condition, x, y), "where")
    ops = [_operand(v, dev) for v in (condition, x, y)]
    shape = broadcast_shapes(*[o.shape if isinstance(o, runtime.DeviceNode) else () for o in ops])
    dt = np.result_type(*[o.dtype if isinstance(o, runtime.DeviceNode) else o for o in ops[1:]])
    return _record(OPS["where"], tuple(ops), None, shape, dt, dev)


def call_at_once(name: str, np_fn, args, kwargs):
    """NumPy's ``np_fn`` (sort, linalg, fft, concatenate...) on device arrays, run now: on
    a real GPU on CuPy arrays (NumPy's functions dispatch to CuPy's), under the simulator
    on host copies (counted in ``device_host_fallbacks``).  Array results stay on the
    device."""
    flat = []

    def collect(x):
        if isinstance(x, DeviceArray):
            flat.append(x)
        elif type(x) in (list, tuple):
            for v in x:
                collect(v)
    collect(args)
    collect(tuple(kwargs.values()))
    dev = names.placement(tuple(flat), name)
    if runtime.CAPTURE[0] is not None:
        runtime.CAPTURE[0].opaque.append(f"{name}, run at once")
    sim = not memory.library_arrays()
    if sim:
        runtime.STATS["device_host_fallbacks"] += 1
    else:
        runtime.STATS["device_cupy_ops"] += 1
        nodes = [x._node() for x in flat]
        runtime.flush([n for n in nodes if n.state == runtime.PENDING or
                       runtime._root(n).state == runtime.PENDING])
        for n in nodes:
            if runtime._root(n).error is not None:
                raise runtime._root(n).error
        realized = {id(x): runtime.realize(n) for x, n in zip(flat, nodes)}

    def value(x):
        if isinstance(x, DeviceArray):
            return x._host() if sim else realized[id(x)]
        if type(x) in (list, tuple):
            return type(x)(value(v) for v in x)
        if isinstance(x, np.ndarray) or hasattr(x, "_node"):
            raise ValueError(f"lazynp: {name}: operands are on two devices, cpu and "
                             f"{dev.name}; move one with .to_device(...)")
        return x

    def call():
        return np_fn(*value(tuple(args)), **{k: value(v) for k, v in kwargs.items()})
    if sim:
        return _mark_opaque(_wrap_result(call(), dev, True), name, flat)
    # (on a compute stream after the inputs' events; the result's leaves get the event
    # recorded after it, so lazynp's later work waits for it)
    res, ev = runtime.result_leaf(dev, call, [runtime._root(n).event for n in nodes],
                                  tuple(realized.values()))
    return _mark_opaque(_wrap_result(res, dev, False, ev), name, flat)


def _wrap_result(res, dev, sim: bool, event=None):
    if isinstance(res, tuple):
        parts = [_wrap_result(r, dev, sim, event) for r in res]
        return type(res)(*parts) if hasattr(res, "_fields") else tuple(parts)
    if isinstance(res, list):
        return [_wrap_result(r, dev, sim, event) for r in res]
    if sim:
        return from_host(res, dev) if isinstance(res, np.ndarray) else res
    cp = memory._load()["cupy"]
    if isinstance(res, cp.ndarray):
        if not res.flags.c_contiguous:
            res = cp.ascontiguousarray(res)      # (made on the stream: covered by the event)
        n = runtime.leaf(res, dev)
        n.event = event
        return DeviceArray._from_node(n)
    return res


def _fallback_call(name: str, fn, arrays) -> DeviceArray:
    """A computation without a device implementation: its values on the host, NumPy, the
    result back on the device (counted in ``stats()['device_host_fallbacks']``)."""
    runtime.STATS["device_host_fallbacks"] += 1
    dev = names.placement(arrays, name)
    if runtime.CAPTURE[0] is not None:
        runtime.CAPTURE[0].opaque.append(f"{name}, run on the host")
    res = np.asarray(fn(*[x._host() for x in arrays]))
    return _mark_opaque(from_host(res, dev), name, arrays)


def _at_once_impl(*args, **kw):  # pragma: no cover - never runs (its nodes are leaves)
    raise AssertionError("a device at-once result never runs")


#: the op of a result computed at once while a gradient is taken: a leaf that keeps its
#: inputs, so the backward pass raises naming the function instead of giving zeros
AT_ONCE = OPS.get("device_at_once") or register(Op("device_at_once", "creation", _at_once_impl,
                                                   raises_on_values=False))


def _mark_opaque(res, name: str, inputs):
    if not runtime.KEEP_GRAPH[0] or not inputs:
        return res
    if isinstance(res, (tuple, list)):
        for r in res:
            _mark_opaque(r, name, inputs)
    elif isinstance(res, DeviceArray):
        n = res._var.head
        n.op = AT_ONCE
        n.params = {"name": name}
        n.args = tuple(a._node() for a in inputs)
    return res


def evaluate(arrays) -> None:
    """Run what the device arrays need (one flush: independent work overlaps on the
    streams), then wait for them."""
    if arrays:
        nodes = [a._node() for a in arrays]
        runtime.flush(nodes)
        for n in nodes:
            runtime.wait(n)


# --- creation ------------------------------------------------------------------------------

def from_host(value, dev: Device, dtype=None) -> DeviceArray:
    """A device array holding a copy of ``value`` (uploaded on the copy stream)."""
    arr = np.array(value, dtype=dtype, order="C", copy=True)
    return DeviceArray._from_node(runtime.upload(arr, dev))


def asarray(a, dev: Device, dtype=None, copy=None) -> DeviceArray:
    """``lazynp.asarray(a, device=dev)`` for a CUDA device."""
    if isinstance(a, DeviceArray):
        if a._device != dev:
            a = a.to_device(dev)
        elif copy:
            a = a.copy()
        if dtype is not None and np.dtype(dtype) != a.dtype:
            a = a.astype(dtype)
        return a
    if names.is_foreign_gpu_array(a) or (hasattr(a, "__dlpack_device__") and
                                                   not isinstance(a, np.ndarray) and
                                                   _is_cuda_dlpack(a)):
        src = names.foreign_device(a)
        if src != dev:
            raise ValueError(f"lazynp.asarray: the array is on {src.name}, not {dev.name}; "
                             f"move it with its library first")
        event = runtime.producer_event(dev, a)
        buf = memory.from_foreign(a, dev)
        if copy is False and not memory.is_c_contiguous(buf):
            raise ValueError("lazynp.asarray(copy=False): lazynp's device arrays are "
                             "C-ordered; this array would need a copy")
        out = DeviceArray._from_node(runtime.foreign_leaf(buf, dev, event))
        if copy:
            out = out.copy()
        if dtype is not None and np.dtype(dtype) != out.dtype:
            out = out.astype(dtype)
        return out
    if hasattr(a, "_value") and hasattr(a, "_node"):       # a lazynp CPU array
        a = a._value()
    if copy is False:
        raise ValueError("lazynp.asarray(copy=False): a copy to the device is needed")
    return from_host(a, dev, dtype)


def _is_cuda_dlpack(a) -> bool:
    try:
        return a.__dlpack_device__()[0] in (2, 3, 13)
    except Exception:
        return False


def create(kind: str, dev: Device, shape: tuple, dtype, fill_value=None) -> DeviceArray:
    """``zeros``/``ones``/``empty``/``full`` (``kind``) on ``dev``."""
    if kind == "empty":
        return empty(shape, dtype, dev)
    if kind != "full":
        fill_value = 0 if kind == "zeros" else 1
    return full(shape, fill_value, dtype, dev)


def full(shape, fill_value, dtype, dev: Device) -> DeviceArray:
    dtype = np.dtype(dtype)
    with np.errstate(all="ignore"):
        np.copyto(np.empty((), dtype), fill_value, casting="unsafe")
    return _record(_FULL, (), {"fill_value": fill_value}, shape, dtype, dev)


def empty(shape, dtype, dev: Device) -> DeviceArray:
    return _record(OPS["empty"], (), None, shape, np.dtype(dtype), dev)


_FULL = OPS["full"]


BACKEND = Backend(create=create, asarray=asarray, ufunc_call=ufunc_call,
                  reduce=reduce, matmul=matmul, where=where,
                  call_at_once=call_at_once, evaluate=evaluate)
DeviceArray._backend = BACKEND
register_backend("cuda", BACKEND)
