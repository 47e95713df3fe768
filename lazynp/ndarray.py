"""``lazynp.ndarray``: a handle on a storage Var plus a view geometry.

Shape and dtype are known without computing.  A base array reads its Var's head; a view
(basic slicing, transpose, reshape, ...) keeps a *shadow*: a NumPy view of an uncommitted
``np.empty`` buffer of the base's shape, produced by NumPy's own view functions.  The shadow
gives NumPy's exact shapes, strides, errors and view-vs-copy decisions for free, and its
byte offset/strides are the geometry realized on the real buffer when the view is read.
"""
from __future__ import annotations

import copy as _copy
import operator

import numpy as np

from . import graph
from .graph import Node, Var


def _data_offset_py(a: np.ndarray, base: np.ndarray) -> int:
    """Byte offset of ``a``'s data pointer from ``base``'s."""
    return a.__array_interface__["data"][0] - base.__array_interface__["data"][0]


_data_offset = _data_offset_py if graph.speedups is None else graph.speedups.data_offset


class ndarray:
    """A lazy NumPy array.  Use it exactly like :class:`numpy.ndarray`.

    Operations on it are recorded, not run; they run (fused, planned, multi-threaded) when a
    value is needed: printing, ``float()``, ``numpy.asarray()``, ``lazynp.evaluate()``...
    """

    __slots__ = ("_var", "_shadow", "_geom", "_scalar", "__weakref__")
    __array_priority__ = 100.0

    def __init__(self, *args, **kwargs):
        raise TypeError("lazynp.ndarray cannot be constructed directly; use lazynp.array, "
                        "lazynp.zeros, lazynp.empty ...")

    # --- construction ------------------------------------------------------------------
    @classmethod
    def _from_node(cls, node: Node, scalar: bool = False) -> "ndarray":
        self = object.__new__(cls)
        self._var = Var(node)
        self._shadow = None
        self._geom = None
        self._scalar = scalar
        return self

    def _view_of(self, shadow: np.ndarray, off: int | None = None) -> "ndarray":
        """A new handle on the same Var with ``shadow``'s geometry (``off``: its byte offset
        in the Var's buffer, when the caller knows it)."""
        v = object.__new__(ndarray)
        v._var = self._var
        if off is None:
            off = _data_offset(shadow, self._var.shadow)
        v._shadow = shadow
        v._geom = (off, shadow.shape, shadow.strides, shadow.dtype)
        v._scalar = False
        return v

    def _get_shadow(self) -> np.ndarray:
        if self._shadow is not None:
            return self._shadow
        var = self._var
        if var.shadow is None:
            h = var.head
            var.shadow = np.empty(h.shape, h.dtype)
        return var.shadow

    # --- reading -----------------------------------------------------------------------
    def _node(self) -> Node:
        """The node holding this array's current value (recording a view if needed)."""
        g = self._geom
        if g is None:
            return self._var.head
        return graph.view_node(self._var.head, g[0], g[1], g[2], g[3])

    def _value(self) -> np.ndarray:
        """Force this array and return its NumPy value (do not mutate it)."""
        return graph.materialize(self._node())

    # --- metadata, known without computing -----------------------------------------------
    @property
    def shape(self) -> tuple:
        s = self._shadow
        return self._var.head.shape if s is None else s.shape

    @shape.setter
    def shape(self, value) -> None:
        new = self._get_shadow().view()
        new.shape = value  # NumPy raises AttributeError when a copy would be needed
        self._rebind_shadow(new)

    def _rebind_shadow(self, shadow: np.ndarray) -> None:
        if shadow.shape == self._var.head.shape and self._var.shadow is not None and \
                shadow.strides == self._var.shadow.strides and shadow.dtype == self._var.head.dtype \
                and _data_offset(shadow, self._var.shadow) == 0:
            self._shadow = None
            self._geom = None
            return
        v = self._view_of(shadow)
        self._shadow, self._geom = v._shadow, v._geom

    @property
    def dtype(self) -> np.dtype:
        s = self._shadow
        return self._var.head.dtype if s is None else s.dtype

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n

    @property
    def itemsize(self) -> int:
        return self.dtype.itemsize

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    @property
    def strides(self) -> tuple:
        return self._get_shadow().strides

    @property
    def flags(self):
        if self._shadow is None:
            self._get_shadow()
            self._shadow = self._var.shadow.view()  # this handle's own flags
        return self._shadow.flags

    def setflags(self, write=None, align=None, uic=None) -> None:
        """Set WRITEABLE (the only flag lazynp tracks) like :meth:`numpy.ndarray.setflags`."""
        self.flags.writeable = self.flags.writeable if write is None else write

    @property
    def base(self):
        return None if self._geom is None else ndarray._base_handle(self._var)

    @staticmethod
    def _base_handle(var):
        b = object.__new__(ndarray)
        b._var, b._shadow, b._geom, b._scalar = var, None, None, False
        return b

    @property
    def T(self) -> "ndarray":
        return self.transpose()

    @property
    def mT(self) -> "ndarray":
        if self.ndim < 2:
            raise ValueError("matrix transpose with ndim < 2 is undefined")
        return self.swapaxes(-1, -2)

    @property
    def real(self) -> "ndarray":
        from . import _namespace as ns
        return ns.real(self)

    @real.setter
    def real(self, value) -> None:
        self.real[...] = value

    @property
    def imag(self) -> "ndarray":
        from . import _namespace as ns
        return ns.imag(self)

    @imag.setter
    def imag(self, value) -> None:
        if self.dtype.kind != "c":
            raise TypeError("array does not have imaginary part to set")
        self.imag[...] = value

    @property
    def flat(self):
        return _Flat(self)

    @property
    def device(self) -> str:
        return "cpu"

    @property
    def data(self):
        return self._value().data

    @property
    def ctypes(self):
        return np.asarray(self._value(), order="C").ctypes

    # --- forcing points ----------------------------------------------------------------
    def __array__(self, dtype=None, copy=None):
        v = self._value()
        node = self._var.head
        node.exported = True
        if dtype is not None and v.dtype != dtype:
            return v.astype(dtype)
        if copy:
            return v.copy()
        return v

    def __bool__(self) -> bool:
        if self.size != 1:
            raise ValueError("The truth value of an array with more than one element is "
                             "ambiguous. Use a.any() or a.all()" if self.size > 1 else
                             "The truth value of an empty array is ambiguous. Use "
                             "`array.size > 0` to check that an array is not empty.")
        return bool(self._value().reshape(-1)[0])

    def __float__(self) -> float:
        return float(self._scalar_value("float"))

    def __int__(self) -> int:
        return int(self._scalar_value("int"))

    def __complex__(self) -> complex:
        return complex(self._scalar_value("complex"))

    def __index__(self) -> int:
        if self.dtype.kind not in "iub":
            raise TypeError("only integer scalar arrays can be converted to a scalar index")
        if self.dtype.kind == "b" and self.ndim:
            raise TypeError("only integer scalar arrays can be converted to a scalar index")
        if self.ndim != 0:
            raise TypeError("only integer scalar arrays can be converted to a scalar index")
        return operator.index(self._value()[()])

    def _scalar_value(self, what: str):
        if self.ndim != 0:
            if self.size == 1:
                raise TypeError(f"only 0-dimensional arrays can be converted to Python scalars")
            raise TypeError(f"only length-1 arrays can be converted to Python scalars")
        return self._value()[()]

    def item(self, *args):
        """Copy an element to a standard Python scalar (forces)."""
        return self._value().item(*args)

    def tolist(self):
        """The array as nested Python lists (forces)."""
        return self._value().tolist()

    def tobytes(self, order="C") -> bytes:
        return self._value().tobytes(order)

    def __repr__(self) -> str:
        v = self._value()
        if self._scalar and v.ndim == 0:
            return repr(v[()])
        return repr(v)

    def __str__(self) -> str:
        v = self._value()
        if self._scalar and v.ndim == 0:
            return str(v[()])
        return str(v)

    def __format__(self, spec: str) -> str:
        v = self._value()
        if v.ndim == 0:
            return format(v[()], spec)
        return format(v, spec)

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of unsized object")
        return self.shape[0]

    def __iter__(self):
        if not self.shape:
            raise TypeError("iteration over a 0-d array")
        return (self[i] for i in range(self.shape[0]))

    def __contains__(self, item) -> bool:
        from . import _namespace as ns
        return bool(ns.any(self == item))

    __hash__ = None  # like NumPy arrays (unlike NumPy scalars: see README)

    def __reduce__(self):
        return (_unpickle, (np.array(self._value(), copy=True), self._scalar))

    def __copy__(self):
        return self.copy()

    def __deepcopy__(self, memo):
        return self.copy()

    def __array_namespace__(self, api_version=None):
        import lazynp
        return lazynp

    def __dlpack__(self, **kw):
        return self._value().__dlpack__(**kw)

    def __dlpack_device__(self):
        return self._value().__dlpack_device__()

    # --- NumPy interoperability -------------------------------------------------------
    def __array_ufunc__(self, uf, method, *inputs, **kwargs):
        from . import _ufunc
        lazy = _ufunc.UFUNCS.get(uf.__name__)
        if lazy is None or lazy._np is not uf:
            from . import _fallback, _namespace
            if uf is np.matmul and method == "__call__":
                return _namespace.matmul(*inputs, **kwargs)
            return _fallback.call_numpy(getattr(uf, method) if method != "__call__" else uf,
                                        f"{uf.__name__}.{method}", inputs, kwargs)
        return getattr(lazy, method)(*inputs, **kwargs) if method != "__call__" \
            else lazy(*inputs, **kwargs)

    def __array_function__(self, func, types, args, kwargs):
        from . import _fallback
        return _fallback.dispatch_numpy_function(func, args, kwargs)

    # --- indexing ----------------------------------------------------------------------
    def __getitem__(self, index):
        from . import _indexing
        return _indexing.getitem(self, index)

    def __setitem__(self, index, value) -> None:
        from . import _indexing
        _indexing.setitem(self, index, value)

    # --- writes ------------------------------------------------------------------------
    def _write(self, op, args: tuple, params: dict) -> None:
        """Record a write into this array's region of its Var: a new head for the Var."""
        var = self._var
        old = var.head
        p = {"geom": self._geom}
        p.update(params)
        node = graph.record(op, (old,) + args, p, old.shape, old.dtype)
        var.set_head(node)

    def fill(self, value) -> None:
        """Fill the array with a scalar value (in place)."""
        self[...] = value

    def __setstate__(self, state):
        raise TypeError("use pickle.loads")


def _unpickle(value, scalar=False):
    return ndarray._from_node(graph.leaf(np.asarray(value, order="C")), scalar)


class _Flat:
    """``a.flat``: indexing reads/writes the raveled array."""

    def __init__(self, arr):
        self._arr = arr

    def __getitem__(self, idx):
        return self._arr.ravel()[idx] if self._arr.flags.c_contiguous else \
            self._arr.flatten()[idx]

    def __setitem__(self, idx, value):
        from . import _namespace as ns
        flat = ns.reshape(self._arr, -1)
        if flat._var is self._arr._var:
            flat[idx] = value
        else:
            flat[idx] = value
            self._arr[...] = flat.reshape(self._arr.shape)

    def __iter__(self):
        return iter(self._arr.ravel())

    def __len__(self):
        return self._arr.size

    def __array__(self, dtype=None, copy=None):
        return np.asarray(self._arr._value().ravel(), dtype=dtype)


def _install_methods():
    """Methods and dunders that delegate to the namespace (defined in _methods)."""
    from . import _methods
    _methods.install(ndarray)


if graph.speedups is not None:
    graph.speedups.configure_array(ndarray)
