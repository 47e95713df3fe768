"""Chunked arrays on dask.distributed: ``lazynp.asarray(dask_array)`` and creation
functions inside ``lazynp.default_device("dask", chunks=..., client=...)``.

A :class:`DaskArray` holds a :class:`lazynp.dask.lower.DaskNode`.  Operators, lazynp's
ufuncs, ``where``, ``astype`` and the reductions *record* nodes; at a flush (a read,
:func:`lazynp.evaluate`, or an op that needs a dask array) the pending nodes become one
dask graph whose fused elementwise groups and reduction chunk steps run the CPU path's
Numba kernels (:mod:`lazynp.dask.lower`).  Everything else (matmul, indexing, reshaping,
concatenate/stack, sort, ``linalg.qr``/``svd``...) is dask.array's own function, built at
the call (dask is lazy too).  A function dask.array lacks raises ``NotImplementedError``
naming it: nothing is gathered silently.

Values are gathered only where asked: ``x.to_device("cpu")``, ``numpy.asarray(x)``,
``float(x)``, ``x.item()``, ``x.tolist()``, printing.  A small value (a scalar, a reduced
vector) is then kept here; a large one stays persisted on the cluster
(:func:`lazynp.dask.reads.read`).  :func:`lazynp.evaluate` persists values on the cluster
(``client.persist``) and waits for them, without gathering.  ``x.device == "dask"``.
"""
from __future__ import annotations

import importlib
import operator
import threading
import weakref

import numpy as np

from ..array.ndarray import ndarray
from ..array.operands import broadcast_shapes
from ..core.graph import leaf as cpu_leaf
from ..devices import names
from ..devices.array_methods import DeviceArrayMethods
from ..devices.names import Device
from ..devices.options import dask_options
from ..devices.registry import Backend, register_backend
from ..ops import elementwise as ew
from ..ops import reductions as R
from ..ops.registry import OPS
from . import cluster, io, lower, reads, stencil
from .lower import DaskNode

__all__ = ["DaskArray", "DASK"]

DASK = Device("dask")
_SCALARS = (bool, int, float, complex)
#: the reductions a chunked array takes (dask.array has each)
_REDUCTIONS = lower._DASK_REDUCTIONS


class DaskArray(DeviceArrayMethods):
    """A lazy chunked array whose chunks live on a dask cluster (``device``: ``"dask"``)."""

    __slots__ = ("_n", "_base", "_views", "__weakref__")
    _MADE_WITH = ("chunked arrays with lazynp.asarray(dask_array) or a creation function "
                  "inside lazynp.default_device('dask')")

    @classmethod
    def _from_node(cls, node: DaskNode) -> "DaskArray":
        self = object.__new__(cls)
        self._n = node
        self._base = None           # (a view: the array it views, as NumPy's ``base``)
        self._views = None          # (weak references to the views of this array)
        return self

    @property
    def _device(self) -> Device:
        return DASK

    def _dask(self):
        """This array's ``dask.array.Array`` (lowering its pending work; nothing runs)."""
        return lower.lower(self._n)

    def to_dask(self):
        """This array as a ``dask.array.Array`` (lazy: the lowered graph, nothing runs)."""
        if lower.TAPING[0] and lower.ON_TRACED_READ[0] is not None and \
                lower.depends_on_tape_inputs(self._n):
            lower.ON_TRACED_READ[0]("to_dask")
        return self._dask()

    @property
    def client(self):
        """The ``distributed.Client`` its reads and :func:`lazynp.evaluate` use."""
        return cluster.client_for(self._n.client)

    # --- metadata ----------------------------------------------------------------------
    @property
    def shape(self) -> tuple:
        return self._n.shape

    @property
    def dtype(self) -> np.dtype:
        return self._n.dtype

    @property
    def chunks(self) -> tuple:
        """dask's chunk sizes along each axis."""
        return self._dask().chunks

    @property
    def device(self) -> Device:
        return DASK

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of unsized object")
        return self.shape[0]

    # --- reads (the only gathers) ------------------------------------------------------
    def _host(self, taken: str = "") -> np.ndarray:
        """The gathered values; ``taken`` names the read that turns them into Python or
        NumPy values (none for ``bool``: control flow): while a gradient is recorded, such a
        read of a value computed from a differentiated input raises (its gradient would be
        silently missing)."""
        if taken and lower.TAPING[0] and lower.ON_TRACED_READ[0] is not None and \
                lower.depends_on_tape_inputs(self._n):
            lower.ON_TRACED_READ[0](taken)
        return reads.read(self._n, self._dask(), self.client)

    def to_device(self, device, /, *, stream=None) -> "DaskArray":
        """``"cpu"``: the values gathered into a ``lazynp.ndarray``; ``"dask"``: self."""
        d = names.device(device)
        if d.kind == "dask":
            return self
        if d.kind == "cpu":
            return ndarray._from_node(cpu_leaf(self._host("to_device")))
        raise ValueError(f"lazynp: to_device({d.name!r}): a chunked array moves to 'cpu' "
                         f"(then to {d.name})")

    def __array__(self, dtype=None, copy=None):
        v = self._host("__array__")
        return v if dtype is None else v.astype(dtype, copy=False)

    def __array_namespace__(self, /, *, api_version=None):
        return importlib.import_module("lazynp")

    def __array_ufunc__(self, np_ufunc, method, *inputs, **kwargs):
        """NumPy's ufuncs on a chunked array: lazynp's (recorded, fused), never a gather."""
        if method == "__call__":
            return ufunc_call(np_ufunc, inputs, kwargs)
        if method == "reduce" and len(inputs) == 1 and np_ufunc.__name__ in _UFUNC_REDUCE:
            kw = {k: v for k, v in kwargs.items() if v is not None}
            return reduce(_UFUNC_REDUCE[np_ufunc.__name__], inputs[0], kw.pop("axis", 0),
                          kw.pop("dtype", None), kw.pop("out", None),
                          kw.pop("keepdims", False), kw or None)
        return NotImplemented

    def __array_function__(self, func, types, args, kwargs):
        """NumPy's functions on a chunked array: lazynp's function of the same name (its
        device path: dask.array's function, or an error naming it), never a gather."""
        target = importlib.import_module("lazynp")
        for part in (func.__module__ or "numpy").split(".")[1:]:
            target = getattr(target, part, None)
        fn = getattr(target, func.__name__, None) if target is not None else None
        if fn is None or fn is func:
            return NotImplemented
        if getattr(_array_function, "active", False):
            # (lazynp's version called NumPy's again: dask.array's function, or an error)
            return call_at_once(func.__name__, func, args, kwargs)
        _array_function.active = True
        try:
            return fn(*args, **kwargs)
        finally:
            _array_function.active = False

    def block_until_ready(self) -> "DaskArray":
        """Compute and persist the value on the cluster (JAX's name)."""
        evaluate([self])
        return self

    def __repr__(self) -> str:
        r = repr(self._host("__repr__"))
        return r[:-1] + ", device='dask')"

    def __str__(self) -> str:
        return str(self._host("__str__"))

    def __format__(self, spec: str) -> str:
        return format(self._host("__format__"), spec) if self.ndim == 0 else format(str(self), spec)

    def __float__(self) -> float:
        return float(self._host("float"))

    def __int__(self) -> int:
        return int(self._host("int"))

    def __complex__(self) -> complex:
        return complex(self._host("complex"))

    def __index__(self) -> int:
        return operator.index(self._host("operator.index")[()])

    def __bool__(self) -> bool:
        return bool(self._host())

    def item(self, *args):
        return self._host("item").item(*args)

    def tolist(self):
        return self._host("tolist").tolist()

    def __iter__(self):
        if not self.shape:
            raise TypeError("iteration over a 0-d array")
        for i in range(self.shape[0]):
            yield self[i]

    # --- dask.array's own (views, indexing) ----------------------------------------------
    def _call(self, fn, *args, **kwargs) -> "DaskArray":
        return _wrap(fn(self._dask(), *args, **kwargs), self._n.client)

    def _view_call(self, fn, *args) -> "DaskArray":
        """A result NumPy gives as a view: recorded as one, so that a later write to either
        raises instead of silently missing the other (dask's arrays are values)."""
        out = self._call(fn, *args)
        out._base = self
        live = [r for r in self._views or () if r() is not None]
        live.append(weakref.ref(out))
        self._views = live
        return out

    def _check_write(self, what: str) -> None:
        """Raise where NumPy's write would reach another array (a view's base, a live
        view): chunked arrays are values, so it would not."""
        if self._base is not None:
            raise NotImplementedError(
                f"lazynp: {what} into a view of a chunked (dask) array is not implemented "
                f"(the array it views would not see it); write into that array itself, "
                f"e.g. x[1:3] = v")
        if self._views and any(r() is not None for r in self._views):
            raise NotImplementedError(
                f"lazynp: {what} on a chunked (dask) array that has live views is not "
                f"implemented (the views would not see it); delete the views or take "
                f"copies (x[1:3].copy())")

    def __getitem__(self, key):
        if _basic_key(key):
            out = self._view_call(operator.getitem, key)
            starts = stencil.slice_starts(key, self.shape)
            if starts is not None:
                out._n.view_of = (self._dask(), starts)
            return _note(out, "getitem", (self,), key)
        return _note(self._call(operator.getitem, _index_key(key)), "getitem (advanced)",
                     (self, key))

    def __setitem__(self, key, value):
        self._check_write("an assignment")
        old = self._n
        if not lower.TAPING[0] and isinstance(value, DaskArray):
            # (an expression of shifted slices of this array: a halo exchange)
            arr = stencil.try_write(self._dask(), key, value._n)
            if arr is not None:
                self._n = lower.leaf(arr, self._n.client)
                return
        arr = self._dask().copy()
        v = _lowered(value)
        arr[_index_key(key)] = v
        self._n = lower.leaf(arr, self._n.client)
        if lower.TAPING[0]:
            # (the written value's node, or the value; the key as given: the rules of
            # lazynp.autograd.dask_grad and dask_forward index the cotangent with it)
            self._n.origin = ("setitem", (old, value._n if isinstance(value, DaskArray)
                                          else value), key)

    @property
    def T(self) -> "DaskArray":
        return self.transpose()

    @property
    def mT(self) -> "DaskArray":
        return self.swapaxes(-1, -2)

    def transpose(self, *axes) -> "DaskArray":
        if len(axes) == 1 and (axes[0] is None or isinstance(axes[0], (tuple, list))):
            axes = axes[0]
        out = self._view_call(lambda a: a.transpose(tuple(axes)) if axes else a.transpose())
        return _note(out, "transpose", (self,), tuple(axes) if axes else None)

    def swapaxes(self, a1: int, a2: int) -> "DaskArray":
        return _note(self._view_call(lambda a: a.swapaxes(a1, a2)), "swapaxes", (self,),
                     (a1, a2))

    def reshape(self, *shape, order="C") -> "DaskArray":
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        if order != "C":
            raise NotImplementedError("lazynp: chunked arrays reshape in C order only")
        return _note(self._view_call(_reshape, shape), "reshape", (self,))

    def ravel(self) -> "DaskArray":
        return self.reshape(-1)

    def flatten(self) -> "DaskArray":
        return _note(self._call(_reshape, (-1,)), "reshape", (self,))

    def squeeze(self, axis=None) -> "DaskArray":
        return _note(self._view_call(lambda a: a.squeeze(axis)), "reshape", (self,))

    def rechunk(self, chunks) -> "DaskArray":
        """The same values in other chunks (dask's ``rechunk``)."""
        return _note(self._call(lambda a: a.rechunk(chunks)), "rechunk", (self,))

    def dot(self, other) -> "DaskArray":
        return call_at_once("dot", np.dot, (self, other), {})

    # --- recorded (fused) ------------------------------------------------------------------
    def copy(self) -> "DaskArray":
        if self._n.value is not None and not lower.TAPING[0]:
            # (dask arrays are values, and a write makes a new one: a copy of a computed
            # array needs no pass over its chunks, as in dask.array)
            return _wrap(self._n.value, self._n.client)
        return _record(OPS["copy"], (self._n,), None, self.shape, self.dtype)

    def astype(self, dtype, copy: bool = True) -> "DaskArray":
        dtype = np.dtype(dtype)
        if dtype == self.dtype and not copy:
            return self
        return _record(OPS["astype"], (self._n,), {"dtype": dtype}, self.shape, dtype)

    def cumsum(self, axis=None, dtype=None, out=None):
        return call_at_once("cumsum", np.cumsum, (self,), {"axis": axis, "dtype": dtype})

    def cumprod(self, axis=None, dtype=None, out=None):
        return call_at_once("cumprod", np.cumprod, (self,), {"axis": axis, "dtype": dtype})


_array_function = threading.local()
#: ``ufunc.reduce`` methods a chunked array takes, as the reduction of the same meaning
_UFUNC_REDUCE = {"add": "sum", "multiply": "prod", "maximum": "max", "minimum": "min",
                 "logical_or": "any", "logical_and": "all"}


def _reshape(a, shape):
    """dask's reshape; where it cannot split or merge the chunks as they are, the trailing
    axes are first put in one chunk each (on the workers), then every axis."""
    try:
        return a.reshape(shape)
    except NotImplementedError:
        pass
    try:
        return a.rechunk({d: -1 for d in range(1, a.ndim)}).reshape(shape)
    except NotImplementedError:
        return a.rechunk(-1).reshape(shape)


def _binary(np_ufunc, reflected: bool = False):
    def f(self, other):
        if not isinstance(other, (DaskArray, np.ndarray, np.generic, ndarray, list) +
                          _SCALARS):
            return NotImplemented
        return ufunc_call(np_ufunc, (other, self) if reflected else (self, other))
    return f


def _inplace(np_ufunc):
    def f(self, other):
        self._check_write(f"an in-place {np_ufunc.__name__}")
        res = ufunc_call(np_ufunc, (self, other))
        if res.dtype != self.dtype:
            if not np.can_cast(res.dtype, self.dtype, "same_kind"):
                probe = [np.empty(0, self.dtype),
                         other if type(other) in _SCALARS else np.empty(0, other.dtype)]
                np_ufunc(*probe, out=np.empty(0, self.dtype))   # NumPy's UFuncTypeError
            res = res.astype(self.dtype)
        self._n = res._n          # (dask arrays are immutable: the handle takes the result)
        return self
    return f


_DUNDERS = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "truediv": np.true_divide,
            "floordiv": np.floor_divide, "mod": np.remainder, "pow": np.power,
            "and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor,
            "lshift": np.left_shift, "rshift": np.right_shift}
for _n, _u in _DUNDERS.items():
    setattr(DaskArray, f"__{_n}__", _binary(_u))
    setattr(DaskArray, f"__r{_n}__", _binary(_u, True))
    setattr(DaskArray, f"__i{_n}__", _inplace(_u))
for _n, _u in {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
               "gt": np.greater, "ge": np.greater_equal}.items():
    setattr(DaskArray, f"__{_n}__", _binary(_u))
DaskArray.__hash__ = None


# --- operands ------------------------------------------------------------------------------

def _client_of(items):
    """The client of the first chunked array among ``items`` (lists and tuples looked
    into: ``stack([x, y])``), else the open ``default_device`` block's."""
    for a in items:
        if isinstance(a, (list, tuple)):
            c = _client_of(a)
            if c is not None:
                return c
        elif isinstance(a, DaskArray) and a._n.client is not None:
            return a._n.client
    return dask_options()["client"]


def _nodes_in(obj) -> tuple:
    """The nodes of the chunked arrays in ``obj`` (lists, tuples and dict values walked)."""
    if isinstance(obj, DaskArray):
        return (obj._n,)
    if isinstance(obj, (list, tuple)):
        return tuple(n for v in obj for n in _nodes_in(v))
    if isinstance(obj, dict):
        return _nodes_in(tuple(obj.values()))
    return ()


def _note(out, name: str, inputs: tuple, params=None):
    """While a gradient is recorded (:data:`lazynp.dask.lower.TAPING`): note on ``out``'s
    node(s) that dask.array's ``name`` made it from ``inputs`` (chunked arrays and values),
    for the backward pass, which raises naming ``name`` where it has no rule; ``out``."""
    if lower.TAPING[0]:
        ins = tuple(a._n if isinstance(a, DaskArray) else a for a in inputs)
        for o in (out if isinstance(out, (tuple, list)) else (out,)):
            if isinstance(o, DaskArray):
                o._n.origin = (name, ins, params)
    return out


def _wrap(arr, client=None) -> DaskArray:
    """A chunked array holding the dask array ``arr`` (unknown chunk sizes, as after a
    boolean mask, are computed now: lazynp's shapes are known)."""
    if any(isinstance(s, float) and s != s for s in arr.shape):
        import dask
        c = cluster.client_for(client)
        arr = c.persist(arr)
        with dask.config.set(scheduler=c.get):
            arr.compute_chunk_sizes()
    return DaskArray._from_node(lower.leaf(arr, client))


def chunks_for(ndim: int, chunks=None):
    """The ``chunks`` of the open ``default_device("dask", chunks=...)`` block for an
    array of ``ndim`` dimensions: a per-axis tuple of another length is cut to its first
    ``ndim`` entries, or filled with ``"auto"``."""
    if chunks is None:
        chunks = dask_options()["chunks"]
    if isinstance(chunks, (tuple, list)) and len(chunks) != ndim:
        chunks = tuple(chunks[:ndim]) + ("auto",) * (ndim - len(chunks))
    return chunks


def _from_host(value, client=None, chunks=None) -> DaskArray:
    import dask.array as da
    value = np.asarray(value)
    return _wrap(da.from_array(value, chunks=chunks_for(value.ndim, chunks)), client)


def _operand(x, client):
    """A node argument: a chunked array's node, a scalar, or a host array as a chunked
    leaf (host arrays broadcast to the chunks)."""
    if isinstance(x, DaskArray):
        return x._n
    if type(x) in _SCALARS or isinstance(x, np.generic):
        return x
    if names.is_device_array(x) or names.is_foreign_gpu_array(x):
        raise ValueError(f"lazynp: operands are on two devices, dask and "
                         f"{names.device_of(x).name}; move one with .to_device(...)")
    if isinstance(x, ndarray):
        x = x._value()
    v = np.asarray(x)
    if v.ndim == 0:
        return v[()]
    return _from_host(v, client, chunks=-1)._n


def _lowered(x):
    """``x`` for a dask.array function: chunked arrays as dask arrays, lazynp's CPU arrays
    as NumPy's, nested lists and tuples walked."""
    if isinstance(x, DaskArray):
        return x._dask()
    if isinstance(x, ndarray):
        return x._value()
    if type(x) in (list, tuple):
        return type(x)(_lowered(v) for v in x)
    return x


def _basic_key(key) -> bool:
    """True for an index NumPy answers with a view (integers, slices, None, ...)."""
    for k in key if type(key) is tuple else (key,):
        if not (k is None or k is Ellipsis or type(k) in (int, slice, bool) and
                type(k) is not bool or isinstance(k, np.integer)):
            return False
    return True


def _index_key(key):
    return _lowered(key) if isinstance(key, (tuple, list, DaskArray, ndarray)) else key


def _record(op, args: tuple, params, shape: tuple, dtype, client=None) -> DaskArray:
    if client is None:
        client = next((a.client for a in args if type(a) is DaskNode and a.client), None)
    return DaskArray._from_node(DaskNode(op, args, params, shape, dtype, client))


# --- the backend's entry points --------------------------------------------------------------

def ufunc_call(np_ufunc, args, kwargs=None) -> DaskArray:
    """``np_ufunc(*args)`` with a chunked operand (recorded: it fuses at the flush)."""
    name = np_ufunc.__name__
    kwargs = {k: v for k, v in (kwargs or {}).items() if v is not None}
    out = kwargs.pop("out", None)
    if kwargs:
        raise NotImplementedError(f"lazynp: {name} on chunked (dask) arrays takes no "
                                  f"keyword arguments {sorted(kwargs)}")
    client = _client_of(args)
    op = ew.UFUNC_OPS.get(name)
    if op is None or np_ufunc.nout != 1:
        res = np_ufunc(*_lowered(tuple(args)))         # (dask.array's ufunc)
        res = tuple(_wrap(r, client) for r in res) if isinstance(res, tuple) else \
            _wrap(res, client)
        _note(res, name, _nodes_in(args))
    else:
        if len(args) != np_ufunc.nin:
            raise TypeError(f"{name}() takes {np_ufunc.nin} positional arguments but "
                            f"{len(args)} were given")
        ops = [_operand(a, client) for a in args]
        keys = tuple(type(o) if type(o) in _SCALARS else o.dtype for o in ops)
        ew.check_python_int(np_ufunc, args, keys)
        dt = ew.result_dtypes(np_ufunc, keys)[0]
        shape = broadcast_shapes(*[o.shape if type(o) is DaskNode else () for o in ops])
        if np_ufunc is np.power and keys[0] != float and isinstance(keys[0], np.dtype):
            ew.check_int_power(keys[0], args[1], shape)
        res = _record(op, tuple(ops), None, shape, dt, client)
    if out is not None:
        if isinstance(out, tuple):
            out = out[0]
        if not isinstance(out, DaskArray):
            raise ValueError(f"lazynp: {name}: out= must be a chunked (dask) array")
        out[...] = res
        return out
    return res


def reduce(name: str, a: DaskArray, axis=None, dtype=None, out=None, keepdims=False,
           kw=None, where=True) -> DaskArray:
    """``numpy.<name>(a, axis, dtype, keepdims)`` of a chunked array (recorded: a trailing
    reduction of a fused group is its chunk step)."""
    if name not in _REDUCTIONS:
        raise NotImplementedError(f"lazynp: {name} is not implemented on chunked (dask) "
                                  f"arrays")
    if where is not True:
        raise NotImplementedError(f"lazynp: {name}(where=...) is not implemented on chunked "
                                  f"(dask) arrays")
    if out is not None:
        raise NotImplementedError(f"lazynp: {name}(out=...) is not implemented on chunked "
                                  f"(dask) arrays")
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
    return _record(R.generic_op(name, fn), (a._n,), args_kw or None, shape, dt, a._n.client)


def matmul(a, b) -> DaskArray:
    """``a @ b`` (dask.array's matmul)."""
    if np.ndim(a) == 0 or np.ndim(b) == 0:
        raise ValueError("matmul: Input operand 1 does not have enough dimensions")
    client = _client_of((a, b))
    if lower.TAPING[0]:
        # (a host operand as a chunked array: the backward pass multiplies by it on the
        # workers)
        a, b = (v if isinstance(v, DaskArray) else _from_host(_host_value(v), client, -1)
                for v in (a, b))
    return _note(_wrap(_lowered(a) @ _lowered(b), client), "matmul", (a, b))


def _host_value(v):
    return v._value() if isinstance(v, ndarray) else np.asarray(v)


def where(condition, x, y) -> DaskArray:
    """``numpy.where(condition, x, y)`` (an elementwise op: it fuses)."""
    client = _client_of((condition, x, y))
    ops = [_operand(v, client) for v in (condition, x, y)]
    shape = broadcast_shapes(*[o.shape if type(o) is DaskNode else () for o in ops])
    dt = np.result_type(*[o.dtype if type(o) is DaskNode else o for o in ops[1:]])
    return _record(OPS["where"], tuple(ops), None, shape, dt, client)


def _dask_function(name: str, np_fn):
    import dask.array as da
    mod = getattr(np_fn, "__module__", "") or ""
    if "linalg" in mod or name.startswith("linalg."):
        return getattr(da.linalg, name.rsplit(".", 1)[-1], None)
    if "fft" in mod or name.startswith("fft."):
        return getattr(da.fft, name.rsplit(".", 1)[-1], None)
    return getattr(da, name, None)


def _sort_along(np_sort):
    def f(a, axis=-1, kind=None, order=None, **kw):
        if order is not None or kw:
            raise NotImplementedError(f"lazynp: {np_sort.__name__}(order=...) is not "
                                      f"implemented on chunked (dask) arrays")
        if axis is None:
            a, axis = a.ravel(), 0
        axis = axis % a.ndim if a.ndim else 0
        # (one chunk along the sorted axis, the others stay chunked: each task sorts its
        # block, on a worker)
        a = a.rechunk({axis: -1})
        dt = np.dtype(np.intp) if np_sort is np.argsort else a.dtype
        return a.map_blocks(np_sort, axis=axis, kind=kind, dtype=dt)
    return f


#: sorting: dask.array has no sort; each block holds the whole sorted axis
_SORTS = {"sort": _sort_along(np.sort), "argsort": _sort_along(np.argsort)}


def call_at_once(name: str, np_fn, args, kwargs):
    """NumPy's ``np_fn`` on chunked arrays: dask.array's function of the same name, built
    lazily (``linalg.qr``/``svd`` are dask's tall-skinny ones: the columns are put in one
    chunk).

    Raises
    ------
    NotImplementedError
        When dask.array has no such function (nothing is gathered).
    """
    fn = _SORTS.get(name) or _dask_function(name, np_fn)
    if fn is None:
        raise NotImplementedError(f"lazynp: {name} is not implemented on chunked (dask) "
                                  f"arrays (dask.array has no {name}); gather with "
                                  f"x.to_device('cpu') first if it fits in memory")
    client = _client_of(tuple(args) + tuple(kwargs.values()))
    largs = _lowered(tuple(args))
    if name.rsplit(".", 1)[-1] in ("qr", "svd") and largs and hasattr(largs[0], "rechunk"):
        largs = (largs[0].rechunk({0: "auto", 1: -1}),) + largs[1:]
    kw = {k: _lowered(v) for k, v in kwargs.items() if v is not None or k != "dtype"}
    out = _wrap_result(fn(*largs, **kw), client)
    if name == "dot" and len(args) == 2 and not kwargs:
        return _note(out, "dot", tuple(args))
    return _note(out, f"lazynp.{name}", _nodes_in((args, kwargs)), kwargs)


def _wrap_result(res, client):
    import dask.array as da
    if isinstance(res, da.Array):
        return _wrap(res, client)
    if isinstance(res, tuple):
        parts = [_wrap_result(r, client) for r in res]
        return type(res)(*parts) if hasattr(res, "_fields") else tuple(parts)
    if isinstance(res, list):
        return [_wrap_result(r, client) for r in res]
    return res


def evaluate(arrays) -> None:
    """Compute the chunked arrays, keep their values on the cluster (one ``client.persist``
    per client) and wait until every chunk is computed (``distributed.wait``), as
    :func:`lazynp.evaluate` promises: afterwards the work is done, as after
    ``x.persist(); wait(x)`` in dask.

    Raises
    ------
    RuntimeError
        When a chunk cannot be computed (its task raised, or its worker was lost and it
        could not be recomputed), or the chunks do not come within
        ``LAZYNP_DASK_TIMEOUT`` seconds.
    """
    from distributed import futures_of, wait
    by_client: dict = {}
    for a in arrays:
        c = a.client
        by_client.setdefault(id(c), (c, []))[1].append(a)
    for c, arrs in by_client.values():
        persisted = c.persist([a._dask() for a in arrs])
        for a, p in zip(arrs, persisted):
            a._n.value = p          # (pending work that reads it reads the persisted one)
        futures = futures_of(persisted)
        try:
            with c.as_current():            # (wait finds its client so: it may be no default)
                wait(futures, timeout=reads.timeout())
        except TimeoutError as e:
            raise RuntimeError(f"lazynp.evaluate: the chunked (dask) arrays were not computed "
                               f"within {reads.timeout():g} s (LAZYNP_DASK_TIMEOUT); is the "
                               f"cluster alive?") from e
        for f in futures:
            if f.status == "error":
                exc = f.exception()
                raise RuntimeError(f"lazynp.evaluate: a chunk of a chunked (dask) array could "
                                   f"not be computed: {type(exc).__name__}: {exc}") from exc


def asarray(a, dev: Device, dtype=None, copy=None) -> DaskArray:
    """``lazynp.asarray(a, device="dask")``: a dask array is wrapped (no copy), a
    ``numpy.memmap`` of a whole file is read chunk by chunk by the workers, anything else
    is chunked (``chunks`` of the open ``default_device("dask", ...)`` block)."""
    import dask.array as da
    client = dask_options()["client"]
    if isinstance(a, DaskArray):
        out = a.copy() if copy else a
    elif isinstance(a, da.Array):
        out = _wrap(a, client)
    elif names.is_device_array(a):
        out = _from_host(a.to_device("cpu")._value(), client)
    elif isinstance(a, np.memmap) and io.whole_file_map(a):
        out = _wrap(io.memmap_array(a, chunks_for(a.ndim)), client)     # (read by workers)
    else:
        if copy is False:
            raise ValueError("lazynp.asarray(copy=False): chunking a host array copies it")
        out = _from_host(a._value() if isinstance(a, ndarray) else a, client)
    if dtype is not None and np.dtype(dtype) != out.dtype:
        out = out.astype(dtype)
    return out


def create(kind: str, dev: Device, shape: tuple, dtype, fill_value=None) -> DaskArray:
    """``zeros``/``ones``/``empty``/``full`` (``kind``) in chunks, made on the workers."""
    import dask.array as da
    opts = dask_options()
    dtype = np.dtype(dtype)
    ch = chunks_for(len(shape))
    if kind == "full":
        with np.errstate(all="ignore"):
            np.copyto(np.empty((), dtype), fill_value, casting="unsafe")
        arr = da.full(shape, fill_value, dtype=dtype, chunks=ch)
    else:
        arr = getattr(da, kind)(shape, dtype=dtype, chunks=ch)
    return _wrap(arr, opts["client"])


def create_range(name: str, args, kwargs) -> DaskArray:
    """``arange``/``linspace`` in chunks (dask.array's, made on the workers)."""
    import dask.array as da
    opts = dask_options()
    kwargs = {k: v for k, v in kwargs.items() if k not in ("device", "like")}
    if name == "arange":
        ref = np.arange(*args, **kwargs)[:0]          # NumPy's dtype and errors
        kwargs.setdefault("dtype", ref.dtype)
    arr = getattr(da, name)(*args, chunks=chunks_for(1), **kwargs)
    return _wrap(arr, opts["client"])


def random_call(np_method, args, kwargs) -> DaskArray:
    """``default_rng(seed).<method>(..., size=...)`` in chunks: dask's generator seeded
    from the NumPy one (deterministic for a seed; the numbers are not NumPy's stream)."""
    import dask.array as da
    opts = dask_options()
    name = np_method.__name__
    gen = np_method.__self__
    seed = int(gen.integers(0, 2**63 - 1)) if hasattr(gen, "integers") else \
        int(gen.randint(0, 2**31 - 1))
    drng = da.random.default_rng(seed)
    fn = getattr(drng, name, None)
    if fn is None:
        raise NotImplementedError(f"lazynp: random {name} is not implemented on chunked "
                                  f"(dask) arrays")
    size = kwargs.get("size", args[-1] if args else None)
    nd = 0 if size is None else 1 if isinstance(size, (int, np.integer)) else len(size)
    return _wrap(fn(*args, chunks=chunks_for(nd), **kwargs), opts["client"])


def to_zarr(x: DaskArray, path, **kwargs) -> None:
    """Write ``x`` to a zarr store on its client's workers (:func:`lazynp.dask.io.to_zarr`)."""
    io.to_zarr(x, path, x.client, **kwargs)


def from_zarr(path, **kwargs) -> DaskArray:
    """A zarr store as a chunked array (:func:`lazynp.dask.io.from_zarr`)."""
    return _wrap(io.from_zarr(path, **kwargs), dask_options()["client"])


def shutdown() -> bool:
    """Close the embedded cluster (see :func:`lazynp.dask.cluster.shutdown`)."""
    return cluster.shutdown()


BACKEND = Backend(create=create, asarray=asarray, ufunc_call=ufunc_call,
                  reduce=reduce, matmul=matmul, where=where,
                  call_at_once=call_at_once, evaluate=evaluate,
                  create_range=create_range, random=random_call,
                  load=io.load, to_zarr=to_zarr, from_zarr=from_zarr,
                  shutdown=shutdown)
DaskArray._backend = BACKEND
register_backend("dask", BACKEND)
