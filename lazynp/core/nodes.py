"""The pending graph's types: :class:`Node` (one version of one value), :class:`Var` (a
storage resource), their states, the leaf, view and placeholder ops, and reading a node's
value.

A :class:`Node` is one version of one value: an op applied to argument nodes (or Python
constants).  A :class:`Var` is a storage resource; its ``head`` is the node holding its
current contents.  A write makes a new head that reads the old one, so a read recorded
before the write keeps seeing the old version and a read recorded after sees the new one.

Views are nodes of the ``view`` op: a geometry (byte offset, shape, strides, dtype) on
their base node's buffer.  They are never executed on their own; a consumer realizes the
view from its base when it runs, and the engine orders that read against later in-place
writes of the same buffer.

When the C extension is in use, :class:`Node`, :class:`Var` and :func:`live_pending_heads`
are its versions (bound at the end of this module); the Python ones are their reference.
"""
from __future__ import annotations

import weakref

import numpy as np

from .._base import native as _native
from ..ops.registry import Op, register
from .state import pending_vars as _pending_vars

PENDING, SCHEDULED, DONE = 0, 1, 2


class Node:
    """One recorded value: ``op(*args, **params)`` with known shape and dtype."""

    __slots__ = ("op", "args", "params", "shape", "dtype", "value", "state", "use_count",
                 "engine_var", "site", "exported", "error", "flush_epoch", "pos", "uses",
                 "readers_left", "needed", "errstate", "tree", "warnings_state", "__weakref__")

    def __init__(self, op: Op, args: tuple, params: dict | None, shape: tuple, dtype: np.dtype):
        self.op = op
        self.args = args
        self.params = params
        self.shape = shape
        self.dtype = dtype
        self.value = None
        self.state = PENDING
        self.use_count = 0          # recorded readers that have not run yet
        self.engine_var = None      # the engine var that orders the uses of its buffer
        self.site = None            # (code, bytecode offset) of the recording line
        self.exported = False       # read outside the graph (the user holds its buffer)
        self.error = None
        self.flush_epoch = 0        # the number of the last flush that visited it
        # (per flush: ``uses`` in-flush readers, ``readers_left`` readers of its buffer not
        # yet run, ``needed`` outlives the flush, ``pos`` its place in the flush's order)
        self.needed = False
        self.errstate = None        # the user's np.errstate at the recording line (None: default)
        self.tree = None            # tree-kernel structure (kernels/tree.py), elementwise only
        self.warnings_state = None  # the warnings filters at the call (late_warnings.py)

    def __repr__(self) -> str:
        st = ("pending", "scheduled", "done")[self.state]
        return f"<Node {self.op.name} {self.shape} {self.dtype} {st}>"


class Var:
    """A storage resource.  ``head`` is the node with its current contents."""

    __slots__ = ("head", "shadow", "__weakref__")

    def __init__(self, head: Node):
        self.head = head
        self.shadow = None
        if head.state == PENDING:
            _pending_vars.append(weakref.ref(self))

    def set_head(self, node: Node) -> None:
        self.head = node
        _pending_vars.append(weakref.ref(self))


class TracingError(RuntimeError):
    """A placeholder value was needed while tracing (Python control flow on an array)."""


def _placeholder_impl(*args, **kwargs):
    raise TracingError("lazynp: a traced placeholder has no value; Python control flow on "
                       "array values cannot be traced (make the argument static or use "
                       "np.where)")


PLACEHOLDER = None  # registered below


def placeholder(shape: tuple, dtype, name: str = "") -> "Node":
    """A symbolic input for tracing: recording works, forcing raises :class:`TracingError`."""
    n = Node(PLACEHOLDER, (), {"name": name}, tuple(shape), np.dtype(dtype))
    return n


def _leaf_impl():  # pragma: no cover - leaves are never executed
    raise AssertionError("a leaf node is never executed")


LEAF = register(Op("leaf", "creation", _leaf_impl, raises_on_values=False))
PLACEHOLDER = register(Op("placeholder", "creation", _placeholder_impl, raises_on_values=False))


def buffer_view(base, offset, shape, strides, dtype):
    return np.ndarray(shape, dtype, buffer=base, offset=offset, strides=strides)


VIEW = register(Op("view", "view", buffer_view, raises_on_values=False))


def root(n: Node) -> Node:
    """The node whose buffer ``n`` reads: its base for a view, else ``n`` itself."""
    return n.args[0] if n.op is VIEW else n


def computed(n: Node) -> bool:
    """True when ``n`` (a view: its base) holds its value."""
    if n.op is VIEW:
        n = n.args[0]
    return n.state == DONE and n.error is None and n.value is not None


def _value_of_py(a):
    """Value of an argument when its producer has run (views realized on their base)."""
    if type(a) is not Node:
        return a
    if a.op is VIEW:
        b = a.args[0]
        if b.error is not None:
            raise b.error
        p = a.params
        return np.ndarray(p["shape"], p["dtype"], buffer=b.value, offset=p["offset"],
                          strides=p["strides"])
    if a.error is not None:
        raise a.error
    return a.value


def normalize(out, node: Node, vals) -> np.ndarray:
    return own_result(out, node.shape, node.dtype, vals, node.op.kind != "write")


def own_result(out, shape: tuple, dtype, vals, check_alias: bool = True) -> np.ndarray:
    """``out`` as a C-contiguous array of ``shape``/``dtype`` that shares memory with none of
    ``vals`` (a NumPy function may hand back a view of its input; lazynp owns its buffers)."""
    if type(out) is not np.ndarray:
        out = np.asarray(out)
    if out.dtype != dtype:
        out = out.astype(dtype)
    if out.shape != shape:
        out = out.reshape(shape)
    if not out.flags.c_contiguous:
        out = np.asarray(out, order="C")
    elif out.base is not None and check_alias:
        for v in vals:
            if type(v) is np.ndarray and np.may_share_memory(out, v):
                out = out.copy()
                break
    return out


def live_pending_heads() -> list:
    """Pending heads of live Vars (each once); drops dead or computed entries from the list."""
    keep = []
    heads = []
    for r in _pending_vars:
        v = r()
        if v is not None and v.head.state == PENDING:
            keep.append(r)
            heads.append(v.head)
    _pending_vars[:] = keep       # in place: the C recorder appends to this same list
    return heads


def post_order(outs, walk, seen=None):
    """``(node, walked)`` for the nodes behind ``outs``, each once, after the nodes it reads
    (iterative: graphs may be deeper than Python's recursion limit).  ``walk(node)``: read
    its args (else it is yielded as a leaf of the walk); ``seen``: ids to skip."""
    seen = set() if seen is None else seen
    for out in outs:
        if id(out) in seen:
            continue
        seen.add(id(out))
        w = walk(out)
        stack = [(out, out.args if w else (), 0, w)]
        while stack:
            n, args, i, w = stack[-1]
            while i < len(args):
                a = args[i]
                i += 1
                if type(a) is Node and id(a) not in seen:
                    seen.add(id(a))
                    stack[-1] = (n, args, i, w)
                    wa = walk(a)
                    stack.append((a, a.args if wa else (), 0, wa))
                    break
            else:
                stack.pop()
                yield n, w


value_of = _value_of_py

if _native.ext is not None:     # the C versions of the same types
    Node = _native.ext.Node
    Var = _native.ext.Var
    live_pending_heads = _native.ext.live_pending_heads
    value_of = _native.ext.value_of     # (_value_of_py: the Python reference)
