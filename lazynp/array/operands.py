"""Turning user arguments into graph operands, and NumPy's broadcasting rule."""
from __future__ import annotations

import numpy as np

from .ndarray import ndarray

from ..core import policy as _policy, graph
from ..core.graph import Node

PY_SCALARS = (bool, int, float, complex)


def is_lazy(x) -> bool:
    return isinstance(x, ndarray)


def to_numpy(x):
    """A NumPy value for ``x`` (forces lazy arrays, recursing into lists/tuples/dicts)."""
    if isinstance(x, ndarray):
        return x._value()
    t = type(x)
    if t is list:
        return [to_numpy(v) for v in x]
    if t is tuple:
        return tuple(to_numpy(v) for v in x)
    if t is dict:
        return {k: to_numpy(v) for k, v in x.items()}
    if t in PY_SCALARS or t is np.ndarray or t is str or x is None:
        return x
    return array_like_value(x)


def array_like_value(x):
    """``x``, or the value of the lazynp array its ``__array__`` returns: a class written
    for lazynp (``def __array__(self): return lazynp.array(...)``) is array-like to lazynp as
    one returning a NumPy array is to NumPy (NumPy itself rejects a lazynp result:
    "object __array__ method not producing an array").  Arrays with NumPy's dispatch
    protocols (pandas, ...) pass through, their ``__array__`` not called here."""
    t = type(x)
    if getattr(t, "__array__", None) is None or isinstance(x, (np.ndarray, np.generic)) or \
            hasattr(t, "__array_function__") or hasattr(t, "__array_ufunc__"):
        return x
    res = x.__array__()
    return res._value() if isinstance(res, ndarray) else res


#: what :func:`eager_operand` returns for a value that is not computed yet
NOT_EAGER = _policy.NOT_EAGER


def value_for_eager(x):
    """The NumPy value of lazy array ``x`` for a call that runs at once; a small pending
    array is computed now (small work gains nothing from joining its graph: see
    :mod:`lazynp.core.policy`); None for a large pending one."""
    v = x._eager_value()
    if v is None and _policy.counted_size(x) < _policy.EAGER_MAX_ELEMS:
        v = graph.value_for_eager(x._node())
    return v


def eager_operand(x):
    """``x`` as NumPy takes it for a call that runs at once: computed lazy arrays become
    their NumPy values (also inside lists and tuples), anything else passes through;
    :data:`NOT_EAGER` when a lazy array in it is large and still pending."""
    if isinstance(x, ndarray):
        v = value_for_eager(x)
        return NOT_EAGER if v is None else v
    t = type(x)
    if (t is list or t is tuple) and contains_lazy(x):
        out = [eager_operand(v) for v in x]
        if any(v is NOT_EAGER for v in out):
            return NOT_EAGER
        return out if t is list else tuple(out)
    if t in PY_SCALARS or t is np.ndarray or t is list or t is tuple:
        return x
    return array_like_value(x)


eager_operand.NOT_EAGER = NOT_EAGER


def contains_lazy(x) -> bool:
    if is_lazy(x):
        return True
    if type(x) in (list, tuple):
        return any(contains_lazy(v) for v in x)
    return False


def leaf_from(value, snapshot: bool = True) -> Node:
    """A leaf node from a NumPy-convertible value; NumPy arrays are copied (snapshot)."""
    if type(value) is np.ndarray:
        arr = np.array(value, copy=True, order="C") if snapshot else np.asarray(value, order="C")
    else:
        arr = np.array(to_numpy(value), order="C")
    return graph.leaf(arr)


def operand(x):
    """Graph operand for ``x``: a Node, or a Python/NumPy scalar kept as a constant."""
    if isinstance(x, ndarray):
        return x._node()
    t = type(x)
    if t in PY_SCALARS or isinstance(x, np.generic):
        return x
    return leaf_from(x)


def key_of(o):
    """Dtype-inference key: a dtype, or the Python type of a weak scalar."""
    t = type(o)
    if t is Node:
        return o.dtype
    if t in PY_SCALARS:
        return t
    return o.dtype


def shape_of(o) -> tuple:
    return o.shape if type(o) is Node else ()


def broadcast_shapes(*shapes) -> tuple:
    """NumPy's broadcasting of shapes; raises NumPy's ValueError on mismatch."""
    first = shapes[0]
    if all(s == first for s in shapes):
        return first
    ndim = max(len(s) for s in shapes)
    out = [1] * ndim
    for s in shapes:
        off = ndim - len(s)
        for i, d in enumerate(s):
            cur = out[off + i]
            if d != cur:
                if cur == 1:
                    out[off + i] = d
                elif d != 1:
                    raise ValueError("operands could not be broadcast together with shapes "
                                     + " ".join(str(tuple(x)).replace(" ", "") for x in shapes) + " ")
    return tuple(out)


def wrap(res, inputs=()):
    """A NumPy result computed at once, as lazynp returns it: arrays as computed lazynp
    arrays owning a C-ordered buffer (copied when NumPy's result shares memory with an
    input or is not C-ordered), NumPy scalars and other objects as they are; tuples, lists
    and named tuples element by element."""
    t = type(res)
    if t is np.ndarray:
        if res.base is not None:
            for v in inputs:
                if type(v) is np.ndarray and np.may_share_memory(res, v):
                    res = res.copy()
                    break
        if not res.flags.c_contiguous:
            return _in_numpys_layout(res)
        return ndarray._from_value(res)
    if t is tuple:
        return tuple(wrap(r, inputs) for r in res)
    if t is list:
        return [wrap(r, inputs) for r in res]
    if isinstance(res, tuple) and hasattr(res, "_fields"):
        return t(*[wrap(r, inputs) for r in res])
    return res


def _in_numpys_layout(res: np.ndarray):
    """A result NumPy laid out in another order (``np.exp(a.T)`` keeps ``a.T``'s strides):
    when its memory is one block in some axis order, the lazynp array is a view of that
    block with NumPy's strides (no copy; ``strides`` and ``flags`` as NumPy's); otherwise a
    C-ordered copy."""
    st = res.strides
    # (a result with a base is a view of NumPy's own temporary -- einsum's transposed
    # product: wrap() has copied the ones sharing an input's memory)
    if res.size > 1 and all(s > 0 for s in st):
        perm = sorted(range(res.ndim), key=lambda i: -st[i])
        block = res.transpose(perm)
        if block.flags.c_contiguous:
            base = ndarray._from_value(block)
            inv = [0] * len(perm)
            for i, p in enumerate(perm):
                inv[p] = i
            return base._view_of(base._get_shadow().transpose(inv))
    return ndarray._from_value(np.ascontiguousarray(res))
