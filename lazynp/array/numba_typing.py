"""Numba's typing of lazynp arrays: ``numba.njit(f)(a)`` works on a ``lazynp.ndarray``.

Numba types a NumPy array argument by its dtype, number of dimensions and layout, and
unboxes it by reading the ``PyArrayObject`` itself, which a lazynp array is not.  Through
Numba's extension API (``typeof_impl``, ``unbox``, ``box``) a lazynp array is typed as
:class:`LazyArrayType`, an ``Array`` type for all of Numba's typing (so every array
function compiles as for the NumPy array), whose unboxing computes the array and reads the
NumPy array ``numpy.asarray(a)`` gives (its buffer: in-place writes of the compiled
function are seen through ``a``, as with a NumPy argument).  Returned arrays are NumPy's,
as a compiled function returns them for a NumPy argument.

This module imports Numba, so it is loaded only once Numba is (``register_with_numba`` in
:mod:`lazynp.array.ndarray`): with lazynp when Numba was imported first, else from Numba's
extension entry point (:mod:`lazynp_numba_extension`) at Numba's first compile.
"""
from __future__ import annotations

from numba.core import types
from numba.core.datamodel import models, register_default
from numba.extending import NativeValue, box, typeof_impl, unbox


class LazyArrayType(types.Array):
    """Numba's type of a ``lazynp.ndarray`` argument: an ``Array`` type (dtype, ndim,
    layout, readonly) that unboxes through ``numpy.asarray``."""

    def __init__(self, dtype, ndim, layout, readonly=False, aligned=True):
        name = f"lazynp.ndarray({dtype}, {ndim}d, {layout}{', readonly' if readonly else ''})"
        super().__init__(dtype, ndim, layout, readonly=readonly, name=name, aligned=aligned)

    def copy(self, dtype=None, ndim=None, layout=None, readonly=None, aligned=None):
        # (derived types, e.g. a slice of the argument, are Numba's own array type)
        return types.Array(self.dtype if dtype is None else dtype,
                           self.ndim if ndim is None else ndim,
                           self.layout if layout is None else layout,
                           readonly=not self.mutable if readonly is None else readonly,
                           aligned=self.aligned if aligned is None else aligned)

    def as_numpy_array(self) -> types.Array:
        """The NumPy array type this argument unboxes as."""
        return types.Array(self.dtype, self.ndim, self.layout, readonly=not self.mutable,
                           aligned=self.aligned)


register_default(LazyArrayType)(models.ArrayModel)


def _unbox_lazy(typ, obj, c):
    from numba.core import cgutils
    from numba.core.boxing import unbox_array
    builder = c.builder
    numpy_type = typ.as_numpy_array()
    result = cgutils.alloca_once(builder, c.context.get_value_type(numpy_type))
    failed = cgutils.alloca_once_value(builder, cgutils.true_bit)
    arr = c.pyapi.call_method(obj, "__array__", ())     # (None: its error is set)
    with builder.if_then(cgutils.is_not_null(builder, arr), likely=True):
        native = unbox_array(numpy_type, arr, c)
        builder.store(native.value, result)
        builder.store(native.is_error, failed)
        # (the native array's meminfo holds a reference to the NumPy array of its own)
        c.pyapi.decref(arr)
    return NativeValue(builder.load(result), is_error=builder.load(failed))


def _box_lazy(typ, val, c):
    from numba.core.boxing import box_array
    return box_array(typ.as_numpy_array(), val, c)


_registered: set = set()


def register(array_cls: type) -> None:
    """Teach Numba to type and unbox ``array_cls`` (``lazynp.ndarray``) arguments (once)."""
    if array_cls in _registered:
        return
    _registered.add(array_cls)

    @typeof_impl.register(array_cls)
    def _typeof_lazy(val, c):
        from numba.np.numpy_support import from_dtype
        try:
            dtype = from_dtype(val.dtype)
        except NotImplementedError:
            raise ValueError(f"Unsupported array dtype: {val.dtype}") from None
        flags = val.flags
        layout = "C" if flags.c_contiguous else "F" if flags.f_contiguous else "A"
        return LazyArrayType(dtype, val.ndim, layout, readonly=not flags.writeable)

    unbox(LazyArrayType)(_unbox_lazy)
    box(LazyArrayType)(_box_lazy)
