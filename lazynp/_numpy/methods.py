"""``ndarray`` dunders and methods, each delegating to the lazy namespace; :func:`install`
sets them on :class:`lazynp.ndarray` (called once, by lazynp/__init__.py)."""
from __future__ import annotations

import builtins
import operator
import os
import sys

import numpy as np

from . import composite, namespace as ns
from .._base import native as _native
from .. import devices as _devices
from .eager import NOT_EAGER, eager_method
from . import fallback as _fallback
from .fallback import _note, dispatch_numpy_function, public_namespace
from .shortcuts import METHODS
from .ufunc import UFUNCS
from ..array import indexing, views as _views
from ..array.ndarray import CORE_NAMES, add_member, configure_core, ndarray
from ..core import graph
from ..ops.core import ASTYPE

_BINARY = {
    "add": "add", "sub": "subtract", "mul": "multiply", "truediv": "true_divide",
    "floordiv": "floor_divide", "mod": "remainder", "pow": "power", "and": "bitwise_and",
    "or": "bitwise_or", "xor": "bitwise_xor", "lshift": "left_shift", "rshift": "right_shift",
}
_COMPARE = {"eq": "equal", "ne": "not_equal", "lt": "less", "le": "less_equal",
            "gt": "greater", "ge": "greater_equal"}
_UNARY = {"neg": "negative", "pos": "positive", "abs": "absolute", "invert": "invert"}


def _binary_dunder(uf, reflected: bool):
    """``a (op) b``, or the reflected ``b (op) a``, through the ufunc's recording fast path."""
    if uf._op is not None:
        return uf.dunder(reflected, uf.__name__ in ("multiply", "add"))
    if reflected:
        return lambda self, other: uf(other, self)
    return lambda self, other: uf(self, other)


def _inplace(uf):
    def f(self, other):
        uf(self, other, out=self)
        return self
    return f


#: operand types NumPy's operators never give way to (arrays, Python and NumPy scalars)
_NEVER_DEFER = frozenset((int, float, complex, bool, np.ndarray, ndarray,
                          *np.sctypeDict.values()))
#: ``numpy.ndarray.__array_priority__``: lazynp's operators give way as NumPy's array does
_NUMPY_PRIORITY = 0.0
_MISSING = object()


def should_defer(self, other, reflected: str | None, inplace: bool = False) -> bool:
    """NumPy's ``binop_should_defer`` for ``self (op) other``: give way (return
    NotImplemented) to an operand whose type sets ``__array_ufunc__ = None``, or has no
    ``__array_ufunc__`` and a higher ``__array_priority__`` than NumPy's array (SciPy's
    sparse matrices: ``ones(3) @ csr`` is ``csr.__rmatmul__``).  ``reflected``: the
    reflected method the other type must define (None for comparisons)."""
    t = type(other)
    if t in _NEVER_DEFER or isinstance(other, (ndarray, np.ndarray, np.generic)):
        return False
    if reflected is not None and getattr(t, reflected, None) is None and \
            getattr(t, "__" + reflected[3:], None) is None:
        return False        # (NumPy: the other type has no slot for this operator)
    uf = getattr(t, "__array_ufunc__", _MISSING)
    if uf is not _MISSING:
        return not inplace and uf is None
    try:
        prio = float(getattr(other, "__array_priority__", -1e6))
    except (TypeError, ValueError):
        return False
    return prio > _NUMPY_PRIORITY


_F64 = np.dtype(np.float64)

#: the operator Python tries on the right operand after a comparison gives way
_SWAPPED = {"__lt__": "__gt__", "__le__": "__ge__", "__eq__": "__eq__", "__ne__": "__ne__",
            "__gt__": "__lt__", "__ge__": "__le__"}


def _deferring(f, reflected: str, inplace: bool = False):
    """``f`` (a forward operator or comparison; ``reflected``: what Python calls on the
    other operand next), giving way to the other operand as NumPy's array does.  That
    operand gets this array as a NumPy array (SciPy's sparse matrices take only those: with
    a NumPy array ``ones(3) + csr`` is ``csr.__radd__(ones(3))``); NotImplemented when it
    declines that too.  In place, the operator gives way to the plain one."""
    comparison = reflected in _SWAPPED     # (NumPy gives way there without checking)
    def dunder(self, other):
        if type(other) not in _NEVER_DEFER and \
                should_defer(self, other, None if comparison else reflected, inplace):
            method = None if inplace else getattr(other, reflected, None)
            return NotImplemented if method is None else method(self.__array__())
        return f(self, other)
    dunder.__name__ = getattr(f, "__name__", "dunder")
    return dunder


#: NumPy's ``a ** e`` on a float or complex array, with ``e`` exactly a Python int 2 or -1 or
#: a Python float 0.5, is its ``square``, ``reciprocal`` or ``sqrt`` ufunc (NumPy's
#: ``fast_scalar_power``; in place too).  For complex arrays those give other bits than
#: ``np.power`` (``z ** 2`` of 1M complex128 values: 30% of them), so the recorded operator
#: takes the same ufunc.  ``** 2`` is ``square`` for every non-object dtype (NumPy 2.4,
#: gh-29388): a bool array's ``b ** 2`` is int8, where ``np.power(b, 2)`` is int64.
_FAST_POWERS = {(int, 2): "square", (int, -1): "reciprocal", (float, 0.5): "sqrt"}


def _fast_power(self, e):
    t = type(e)
    if t is int or t is float:
        name = _FAST_POWERS.get((t, e))
        kind = self.dtype.kind
        if name is not None and (kind in "fc" or name == "square" and kind != "O"):
            return UFUNCS[name]
    return None


def _power_dunder(uf):
    plain = _binary_dunder(uf, reflected=False)

    def __pow__(self, other):
        fast = _fast_power(self, other)
        return plain(self, other) if fast is None else fast(self)
    return __pow__


def _power_inplace(uf):
    plain = _inplace(uf)

    def __ipow__(self, other):
        fast = _fast_power(self, other)
        if fast is None:
            return plain(self, other)
        fast(self, out=self)
        return self
    return __ipow__


def _compare(uf):
    def f(self, other):
        try:
            return uf(self, other)
        except (TypeError, ValueError) as exc:
            if uf.__name__ in ("equal", "not_equal") and isinstance(exc, TypeError):
                if self.dtype.kind == "V":
                    # structured arrays: NumPy's ``==`` compares field by field (no ufunc)
                    op = operator.eq if uf.__name__ == "equal" else operator.ne
                    return _fallback.call_numpy(op, f"ndarray.__{op.__name__}__", (self, other), {})
                return NotImplemented
            raise
    return f


def _unary(uf):
    def f(self):
        return uf(self)
    return f


def _reshape(self, *shape, order="C", copy=None):
    if len(shape) == 1 and not isinstance(shape[0], (int, np.integer)):
        shape = shape[0]
    return ns.reshape(self, shape, order=order, copy=copy)


def _transpose(self, *axes):
    if not axes or axes == (None,):
        return ns.transpose(self)
    if len(axes) == 1 and not isinstance(axes[0], (int, np.integer)):
        axes = axes[0]
    return ns.transpose(self, axes)


def _astype(self, dtype, order="K", casting="unsafe", subok=True, copy=True, **unknown):
    if unknown:
        raise TypeError(f"astype() got an unexpected keyword argument '{next(iter(unknown))}'")
    # NumPy's errors for the arguments (dtype, order, casting), before any work
    np.empty(0, self.dtype).astype(dtype, order=order, casting=casting, subok=subok,
                                   copy=copy)
    dtype = np.dtype(dtype)
    if not np.can_cast(self.dtype, dtype, casting):
        raise TypeError(f"Cannot cast array data from {self.dtype!r} to {dtype!r} according "
                        f"to the rule '{casting}'")
    if dtype == self.dtype and not copy:
        return self
    if dtype.itemsize == 0 and dtype.kind in "SUV":
        # an unsized string type: NumPy sizes it from the source type (float64 -> 'S32'),
        # from the values for objects
        if self.dtype.kind == "O":
            return ns.asarray(self._value().astype(dtype, order=order, casting=casting))
        dtype = np.empty(1, self.dtype).astype(dtype).dtype
    node = graph.record(ASTYPE, (self._node(),), {"dtype": dtype}, self.shape, dtype)
    return type(self)._from_node(node)


def _copy(self, order="C"):
    return ns.copy(self)


def _flatten(self, order="C"):
    return ns.copy(ns.ravel(self, order))


def _ravel(self, order="C"):
    return ns.ravel(self, order)


def _sort(self, axis=-1, kind=None, order=None, stable=None):
    self[...] = ns.sort(self, axis=axis, kind=kind, order=order)


def _view(self, dtype=None, type=None):
    """NumPy's ``ndarray.view``.  ``type`` (or ``dtype`` given a class) an ndarray subclass:
    NumPy's object of that class on this array's buffer, as NumPy returns it (a counted
    fallback; the buffer is given out as by ``numpy.asarray``: shared from then on)."""
    lazy = builtins.type(self)
    if type is None and isinstance(dtype, builtins.type) and \
            issubclass(dtype, (np.ndarray, lazy)):
        dtype, type = None, dtype
    if type is not None and type is not lazy:
        if not (isinstance(type, builtins.type) and issubclass(type, np.ndarray)):
            raise ValueError("Type must be a sub-type of ndarray type")
        _note("ndarray.view")
        buffer = self.__array__()
        return buffer.view(type) if dtype is None else buffer.view(dtype, type)
    if dtype is None:
        return self[...]
    return _views.view(self, np.ndarray.view, np.dtype(dtype))


def _conj(self):
    kind = self.dtype.kind
    if kind in "biuf":
        return self      # NumPy returns the array itself for real dtypes
    if kind not in "cO":
        raise TypeError("cannot conjugate non-numeric dtype")
    return UFUNCS["conjugate"](self)    # (an object array: each element's conjugate())


def _dot(self, b, out=None):
    return ns.dot(self, b, out=out)


def _round(self, decimals=0, out=None):
    return ns.round(self, decimals, out)


def _array_wrap(self, array, context=None, return_scalar=False):
    """NumPy's ``ndarray.__array_wrap__``: ``array`` (a NumPy result) as this array's type,
    a lazynp array sharing its buffer; NumPy's scalar for a 0-d one when
    ``return_scalar``."""
    if return_scalar and np.ndim(array) == 0:
        return np.asarray(array)[()]
    return ns.asarray(array)


def _device(self):
    """The Array API's ``device``: the :class:`lazynp.devices.Device` the array lives on
    (``device('cpu')``, equal to NumPy's ``'cpu'``; a GPU array's is ``device('cuda:N')``)."""
    return _devices.CPU


def _to_device(self, device, /, *, stream=None):
    """The Array API's ``to_device``: the array on ``device`` (itself for the CPU, as
    NumPy's ``to_device('cpu')``)."""
    if stream is not None:
        raise ValueError("The stream argument in to_device() is not supported")
    d = _devices.device(device)
    if d == _devices.CPU:
        return self
    return ns.asarray(self, device=d)


def _python_round(self, ndigits=None):
    if ndigits is None:
        return round(self._value()[()]) if self.ndim == 0 else ns.round(self)
    return ns.round(self, ndigits)


def _nonzero(self):
    return ns.nonzero(self)


def _item_method(name):
    fn = getattr(ns, name)
    kind = _METHOD_KINDS.get(name)
    if kind is None:        # a view (squeeze, swapaxes, diagonal): lazynp's view machinery
        def f(self, *args, **kwargs):
            return fn(self, *args, **kwargs)
    else:
        def f(self, *args, **kwargs):
            # the policy: NumPy's own method at once when ``self`` is computed and small
            r = eager_method(self, name, args, kwargs, kind)
            if r is NOT_EAGER:
                return fn(self, *args, **kwargs)
            return r
    f.__name__ = name
    f.__doc__ = getattr(np.ndarray, name, fn).__doc__
    return f


_METHOD_KINDS = dict.fromkeys("sum prod mean std var min max argmin argmax all any cumsum "
                              "cumprod".split(), "reduction")
_METHOD_KINDS.update(dict.fromkeys("clip".split(), "elementwise"))
_METHOD_KINDS.update(dict.fromkeys("repeat take trace argsort searchsorted choose "
                                   "argpartition".split(), "opaque"))


_DELEGATED = ("sum", "prod", "mean", "std", "var", "min", "max", "argmin", "argmax", "all",
              "any", "cumsum", "cumprod", "clip", "squeeze", "repeat", "take", "swapaxes",
              "diagonal", "trace", "argsort", "searchsorted", "ptp", "choose",
              "argpartition")


def _compress(self, condition, axis=None, out=None):
    return composite.compress(condition, self, axis=axis, out=out)


def _partition(self, kth, axis=-1, kind="introselect", order=None):
    self[...] = ns.partition(self, kth, axis=axis, kind=kind, order=order)


def _resize(self, *new_shape, refcheck=True):
    if len(new_shape) == 1 and not isinstance(new_shape[0], (int, np.integer)):
        new_shape = new_shape[0]
    v = np.array(self._value(), copy=True)
    v.resize(new_shape, refcheck=False)
    fresh = ns.asarray(v)
    self._var, self._shadow, self._geom = fresh._var, None, None


def _byteswap(self, inplace=False):
    swapped = ns.asarray(self._value().byteswap())
    if inplace:
        self[...] = swapped
        return self
    return swapped


def _matmul(self, other):
    return ns.matmul(self, other)


def _rmatmul(self, other):
    return ns.matmul(other, self)


def _imatmul(self, other):
    self[...] = ns.matmul(self, other)
    return self


def _divmod(self, other):
    return UFUNCS["divmod"](self, other)


def _rdivmod(self, other):
    return UFUNCS["divmod"](other, self)


def _getfield(self, dtype, offset=0):
    return ns.asarray(self._value().getfield(dtype, offset))


def _put(self, indices, values, mode="raise"):
    _fallback.call_numpy(np.put, "put", (self, indices, values), {"mode": mode})


def _tofile(self, fid, sep="", format="%s"):
    self._value().tofile(fid, sep, format)


def _dump(self, file):
    np.asarray(self._value()).dump(file)


def _real(self):
    return ns.real(self)


def _set_real(self, value) -> None:
    self.real[...] = value


def _imag(self):
    return ns.imag(self)


def _set_imag(self, value) -> None:
    if self.dtype.kind != "c":
        raise TypeError("array does not have imaginary part to set")
    self.imag[...] = value


def _contains(self, item) -> bool:
    return bool(ns.any(self == item))


_EMPTY = np.empty(0)


def _array_namespace(self, /, *, api_version=None):
    """The Array API's ``__array_namespace__``: lazynp, for the versions NumPy supports
    (NumPy's own check: ``ValueError`` naming an unsupported ``api_version``)."""
    if api_version is not None:
        _EMPTY.__array_namespace__(api_version=api_version)
    return public_namespace()


def _refuse_numpy_mean_into_lazy_out() -> None:
    """``numpy.ndarray.mean/var/std(out=<lazynp array>)``: NumPy's method divides the sum in
    ``out`` only when ``isinstance(out, numpy.ndarray)``, so it would leave the sum there."""
    caller = sys._getframe(2).f_code
    if caller.co_name in ("_mean", "_var") and \
            caller.co_filename.endswith(os.path.join("_core", "_methods.py")):
        name = caller.co_name[1:]
        raise TypeError(f"numpy.ndarray.{name}() cannot write into a lazynp array given as "
                        f"out= (NumPy's method needs a numpy.ndarray there); use "
                        f"lazynp.{name}(a, out=out) or a NumPy array as out")


def _linalg_vecdot(x1, x2, axis=-1):
    """``numpy.vecdot(x1, x2)``: ``sum(conj(x1) * x2, axis)`` from recorded ops."""
    x1, x2 = ns.asarray(x1), ns.asarray(x2)
    # NumPy's errors and result dtype (a plain sum would widen small integers: uint8 -> uint64)
    dtype = np.vecdot(np.zeros(x1.shape, x1.dtype), np.zeros(x2.shape, x2.dtype),
                      axis=axis).dtype
    return ns.sum(ns.conjugate(x1) * x2, axis=axis, dtype=dtype)


def _array_ufunc(self, uf, method, *inputs, **kwargs):
    if isinstance(self, type):
        # (``numpy.isnat(lazynp.ndarray)``: the class itself, found through its metaclass;
        # NumPy then raises its TypeError instead of calling lazynp's ufunc on it forever)
        return NotImplemented
    out = kwargs.get("out")
    if type(out) is tuple and len(out) == 1:
        # (NumPy hands ``out`` as a tuple: lazynp's reductions and functions take the array)
        kwargs["out"] = out[0]
        if method == "reduce" and isinstance(out[0], ndarray):
            _refuse_numpy_mean_into_lazy_out()
    lazy = UFUNCS.get(uf.__name__)
    if method == "__call__" and any(type(x) is np.ndarray and x.shape == () and
                                    x.dtype == _F64 for x in inputs):
        # (``np.float64(c) <= lazy``: NumPy hands its scalar as a 0-d array; as the scalar
        # it is, read now as NumPy reads it, the op can join a tree kernel)
        inputs = tuple(x[()] if type(x) is np.ndarray and x.shape == () and x.dtype == _F64
                       else x for x in inputs)
    if lazy is None or lazy._np is not uf:
        if uf is np.matmul and method == "__call__":
            return ns.matmul(*inputs, **kwargs)
        if uf is np.vecdot and method == "__call__" and set(kwargs) <= {"axis"} and \
                len(inputs) == 2:       # (the ufunc is linalg.vecdot: recorded, differentiable)
            return _linalg_vecdot(*inputs, **kwargs)
        return _fallback.call_numpy(getattr(uf, method) if method != "__call__" else uf,
                          f"{uf.__name__}.{method}", inputs, kwargs)
    return getattr(lazy, method)(*inputs, **kwargs) if method != "__call__" \
        else lazy(*inputs, **kwargs)


def _array_function(self, func, types, args, kwargs):
    return dispatch_numpy_function(func, args, kwargs)


def install() -> None:
    """Set the dunders and methods on :class:`lazynp.ndarray`, except those its core type
    implements itself (the C core is handed their Python paths instead)."""
    real, imag = property(_real, _set_real), property(_imag, _set_imag)
    configure_core(getitem=indexing.getitem, setitem=indexing.setitem,
                   array_ufunc=_array_ufunc, real=real, imag=imag)
    members = {"__getitem__": indexing.getitem, "__setitem__": indexing.setitem,
               "real": real, "imag": imag, "__contains__": _contains,
               "__array_namespace__": _array_namespace, "__array_ufunc__": _array_ufunc,
               "__array_function__": _array_function}
    plain = {}      # (the operators without the deferral check: see configure_dunders)
    for dunder, name in _BINARY.items():
        uf = UFUNCS[name]
        plain[f"__{dunder}__"] = _binary_dunder(uf, reflected=False)
        plain[f"__i{dunder}__"] = _inplace(uf)
        members[f"__{dunder}__"] = _deferring(plain[f"__{dunder}__"], f"__r{dunder}__")
        members[f"__r{dunder}__"] = _binary_dunder(uf, reflected=True)
        members[f"__i{dunder}__"] = _deferring(plain[f"__i{dunder}__"], f"__r{dunder}__", True)
    plain["__pow__"] = _power_dunder(UFUNCS["power"])
    plain["__ipow__"] = _power_inplace(UFUNCS["power"])
    members["__pow__"] = _deferring(plain["__pow__"], "__rpow__")
    members["__ipow__"] = _deferring(plain["__ipow__"], "__rpow__", True)
    for dunder, name in _COMPARE.items():
        members[f"__{dunder}__"] = _deferring(_compare(UFUNCS[name]), _SWAPPED[f"__{dunder}__"])
    for dunder, name in _UNARY.items():
        members[f"__{dunder}__"] = _unary(UFUNCS[name])
    members.update(
        __matmul__=_deferring(_matmul, "__rmatmul__"), __rmatmul__=_rmatmul,
        __imatmul__=_deferring(_imatmul, "__rmatmul__", True),
        __divmod__=_deferring(_divmod, "__rdivmod__"),
        __rdivmod__=_rdivmod, __array_wrap__=_array_wrap, device=property(_device),
        to_device=_to_device, __round__=_python_round, reshape=_reshape, transpose=_transpose,
        astype=_astype, copy=_copy, flatten=_flatten, ravel=_ravel, sort=_sort, view=_view,
        conj=_conj, conjugate=_conj, dot=_dot, round=_round, nonzero=_nonzero,
        getfield=_getfield, compress=_compress, partition=_partition, resize=_resize,
        byteswap=_byteswap, put=_put, tofile=_tofile, dump=_dump)
    for name in _DELEGATED:
        members[name] = _item_method(name)
    if _native.ext is not None:
        _native.ext.configure_methods(
            {n: members[n] for n in _native.ext.METHOD_NAMES}, METHODS)
    for name, value in members.items():
        if name not in CORE_NAMES:
            add_member(name, value)
    if _native.ext is not None and "__add__" in CORE_NAMES:
        # The C type's own dunders try NumPy at once and fall back to these recorded paths.
        dunder_names = {**{k: k for k in _BINARY}, "matmul": "matmul", "divmod": "divmod"}
        _native.ext.configure_dunders(
            forward={k: members[f"__{d}__"] for k, d in dunder_names.items()},
            reflected={k: members[f"__r{d}__"] for k, d in dunder_names.items()},
            inplace={k: members.get(f"__i{d}__") for k, d in dunder_names.items()},
            forward_plain={k: plain.get(f"__{d}__", members[f"__{d}__"])
                           for k, d in dunder_names.items()},
            inplace_plain={k: plain.get(f"__i{d}__", members.get(f"__i{d}__"))
                           for k, d in dunder_names.items()},
            never_defer=_NEVER_DEFER,
            compare=[members[f"__{d}__"] for d in ("lt", "le", "eq", "ne", "gt", "ge")],
            unary=[members[f"__{d}__"] for d in ("neg", "pos", "abs", "invert")])
