"""``a[index]`` and ``a[index] = value``: basic indexing makes views, advanced indexing copies.

Basic indices are applied to the array's shadow (see :mod:`lazynp.ndarray`), so NumPy
itself decides shapes and raises ``IndexError``.  Advanced indices may be lazy arrays; the
result shape is found by indexing a zero-stride dummy (no real data is touched), with the
concrete index values when they are known so that out-of-bounds errors are raised at the
user's line, as in NumPy.
"""
from __future__ import annotations

import operator

import numpy as np

from .ndarray import ndarray

from ..core import policy as _policy, graph
from .._base import native as _native
from .operands import (PY_SCALARS, array_like_value, broadcast_shapes, eager_operand, operand,
                       to_numpy, wrap)
from ..core.graph import Node
from ..ops.registry import Op, register


class _Slot:
    """Placeholder in an index template for the k-th lazy index argument."""

    __slots__ = ("k",)

    def __init__(self, k: int):
        self.k = k

    def __repr__(self) -> str:
        return f"_Slot({self.k})"


def _fill(template, vals):
    if type(template) is _Slot:
        return vals[template.k]
    if type(template) is tuple:
        return tuple(_fill(t, vals) for t in template)
    return template


def _getitem_impl(base, *idx_vals, index):
    return base[_fill(index, idx_vals)]


def _setitem_impl(base, value, *idx_vals, geom, index):
    target = base if geom is None else graph.buffer_view(base, *geom)
    if index is Ellipsis:
        target[...] = value
    else:
        assign(target, _fill(index, idx_vals), value)
    return base


#: ``target[mask] = scalar`` without branches (lazynp._speedups.mask_fill), or None.
_mask_fill = _native.ext.mask_fill if _native.ext is not None else None


def assign(target: np.ndarray, idx, value) -> None:
    """``target[idx] = value`` on NumPy arrays; a boolean mask of the target's shape with a
    scalar of its type is filled in C (NumPy's masked assignment branches per element: 2.9
    ms for 620k int8 elements on a random mask, 40 us so)."""
    if _mask_fill is not None and type(idx) is np.ndarray and _mask_fill(target, idx, value):
        return
    target[idx] = value


def _ufunc_at_impl(base, *vals, geom, index, ufunc, has_b):
    target = base if geom is None else graph.buffer_view(base, *geom)
    if has_b:
        ufunc.at(target, _fill(index, vals[:-1]), vals[-1])
    else:
        ufunc.at(target, _fill(index, vals))
    return base


GETITEM = register(Op("getitem", "index", _getitem_impl))
_COPY_ELEMENT = register(Op("element", "index", lambda x: np.array(x, copy=True),
                            raises_on_values=False))
SETITEM = register(Op("setitem", "write", _setitem_impl, inplace=(0,)))
UFUNC_AT = register(Op("ufunc_at", "write", _ufunc_at_impl, inplace=(0,)))



def _normalize_basic(index):
    """The index as a tuple of basic components, or None when it has advanced parts."""
    items = index if type(index) is tuple else (index,)
    out = None              # built only when a component needs converting
    for k, it in enumerate(items):
        t = type(it)
        if t is int or t is type(None) or t is type(Ellipsis) or \
                t is slice and not _lazy_slice(it):
            if out is not None:
                out.append(it)
            continue
        if out is None:
            out = list(items[:k])
        if t is bool:
            return None
        if t is slice:
            try:
                out.append(slice(*(operator.index(x) if x is not None and type(x) is not int
                                   else x for x in (it.start, it.stop, it.step))))
            except TypeError:       # (a float bound: NumPy's own error, IndexError or not)
                return None
        elif isinstance(it, np.integer):
            out.append(int(it))
        elif isinstance(it, ndarray):
            if it.ndim == 0 and it.dtype.kind in "iu" and it._scalar:   # a NumPy integer
                out.append(operator.index(it))
            else:
                return None
        else:
            return None
    return items if out is None else tuple(out)


def _lazy_slice(s: slice) -> bool:
    """A slice with a bound that is not a Python int (NumPy integer, lazy 0-d array...)."""
    a, b, c = s.start, s.stop, s.step
    return a is not None and type(a) is not int or b is not None and type(b) is not int or \
        c is not None and type(c) is not int


def _basic_view_shadow(arr, idx: tuple):
    """Shadow of ``arr[idx]`` as an array view (0-d for a full integer index)."""
    sh = arr._get_shadow()
    res = sh[idx]
    if type(res) is not np.ndarray or sh.dtype.hasobject and res.base is not _owner(sh):
        # (an object array's element may itself be an array: the element, not a view)
        res = sh[idx + (Ellipsis,)]
        return res, True
    return res, False


def _owner(a: np.ndarray):
    """The ``base`` NumPy gives every view of ``a``."""
    return a if a.base is None else a.base


def _set_object_element(arr, index, value) -> bool:
    """``arr[i, j] = value`` for one element of an object array, ``value`` a lazynp array:
    NumPy stores the object itself there, not its converted value (as the C core does).
    False where this does not apply."""
    if arr.dtype != object or _policy.record_all:
        return False
    basic = _normalize_basic(index)
    if basic is None or not _basic_view_shadow(arr, basic)[1]:
        return False
    target = graph.writable_view(arr, 1, large_in_place=True)
    if target is None:
        return False
    target[basic] = value
    return True


def is_field_key(index) -> bool:
    """A structured array's field index: a field name or a list of field names."""
    if isinstance(index, str):
        return True
    return type(index) is list and len(index) > 0 and all(isinstance(k, str) for k in index)


def empty_like_shadow(sh: np.ndarray):
    """The array standing for an empty view NumPy made (``sh``): a new one of zeros of its
    shape and dtype, read-only when ``sh`` is."""
    out = ndarray._from_node(graph.leaf(np.zeros(sh.shape, sh.dtype)))
    if not sh.flags.writeable:
        out.flags.writeable = False
    return out


def field_view(arr, key):
    """``arr[key]`` for a field name (or a list of them): a view sharing ``arr``'s storage,
    as in NumPy (its dtype, shape for sub-array fields, errors: NumPy's, from the shadow)."""
    shadow = arr._get_shadow()[key]
    if shadow.size == 0:
        return empty_like_shadow(shadow)
    return arr._view_of(shadow)


def _element(arr, basic):
    """``arr[basic]`` for a full integer index: NumPy's scalar (a pending array is computed
    first).  A structured element (``numpy.void``) is a view into the buffer, as in NumPy,
    so the buffer is given out as by ``numpy.asarray(arr)`` (shared with the caller from then
    on; a snapshot where everything is recorded)."""
    if arr.dtype.kind == "V":
        return arr.__array__()[basic]
    return arr._value()[basic]


def getitem(arr, index):
    if is_field_key(index):
        return field_view(arr, index)
    basic = _normalize_basic(index)
    if basic is not None:
        shadow, scalar = _basic_view_shadow(arr, basic)
        if scalar:
            if not _policy.record_all or shadow.dtype.kind == "V":
                return _element(arr, basic)
            # a copy of the element, not a view of it (traced: lazy, NumPy's scalar later)
            v = arr._view_of(shadow)
            node = graph.record(_COPY_ELEMENT, (v._node(),), None, (), shadow.dtype)
            return ndarray._from_node(node, True)
        return arr._view_of(shadow)
    if not _policy.record_all:
        val = arr._eager_value()
        if val is not None:
            idx = _eager_index(index)
            if idx is not None:
                return wrap(val[idx], (val,))
    template, args, dummy_index = _advanced_template(index)
    dummy = np.broadcast_to(np.empty((), arr.dtype), arr.shape)
    shape = dummy[dummy_index].shape
    node = graph.record(GETITEM, (arr._node(),) + tuple(args), {"index": template}, shape,
                        arr.dtype)
    return ndarray._from_node(node)


_NOT = eager_operand.NOT_EAGER


def _eager_index(index):
    """``index`` with computed lazy arrays replaced by their values (None when one is
    pending)."""
    if type(index) is tuple:
        out = []
        for it in index:
            if isinstance(it, ndarray):
                it = it._eager_value()
                if it is None:
                    return None
            else:
                it = array_like_value(it)
            out.append(it)
        return tuple(out)
    if isinstance(index, ndarray):
        return index._eager_value()
    return index


def _advanced_template(index):
    """Index template with lazy arrays as slots; lazy boolean masks are forced (their
    True count decides the shape, as in NumPy)."""
    items = index if type(index) is tuple else (index,)
    template, args, dummy = [], [], []
    for it in items:
        if isinstance(it, ndarray):
            if it.dtype.kind == "b":
                val = it._value()
                template.append(val.copy())
                dummy.append(val)
            elif it.dtype.kind in "iu":
                template.append(_Slot(len(args)))
                args.append(it._node())
                dummy.append(np.broadcast_to(np.zeros((), it.dtype), it.shape))
            else:
                raise IndexError("arrays used as indices must be of integer (or boolean) type")
        elif type(it) in (list, tuple) or isinstance(it, np.ndarray):
            val = np.asarray(to_numpy(it)) if not isinstance(it, np.ndarray) else it.copy()
            if isinstance(it, list) and len(it) == 0:
                val = np.asarray(it, dtype=np.intp)
            template.append(val)
            dummy.append(val)
        else:
            template.append(it)
            dummy.append(it)
    if type(index) is not tuple:
        return template[0], args, dummy[0]
    return tuple(template), args, tuple(dummy)


def _check_scalar_assign(dtype, value) -> None:
    """NumPy's errors for assigning a scalar into ``dtype`` (overflow, NaN into int...)."""
    probe = np.empty((), dtype)
    probe[()] = value


def setitem(arr, index, value) -> None:
    if is_field_key(index):
        # NumPy assigns to a field through its view: so does lazynp (the base sees it)
        setitem(field_view(arr, index), Ellipsis, value)
        return
    if isinstance(value, ndarray) and _set_object_element(arr, index, value):
        return
    if not _policy.record_all and _setitem_now(arr, index, value):
        return
    basic = _normalize_basic(index)
    if basic is not None:
        shadow, _ = _basic_view_shadow(arr, basic)      # NumPy's IndexError comes first
        target = arr._view_of(shadow)
        g = target._geom
        head = arr._var.head
        whole = g[0] == 0 and g[1] == head.shape and g[3] == head.dtype and \
            g[2] == _c_strides(head.shape, head.dtype)
        del head     # (a reference held here would keep the write from running in place)
        if type(value) is ndarray and value._var is arr._var and \
                (value._geom == g or value._geom is None and whole):
            # the region onto itself (``u[a:b] += v`` ends so): nothing changes.  Checked
            # before ``value`` becomes an operand, whose view node would count as a reader
            # of the head and keep the next write from running in place
            if not arr._get_shadow().flags.writeable:
                raise ValueError("assignment destination is read-only")
            return
    else:
        template, args, dummy_index = _advanced_template(index)
        if not args and not _policy.record_all:
            if type(value) is ndarray and value._eager_value() is None:
                # a scatter (``z[mask] = z[mask] ** 2 + c[mask]``) joins no fused loop:
                # recorded, it only defers its value's work to a flush of its own
                value._value()
            if _setitem_now(arr, template, value):
                return      # (its boolean masks are computed now: at once, as NumPy)
    concrete = not isinstance(value, ndarray) and not isinstance(value, np.ndarray)
    if concrete and arr.dtype.names is not None:
        # records given as tuples (or one scalar for every field): NumPy's conversion,
        # to the written region's shape
        if basic is not None:
            region = shadow.shape
        else:
            region = np.broadcast_to(np.empty((), arr.dtype), arr.shape)[dummy_index].shape
        converted = np.empty(region, arr.dtype)
        converted[...] = value
        value, concrete = converted, False
    scratch_checked = basic is None and not args and concrete and arr.size <= 100_000
    if scratch_checked:
        # NumPy's own errors, in NumPy's order (index shapes, value broadcast and
        # conversion, bounds), from the same assignment on a scratch array
        np.zeros(arr.shape, arr.dtype)[dummy_index] = value
    elif concrete and np.size(value) < 10000:
        # NumPy's conversion errors ("x" into an int array, NaN into int...) at this line
        probe = np.empty(np.shape(value), arr.dtype)
        probe[...] = value
    val = operand(value)
    vshape = val.shape if type(val) is Node else ()
    if type(val) is not Node:
        _check_scalar_assign(arr.dtype, value)
    elif val.dtype.kind == "c" and arr.dtype.kind in "biuf":
        np.empty((), arr.dtype)[()] = np.zeros((), val.dtype)  # NumPy's warning/error here
    if not arr._get_shadow().flags.writeable:
        raise ValueError("assignment destination is read-only")
    if basic is not None:
        _check_broadcast_assign(vshape, shadow.shape)
        if whole:
            target = ndarray._base_handle(arr._var)
        target._write(SETITEM, (val,), {"index": Ellipsis})
        return
    if arr.size <= 100_000:
        if not scratch_checked:
            # NumPy's own errors for this assignment, on a scratch array (lazy index
            # arrays stand in as zeros, so only their bounds are checked later)
            vdt = val.dtype if type(val) is Node else np.asarray(value).dtype
            try:
                np.zeros(arr.shape, arr.dtype)[dummy_index] = np.zeros(vshape, vdt)
            except IndexError:
                if not args:
                    raise
    elif not args:
        dummy = np.broadcast_to(np.empty((), arr.dtype), arr.shape)
        _check_broadcast_assign(vshape, dummy[dummy_index].shape, advanced=True)
    arr._write(SETITEM, (val,) + tuple(args), {"index": template})


def _setitem_now(arr, index, value) -> bool:
    """``arr[index] = value`` at once, by NumPy, when the policy allows it: ``arr``, the
    index and the value computed, the written region small, and a buffer that may be
    written (:func:`lazynp.core.recorder.writable_view`).  False: record it instead."""
    val = eager_operand(value)
    if val is _NOT:
        return False
    idx = _eager_index(index)
    if idx is None:
        return False
    target = graph.writable_view(arr, _region_size(arr, idx, val), large_in_place=True)
    if target is None:
        return False
    assign(target, idx, val)
    return True


def _region_size(arr, idx, val) -> int:
    """Elements written by ``arr[idx] = val``: exact for basic indices, else a bound (the
    value's size, or the array's for a scalar value)."""
    basic = _normalize_basic(idx)
    if basic is not None:
        try:
            return np.size(arr._get_shadow()[basic])
        except (IndexError, TypeError, ValueError):
            return 0        # NumPy raises its error when the write runs
    if type(val) is np.ndarray:
        return val.size
    return arr.size


def _c_strides(shape, dtype) -> tuple:
    st = []
    acc = dtype.itemsize
    for s in reversed(shape):
        st.append(acc)
        acc *= max(s, 1)
    return tuple(reversed(st))


def _check_broadcast_assign(vshape: tuple, tshape: tuple, advanced: bool = False) -> None:
    # NumPy lets a value with extra leading length-1 dimensions be assigned
    vs = vshape
    while len(vs) > len(tshape) and vs[0] == 1:
        vs = vs[1:]
    ok = len(vs) <= len(tshape)
    if ok:
        try:
            ok = broadcast_shapes(vs, tshape) == tshape
        except ValueError:
            ok = False
    if not ok:
        if advanced:
            raise ValueError(f"shape mismatch: value array of shape {vshape} could not be "
                             f"broadcast to indexing result of shape {tshape}")
        raise ValueError(f"could not broadcast input array from shape {vshape} into shape "
                         f"{tshape}")


def ufunc_at(uf, a, indices, b=None) -> None:
    if isinstance(a, ndarray) and not a._get_shadow().flags.writeable:
        raise ValueError("assignment destination is read-only")
    if not isinstance(a, ndarray):
        uf._np.at(a, to_numpy(indices), to_numpy(b) if b is not None else None) if b is not None \
            else uf._np.at(a, to_numpy(indices))
        return
    template, args, dummy_index = _advanced_template(indices)
    if not args:
        dummy = np.broadcast_to(np.empty((), a.dtype), a.shape)
        dummy[dummy_index]  # IndexError at the user's line
    extra = tuple(args)
    if b is not None:
        extra += (operand(b),)
    a._write(UFUNC_AT, extra, {"index": template, "ufunc": uf._np, "has_b": b is not None})
