"""Batching rules: a function's per-example graph recorded again with a batch axis.

:func:`lazynp.vmap` traces the function once on placeholders shaped like one example; this
module walks the recorded nodes from the outputs and records each node that depends on a
placeholder again, on batched arguments, through the op's batching rule.  Every batched
value carries its batch axis first (shape ``(B,) + the example's shape``); values that do
not depend on the batch are the traced nodes themselves.

Rules: the op table's slot (:attr:`lazynp.ops.registry.Op.batch`: elementwise ops,
reductions and scans, parts of multi-output ops) and, for ops defined above the op table,
the tables below keyed by op name (views, indexing, writes, the gradient's own region
ops) or by NumPy function name (the ops recorded by ``lazy_call``: ``matmul``, ``einsum``,
``concatenate``, ``sort``, ``linalg.*``...).  An op with no rule (or a case its rule does
not cover) is recorded once per example on that example's slice of its batched arguments
and the results stacked: counted in :func:`lazynp.stats` (``vmap_op_loops``).

The gradient's backward pass is made of the same recorded ops, so ``vmap(grad(f))`` is
the batched backward pass.
"""
from __future__ import annotations

import inspect
import math
import string

import numpy as np
from numpy.lib.array_utils import normalize_axis_index, normalize_axis_tuple

from .._base import counters as _counters
from .._numpy import namespace as lnp
from ..array.calls import _fill_deep as _fill, function_op
from ..array.indexing import _Slot
from ..array.ndarray import ndarray
from ..core import graph
from ..core.graph import VIEW, Node
from ..ops.core import COPY, TUPLE_GET
from ..ops.elementwise import UFUNC_OPS

#: ``stats()`` counters: ops recorded once per example (no batching rule for that case),
#: by op name, and their total
STATS = {"vmap_op_loops": 0}
LOOPED_OPS: dict = {}


def _read() -> dict:
    return {"vmap_op_loops": STATS["vmap_op_loops"], "vmap_looped_ops": dict(LOOPED_OPS)}


def _reset() -> None:
    STATS["vmap_op_loops"] = 0
    LOOPED_OPS.clear()


_counters.register_counters(_read, _reset)


class NoRule(Exception):
    """This case of the op has no batching rule: it runs once per example."""


def _prod(shape) -> int:
    return math.prod(shape)


def _c_strides(shape: tuple, itemsize: int) -> tuple:
    out = []
    acc = itemsize
    for s in reversed(shape):
        out.append(acc)
        acc *= max(s, 1)
    return tuple(reversed(out))


def _contiguous_at(node: Node):
    """``(root, byte offset)`` when ``node``'s value lies C-contiguously in ``root``'s
    buffer from that offset; else None."""
    if node.op is not VIEW:
        return node, 0
    p = node.params
    want = _c_strides(p["shape"], np.dtype(p["dtype"]).itemsize)
    if all(s == w or n == 1 for s, w, n in zip(p["strides"], want, p["shape"])):
        return node.args[0], p["offset"]
    return None


def wrap(node: Node) -> ndarray:
    """A lazynp array reading ``node`` (a view node becomes a view of its base's array)."""
    if node.op is not VIEW:
        return ndarray._from_node(node)
    p = node.params
    base = ndarray._from_node(node.args[0])
    shadow = np.ndarray(p["shape"], p["dtype"], buffer=base._get_shadow(),
                        offset=p["offset"], strides=p["strides"])
    return base._view_of(shadow, p["offset"])


class Batcher:
    """Records the batched version of traced nodes, batch size ``size``.

    ``env`` maps ``id(traced node)`` to its batched node; :meth:`run` fills it from the
    batched inputs (the placeholders' entries) to the outputs."""

    def __init__(self, size: int, env: dict):
        self.B = size
        self.env = env
        self.loops: dict = {}       # id(multi-output node) -> its per-example nodes
        self.multi: set = set()     # ids of multi-output nodes (read through tuple_get)

    # --- values ---------------------------------------------------------------------------

    def get(self, a):
        """The batched node of argument ``a``, or None (not batched)."""
        return self.env.get(id(a)) if type(a) is Node else None

    def root(self, bn: Node) -> tuple:
        """``(root, offset)`` of a C-contiguous layout of ``bn``'s value (a copy if its
        view is not one)."""
        at = _contiguous_at(bn)
        if at is None:
            bn = graph.record(COPY, (bn,), None, bn.shape, bn.dtype)
            at = bn, 0
        return at

    def owned(self, bn: Node) -> Node:
        """``bn`` as a node of its own buffer (a copy of a view)."""
        if bn.op is VIEW:
            return graph.record(COPY, (bn,), None, bn.shape, bn.dtype)
        return bn

    def reshape(self, bn: Node, shape: tuple) -> Node:
        """``bn`` reshaped to ``shape`` (a view when its layout allows)."""
        shape = tuple(shape)
        if shape == bn.shape:
            return bn
        at = _contiguous_at(bn)
        if at is not None:
            return graph.view_node(at[0], at[1], shape,
                                   _c_strides(shape, bn.dtype.itemsize), bn.dtype)
        return lnp.reshape(wrap(bn), shape)._node()

    def expand(self, bn: Node, per_shape: tuple, ndim: int) -> Node:
        """Batched ``bn`` (an example's shape ``per_shape``) with axes after the batch axis
        so that its example has ``ndim`` dimensions (it broadcasts as the example did)."""
        extra = ndim - len(per_shape)
        if extra <= 0:
            return bn
        return self.reshape(bn, (self.B,) + (1,) * extra + tuple(per_shape))

    def fit(self, bn: Node, per_shape: tuple, ndim: int) -> Node:
        """Batched value ``bn`` written into a region of ``ndim`` dimensions: as
        :meth:`expand`, and leading size-1 axes beyond them dropped (NumPy's assignment
        drops them)."""
        extra = len(per_shape) - ndim
        if extra > 0:
            return self.reshape(bn, (self.B,) + tuple(per_shape[extra:]))
        return self.expand(bn, per_shape, ndim)

    def batched(self, a) -> Node:
        """Argument ``a`` (node) with a batch axis: its batched node, or its value broadcast
        along a new leading axis (a view)."""
        bn = self.get(a)
        if bn is not None:
            return bn
        return lnp.broadcast_to(wrap(a), (self.B,) + tuple(a.shape))._node()

    def example(self, bn: Node, i: int) -> Node:
        """Example ``i`` of batched ``bn`` (a view)."""
        at = _contiguous_at(bn)
        shape = bn.shape[1:]
        if at is not None:
            step = _prod(shape) * bn.dtype.itemsize
            return graph.view_node(at[0], at[1] + i * step, shape,
                                   _c_strides(shape, bn.dtype.itemsize), bn.dtype)
        return wrap(bn)[i]._node()

    def stack(self, nodes: list, shape: tuple, dtype) -> Node:
        """The per-example ``nodes`` (each of ``shape``/``dtype``) stacked."""
        if not nodes:
            return lnp.empty((0,) + tuple(shape), dtype)._node()
        return lnp.stack([ndarray._from_node(n) for n in nodes])._node()

    # --- the walk ---------------------------------------------------------------------------

    def run(self, outs: list) -> None:
        """Batch every node between the batched inputs and ``outs``."""
        def walk(n):
            return n.op is VIEW or (n.state == graph.PENDING and n.args)
        order = [n for n, walked in graph.post_order(outs, walk, set(self.env)) if walked]
        self.multi = {id(n.args[0]) for n in order if n.op is TUPLE_GET}
        for n in order:
            if id(n) in self.env:
                continue
            if not any(type(a) is Node and (id(a) in self.env or id(a) in self.loops)
                       for a in n.args):
                continue
            bn = self.node(n)
            if bn is not None:          # (None: a multi-output op run per example)
                self.env[id(n)] = bn

    def node(self, n: Node):
        """The batched node of traced node ``n`` (an argument of it is batched)."""
        rule = _rule_for(n.op)
        try:
            if rule is None:
                raise NoRule
            bn = rule(self, n)
        except NoRule:
            bn = self.loop(n)
            if bn is None:
                return None
        want = (self.B,) + tuple(n.shape)
        if bn.shape != want:
            # (a rule may leave size-1 axes it added, or drop keepdims ones; anything else
            # is a rule's bug: an error, never a wrong result)
            if [s for s in bn.shape if s != 1] != [s for s in want if s != 1]:
                raise AssertionError(f"lazynp.vmap: the batching rule of {n.op.name} gave "
                                     f"shape {bn.shape}, not {want}")
            bn = self.reshape(bn, want)
        if bn.dtype != n.dtype:
            raise AssertionError(f"lazynp.vmap: the batching rule of {n.op.name} gave "
                                 f"dtype {bn.dtype}, not {n.dtype}")
        return bn

    def loop(self, n: Node):
        """``n``'s op recorded once per example, the results stacked (no batching rule)."""
        name = n.op.name
        LOOPED_OPS[name] = LOOPED_OPS.get(name, 0) + 1
        STATS["vmap_op_loops"] += 1
        write = n.op.kind == "write"
        parts = []
        for i in range(self.B):
            args = []
            for k, a in enumerate(n.args):
                bn = self.get(a)
                if bn is not None:
                    a = self.example(bn, i)
                    if write and k == 0:       # (written in place: its own copy)
                        a = graph.record(COPY, (a,), None, a.shape, a.dtype)
                elif type(a) is Node and id(a) in self.loops:
                    a = self.loops[id(a)][i]
                args.append(a)
            params = dict(n.params) if n.params else n.params
            parts.append(graph.record(n.op, tuple(args), params, n.shape, n.dtype))
        if id(n) in self.multi:
            self.loops[id(n)] = parts
            return None
        return self.stack(parts, n.shape, n.dtype)


# --- rules of the op table's slot -------------------------------------------------------------

def _elementwise(bt: Batcher, n: Node) -> Node:
    if n.op.name == "ufunc_call" and \
            set(n.params["kw"]) & {"axes", "axis", "keepdims", "out", "signature"}:
        raise NoRule
    r = len(n.shape)
    args = []
    for a in n.args:
        bn = bt.get(a)
        args.append(a if bn is None else bt.expand(bn, a.shape, r))
    params = dict(n.params) if n.params else n.params
    return graph.record(n.op, tuple(args), params, (bt.B,) + tuple(n.shape), n.dtype)


def _reduction(bt: Batcher, n: Node, flat: bool = False) -> Node:
    x = n.args[0]
    bx = bt.batched(x)
    nd = len(x.shape)
    p = dict(n.params or {})
    axis = p.get("axis")
    shape = (bt.B,) + tuple(n.shape)
    if axis is None and (flat or n.op.name.endswith(".reduce")) or nd == 0:
        # each example flattened: one axis to reduce (or scan) after the batch axis
        if len(n.args) > 1:
            raise NoRule            # (a where= mask is not flattened with it)
        bx = bt.reshape(bx, (bt.B, _prod(x.shape)))
        p["axis"] = 1
        if p.get("keepdims"):
            shape = (bt.B, 1)
    elif axis is None:
        p["axis"] = tuple(range(1, nd + 1))
    elif isinstance(axis, tuple):
        p["axis"] = tuple(a + 1 for a in normalize_axis_tuple(axis, nd))
    else:
        p["axis"] = normalize_axis_index(axis, nd) + 1
    args = [bx]
    for a in n.args[1:]:            # (the where= mask)
        bn = bt.get(a)
        args.append(a if bn is None else bt.expand(bn, a.shape, nd))
    return graph.record(n.op, tuple(args), p, shape, n.dtype)


def _reduction_flat(bt: Batcher, n: Node) -> Node:
    return _reduction(bt, n, flat=True)


def _tuple_get(bt: Batcher, n: Node) -> Node:
    multi, i = n.args
    parts = bt.loops.get(id(multi))
    if parts is not None:
        return bt.stack([graph.record(TUPLE_GET, (m, i), None, n.shape, n.dtype)
                         for m in parts], n.shape, n.dtype)
    return graph.record(TUPLE_GET, (bt.env[id(multi)], i), None, (bt.B,) + tuple(n.shape),
                        n.dtype)


SLOT_RULES = {"elementwise": _elementwise, "reduction": _reduction,
              "reduction_flat": _reduction_flat, "tuple_get": _tuple_get}


# --- views, indexing and writes ----------------------------------------------------------------

def _view(bt: Batcher, n: Node) -> Node:
    base = n.args[0]
    root, off = bt.root(bt.env[id(base)])
    step = _prod(base.shape) * base.dtype.itemsize
    p = n.params
    return graph.view_node(root, off + p["offset"], (bt.B,) + tuple(p["shape"]),
                           (step,) + tuple(p["strides"]), p["dtype"])


def _is_advanced(c) -> bool:
    return type(c) is _Slot or isinstance(c, (np.ndarray, list))


def _index_tuple(index) -> tuple:
    return index if type(index) is tuple else (index,)


def _batched_index(index) -> tuple:
    """``(index with the batch axis first, k)``: the batch axis of the result is at ``k``
    (after the broadcast shape of non-adjacent advanced indices, NumPy's rule), else 0."""
    if index is Ellipsis:
        return Ellipsis, 0
    items = _index_tuple(index)
    if any(type(c) is bool or isinstance(c, np.bool_) for c in items):
        raise NoRule
    has_array = any(_is_advanced(c) for c in items)
    adv = [k for k, c in enumerate(items)
           if _is_advanced(c) or has_array and isinstance(c, (int, np.integer))]
    new = (slice(None),) + items
    if not adv or adv == list(range(adv[0], adv[-1] + 1)):
        return new, 0
    k = 0
    for c in items:
        if isinstance(c, np.ndarray):
            k = max(k, 1 if c.dtype == bool else c.ndim)
        elif isinstance(c, list):
            k = max(k, np.ndim(c))
        elif type(c) is _Slot:
            raise NoRule
    return new, k


def _getitem(bt: Batcher, n: Node) -> Node:
    x, idx = n.args[0], n.args[1:]
    index = n.params["index"]
    bidx = [bt.get(a) for a in idx]
    if any(b is not None for b in bidx):
        return _gather(bt, n, bidx)
    new, k = _batched_index(index)
    shape = tuple(n.shape)
    shape = shape[:k] + (bt.B,) + shape[k:]
    bn = graph.record(n.op, (bt.env[id(x)],) + tuple(idx), {"index": new}, shape, n.dtype)
    if k:
        bn = lnp.moveaxis(wrap(bn), k, 0)._node()
    return bn


def _gather(bt: Batcher, n: Node, bidx: list) -> Node:
    """``x[i]`` with a batched index array ``i`` (the whole index)."""
    index = n.params["index"]
    items = _index_tuple(index)
    if len(items) != 1 or type(items[0]) is not _Slot or len(n.args) != 2:
        raise NoRule
    i = n.args[1]
    bi = bidx[0]
    bx = bt.get(n.args[0])
    if bx is None:
        return graph.record(n.op, (n.args[0], bi), {"index": _Slot(0)},
                            (bt.B,) + tuple(n.shape), n.dtype)
    rows = graph.leaf(np.arange(bt.B).reshape((bt.B,) + (1,) * len(i.shape)))
    return graph.record(n.op, (bx, rows, bi), {"index": (_Slot(0), _Slot(1))},
                        (bt.B,) + tuple(n.shape), n.dtype)


def _batch_geom(geom, per_bytes: int, B: int):
    """A region geometry ``(offset, shape, strides, dtype)`` of one example's buffer (of
    ``per_bytes`` bytes) as the same region of every example of the batched buffer."""
    if geom is None:
        return None
    off, shape, strides, dt = geom
    return (off, (B,) + tuple(shape), (per_bytes,) + tuple(strides), dt)


def _target_ndim(shape: tuple, dtype, geom, index) -> int:
    """The example's ``target[index]`` dimensions (``target``: its region ``geom``)."""
    t = np.broadcast_to(np.zeros((), dtype), shape)
    if geom is not None:
        t = np.broadcast_to(np.zeros((), geom[3]), geom[1])
    if index is None:
        return t.ndim
    return np.ndim(t[index])


def _index_args_batched(bt: Batcher, args) -> bool:
    return any(bt.get(a) is not None for a in args)


def _setitem(bt: Batcher, n: Node) -> Node:
    base, value, idx = n.args[0], n.args[1], n.args[2:]
    p = n.params
    if idx or _index_args_batched(bt, idx):
        raise NoRule
    index = p["index"]
    new, k = _batched_index(index)
    if k:
        raise NoRule
    per_bytes = _prod(base.shape) * base.dtype.itemsize
    geom = _batch_geom(p["geom"], per_bytes, bt.B)
    tb = bt.owned(bt.batched(base)) if bt.get(base) is not None else \
        graph.record(COPY, (bt.batched(base),), None, (bt.B,) + tuple(base.shape), base.dtype)
    bv = bt.get(value)
    if bv is not None:
        bv = bt.fit(bv, value.shape, _target_ndim(base.shape, base.dtype, p["geom"], index))
    else:
        bv = value
    return graph.record(n.op, (tb, bv), {"geom": geom, "index": new},
                        (bt.B,) + tuple(n.shape), n.dtype)


def _ufunc_out(bt: Batcher, n: Node) -> Node:
    base, ops = n.args[0], n.args[1:]
    p = dict(n.params)
    if set(p["kw"]) & {"axes", "axis", "keepdims", "signature"}:
        raise NoRule
    per_bytes = _prod(base.shape) * base.dtype.itemsize
    region = p["geom"][1] if p["geom"] is not None else base.shape
    p["geom"] = _batch_geom(p["geom"], per_bytes, bt.B)
    tb = bt.owned(bt.batched(base)) if bt.get(base) is not None else \
        graph.record(COPY, (bt.batched(base),), None, (bt.B,) + tuple(base.shape), base.dtype)
    args = [tb]
    for a in ops:
        bn = bt.get(a)
        args.append(a if bn is None else bt.expand(bn, a.shape, len(region)))
    return graph.record(n.op, tuple(args), p, (bt.B,) + tuple(n.shape), n.dtype)


def _ufunc_at(bt: Batcher, n: Node) -> Node:
    p = dict(n.params)
    base = n.args[0]
    rest = n.args[1:]
    idx = rest[:-1] if p["has_b"] else rest
    if idx:
        raise NoRule
    new, k = _batched_index(p["index"])
    if k:
        raise NoRule
    per_bytes = _prod(base.shape) * base.dtype.itemsize
    nd = _target_ndim(base.shape, base.dtype, p["geom"], p["index"])
    p["geom"] = _batch_geom(p["geom"], per_bytes, bt.B)
    p["index"] = new
    tb = bt.owned(bt.batched(base)) if bt.get(base) is not None else \
        graph.record(COPY, (bt.batched(base),), None, (bt.B,) + tuple(base.shape), base.dtype)
    args = [tb]
    if p["has_b"]:
        b = rest[-1]
        bb = bt.get(b)
        args.append(b if bb is None else bt.fit(bb, b.shape, nd))
    return graph.record(n.op, tuple(args), p, (bt.B,) + tuple(n.shape), n.dtype)


def _lazy_index(bt: Batcher, index, idx: tuple, shape: tuple, dtype, geom) -> tuple:
    """``(index, index args, ndim)`` for a region op whose example index may hold lazy
    index arrays ``idx`` (its slots): the batched index and arguments, and the example's
    ``target[index]`` dimensions.  A batched index array is supported as the whole index
    (a gather: each example's rows paired with its indices)."""
    b_idx = [bt.get(a) for a in idx]
    if any(x is not None for x in b_idx):
        items = _index_tuple(index)
        if len(items) != 1 or type(items[0]) is not _Slot or len(idx) != 1 or \
                geom is not None or idx[0].dtype.kind not in "iu":
            raise NoRule
        i = idx[0]
        rows = graph.leaf(np.arange(bt.B).reshape((bt.B,) + (1,) * len(i.shape)))
        nd = len(i.shape) + len(shape) - 1
        return (_Slot(0), _Slot(1)), (rows, b_idx[0]), nd
    if any(a.dtype.kind not in "iu" for a in idx):
        raise NoRule        # (a lazy boolean mask: its shape depends on its values)
    dummies = [np.zeros(a.shape, a.dtype) for a in idx]
    nd = _target_ndim(shape, dtype, geom, None if index is None else _fill(index, dummies))
    if index is None:
        return None, tuple(idx), nd
    new, k = _batched_index(index)
    if k:
        raise NoRule
    return new, tuple(idx), nd


def _region(bt: Batcher, n: Node, kind: str) -> Node:
    """The gradient's region ops (:mod:`lazynp.autograd.rules`): ``ad.region_get``,
    ``ad.region_add``, ``ad.region_zero``."""
    src, idx = n.args[0], n.args[1:]
    p = dict(n.params)
    if kind == "add":
        shape, dtype = tuple(p["shape"]), np.dtype(p["dtype"])
    else:
        shape, dtype = tuple(src.shape), src.dtype
    p["index"], idx_args, nd = _lazy_index(bt, p["index"], idx, shape, dtype, p["geom"])
    if kind == "add":
        p["shape"] = (bt.B,) + shape
        g = bt.expand(bt.batched(src), src.shape, nd)
    elif kind == "get" and p["geom"] is None:
        g = bt.batched(src)
    else:                           # (a region of its buffer: a buffer of its own)
        g = bt.owned(bt.batched(src))
    per_bytes = _prod(shape) * dtype.itemsize
    p["geom"] = _batch_geom(p["geom"], per_bytes, bt.B)
    return graph.record(n.op, (g,) + idx_args, p, (bt.B,) + tuple(n.shape), n.dtype)


def _tal_add(bt: Batcher, n: Node) -> Node:
    g, idx = n.args
    p = dict(n.params)
    if p["axis"] is None:
        raise NoRule
    shape = tuple(p["shape"])
    p["axis"] = normalize_axis_index(p["axis"], len(shape)) + 1
    p["shape"] = (bt.B,) + shape
    bg = bt.expand(bt.batched(g), g.shape, len(shape))
    bg = lnp.broadcast_to(wrap(bg), (bt.B,) + tuple(np.broadcast_shapes(g.shape, idx.shape))
                          )._node() if g.shape != idx.shape else bg
    bi = bt.batched(idx)
    return graph.record(n.op, (bg, bi), p, (bt.B,) + tuple(n.shape), n.dtype)


def _roll1(bt: Batcher, n: Node) -> Node:
    p = dict(n.params)
    p["axis"] = p["axis"] + 1
    return graph.record(n.op, (bt.env[id(n.args[0])],), p, (bt.B,) + tuple(n.shape), n.dtype)


NAME_RULES = {
    "view": _view,
    "getitem": _getitem,
    "element": _elementwise,
    "setitem": _setitem,
    "ufunc_out": _ufunc_out,
    "ufunc_at": _ufunc_at,
    "roll1": _roll1,
    "ad.stop_gradient": _elementwise,
    "ad.region_get": lambda bt, n: _region(bt, n, "get"),
    "ad.region_add": lambda bt, n: _region(bt, n, "add"),
    "ad.region_zero": lambda bt, n: _region(bt, n, "zero"),
    "ad.take_along_axis_add": _tal_add,
}


# --- NumPy functions recorded by lazy_call (op params: a call template) ------------------------

def _template(obj, nodes: list):
    """``obj`` with its nodes replaced by slots (appended to ``nodes``)."""
    t = type(obj)
    if t is Node:
        nodes.append(obj)
        return _Slot(len(nodes) - 1)
    if t is tuple:
        return tuple(_template(x, nodes) for x in obj)
    if t is list:
        return [_template(x, nodes) for x in obj]
    if t is dict:
        return {k: _template(v, nodes) for k, v in obj.items()}
    return obj


def _call(name: str, fn, args: tuple, kwargs: dict, shape: tuple, dtype) -> Node:
    """Record ``fn(*args, **kwargs)`` (nodes inside) as the op of NumPy function ``name``."""
    nodes: list = []
    tpl = _template((tuple(args), dict(kwargs)), nodes)
    return graph.record(function_op(name, fn), tuple(nodes), {"tpl": tpl}, tuple(shape),
                        np.dtype(dtype))


def _numpy_name(op) -> str:
    name = op.name
    return name[5:] if name.startswith("call:") else name


def _function(bt: Batcher, n: Node) -> Node:
    rule = FUNCTION_RULES.get(_numpy_name(n.op))
    fn = getattr(n.op.impl, "numpy_function", None)
    if rule is None or fn is None or "tpl" not in (n.params or {}):
        raise NoRule
    args, kwargs = _fill(n.params["tpl"], n.args)
    return rule(bt, n, fn, args, kwargs)


def _matmul_operands(bt: Batcher, a, b):
    """Batched ``a``, ``b`` (an example's matmul operands) as operands of one matmul, and
    the shape of its result."""
    sa, sb = tuple(a.shape), tuple(b.shape)
    if not sa or not sb:
        raise NoRule
    a2 = sa if len(sa) >= 2 else (1,) + sa
    b2 = sb if len(sb) >= 2 else sb + (1,)
    stack = np.broadcast_shapes(a2[:-2], b2[:-2])
    L = len(stack) + 2
    ops = []
    for x, s2 in ((a, a2), (b, b2)):
        bx = bt.get(x)
        if bx is None:
            ops.append(bt.reshape(x, s2) if s2 != tuple(x.shape) else x)
        else:
            ops.append(bt.reshape(bx, (bt.B,) + (1,) * (L - len(s2)) + s2))
    return ops, (bt.B,) + tuple(stack) + (a2[-2], b2[-1])


def _matmul(bt: Batcher, n: Node, fn, args, kwargs) -> Node:
    if len(args) != 2 or set(kwargs) - {"dtype", "casting"} or \
            any(type(x) is not Node for x in args):
        raise NoRule
    if not kwargs:
        return _product(bt, n, *args)
    ops, shape = _matmul_operands(bt, *args)
    return _call("matmul", np.matmul, tuple(ops), kwargs, shape, n.dtype)


def _product(bt: Batcher, n: Node, a, b) -> Node:
    """The batched ``a @ b`` of an example's operands ``a``, ``b``, of the example's
    result shape after the batch axis.  (A batch of rows times a shared matrix stays a
    stack of products rather than one ``(B*n, k) @ (k, m)`` BLAS call: on two cores the
    BLAS threads that spin after a large call slowed the per-example gradient of an MLP
    from 0.19 to 0.36 s.)"""
    ops, shape = _matmul_operands(bt, a, b)
    return bt.reshape(_matmul_or_outer(ops, shape, n.dtype), (bt.B,) + tuple(n.shape))


def _matmul_or_outer(ops: list, shape: tuple, dtype) -> Node:
    """``matmul`` of the operands; a product over one term (an outer product: the
    per-example weight gradient of a dense layer) is not one BLAS call per example but,
    for real dtypes, ``einsum('...ik,...kj->...ij')``: matmul's values bit for bit (a sum
    over one term from 0, so ``-1 * 0`` is ``+0.0`` as in the loop's matmul, where the
    broadcast ``multiply`` gives ``-0.0``), written into a pooled buffer, and NumPy's
    einsum loop for it runs ~1.8x faster than the broadcast multiply's (2026-12-07, the
    (256, 784, 256) gradient of the 784-256-10 MLP: 72 vs 136 ms into a reused buffer).
    A large one is then written in one pass by a compiled kernel, on two threads
    (array/outer_products.py through einsum's ``impl_out`` and ``split.einsum_into``).
    Complex dtypes keep the broadcast multiply."""
    a, b = ops
    if a.shape[-1] == 1 and dtype.kind == "f" and a.dtype == b.dtype == dtype:
        return _call("einsum", np.einsum, ("...ik,...kj->...ij", a, b), {}, shape, dtype)
    if a.shape[-1] == 1 and dtype.kind == "c" and a.dtype == b.dtype == dtype:
        return graph.record(UFUNC_OPS["multiply"], (a, b), None, shape, dtype)
    return _call("matmul", np.matmul, tuple(ops), {}, shape, dtype)


def _dot(bt: Batcher, n: Node, fn, args, kwargs) -> Node:
    if len(args) != 2 or kwargs or type(args[0]) is not Node or type(args[1]) is not Node or \
            not args[0].shape or not 1 <= len(args[1].shape) <= 2:
        raise NoRule       # (dot with a scalar, or with an N-d b: no matmul form)
    return _product(bt, n, *args)


def _fresh_letter(used: str) -> str:
    for c in string.ascii_letters:
        if c not in used:
            return c
    raise NoRule


def _einsum(bt: Batcher, n: Node, fn, args, kwargs) -> Node:
    subs = args[0]
    ops = args[1:]
    if not isinstance(subs, str) or set(kwargs) - {"optimize", "dtype", "casting", "order"}:
        raise NoRule
    subs = subs.replace(" ", "")
    if "->" in subs:
        ins, out = subs.split("->")
    else:
        ins = subs
        letters = ins.replace(",", "").replace(".", "")
        out = ("..." if "..." in ins else "") + \
            "".join(sorted(c for c in set(letters) if letters.count(c) == 1))
    terms = ins.split(",")
    if len(terms) != len(ops):
        raise NoRule
    z = _fresh_letter(subs)
    new_terms, new_ops = [], []
    for t, x in zip(terms, ops):
        bx = bt.get(x)
        if bx is None:
            new_terms.append(t)
            new_ops.append(x)
        else:
            new_terms.append(z + t)
            new_ops.append(bx)
    new = ",".join(new_terms) + "->" + z + out
    return _call("einsum", np.einsum, (new,) + tuple(new_ops), kwargs,
                 (bt.B,) + tuple(n.shape), n.dtype)


def _tensordot(bt: Batcher, n: Node, fn, args, kwargs) -> Node:
    bound = _bind(np.tensordot, args, kwargs)
    a, b, axes = bound["a"], bound["b"], bound["axes"]
    if type(a) is not Node or type(b) is not Node:
        raise NoRule
    na, nb = len(a.shape), len(b.shape)
    if isinstance(axes, (int, np.integer)):
        ax_a, ax_b = list(range(na - axes, na)), list(range(axes))
    else:
        ax_a, ax_b = axes
        ax_a = [ax_a] if isinstance(ax_a, (int, np.integer)) else list(ax_a)
        ax_b = [ax_b] if isinstance(ax_b, (int, np.integer)) else list(ax_b)
    ax_a = [normalize_axis_index(x, na) for x in ax_a]
    ax_b = [normalize_axis_index(x, nb) for x in ax_b]
    letters = iter(string.ascii_lowercase)
    ta = [next(letters) for _ in range(na)]
    tb = [next(letters) for _ in range(nb)]
    for i, j in zip(ax_a, ax_b):
        tb[j] = ta[i]
    out = [c for k, c in enumerate(ta) if k not in ax_a] + \
        [c for k, c in enumerate(tb) if k not in ax_b]
    subs = "".join(ta) + "," + "".join(tb) + "->" + "".join(out)
    return _einsum(bt, n, np.einsum, (subs, a, b), {})


def _inner(bt: Batcher, n: Node, fn, args, kwargs) -> Node:
    a, b = args
    if type(a) is not Node or type(b) is not Node or not a.shape or not b.shape or kwargs:
        raise NoRule
    letters = iter(string.ascii_lowercase[1:])
    k = "a"
    ta = "".join(next(letters) for _ in range(len(a.shape) - 1))
    tb = "".join(next(letters) for _ in range(len(b.shape) - 1))
    return _einsum(bt, n, np.einsum, (f"{ta}{k},{tb}{k}->{ta}{tb}", a, b), {})


def _outer(bt: Batcher, n: Node, fn, args, kwargs) -> Node:
    a, b = args
    if type(a) is not Node or type(b) is not Node or kwargs:
        raise NoRule
    na, nb = _prod(a.shape), _prod(b.shape)
    ops = []
    for x, shape in ((a, (na, 1)), (b, (1, nb))):
        bx = bt.get(x)
        ops.append(bt.reshape(x, shape) if bx is None else bt.reshape(bx, (bt.B,) + shape))
    mul = UFUNC_OPS["multiply"]
    if np.result_type(a.dtype, b.dtype) != n.dtype:
        raise NoRule
    return graph.record(mul, tuple(ops), None, (bt.B, na, nb), n.dtype)


def _concatenate(bt: Batcher, n: Node, fn, args, kwargs) -> Node:
    if not args or not isinstance(args[0], (list, tuple)) or len(args) > 2:
        raise NoRule
    arrays = args[0]
    kw = dict(kwargs)
    axis = args[1] if len(args) == 2 else kw.pop("axis", 0)
    if any(type(x) is not Node for x in arrays):
        raise NoRule
    nd = len(arrays[0].shape)
    new = []
    for x in arrays:
        bx = bt.batched(x)
        if axis is None:
            bx = bt.reshape(bx, (bt.B, _prod(x.shape)))
        new.append(bx)
    kw["axis"] = 1 if axis is None else normalize_axis_index(axis, nd) + 1
    return _call("concatenate", fn, (new,), kw, (bt.B,) + tuple(n.shape), n.dtype)


_SIGNATURES: dict = {}


def _bind(fn, args, kwargs) -> dict:
    sig = _SIGNATURES.get(fn)
    if sig is None:
        try:
            sig = _SIGNATURES[fn] = inspect.signature(fn)
        except (TypeError, ValueError):
            raise NoRule from None
    try:
        b = sig.bind(*args, **kwargs)
    except TypeError:
        raise NoRule from None
    b.apply_defaults()
    return dict(b.arguments)


def _along_axis(name: str, data: tuple, flatten: bool, also: tuple = ()):
    """Rule of a function acting along one ``axis`` (other axes independent): the data
    arguments ``data`` batched, the axis shifted; ``axis=None`` flattens each example when
    ``flatten`` (else no rule).  ``also``: arguments batched too when the data are
    (same shape: ``take_along_axis``'s indices)."""
    def rule(bt: Batcher, n: Node, fn, args, kwargs) -> Node:
        bound = _bind(fn, args, kwargs)
        params = list(_SIGNATURES[fn].parameters)
        axis = bound.get("axis")
        nd = None
        for k in data + also:
            x = bound[k]
            if type(x) is not Node:
                raise NoRule
            nd = len(x.shape) if nd is None else nd
            bx = bt.batched(x)
            if axis is None:
                if not flatten:
                    raise NoRule
                bx = bt.reshape(bx, (bt.B, _prod(x.shape)))
            bound[k] = bx
        for k, v in bound.items():
            if k not in data + also and (bt.get(v) is not None or
                                         isinstance(v, (list, tuple)) and
                                         any(bt.get(x) is not None for x in v)):
                raise NoRule
        bound["axis"] = 1 if axis is None else normalize_axis_index(axis, nd) + 1
        first = [bound.pop(params[0])]
        return _call(name, fn, tuple(first), bound, (bt.B,) + tuple(n.shape), n.dtype)
    return rule


def _stacked(name: str, n_matrix_args: int = 1):
    """Rule of a function on stacks of matrices (``linalg.inv``, ``linalg.svd``...): the
    batch axis is one more stack axis."""
    def rule(bt: Batcher, n: Node, fn, args, kwargs) -> Node:
        if any(bt.get(v) is not None for v in kwargs.values()):
            raise NoRule
        new = list(args)
        mats = [k for k, a in enumerate(args) if type(a) is Node]
        if not mats or mats[-1] >= n_matrix_args:
            raise NoRule
        L = max(len(args[k].shape) for k in mats)
        for k in mats:
            x = args[k]
            bx = bt.get(x)
            if bx is not None:
                new[k] = bt.reshape(bx, (bt.B,) + (1,) * (L - len(x.shape)) + tuple(x.shape))
        if name == "linalg.qr" and kwargs.get("mode", args[1] if len(args) > 1 else
                                             "reduced") == "raw":
            raise NoRule
        return _call(name, fn, tuple(new), kwargs, (bt.B,) + tuple(n.shape), n.dtype)
    return rule


def _solve(bt: Batcher, n: Node, fn, args, kwargs) -> Node:
    """``linalg.solve(a, b)``: ``b`` is a vector exactly when it is 1-d (NumPy 2), so a
    batch of vectors is solved as a stack of one-column matrices."""
    if len(args) != 2 or kwargs or any(type(x) is not Node for x in args):
        raise NoRule
    a, b = args
    sa = tuple(a.shape)
    sb = tuple(b.shape) + ((1,) if len(b.shape) == 1 else ())
    stack = np.broadcast_shapes(sa[:-2], sb[:-2])
    ops = []
    for x, s2 in ((a, sa), (b, sb)):
        bx = bt.get(x)
        if bx is None:
            ops.append(bt.reshape(x, s2) if s2 != tuple(x.shape) else x)
        else:
            ops.append(bt.reshape(bx, (bt.B,) + (1,) * (len(stack) + 2 - len(s2)) + s2))
    shape = (bt.B,) + tuple(stack) + sb[-2:]
    return _call("linalg.solve", fn, tuple(ops), {}, shape, n.dtype)


def _trailing(name: str):
    """Rule of a function on the last two axes (``triu``, ``tril``)."""
    def rule(bt: Batcher, n: Node, fn, args, kwargs) -> Node:
        x = args[0]
        if type(x) is not Node or len(x.shape) < 2 or \
                any(bt.get(a) is not None for a in args[1:]):
            raise NoRule
        return _call(name, fn, (bt.env[id(x)],) + tuple(args[1:]), kwargs,
                     (bt.B,) + tuple(n.shape), n.dtype)
    return rule


def _ravel(bt: Batcher, n: Node, fn, args, kwargs) -> Node:
    bound = _bind(fn, args, kwargs)
    if bound.get("order", "C") not in ("C", "A", "K") and n.args[0].shape and \
            len(n.args[0].shape) > 1:
        raise NoRule
    x = bound["a"]
    return bt.reshape(bt.env[id(x)], (bt.B, _prod(x.shape)))


def _reshape(bt: Batcher, n: Node, fn, args, kwargs) -> Node:
    bound = _bind(fn, args, kwargs)
    if bound.get("order", "C") != "C":
        raise NoRule
    x = bound["a"]
    return bt.reshape(bt.env[id(x)], (bt.B,) + tuple(n.shape))


def _norm(bt: Batcher, n: Node, fn, args, kwargs) -> Node:
    """``linalg.norm``: a vector norm over one axis, a matrix norm over two, or (no
    ``ord``, no ``axis``) the 2-norm of the flattened example."""
    bound = _bind(fn, args, kwargs)
    x = bound["x"]
    if type(x) is not Node:
        raise NoRule
    nd = len(x.shape)
    bx = bt.env[id(x)]
    axis = bound["axis"]
    if axis is None:
        if bound["ord"] is None or nd == 1:
            bx = bt.reshape(bx, (bt.B, _prod(x.shape)))
            axis = 1
        elif nd == 2:
            axis = (1, 2)
        else:
            raise NoRule
    elif isinstance(axis, tuple):
        axis = tuple(a + 1 for a in normalize_axis_tuple(axis, nd))
    else:
        axis = normalize_axis_index(axis, nd) + 1
    shape = (bt.B,) + tuple(n.shape)
    if bound["keepdims"] and bound["axis"] is None:
        shape = (bt.B,) + (1,) * (2 if axis == (1, 2) else 1)
    return _call("linalg.norm", fn, (bx,), {"ord": bound["ord"], "axis": axis,
                                            "keepdims": bound["keepdims"]}, shape, n.dtype)


def _pad(bt: Batcher, n: Node, fn, args, kwargs) -> Node:
    """``pad``: no padding along the batch axis (per-axis options of scalars only)."""
    bound = _bind(fn, args, kwargs)
    x = bound.pop("array")
    if type(x) is not Node or callable(bound["mode"]):
        raise NoRule
    nd = len(x.shape)
    width = np.broadcast_to(np.asarray(bound["pad_width"]), (nd, 2)).tolist()
    options = bound.pop("kwargs", {})
    if any(np.ndim(v) or bt.get(v) is not None for v in options.values()):
        raise NoRule
    return _call("pad", fn, (bt.env[id(x)], [[0, 0]] + width, bound["mode"]), options,
                 (bt.B,) + tuple(n.shape), n.dtype)


def _tile(bt: Batcher, n: Node, fn, args, kwargs) -> Node:
    """``tile``: one repetition of the batch axis (the example padded to ``reps``'s
    length first, as NumPy does)."""
    bound = _bind(fn, args, kwargs)
    x, reps = bound["A"], bound["reps"]
    if type(x) is not Node or bt.get(reps) is not None:
        raise NoRule
    reps = tuple(np.atleast_1d(np.asarray(reps)).tolist())
    nd = max(len(x.shape), len(reps))
    bx = bt.expand(bt.env[id(x)], x.shape, nd)
    reps = (1,) * (nd - len(reps)) + reps
    return _call("tile", fn, (bx, (1,) + reps), {}, (bt.B,) + tuple(n.shape), n.dtype)


FUNCTION_RULES = {
    "matmul": _matmul, "dot": _dot, "einsum": _einsum, "tensordot": _tensordot,
    "inner": _inner, "outer": _outer, "concatenate": _concatenate,
    "sort": _along_axis("sort", ("a",), True),
    "argsort": _along_axis("argsort", ("a",), True),
    "diff": _along_axis("diff", ("a",), False),
    "take": _along_axis("take", ("a",), True),
    "repeat": _along_axis("repeat", ("a",), True),
    "take_along_axis": _along_axis("take_along_axis", ("arr",), True, ("indices",)),
    "linalg.solve": _solve,
    "triu": _trailing("triu"), "tril": _trailing("tril"),
    "ravel": _ravel, "reshape": _reshape, "linalg.norm": _norm, "pad": _pad, "tile": _tile,
}
for _name in ("inv", "det", "slogdet", "cholesky", "eigh", "eigvalsh", "eig", "eigvals",
              "svd", "qr", "pinv", "matrix_power", "svdvals"):
    FUNCTION_RULES["linalg." + _name] = _stacked("linalg." + _name)


def _rule_for(op):
    slot = op.batch
    if slot is not None:
        return SLOT_RULES[slot]
    rule = NAME_RULES.get(op.name)
    if rule is not None:
        return rule
    if "numpy_function" in getattr(op.impl, "__dict__", {}):
        return _function
    return None
