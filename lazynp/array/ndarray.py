"""``lazynp.ndarray``: a handle on a storage Var plus a view geometry.

Shape and dtype are known without computing.  A base array reads its Var's head; a view
(basic slicing, transpose, reshape, ...) keeps a *shadow*: a NumPy view of an array of the
base's shape (the head's own buffer when it is computed, else an uncommitted ``np.empty``),
produced by NumPy's own view functions.  The shadow gives NumPy's exact shapes, strides,
errors and view-vs-copy decisions for free, and its byte offset/strides are the geometry
realized on the real buffer when the view is read.

An array computed at once by the execution policy (:mod:`lazynp.core.policy`) starts
*detached*: it holds its NumPy value and no Var; the Var (with a computed leaf) is made the
first time something needs it (a view, a recorded op reading it).

The class is made of two parts.  The *core* (state, construction, metadata, indexing, the
arithmetic dunders: the hot paths of eager code) is the C type ``lazynp._speedups.ndarray``
when the extension is built, else :class:`_CoreReference` below (the reference the C one is
tested against).  The *members* are Python: :class:`_Members`, installed on the core type
here, and those the namespace layer installs through :func:`add_member` and
:func:`configure_core` (:func:`lazynp._numpy.methods.install`: the dunders and methods that
delegate to the namespace, and, on the pure Python core, ``__getitem__``/``__setitem__``).
"""
from __future__ import annotations

import copy as _copy
import operator
import sys
import weakref

import numpy as np

from ..core import policy as _policy, graph
from .._base import native as _native
from ..core.graph import DONE, Node, Var
from .flags import ArrayFlags


def _data_offset_py(a: np.ndarray, base: np.ndarray) -> int:
    """Byte offset of ``a``'s data pointer from ``base``'s."""
    return a.__array_interface__["data"][0] - base.__array_interface__["data"][0]


_data_offset = _data_offset_py if _native.ext is None else _native.ext.data_offset


def _c_contiguous_owned(value: np.ndarray) -> np.ndarray:
    """``value`` as a buffer an array may own: C-contiguous (lazynp's buffers all are)."""
    return value if value.flags.c_contiguous else np.ascontiguousarray(value)


_EXACT_EXPORTS: dict = {}


class _Interface:
    def __init__(self, value: np.ndarray):
        self.__array_interface__ = value.__array_interface__


def _exports_exactly(dtype: np.dtype, protocol: str) -> bool:
    """Whether NumPy reads ``dtype`` back unchanged through ``protocol`` ("buffer": PEP
    3118, or "interface": ``__array_interface__``).  Not so for some structured dtypes
    (fields out of offset order, the gaps a multi-field view leaves...)."""
    exact = _EXACT_EXPORTS.get((dtype, protocol))
    if exact is None:
        probe = np.zeros(1, dtype)
        try:
            via = memoryview(probe) if protocol == "buffer" else _Interface(probe)
            exact = np.asarray(via).dtype == dtype
        except (BufferError, ValueError, TypeError, RuntimeError, NotImplementedError):
            exact = False
        _EXACT_EXPORTS[(dtype, protocol)] = exact
    return exact


def _integer_request(dtype) -> bool:
    """True when ``__array__`` is asked for an integer or boolean dtype."""
    return dtype is not None and np.dtype(dtype).kind in "iub"


def check_buffer_dtype(dtype: np.dtype) -> None:
    """Raise for a structured dtype PEP 3118 cannot carry exactly (NumPy's own error where
    NumPy refuses it, else BufferError): NumPy, which tries the buffer protocol first, then
    reads the array another way."""
    if not _exports_exactly(dtype, "buffer"):
        memoryview(np.zeros(1, dtype))          # NumPy's error, when NumPy raises one
        raise BufferError(f"lazynp: dtype {dtype} has no exact PEP 3118 buffer format")


class _CoreReference:
    """The array's state and hot paths in pure Python (the C core mirrors this).

    ``_v``: the Var (None while detached); ``_val``: the NumPy value while detached;
    ``_shadow``/``_geom``: the view geometry (None for a base array); ``_scalar``: a 0-d
    result that NumPy would give as a scalar (only while it is pending or traced: computed
    ones are NumPy's scalars); ``_ext``: a detached array whose buffer the user holds too
    (``asarray`` of a NumPy array, or given out by ``__array__``: ops reading or writing
    it run at once, see :func:`lazynp.core.graph.run_now`).
    """


    __slots__ = ("_v", "_val", "_shadow", "_geom", "_scalar", "_ext", "_owner", "__weakref__")
    __array_priority__ = 100.0

    def __new__(cls, shape=None, dtype=float, buffer=None, offset=0, strides=None,
                order=None):
        if shape is None:
            raise TypeError("ndarray() missing required argument 'shape' (pos 0)")
        return _construct(cls, shape, dtype, buffer, offset, strides, order)

    # --- construction ------------------------------------------------------------------
    @classmethod
    def _from_node(cls, node: Node, scalar: bool = False):
        """The array holding ``node``'s value; NumPy's scalar when ``scalar`` (a 0-d result
        NumPy gives as a scalar) outside a transform or lazy policy: a pending node is then
        computed now (one flush running the kernel that produces it), as NumPy returns a
        scalar (``json.dumps``, ``hash``, ``isinstance(m, float)`` need one)."""
        if scalar and not _policy.record_all:
            if node.state != DONE:
                graph.materialize(node)     # (raises the node's error, as NumPy at the call)
            if node.value is not None and node.error is None:
                return node.value[()]
        self = object.__new__(cls)
        self._v = Var(node)
        self._val = None
        self._shadow = None
        self._geom = None
        self._scalar = scalar
        self._ext = False
        self._owner = None
        return self

    @classmethod
    def _blank(cls):
        """A handle with no state yet (set ``_var`` or ``_val`` next)."""
        self = object.__new__(cls)
        self._v = self._val = self._shadow = self._geom = self._owner = None
        self._scalar = self._ext = False
        return self

    @classmethod
    def _from_shared(cls, value: np.ndarray):
        """A detached computed array on ``value``, a C-contiguous NumPy array the caller
        keeps (``asarray``): its buffer is shared, as in NumPy."""
        self = cls._from_value(value)
        self._ext = True
        return self

    @classmethod
    def _from_value(cls, value: np.ndarray):
        """A detached computed array owning ``value`` (C-contiguous, shared with nothing
        lazynp holds)."""
        self = object.__new__(cls)
        self._v = None
        self._val = value
        self._shadow = None
        self._geom = self._owner = None
        self._scalar = self._ext = False
        return self

    @property
    def _var(self) -> Var:
        """The storage Var (a detached array gets one now, holding its value)."""
        v = self._v
        if v is None:
            v = self._v = Var(graph.leaf(self._val, self._ext))
            self._val = None
        return v

    @_var.setter
    def _var(self, var: Var) -> None:
        self._v = var
        self._val = None

    def _view_of(self, shadow: np.ndarray, off: int | None = None):
        """A new handle on the same Var with ``shadow``'s geometry (``off``: its byte offset
        in the Var's buffer, when the caller knows it)."""
        v = type(self)._blank()
        v._v = var = self._var
        if off is None:
            off = _data_offset(shadow, var.shadow)
        v._shadow = shadow
        v._geom = (off, shadow.shape, shadow.strides, shadow.dtype)
        v._scalar = False
        v._owner = self if self._geom is None else getattr(self, "_owner", None)
        return v

    def _get_shadow(self) -> np.ndarray:
        if self._shadow is not None:
            return self._shadow
        var = self._var
        if var.shadow is None:
            h = var.head
            # a computed head's own buffer (no allocation; its views are real data), else
            # an uncommitted buffer of its shape
            var.shadow = h.value if h.state == DONE and h.value is not None and \
                h.error is None and type(h.value) is np.ndarray else np.empty(h.shape, h.dtype)
        return var.shadow

    # --- reading -----------------------------------------------------------------------
    def _node(self) -> Node:
        """The node holding this array's current value (recording a view if needed)."""
        g = self._geom
        var = self._var
        if g is None:
            return var.head
        return graph.view_node(var.head, g[0], g[1], g[2], g[3])

    def _eager_value(self):
        """This array's NumPy value when it is computed (a view of the buffer for a view;
        do not mutate it), else None.  Never forces anything."""
        v = self._v
        if v is None:
            return self._val
        h = v.head
        if h.state != DONE or h.value is None or h.error is not None:
            return None
        g = self._geom
        if g is None:
            return h.value
        if v.shadow is h.value:
            return self._shadow
        return np.ndarray(g[1], g[3], buffer=h.value, offset=g[0], strides=g[2])

    def _value(self) -> np.ndarray:
        """Force this array and return its NumPy value (do not mutate it)."""
        val = self._eager_value()
        if val is not None:
            return val
        return graph.materialize(self._node())

    @property
    def shape(self) -> tuple:
        s = self._shadow
        if s is not None:
            return s.shape
        v = self._v
        return self._val.shape if v is None else v.head.shape

    @shape.setter
    def shape(self, value) -> None:
        new = self._get_shadow().view()
        new.shape = value  # NumPy raises AttributeError when a copy would be needed
        self._rebind_shadow(new)

    @property
    def dtype(self) -> np.dtype:
        s = self._shadow
        if s is not None:
            return s.dtype
        v = self._v
        return self._val.dtype if v is None else v.head.dtype

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n

    def __len__(self) -> int:
        shape = self.shape
        if not shape:
            raise TypeError("len() of unsized object")
        return shape[0]

    if sys.version_info >= (3, 12):
        def __buffer__(self, flags: int) -> memoryview:
            """The buffer protocol (the C core has it on every Python version)."""
            if self.dtype.kind == "V":
                check_buffer_dtype(self.dtype)
            return memoryview(self.__array__())

    # --- indexing (``__getitem__``/``__setitem__``: lazynp.array.indexing's) --------------
    def __delitem__(self, index):
        raise ValueError("cannot delete array elements")

    def __iter__(self):
        if not self.shape:
            raise TypeError("iteration over a 0-d array")
        return (self[i] for i in range(self.shape[0]))


def _construct(cls, shape, dtype, buffer, offset, strides, order):
    """``lazynp.ndarray(shape, dtype, buffer, offset, strides, order)``: NumPy's
    constructor (an uninitialized array, or a view of ``buffer`` sharing its memory)."""
    value = _construct_value(shape, dtype, buffer, offset, strides, order)
    return cls._from_value(value) if buffer is None else cls._from_shared(value)


def _construct_value(shape, dtype=float, buffer=None, offset=0, strides=None, order=None):
    if isinstance(buffer, _CORE_TYPES):
        buffer = buffer._value()
    value = np.ndarray(shape, dtype, buffer=buffer, offset=offset, strides=strides,
                       order=order)
    if not value.flags.c_contiguous:
        value = np.ascontiguousarray(value)   # (lazynp buffers are C-ordered: docs/numpy-differences.md)
    return value


class _Members:
    """The Python members of ``lazynp.ndarray`` (installed on the core type)."""

    def _rebind_shadow(self, shadow: np.ndarray) -> None:
        var = self._var
        if shadow.shape == var.head.shape and var.shadow is not None and \
                shadow.strides == var.shadow.strides and shadow.dtype == var.head.dtype \
                and _data_offset(shadow, var.shadow) == 0:
            self._shadow = None
            self._geom = None
            return
        v = self._view_of(shadow)
        self._shadow, self._geom = v._shadow, v._geom

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
        return ArrayFlags(self._shadow.flags, owndata=self._geom is None)

    def setflags(self, write=None, align=None, uic=None) -> None:
        """Set WRITEABLE (the only flag lazynp tracks) like :meth:`numpy.ndarray.setflags`."""
        self.flags.writeable = self.flags.writeable if write is None else write

    @property
    def base(self):
        """The array owning the memory of a view (the one it was made from, as NumPy:
        ``a[...].base is a``), None for an array owning its memory."""
        if self._geom is None:
            return None
        owner = getattr(self, "_owner", None)
        if owner is not None and owner._v is self._v and owner._geom is None:
            return owner
        return ndarray._base_handle(self._var)

    @staticmethod
    def _base_handle(var):
        b = ndarray._blank()
        b._var = var
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
    def flat(self):
        return _Flat(self)

    @flat.setter
    def flat(self, value) -> None:
        """``a.flat = value``: NumPy's flat assignment, ``value``'s elements cast (unsafe)
        and repeated in C order over the whole array."""
        v = np.asarray(value, dtype=self.dtype).reshape(-1)
        if v.size:
            self[...] = np.resize(v, self.size).reshape(self.shape)

    # ``data`` and ``ctypes`` give out the buffer itself (as NumPy): from then on it is
    # shared with the caller, like ``numpy.asarray(a)`` (see ``__array__``)
    @property
    def data(self):
        return self.__array__().data

    @property
    def ctypes(self):
        return np.asarray(self.__array__(), order="C").ctypes

    # --- forcing points ----------------------------------------------------------------
    def __array__(self, dtype=None, copy=None):
        if self._v is None:            # a detached computed array: its buffer, as NumPy
            v = self._val
            if dtype is not None and v.dtype != dtype:
                return v.astype(dtype)
            if copy or _policy.record_all:
                return v.copy(order="K")
            self._ext = True
            return v
        if graph.shared.array_hook is not None and not _integer_request(dtype):
            # (autograd: no silent constant on its path; a cast to an integer, e.g.
            # numpy.int64(x), is a value with a zero gradient, as in autograd)
            graph.shared.array_hook(self)
        v = self._value()
        if _policy.record_all:
            # everything is recorded (policy "lazy", or a transform): a snapshot, so that
            # recorded readers never see the caller's later writes to it
            v = v.astype(dtype) if dtype is not None and v.dtype != dtype else v
            return v.copy(order="K")
        h = self._var.head
        if h.exported is not True:
            h.exported = True            # shared with the caller from now on: later ops
            if h.use_count and graph.counts.pending_count:    # on it run at once, and readers
                live = graph.live_pending_heads()        # recorded before run now (and
                if live:                                 # finish) before the caller writes
                    graph.flush(live)
        if dtype is not None and v.dtype != dtype:
            return v.astype(dtype)
        if copy:
            return v.copy(order="K")
        return v

    @property
    def __array_interface__(self) -> dict:
        """NumPy's array interface of the value (forced): its memory is shared with the
        caller as by ``numpy.asarray(a)``, and kept alive as long as this array is.  Absent
        for a structured dtype the interface cannot carry exactly (NumPy then reads the
        array through ``__array__``)."""
        if self.dtype.kind == "V" and not _exports_exactly(self.dtype, "interface"):
            raise AttributeError("__array_interface__")
        if graph.shared.array_hook is not None and self.dtype.kind in "fc":
            # (a gradient is traced: NumPy then reads the value through __array__, which
            # is told the dtype asked for: numpy.int64(x) is allowed, numpy.asarray(x) not)
            raise AttributeError("__array_interface__")
        value = self.__array__()
        key = id(self)
        if key not in _interface_values:
            weakref.finalize(self, _interface_values.pop, key, None)
        _interface_values[key] = value
        return value.__array_interface__

    def __bytes__(self) -> bytes:
        return self.tobytes()      # (NumPy's bytes(a) reads the buffer: the same bytes)

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
        if self.dtype.kind in "fc" and graph.shared.value_hook is not None:
            graph.shared.value_hook(self, "operator.index", None)   # (autograd: says how)
        if self.dtype.kind not in "iub":
            raise TypeError("only integer scalar arrays can be converted to a scalar index")
        if self.dtype.kind == "b" and self.ndim:
            raise TypeError("only integer scalar arrays can be converted to a scalar index")
        if self.ndim != 0:
            raise TypeError("only integer scalar arrays can be converted to a scalar index")
        return operator.index(self._value()[()])

    def _scalar_value(self, what: str):
        if self.ndim != 0:      # (NumPy 2.4's wording, for every size)
            raise TypeError("only 0-dimensional arrays can be converted to Python scalars")
        v = self._value()[()]
        if graph.shared.value_hook is not None:
            graph.shared.value_hook(self, what, v)    # (autograd: no silent constant on its path)
        return v

    def item(self, *args):
        """Copy an element to a standard Python scalar (forces)."""
        v = self._value().item(*args)
        if graph.shared.value_hook is not None:
            graph.shared.value_hook(self, "item", v)
        return v

    def tolist(self):
        """The array as nested Python lists (forces)."""
        v = self._value().tolist()
        if graph.shared.value_hook is not None:
            graph.shared.value_hook(self, "tolist", v)
        return v

    def tobytes(self, order="C") -> bytes:
        v = self._value()
        if graph.shared.value_hook is not None:
            graph.shared.value_hook(self, "tobytes", v)
        return v.tobytes(order)

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

    __hash__ = None  # like NumPy arrays (unlike NumPy scalars: see docs/numpy-differences.md)

    def __reduce__(self):
        return (_unpickle, (np.array(self._value(), copy=True), self._scalar))

    def __copy__(self):
        return self.copy()

    def __deepcopy__(self, memo):
        return self.copy()

    def __dlpack__(self, /, *, stream=None, max_version=None, dl_device=None, copy=None):
        """The DLPack protocol (NumPy's, on the computed value)."""
        return self._value().__dlpack__(stream=stream, max_version=max_version,
                                        dl_device=dl_device, copy=copy)

    def __dlpack_device__(self, /):
        return self._value().__dlpack_device__()

    # --- writes ------------------------------------------------------------------------
    def _write(self, op, args: tuple, params: dict) -> None:
        """Write ``op`` into this array's region of its Var (at once, or recorded: a new
        head for the Var; see :func:`lazynp.core.graph.record_write`)."""
        p = {"geom": self._geom}
        p.update(params)
        graph.record_write(self._var, op, args, p, self.shape)

    def fill(self, value) -> None:
        """Fill the array with a scalar value (in place)."""
        self[...] = value

    def __setstate__(self, state):
        raise TypeError("use pickle.loads")


#: id(array) -> the value whose memory its ``__array_interface__`` described (kept while the
#: array lives: NumPy's array made from the interface has the lazynp array as its base)
_interface_values: dict = {}


def _unpickle(value, scalar=False):
    value = np.asarray(value, order="C")
    if scalar and value.ndim == 0:
        return value[()]
    return ndarray._from_value(value)


def _reads_like_an_array_index(idx) -> bool:
    """Whether ``a.flat[idx]`` selects what ``a.ravel()[idx]`` does: integers, slices,
    ``...`` and integer arrays.  Others (None, booleans, tuples, floats, lists of booleans)
    follow NumPy's flat-iterator rules, which differ (``a.flat[True]`` is the first element)."""
    if type(idx) is tuple:
        return len(idx) == 1 and type(idx[0]) is not tuple and \
            _reads_like_an_array_index(idx[0])
    if isinstance(idx, (bool, np.bool_)):
        return False
    if isinstance(idx, (int, np.integer, slice)) or idx is Ellipsis:
        return True
    if isinstance(idx, (np.ndarray, ndarray)):
        return idx.dtype.kind in "iu"
    if type(idx) is list:
        return all(type(x) is int for x in idx)
    return False


def _numpy_index(idx):
    """``idx`` with lazynp arrays (also inside a tuple) as NumPy's."""
    if isinstance(idx, ndarray):
        return np.asarray(idx)
    if type(idx) is tuple:
        return tuple(_numpy_index(i) for i in idx)
    return idx


class _Flat:
    """``a.flat``: indexing reads/writes the raveled array."""

    def __init__(self, arr):
        self._arr = arr

    def __getitem__(self, idx):
        if not _reads_like_an_array_index(idx):
            idx = _numpy_index(idx)
            r = self._arr._value().flat[idx]         # (NumPy's flat-iterator rules, errors)
            return ndarray._from_value(r) if type(r) is np.ndarray else r
        return self._arr.ravel()[idx] if self._arr.flags.c_contiguous else \
            self._arr.flatten()[idx]

    def __setitem__(self, idx, value):
        if not _reads_like_an_array_index(idx):
            v = np.array(self._arr._value(), copy=True)
            v.flat[_numpy_index(idx)] = np.asarray(value) if isinstance(value, ndarray) else value
            self._arr[...] = v
            return
        flat = self._arr.reshape(-1)
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


class _ArrayType(type):
    """The metaclass of :class:`lazynp.ndarray`: a class statement deriving from it makes a
    *NumPy* subclass (``numpy.ndarray`` takes its place among the bases).

    User code written against ``np.ndarray`` (which ``import lazynp as np`` makes lazynp's)
    thereby keeps NumPy's subclass semantics: ``__array_finalize__``, view casting,
    ``super().__new__(cls, shape, ...)``, results of operations keeping the subclass.
    """

    def __new__(mcls, name, bases, namespace, **kwargs):
        lazy = globals().get("ndarray")
        if lazy is not None and lazy in bases:
            bases = tuple(np.ndarray if b is lazy else b for b in bases)
            return type(name, bases, namespace, **kwargs)
        return super().__new__(mcls, name, bases, namespace, **kwargs)


_SKIP = frozenset(("__dict__", "__weakref__", "__module__", "__doc__", "__slots__", "__new__",
                   "__init__"))


def _make_class():
    """``lazynp.ndarray``: the C core type when built, else a Python class on the reference
    core; either way with the members of :class:`_Members` (and :mod:`lazynp._numpy.methods`).
    Returns ``(class, names its core defines)``."""
    if _native.ext is not None:
        cls = _native.ext.ndarray
        _native.ext.set_metatype(cls, _ArrayType)
        core = frozenset(cls.__dict__)
        # what NumPy's operators see on the class: None during `numpy_scalar * array`, so
        # that they give way to the array's reflected operator (see OperatorDeferral)
        _ArrayType.__array_ufunc__ = _native.ext.OperatorDeferral(
            cls.__dict__["__array_ufunc__"])
        install = _native.ext.install_member
        for name, value in _CoreReference.__dict__.items():   # the core's cold paths
            if name not in _SKIP and name not in core:
                install(cls, name, value)
    else:
        cls = _ArrayType("ndarray", (_CoreReference,), {"__slots__": (), "__module__": "lazynp",
                                                        "__doc__": _DOC})
        core = frozenset(_CoreReference.__dict__)
        install = setattr
    for name, value in _Members.__dict__.items():
        if name not in _SKIP and name not in core:
            install(cls, name, value)
    return cls, core


_DOC = """A lazy NumPy array.  Use it exactly like :class:`numpy.ndarray`.

Small work on computed arrays runs at once on NumPy; large or pending work is recorded and
runs (fused, planned, multi-threaded) when a value is needed: printing, ``float()``,
``numpy.asarray()``, ``lazynp.evaluate()``...  ``lazynp.ndarray(shape, dtype, buffer,
offset, strides, order)`` is NumPy's constructor.
"""

ndarray, CORE_NAMES = _make_class()   # (CORE_NAMES: the members its core type defines)


def add_member(name: str, value) -> None:
    """Set a method or property on :class:`ndarray` (the C type is otherwise immutable)."""
    if _native.ext is not None:
        _native.ext.install_member(ndarray, name, value)
    else:
        setattr(ndarray, name, value)
_CORE_TYPES = (ndarray,)


def configure_core(*, getitem, setitem, array_ufunc, real: property, imag: property) -> None:
    """Hand the C core (when built) the Python paths of the members that live above this
    module: indexing (:mod:`lazynp.array.indexing`), ``__array_ufunc__`` and the ``real``
    and ``imag`` properties (:mod:`lazynp._numpy.methods`, which calls this once).  The
    pure Python class gets these as members (:func:`add_member`) instead."""
    if _native.ext is None:
        return
    _native.ext.configure_array(
        ndarray, leaf=graph.leaf, leaf_op=graph.LEAF, materialize=graph.materialize,
        getitem=getitem, setitem=setitem, writable=graph.writable_view,
        construct=_construct_value, data_offset=_data_offset,
        view_on=graph.buffer_view, array=_Members.__array__, array_ufunc=array_ufunc,
        transpose=lambda a: a.transpose(), check_buffer_dtype=check_buffer_dtype)
    _native.ext.configure_parts(real, imag)


def register_with_numba() -> None:
    """Teach Numba to type lazynp arrays (:mod:`.numba_typing`, which imports Numba): at
    import when Numba is loaded already, else at Numba's first compile (its extension entry
    point, :mod:`lazynp_numba_extension`), so ``import lazynp`` does not load Numba."""
    from .numba_typing import register
    register(ndarray)


if "numba" in sys.modules:
    register_with_numba()
