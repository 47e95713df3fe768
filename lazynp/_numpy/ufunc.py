"""Lazy ufunc objects: ``lazynp.add`` records instead of computing.

Supports ``__call__`` (with ``out=``, ``where=``, ``dtype=``, ``casting=``), ``reduce``,
``accumulate``, ``outer``, ``at`` and ``reduceat``, with NumPy's dtypes and errors.
"""
from __future__ import annotations

import builtins

import numpy as np

from ..array.ndarray import ndarray

from . import eager as _eager, fallback as _fallback, reductions as _reductions
from .conversion import asarray
from ..core import policy as _policy, graph
from .._base import native as _native
from .. import devices as _devices
from ..array import indexing as _indexing
from ..array.operands import broadcast_shapes, key_of, operand, shape_of, to_numpy
from ..ops import elementwise as ew
from ..ops.core import TUPLE_GET, UFUNC_CALL
from ..ops.registry import Op, register

_NoValue = np._NoValue
_F64 = np.dtype(np.float64)


def _ufunc_out_impl(base, *vals, geom, ufunc, kw, has_where):
    target = base if geom is None else graph.buffer_view(base, *geom)
    if has_where:
        ufunc(*vals[:-1], out=target, where=vals[-1], **kw)
    else:
        ufunc(*vals, out=target, **kw)
    return base


UFUNC_OUT = register(Op("ufunc_out", "write", _ufunc_out_impl, inplace=(0,)))


def _given(**kwargs) -> dict:
    """The keyword arguments that are not None (NumPy's methods reject an explicit None)."""
    return {k: v for k, v in kwargs.items() if v is not None}


def _arrays(result):
    """``result`` (an array, a NumPy scalar or a tuple of them) with each scalar made a 0-d
    array: what NumPy's ufuncs return given ``out=...``."""
    if type(result) is tuple:
        return tuple(_arrays(r) for r in result)
    return result if isinstance(result, ndarray) else asarray(result)


def _ufunc_named(name: str) -> "ufunc":
    return UFUNCS[name]


_UfuncBase = object if _native.ext is None else _native.ext.UfuncBase


class _UfuncType(type):
    """The metaclass of :class:`ufunc`: NumPy's ufunc objects are ``lazynp.ufunc``
    instances too (``isinstance(numpy.add, lazynp.ufunc)``), as code written against
    ``numpy.ufunc`` finds its ufuncs that way (NumPy's own test_ufunc.py collects
    ``[uf for uf in np._core.umath.__dict__.values() if isinstance(uf, np.ufunc)]``)."""

    def __instancecheck__(cls, obj) -> bool:
        return isinstance(obj, np.ufunc) or type.__instancecheck__(cls, obj) or \
            isinstance(getattr(obj, "_np_gufunc", None), np.ufunc)

    def __subclasscheck__(cls, sub) -> bool:
        return (isinstance(sub, type) and issubclass(sub, np.ufunc)) or \
            type.__subclasscheck__(cls, sub)


class ufunc(_UfuncBase, metaclass=_UfuncType):
    """A lazy wrapper of a :class:`numpy.ufunc` with the same interface."""

    def __init__(self, np_ufunc: np.ufunc):
        self._np = np_ufunc
        self._op = ew.UFUNC_OPS.get(np_ufunc.__name__)
        self.__name__ = np_ufunc.__name__
        self.__doc__ = np_ufunc.__doc__
        self.nin = np_ufunc.nin
        self.nout = np_ufunc.nout
        self.nargs = np_ufunc.nargs
        self.ntypes = np_ufunc.ntypes
        self.types = np_ufunc.types
        self.identity = np_ufunc.identity
        self.signature = np_ufunc.signature
        self._dtypes = {}
        self._c = None      # the C call path (lazynp._speedups) of one-output ufuncs
        if _native.ext is not None and self._op is not None and self.nout == 1 and \
                self.nin in (1, 2):
            dunders = (self.dunder(False, False), self.dunder(True, False)) \
                if self.nin == 2 else ()
            self._c = _native.ext.UfuncInfo(self._op, np_ufunc, self._dtypes,
                                               ew.result_dtypes, *dunders)

    def __repr__(self) -> str:
        return f"<lazynp ufunc '{self.__name__}'>"

    def __reduce__(self):
        return (_ufunc_named, (self.__name__,))    # by name, as NumPy's ufuncs pickle

    @property
    def __signature__(self):
        """NumPy's signature of the call (``inspect.signature(lazynp.add)``)."""
        return self._np.__signature__

    # --- NumPy's dtype resolution (answers about dtypes, no array work) ------------------
    def resolve_dtypes(self, dtypes, *, signature=None, casting=None, reduction=False):
        """:meth:`numpy.ufunc.resolve_dtypes` of the wrapped NumPy ufunc."""
        return self._np.resolve_dtypes(dtypes, **_given(signature=signature,
                                                        casting=casting), reduction=reduction)

    def _resolve_dtypes_and_context(self, dtypes, *, signature=None, casting=None,
                                    reduction=False):
        return self._np._resolve_dtypes_and_context(
            dtypes, **_given(signature=signature, casting=casting), reduction=reduction)

    def _get_strided_loop(self, call_info, /, *, fixed_strides=None):
        return self._np._get_strided_loop(call_info, **_given(fixed_strides=fixed_strides))

    # --- elementwise call ----------------------------------------------------------------
    def _call_py(self, *args, **kwargs):
        if kwargs or len(args) != self.nin or self._op is None or self.nout != 1:
            return self._call(*args, **kwargs)
        # fast path (plain call, one output): a few microseconds per recorded op
        ops = []
        keys = []
        shape = None
        has_int = False
        for a in args:
            t = type(a)
            if t is ndarray:
                n = a._var.head if a._geom is None else a._node()
                ops.append(n)
                keys.append(n.dtype)
                s = n.shape
            elif t is float or t is int or t is bool or t is complex:
                ops.append(a)
                keys.append(t)
                if t is int:
                    has_int = True
                s = ()
            elif t is np.float64:
                # (a constant of its dtype, not a weak scalar: medium work on it joins a
                # tree kernel as a Python float's does, lazynp.core.policy.decide)
                ops.append(a)
                keys.append(_F64)
                s = ()
            else:
                return self._call(*args)
            if shape is None or shape == s:
                shape = s
            elif s == ():
                pass
            elif shape == ():
                shape = s
            else:
                try:
                    shape = broadcast_shapes(shape, s)
                except ValueError:
                    ew.result_dtypes(self._np, tuple(k if k is not None else float for k in
                                                     keys + [float] * (self.nin - len(keys))))
                    raise
        keys = tuple(keys)
        if shape == () and not any(type(o) is graph.Node for o in ops):
            return self._scalars_only(args)
        dt = self._dtypes.get(keys)
        if dt is None:
            dt = ew.result_dtypes(self._np, keys)[0]
            self._dtypes[keys] = dt
        if has_int:
            ew.check_python_int(self._np, args, keys)
            if self._np is np.power:
                ew.check_int_power(keys[0], args[1], shape)

        return ndarray._from_node(graph.record(self._op, tuple(ops), None, shape, dt),
                                  shape == ())

    if _native.ext is None:
        __call__ = _call_py     # (else UfuncBase.__call__, in C)

    def _scalars_only(self, args):
        """Only Python scalars: NumPy's own conversion rules (huge ints become uint64 or
        object), computed at once like NumPy does."""
        res = self._np(*args)
        return ndarray._from_node(graph.leaf(np.asarray(res)), True)

    def dunder(self, reflected: bool, sequence_aware: bool):
        """The ``ndarray`` dunder for this ufunc: ``a (op) b``, or ``b (op) a`` when
        ``reflected``.  The hot path of eager code, so what it uses are closure locals.
        ``sequence_aware``: a lazy scalar leaves ``list * n`` to Python, like a NumPy int.
        The C version (``lazynp._speedups``) is used when it is built."""
        if _native.ext is not None:
            return _native.ext.binary_dunder(self, reflected, sequence_aware,
                                                ew.result_dtypes, ew.check_python_int,
                                                broadcast_shapes, np.power)
        np_uf = self._np
        op = self._op
        dtypes = self._dtypes
        is_power = np_uf is np.power
        from_node = ndarray._from_node
        result_dtypes = ew.result_dtypes
        check_python_int = ew.check_python_int

        def slow(a, b):
            if sequence_aware and a._scalar and type(b) in (list, tuple, str):
                return NotImplemented
            return self(b, a) if reflected else self(a, b)

        def f(a, b):
            tb = type(b)
            if tb is float or tb is int or tb is bool or tb is complex:
                nb = b
                kb = tb
                sb = ()
            elif tb is np.float64:
                nb = b
                kb = _F64
                sb = ()
            elif tb is ndarray:
                nb = b._var.head if b._geom is None else b._node()
                kb = nb.dtype
                sb = nb.shape
            else:
                return slow(a, b)
            na = a._var.head if a._geom is None else a._node()
            ka = na.dtype
            if tb is int and not 0 <= b <= 127:
                check_python_int(np_uf, (b, a) if reflected else (a, b),
                                 (int, ka) if reflected else (ka, int))
                if is_power and not reflected:
                    ew.check_int_power(ka, b, na.shape)
            key = (kb, ka) if reflected else (ka, kb)
            dt = dtypes.get(key)
            if dt is None:
                dt = result_dtypes(np_uf, key)[0]   # NumPy checks dtypes before shapes
                dtypes[key] = dt
            sa = na.shape
            shape = sa if (sa == sb or sb == ()) else \
                (sb if sa == () else broadcast_shapes(sa, sb))
            return from_node(graph.record(op, (nb, na) if reflected else (na, nb), None, shape,
                                          dt), shape == ())
        return f

    def _call(self, *args, out=None, where=True, dtype=None, casting="same_kind",
              order="K", subok=True, signature=None, **unknown):
        if "sig" in unknown:            # (NumPy's older name of ``signature``)
            if signature is not None:
                raise TypeError("cannot specify both 'sig' and 'signature'")
            signature = unknown.pop("sig")
        if builtins.any(a is Ellipsis for a in args[self.nin:]):
            raise TypeError("out=... is only allowed as a keyword argument.")
        if type(out) is tuple and builtins.any(o is Ellipsis for o in out):
            raise TypeError("must use `...` as `out=...` and not per-operand/in a tuple")
        if out is Ellipsis:         # arrays always, never NumPy scalars
            return _arrays(self._call(*args, where=where, dtype=dtype, casting=casting,
                                      order=order, subok=subok, signature=signature,
                                      **unknown))
        if unknown:         # (NumPy's wording: the ufunc's name, not this method's)
            raise TypeError(f"{self.__name__}() got an unexpected keyword argument "
                            f"'{next(iter(unknown))}'")
        if len(args) > self.nargs:
            raise TypeError(f"{self.__name__}() takes from {self.nin} to {self.nargs} "
                            f"positional arguments but {len(args)} were given")
        if _devices.ACTIVE and _devices.any_on_device(args, out):      # (device hook)
            return _devices.ufunc_call(self._np, args, out, where=where, dtype=dtype,
                                       signature=signature)
        nin = self.nin
        if len(args) < nin:
            raise TypeError(f"{self.__name__}() takes from {nin} to {nin + self.nout} positional "
                            f"arguments but {len(args)} were given")
        if len(args) > nin + self.nout:
            raise TypeError(f"{self.__name__}() takes from {nin} to {nin + self.nout} positional "
                            f"arguments but {len(args)} were given")
        if len(args) > nin:
            if out is not None:
                raise TypeError("cannot specify 'out' as both a positional and keyword argument")
            out = args[nin:] + (None,) * (nin + self.nout - len(args))
            args = args[:nin]
        elif self.nout > 1 and out is not None and not isinstance(out, tuple):
            raise TypeError("'out' must be a tuple of arrays")
        if isinstance(out, tuple):
            if len(out) != self.nout:
                raise ValueError("The 'out' tuple must have exactly one entry per ufunc output")
            if self.nout > 1:
                if not builtins.all(o is None or isinstance(o, ndarray) for o in out):
                    # a NumPy buffer the user holds (or NumPy's error): NumPy's call, now
                    if builtins.any(isinstance(o, ndarray) for o in out):
                        raise TypeError(f"{self.__name__}(): out= mixes NumPy and lazynp "
                                        "arrays (give all outputs of one kind)")
                    return self._np(*to_numpy(list(args)), out=to_numpy(out),
                                    where=to_numpy(where), dtype=dtype, casting=casting)
                # NumPy's casting check of each output, on 0-d stand-ins
                self._np(*[a if type(a) in (bool, int, float, complex) else
                           np.zeros((), getattr(a, "dtype", None) or np.asarray(a).dtype)
                           for a in args],
                         out=tuple(None if o is None else np.empty((), o.dtype) for o in out),
                         dtype=dtype, casting=casting)
                res = self(*args, where=where, dtype=dtype, casting=casting)
                for r, o in zip(res, out):
                    if o is not None:
                        o[...] = r
                return tuple(r if o is None else o for r, o in zip(res, out))
            out = out[0]
        if out is not None and not isinstance(out, (ndarray, tuple)):
            return self._eager(args, out, where, dtype, casting, signature)
        if not _policy.record_all:
            kw = {}
            if where is not True:
                kw["where"] = where
            if dtype is not None:
                kw["dtype"] = dtype
            if casting != "same_kind":
                kw["casting"] = casting
            if order != "K":
                kw["order"] = order
            if signature is not None:
                kw["signature"] = signature
            r = _eager.try_ufunc(self._np, args, out, kw)
            if r is not _eager.NOT_EAGER:
                return r
        ops = [operand(a) for a in args]
        keys = tuple(key_of(o) for o in ops)
        ew.check_python_int(self._np, args, keys)
        kw = {}
        if dtype is not None:
            kw["dtype"] = np.dtype(dtype)
        if casting != "same_kind":
            kw["casting"] = casting
        if signature is not None:
            kw["signature"] = signature
        if out is None and not signature:
            ew.result_dtypes(self._np, keys, kw.get("dtype"), casting)  # dtype errors first
        elif out is not None and isinstance(out, ndarray):
            probes = [np.empty(0, dtype=k) if isinstance(k, np.dtype) else k(0) for k in keys]
            with np.errstate(all="ignore"):
                self._np(*probes, out=np.empty(0, out.dtype), **kw)
        shape = broadcast_shapes(*[shape_of(o) for o in ops])
        has_where = where is not True
        if has_where:
            w = operand(where)
            shape_w = broadcast_shapes(shape, shape_of(w))
            if shape_w != shape and out is None:
                shape = shape_w
            ops.append(w)
        if out is not None:
            return self._call_out(ops, keys, kw, has_where, shape, out)
        dts = ew.result_dtypes(self._np, keys, kw.get("dtype"), casting) if not signature else \
            self._probe_dtypes(keys, kw)
        if self.nout == 1:
            if not kw and not has_where and self._op is not None:
                node = graph.record(self._op, tuple(ops), None, shape, dts[0])
            else:
                node = graph.record(UFUNC_CALL, tuple(ops),
                                    {"ufunc": self._np, "kw": kw, "has_where": has_where},
                                    shape, dts[0])
            return ndarray._from_node(node, shape == ())
        multi = graph.record(UFUNC_CALL, tuple(ops),
                             {"ufunc": self._np, "kw": kw, "has_where": has_where}, shape, dts[0])
        return tuple(ndarray._from_node(graph.record(TUPLE_GET, (multi, i), None, shape, dts[i]),
                                        shape == ()) for i in range(self.nout))

    def _probe_dtypes(self, keys, kw):
        probes = [np.empty(0, dtype=k) if isinstance(k, np.dtype) else k(0) for k in keys]
        with np.errstate(all="ignore"):
            res = self._np(*probes, **kw)
        res = res if isinstance(res, tuple) else (res,)
        return tuple(np.asarray(r).dtype for r in res)

    def _call_out(self, ops, keys, kw, has_where, shape, out):
        o = out
        if not isinstance(o, ndarray):
            raise TypeError("return arrays must be of ArrayType")
        if not o._get_shadow().flags.writeable:
            raise ValueError("output array is read-only")
        oshape = o.shape
        probes = [np.empty(0, dtype=k) if isinstance(k, np.dtype) else k(0) for k in keys]
        with np.errstate(all="ignore"):
            self._np(*probes, out=np.empty(0, o.dtype), **kw)  # NumPy's casting errors, here
        full = broadcast_shapes(shape, shape_of(ops[-1])) if has_where else shape
        if broadcast_shapes(full, oshape) != oshape:
            raise ValueError(f"non-broadcastable output operand with shape {oshape} doesn't "
                             f"match the broadcast shape {broadcast_shapes(full, oshape)}")
        if not self._new_version(ops, keys, kw, has_where, shape, o):
            o._write(UFUNC_OUT, tuple(ops), {"ufunc": self._np, "kw": kw,
                                             "has_where": has_where})
        return o

    def _new_version(self, ops, keys, kw, has_where, shape, o) -> bool:
        """``a += b`` (``np.add(a, b, out=a)``) recorded into a whole array that only
        lazynp holds, with the result's shape and dtype: the array's next version is the
        elementwise node ``add(a, b)`` itself (its Var's new head), which the fusion pass
        joins with what comes before and after (a chain of in-place updates becomes one
        loop: ``out += t.transpose(...)`` per kernel offset of a convolution) and the
        flush's memory plan computes in place when nothing else reads the old version.
        False when the write must stay one (a view's region, a buffer the caller shares,
        ``where=``, a cast on output)."""
        if kw or has_where or self._op is None or self.nout != 1 or shape != o.shape or \
                o._geom is not None or o._ext:
            return False
        var = o._var
        if var.head.exported is True:
            return False
        if ew.result_dtypes(self._np, keys, None, "same_kind")[0] != o.dtype:
            return False
        var.set_head(graph.record(self._op, tuple(ops), None, shape, o.dtype))
        return True

    def _eager(self, args, out, where, dtype, casting, signature):
        kw = {"where": where, "casting": casting}
        if dtype is not None:
            kw["dtype"] = dtype
        if signature is not None:
            kw["signature"] = signature
        return self._np(*to_numpy(list(args)), out=out, **kw)

    # --- methods -------------------------------------------------------------------------
    def reduce(self, array, axis=0, dtype=None, out=None, keepdims=False, initial=_NoValue,
               where=True):
        if out is Ellipsis:         # an array always, never a NumPy scalar
            return _arrays(self.reduce(array, axis, dtype, None, keepdims, initial, where))
        if type(out) is tuple and builtins.any(o is Ellipsis for o in out):
            raise TypeError("must use `...` as `out=...` and not per-operand/in a tuple")
        if not _policy.record_all and out is None:
            kw = {"axis": axis}
            if dtype is not None:
                kw["dtype"] = dtype
            if keepdims:
                kw["keepdims"] = keepdims
            if initial is not _NoValue:
                kw["initial"] = initial
            if where is not True:
                kw["where"] = where
            r = _eager.eager_call(self._np.reduce, (array,), kw, "reduction")
            if r is not _eager.NOT_EAGER:
                return r
        kw = {}
        if initial is not _NoValue:
            kw["initial"] = initial
        return _reductions.reduction(f"{self.__name__}.reduce", self._np.reduce, array, axis,
                                     dtype, out, keepdims, where, kw)

    def accumulate(self, array, axis=0, dtype=None, out=None):
        if not _policy.record_all and out is None:
            r = _eager.eager_call(self._np.accumulate, (array,), {"axis": axis, "dtype": dtype},
                                "reduction")
            if r is not _eager.NOT_EAGER:
                return r
        return _reductions.accumulate(self._np, array, axis, dtype, out)

    def outer(self, A, B, **kwargs):
        r = _eager.eager_call(self._np.outer, (A, B), kwargs, "elementwise")
        if r is not _eager.NOT_EAGER:
            return r
        A = asarray(A)
        B = asarray(B)
        return self(A.reshape(A.shape + (1,) * B.ndim), B, **kwargs)

    def at(self, a, indices, b=None):
        _indexing.ufunc_at(self, a, indices, b)

    def reduceat(self, array, indices, axis=0, dtype=None, out=None):
        return _fallback.call_numpy(self._np.reduceat, f"{self.__name__}.reduceat",
                                    (array, indices), {"axis": axis, "dtype": dtype, "out": out})


for _method in ("reduce", "accumulate", "outer", "at", "reduceat"):
    # (Python's argument errors name the method as NumPy's do: "reduce() got an unexpected
    # keyword argument 'foo'", not "ufunc.reduce() ...")
    getattr(ufunc, _method).__qualname__ = _method

UFUNCS: dict[str, ufunc] = {}   # by NumPy's attribute names and ufunc names (no gufuncs)
# (NumPy's module dict, not dir(np): getattr on dir's names would import the submodules NumPy
# loads lazily, numpy.testing, numpy.f2py, numpy.ma..., 60 ms of import; none is a ufunc)
for _name, _u in sorted(vars(np).items()):
    if isinstance(_u, np.ufunc) and _u.signature is None:
        if _u.__name__ not in UFUNCS:
            UFUNCS[_u.__name__] = ufunc(_u)
        UFUNCS[_name] = UFUNCS[_u.__name__]


def give_gufunc_face(fn, np_gufunc: np.ufunc) -> None:
    """Give ``fn``, lazynp's function for NumPy's generalized ufunc ``np_gufunc``
    (``matmul``), a ufunc's attributes and methods: ``isinstance(lazynp.matmul,
    lazynp.ufunc)``, ``.signature``, ``.types``, ``inspect.signature`` as in NumPy.  Its
    methods are NumPy's, which raise for a ufunc with a core signature, as in NumPy."""
    fn._np_gufunc = np_gufunc
    for name in ("nin", "nout", "nargs", "ntypes", "types", "identity", "signature",
                 "__signature__", "reduce", "accumulate", "outer", "at", "reduceat",
                 "resolve_dtypes", "_resolve_dtypes_and_context", "_get_strided_loop"):
        setattr(fn, name, getattr(np_gufunc, name))


def core_module():
    """``lazynp._core``: NumPy's ``numpy._core`` (counted fallbacks), whose ``umath`` holds
    lazynp's ufuncs where NumPy's has its own (code that lists the ufuncs of
    ``np._core.umath`` gets lazynp's: NumPy's test_ufunc.py)."""
    import types
    umath = types.ModuleType("lazynp._core.umath", np._core.umath.__doc__)
    for name, obj in vars(np._core.umath).items():
        if name in ("__name__", "__doc__", "__spec__", "__loader__", "__package__"):
            continue
        lazy = UFUNCS.get(getattr(obj, "__name__", None)) if isinstance(obj, np.ufunc) \
            else None
        setattr(umath, name, lazy if lazy is not None and lazy._np is obj else obj)
    return _fallback.FallbackModule("lazynp._core", np._core, {"umath": umath})
