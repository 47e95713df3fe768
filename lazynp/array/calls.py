"""Recording a NumPy function call lazily: arguments with lazy arrays become a template.

``lazy_call("concatenate", np.concatenate, args, kwargs)`` records one node of the op named
after the function.  Its output shape and dtype come from a rule when one is given, else
from running the NumPy function on zero-stride *dummies* of the real shapes (NumPy then
raises its own exceptions at the user's line).
"""
from __future__ import annotations

import numpy as np

from .ndarray import ndarray

from .._base import split as _split
from ..core import graph
from . import outer_products as _outer_products
from .indexing import _Slot, _fill
from ..core.graph import Node
from ..ops.core import TUPLE_GET
from ..ops.registry import OPS, Op, register


def _call_impl_for(fn):
    if fn in _split.BLAS_FUNCTIONS:     # (split.note_blas)
        def impl(*vals, tpl):
            a, k = _fill_deep(tpl, vals)
            res = fn(*a, **k)
            _split.note_blas_for(a)
            return res
    else:
        def impl(*vals, tpl):
            a, k = _fill_deep(tpl, vals)
            return _split.run(fn, a, k)         # (independent rows of large work: two threads)
    impl.__name__ = getattr(fn, "__name__", "call")
    impl.numpy_function = fn        # (compiled plans call it directly: jit.py)
    return impl


def _call_impl_out_for(fn):
    """``impl_out`` for a single-output NumPy ufunc called as a function (matmul), and for
    ``einsum`` (a large result then goes to a pooled buffer: no fresh page faults)."""
    if fn is not np.einsum and (not isinstance(fn, np.ufunc) or fn.nout != 1):
        return None

    def impl_out(out, *vals, tpl):
        a, k = _fill_deep(tpl, vals)
        if fn is np.einsum:     # (a large stack of outer products: one pass, two threads)
            _split.einsum_into(a, k, out, _outer_products.row_writer(a, k, out))
        else:
            fn(*a, out=out, **k)
            if fn is np.matmul:
                _split.note_blas_for(a)
    impl_out.__name__ = fn.__name__
    return impl_out


_FUNCTION_OPS: dict = {}


def function_op(name: str, fn, kind: str = "opaque") -> Op:
    """The op-table entry for NumPy function ``fn`` (registered on first use)."""
    op = _FUNCTION_OPS.get(name)
    if op is None:
        # (a name the op table already has, e.g. the reduction "var", gets a "call:" prefix;
        # the entry is found again under both names)
        full = "call:" + name if name in OPS else name
        op = register(Op(full, kind, _call_impl_for(fn), impl_out=_call_impl_out_for(fn)))
        _FUNCTION_OPS[name] = _FUNCTION_OPS[full] = op
    return op


def _fill_deep(tpl, vals):
    t = type(tpl)
    if t is _Slot:
        return vals[tpl.k]
    if t is tuple:
        return tuple(_fill_deep(x, vals) for x in tpl)
    if t is list:
        return [_fill_deep(x, vals) for x in tpl]
    if t is dict:
        return {k: _fill_deep(v, vals) for k, v in tpl.items()}
    return tpl


def make_template(obj, nodes: list):
    """Replace lazy arrays (and NumPy arrays, snapshotted) in ``obj`` with slots."""
    t = type(obj)
    if isinstance(obj, ndarray):
        nodes.append(obj._node())
        return _Slot(len(nodes) - 1)
    if t is np.ndarray:
        nodes.append(graph.leaf(np.array(obj, copy=True, order="C")))
        return _Slot(len(nodes) - 1)
    if t is tuple:
        return tuple(make_template(x, nodes) for x in obj)
    if t is list:
        return [make_template(x, nodes) for x in obj]
    if t is dict:
        return {k: make_template(v, nodes) for k, v in obj.items()}
    return obj


def dummy(node: Node) -> np.ndarray:
    """A zero-stride array with ``node``'s shape and dtype (no memory)."""
    return np.broadcast_to(np.zeros((), node.dtype), node.shape)


def twin(node: Node) -> np.ndarray:
    """A tiny array with ``node``'s dtype, ndim and zero-size pattern."""
    return np.zeros(tuple(0 if s == 0 else 1 for s in node.shape), node.dtype)


def lazy_call(name: str, fn, args: tuple, kwargs: dict, *, kind: str = "opaque", meta=None,
              scalar: bool = False, nout: int = 0):
    """Record ``fn(*args, **kwargs)`` lazily and return lazy result(s).

    ``meta(nodes, tpl)`` may return ``(shape, dtype)`` (or a list of them when ``nout``);
    otherwise the function runs once on zero-stride dummies to find them.
    """
    if not kwargs and all(type(a) is ndarray for a in args):
        # what make_template builds for plain lazy arrays, without walking the arguments
        # (matmul's common case: 10 -> 3.7 us per recorded call)
        nodes = [a._node() for a in args]
        tpl = (tuple(_Slot(k) for k in range(len(args))), {})
    else:
        nodes = []
        tpl = make_template((tuple(args), dict(kwargs)), nodes)
    if meta is not None:
        m = meta(nodes, tpl)
    else:
        # computed inputs take part with their real values (exact shapes for functions like
        # repeat/compress), pending ones as zero-stride dummies
        a, k = _fill_deep(tpl, [n.value if n.value is not None and n.op.kind != "view"
                                else dummy(n) for n in nodes])
        with np.errstate(all="ignore"):
            res = fn(*a, **k)
        if nout:
            m = [(np.shape(r), np.asarray(r).dtype) for r in res]
        else:
            r = np.asarray(res)
            m = (r.shape, r.dtype)
    op = function_op(name, fn, kind)
    if not nout:
        shape, dtype = m
        node = graph.record(op, tuple(nodes), {"tpl": tpl}, tuple(shape), np.dtype(dtype))
        return ndarray._from_node(node, scalar and shape == ())
    multi = graph.record(op, tuple(nodes), {"tpl": tpl}, tuple(m[0][0]), np.dtype(m[0][1]))
    return tuple(ndarray._from_node(graph.record(TUPLE_GET, (multi, i), None, tuple(s),
                                                 np.dtype(d)), scalar and tuple(s) == ())
                 for i, (s, d) in enumerate(m))
