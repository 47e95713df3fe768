"""Replay of eager gradients: one compiled plan per forward-graph structure.

``lazynp.grad(f)(x)`` runs ``f`` in Python on every call (so its control flow, closures and
side effects are honoured), which records the forward graph.  Recording the backward pass
and scheduling forward + backward node by node then costs more than the arithmetic for
small and medium arrays.  When the recorded forward graph has the same *structure* as on an
earlier call (same ops, parameters, constants, shapes and dtypes, wired the same way), the
backward graph is the same too, so the second time a structure is seen its forward +
backward graph is compiled into an unfused :class:`lazynp.jit.Plan` and every later call
with that structure runs the plan on the current values of the graph's external inputs
instead of recording the backward pass.

A call never uses a plan (and falls back to the ordinary eager path) when its structure
cannot be keyed exactly: a flush ran during the trace (a value was read: control flow may
depend on it), a parameter holds an array or an object without a value identity, a node
carries its own error state (``np.errstate`` inside ``f``), a NumPy fallback ran on the
differentiated path, or the call is inside another trace (the inner ``grad`` of
``grad(grad(f))``, whose graph the outer one differentiates; ``grad`` traced by
``jit``).  No plan is compiled when something ran while the backward pass was recorded (its
values would be baked in).  When a plan fails at run time, its entry is dropped and the
call takes the eager path, whose errors name the user's line.

The trace's forward nodes are abandoned when a plan runs; those that die unrun release
their reads of earlier nodes (:func:`abandon`, :func:`release_dead`), so a training loop's
``w -= lr * g`` still updates ``w`` in place.

``LAZYNP_GRAD_REPLAY=0`` turns the replay off.
"""
from __future__ import annotations

import warnings
import weakref
from collections import OrderedDict
from types import BuiltinFunctionType, FunctionType

import numpy as np

from .._base import config as _config
from .._base import native as _native
from ..core import graph as _graph
from ..array.indexing import _Slot
from ..core.graph import Node
from ..ir.symbol import Symbol, extract
from ..jit.plan import compile_plan, prepare_leaf, wrap_outputs
from ..ops.registry import Op

STATS = {"hits": 0, "plans": 0, "misses": 0, "uncacheable": 0, "failures": 0}

#: a structure is compiled the second time it is seen (once: a one-off call pays nothing)
COMPILE_AT = 2

#: graph passes of a replay plan (lazynp/passes/pipeline.py)
PASSES = ("prune", "constant_fold", "eliminate_copies", "prune")


class Uncacheable(Exception):
    pass


_ATOMS = frozenset([type(None), bool, int, str, bytes, np.dtype,
                    type(Ellipsis), type(NotImplemented)])
_BY_IDENTITY = (FunctionType, BuiltinFunctionType, np.ufunc, type, Op)


def _freeze(v):
    """A hashable stand-in equal for equal parameters (the type is part of it: 1, 1.0 and
    True are equal in Python but not as NumPy constants)."""
    t = type(v)
    if t is tuple or t is list:
        for x in v:
            if type(x) is not int:
                return (t, tuple([_freeze(x) for x in v]))
        return (t, tuple(v))        # (all ints, e.g. a shape: their own stand-ins)
    if t is dict:
        return (dict, tuple([(k, _freeze(x)) for k, x in v.items()]))
    if t is float:            # (by bits: 0.0 == -0.0, but x * -0.0 is not x * 0.0)
        return (t, v.hex())
    if t in _ATOMS or isinstance(v, np.dtype):
        return (t, v)
    if t is _Slot:
        return (_Slot, v.k)
    if t is complex:
        return (t, v.real.hex(), v.imag.hex())
    if t is slice:
        return (slice, _freeze(v.start), _freeze(v.stop), _freeze(v.step))
    if isinstance(v, np.generic) and v.dtype.kind in "biufcSUM?":
        return (t, v.tobytes())
    if isinstance(v, _BY_IDENTITY):
        return (t, v)       # kept alive by the cache entry's key, so the identity is stable
    raise Uncacheable


def structure(outs: list, tape: dict, inputs: list) -> tuple:
    """``(key, externals, readers)`` of the graph behind ``outs``: the nodes recorded in this trace
    (``tape``: ``{id(node): (node, args, params)}`` in recording order) by op, parameters
    and wiring; every other node they read is an external input (its value is read when the
    plan runs), listed in ``externals``.  The key also says where the differentiated
    ``inputs`` (nodes) and the ``outs`` are.  ``readers``: ``(node, [external args])`` of
    the recorded nodes (views aside) that read nodes recorded before the trace, for
    :func:`abandon`.  Raises :class:`Uncacheable`.  (``lazynp._speedups.replay_structure``
    is the same function in C, used when built.)

    (One pass over the tape in recording order, which is a topological order: it runs on
    every call of a replayed gradient.  Recorded nodes the outputs do not read are part of
    the key too: the same recording gives the same key, and the plan compiled for it
    computes only what the outputs read.)"""
    pending = _graph.PENDING
    placeholder = _graph.PLACEHOLDER
    index: dict = {}            # id(node) -> position in items
    items: list = []
    externals: list = []
    readers: list = []
    freeze = _freeze
    view = _graph.VIEW
    for n, args, p in tape.values():
        if n.state != pending or n.errstate is not None:
            raise Uncacheable
        ak = []
        outside = None
        for a in args:
            if type(a) is Node:
                k = index.get(id(a))
                if k is None:
                    if a.op is placeholder or a.error is not None or id(a) in tape:
                        raise Uncacheable     # (a tape not in recording order: merged)
                    k = index[id(a)] = len(items)
                    items.append(("x", a.shape, a.dtype))
                    externals.append(a)
                if id(a) not in tape:
                    if outside is None:
                        outside = []
                    outside.append(a)
                ak.append(k)
            else:
                ak.append(freeze(a))
        index[id(n)] = len(items)
        items.append((n.op, tuple(ak), None if p is None else freeze(p), n.shape, n.dtype))
        if outside is not None and n.op is not view:
            readers.append((n, outside))
    for o in outs:
        if id(o) not in index:
            if o.op is placeholder or o.error is not None:
                raise Uncacheable
            index[id(o)] = len(items)
            items.append(("x", o.shape, o.dtype))
            externals.append(o)
    where = tuple([index.get(id(n), -1) for n in inputs])
    heads = tuple([index[id(o)] for o in outs])      # (which entries, how many, in order)
    return (tuple(items), where, heads), externals, readers


_py_structure = structure
if getattr(_native.ext, "replay_structure", None) is not None:

    def structure(outs: list, tape: dict, inputs: list, _c=_native.ext.replay_structure):
        return _c(outs, tape, inputs, _freeze, _graph.PLACEHOLDER, _graph.VIEW, Uncacheable,
                  _Slot)
    structure.__doc__ = _py_structure.__doc__


class _Entry:
    __slots__ = ("count", "plan", "grad_mask", "scalars", "n_values")

    def __init__(self):
        self.count = 0
        self.plan = None            # a jit Plan; False when it could not be compiled
        self.grad_mask = None       # which gradients the eager pass produced (not None)
        self.scalars = None         # NumPy-scalar flags of the value and the gradients
        self.n_values = 0           # the plan's first outputs are values, not gradients


class GradReplay:
    """The plans of one ``value_and_grad`` function (least recently used kept)."""

    def __init__(self, maxsize: int = 8):
        self._entries: OrderedDict = OrderedDict()
        self.maxsize = maxsize

    def lookup(self, key) -> _Entry:
        e = self._entries.get(key)
        if e is None:
            STATS["misses"] += 1
            e = self._entries[key] = _Entry()
            if len(self._entries) > self.maxsize:
                self._entries.popitem(last=False)
        else:
            self._entries.move_to_end(key)
        e.count += 1
        return e

    def drop(self, key) -> None:
        self._entries.pop(key, None)

    def __len__(self) -> int:
        return len(self._entries)


def enabled() -> bool:
    return _config.GRAD_REPLAY


def compile_entry(entry: _Entry, values: list, grads: list, externals: list) -> None:
    """Compile the forward + backward graph (outputs: the arrays ``values``, e.g. the
    function's result or the heads of ``backward()``, then the non-None gradients) with
    ``externals`` as its inputs, in order.  (Without values, a replayed ``grad`` computes,
    and warns about, exactly what the eager one does: the forward ops the gradient
    needs.)"""
    outs = [v._node() for v in values] + [g._node() for g in grads if g is not None]
    names = [f"x{i}" for i in range(len(externals))]
    entries, refs = extract(outs, externals, names=names)
    # (no CSE: two equal ops run, and warn, twice, as in the eager pass)
    entry.plan = compile_plan(Symbol(entries, refs), fuse=False, passes=PASSES)
    entry.grad_mask = [g is not None for g in grads]
    entry.scalars = [v._scalar for v in values] + [g._scalar for g in grads if g is not None]
    entry.n_values = len(values)
    STATS["plans"] += 1


def run_entry(entry: _Entry, externals: list):
    """``(values, grads)`` as lazynp arrays (a gradient is ``None`` where the eager pass had
    none), computed now by the entry's plan on the externals' current values.  Warnings
    are given once the plan has run: when it raises, the eager pass that follows gives
    them (once)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        vals = [prepare_leaf(_graph.materialize(n)) for n in externals]
        res = wrap_outputs(entry.plan.run(vals), entry.scalars)
    for w in caught:
        warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    k = entry.n_values
    it = iter(res[k:])
    return res[:k], [next(it) if m else None for m in entry.grad_mask]


def deliver(res, node: Node, value):
    """The function's own result ``res`` (recorded as ``node``) holding the plan's
    ``value``: its Var gets a computed head, so ``res`` (and any other handle on that
    storage, e.g. a global buffer ``f`` returned) reads it.  A view result is returned as
    recorded and computed when read."""
    if res._geom is not None or res._var.head is not node:
        return res
    v = np.asarray(value._value() if hasattr(value, "_value") else value)
    res._var.head = _graph.leaf(v if v.flags.c_contiguous else np.ascontiguousarray(v))
    return res


def abandon(recorded: list, readers: list | None = None) -> list:
    """The trace's nodes (``recorded``) are not run when a plan replaced them.  They stop
    counting towards the bound flush, and the returned watch list lets
    :func:`release_dead` drop the reads they hold on nodes recorded before the trace
    (a pending reader keeps a Var from being updated in place: ``w -= lr * g`` would copy
    ``w`` on every step).  A node the user kept (a global list, a written global array) still
    runs when read.  ``readers``: those reads, as :func:`structure` found them, when
    ``recorded`` is exactly the tape it keyed (else they are found here)."""
    st = _graph.counts
    st.pending_count = max(0, st.pending_count - len(recorded))
    pending = _graph.PENDING
    if readers is None:
        mine = {id(n) for n in recorded}
        readers = []
        for n in recorded:
            if n.op is not _graph.VIEW:
                outside = [a for a in n.args if type(a) is Node and id(a) not in mine]
                if outside:
                    readers.append((n, outside))
    ref = weakref.ref
    return [(ref(n), outside) for n, outside in readers if n.state == pending]


def release_dead(watch: list) -> None:
    """Nodes of ``watch`` that died without running will never read their arguments."""
    dead = [reads for ref, reads in watch if ref() is None]
    if dead:
        with _graph.book_lock:
            for reads in dead:
                for a in reads:
                    if a.use_count > 0:
                        a.use_count -= 1
