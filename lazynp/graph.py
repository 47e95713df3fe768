"""The pending graph: nodes, storage Vars and their versions, recording, and ``flush``.

A :class:`Node` is one version of one value: an op applied to argument nodes (or Python
constants).  A :class:`Var` is a storage resource; its ``head`` is the node holding its
current contents.  A write makes a new head that reads the old one, so a read recorded
before the write keeps seeing the old version and a read recorded after sees the new one.

Views are nodes of the ``view`` op: a geometry (byte offset, shape, strides, dtype) on
their base node's buffer.  They are never executed on their own; a consumer realizes the
view from its base when it runs, and the engine orders that read against later in-place
writes of the same buffer.

``flush(targets)`` runs the live subgraph behind ``targets`` on the engine and returns when
the targets are ready.  It is the seam for the graph passes (prune, CSE, fusion, memory
planning): they rewrite the node list between ``_collect`` and ``_schedule``.
"""
from __future__ import annotations

import threading
import weakref

import numpy as np

from . import _config, _site, engine
from .ops.registry import Op, register

PENDING, SCHEDULED, DONE = 0, 1, 2


class Node:
    """One recorded value: ``op(*args, **params)`` with known shape and dtype."""

    __slots__ = ("op", "args", "params", "shape", "dtype", "value", "state", "nuse", "evar",
                 "site", "owner", "exported", "error", "__weakref__")

    def __init__(self, op: Op, args: tuple, params: dict | None, shape: tuple, dtype: np.dtype):
        self.op = op
        self.args = args
        self.params = params
        self.shape = shape
        self.dtype = dtype
        self.value = None
        self.state = PENDING
        self.nuse = 0
        self.evar = None
        self.site = None
        self.owner = None
        self.exported = False
        self.error = None

    def __repr__(self) -> str:
        st = ("pending", "scheduled", "done")[self.state]
        return f"<Node {self.op.name} {self.shape} {self.dtype} {st}>"


class Var:
    """A storage resource.  ``head`` is the node with its current contents."""

    __slots__ = ("head", "shadow", "__weakref__")

    def __init__(self, head: Node):
        self.head = head
        self.shadow = None
        head.owner = weakref.ref(self)
        if head.state == PENDING:
            _track_pending(self, head)

    def set_head(self, node: Node) -> None:
        self.head = node
        node.owner = weakref.ref(self)
        _track_pending(self, node)


# --- leaves and the view op -------------------------------------------------------------

def _leaf_impl():  # pragma: no cover - leaves are never executed
    raise AssertionError("a leaf node is never executed")


LEAF = register(Op("leaf", "creation", _leaf_impl))


def _view_impl(base, offset, shape, strides, dtype):
    return np.ndarray(shape, dtype, buffer=base, offset=offset, strides=strides)


VIEW = register(Op("view", "view", _view_impl))


def leaf(value: np.ndarray, exported: bool = False) -> Node:
    """A node holding a concrete NumPy array (C-contiguous, owned by lazynp)."""
    n = Node(LEAF, (), None, value.shape, value.dtype)
    n.value = value
    n.state = DONE
    n.evar = engine.new_var()
    n.exported = exported
    return n


# --- recording -----------------------------------------------------------------------------

_lock = threading.RLock()
_pending_vars: list = []          # weakrefs to Vars that got a pending head since last flush
_pending_count = 0
_pending_bytes = 0
STATS = {"ops_recorded": 0, "flushes": 0, "nodes_executed": 0, "bound_flushes": 0,
         "inplace_writes": 0, "copy_on_write": 0}


def _track_pending(var: Var, node: Node) -> None:
    _pending_vars.append(weakref.ref(var))


def record(op: Op, args: tuple, params: dict | None, shape: tuple, dtype) -> Node:
    """Add a node to the pending graph (no work runs) and return it."""
    global _pending_count, _pending_bytes
    n = Node(op, args, params, shape, dtype)
    for a in args:
        if type(a) is Node:
            a.nuse += 1
    n.site = _site.call_site(2)
    STATS["ops_recorded"] += 1
    _pending_count += 1
    if _pending_count >= _config.MAX_PENDING_NODES:
        _bound_flush()
    return n


def view_node(base: Node, offset: int, shape: tuple, strides: tuple, dtype) -> Node:
    """A view of ``base``'s buffer (never executed alone; realized by its consumers)."""
    n = Node(VIEW, (base,), {"offset": offset, "shape": shape, "strides": strides, "dtype": dtype},
             shape, dtype)
    base.nuse += 1
    return n


def _bound_flush() -> None:
    """Flush every live pending head: keeps a long Python loop's graph bounded."""
    STATS["bound_flushes"] += 1
    flush_live()


def flush_live() -> None:
    """Flush the heads of all live Vars that are pending."""
    global _pending_vars
    targets = []
    refs, _pending_vars = _pending_vars, []
    seen = set()
    for r in refs:
        v = r()
        if v is not None and v.head.state == PENDING and id(v.head) not in seen:
            seen.add(id(v.head))
            targets.append(v.head)
    if targets:
        flush(targets, wait=False)


# --- flush ---------------------------------------------------------------------------------

def _root(n: Node) -> Node:
    return n.args[0] if n.op is VIEW else n


def _collect(targets) -> list:
    """Pending nodes behind ``targets``, in topological order (iterative DFS)."""
    order = []
    visited = set()
    for t in targets:
        if t.state != PENDING or id(t) in visited:
            continue
        stack = [(t, 0)]
        visited.add(id(t))
        while stack:
            node, i = stack[-1]
            args = node.args
            while i < len(args):
                a = args[i]
                i += 1
                if type(a) is Node and a.state == PENDING and id(a) not in visited:
                    visited.add(id(a))
                    stack[-1] = (node, i)
                    stack.append((a, 0))
                    break
            else:
                stack.pop()
                order.append(node)
                continue
    return order


def _is_live_head(n: Node) -> bool:
    o = n.owner
    if o is None:
        return False
    v = o()
    return v is not None and v.head is n


class _Plan:
    """Bookkeeping of one flush: positions, in-flush uses, what must outlive the flush."""

    def __init__(self, order: list, targets):
        self.order = order
        self.pos = {id(n): i for i, n in enumerate(order)}
        uses: dict = {}
        consumers: dict = {}
        for i, n in enumerate(order):
            for a in n.args:
                if type(a) is Node:
                    k = id(a)
                    uses[k] = uses.get(k, 0) + 1
                    consumers.setdefault(k, []).append(i)
        self.uses = uses
        self.consumers = consumers
        target_ids = {id(t) for t in targets}
        needed = set()
        for n in order:
            k = id(n)
            if k in target_ids or n.nuse > uses.get(k, 0) or n.exported or _is_live_head(n):
                needed.add(k)
        for n in order:  # a view that outlives the flush keeps its base buffer alive
            if n.op is VIEW and id(n) in needed:
                needed.add(id(n.args[0]))
        self.needed = needed

    def last_reader_before(self, node: Node, limit: int) -> bool:
        """True when every in-flush reader of ``node`` (direct or through a view) is at a
        position <= ``limit`` and nothing outside the flush still reads it."""
        k = id(node)
        if node.op is not VIEW:
            if k in self.pos:
                if k in self.needed:
                    return False
            elif node.nuse != self.uses.get(k, 0) or node.exported or _is_live_head(node):
                return False
        for p in self.consumers.get(k, ()):
            c = self.order[p]
            if c.op is VIEW:
                if id(c) in self.needed or not self.last_reader_before(c, limit):
                    return False
            elif p > limit:
                return False
        return True


def _value_of(a):
    """Value of an argument when its producer has run (views realized on their base)."""
    if type(a) is not Node:
        return a
    if a.op is VIEW:
        b = a.args[0]
        if b.error is not None:
            raise b.error
        p = a.params
        return _view_impl(b.value, p["offset"], p["shape"], p["strides"], p["dtype"])
    if a.error is not None:
        raise a.error
    return a.value


def _run(node: Node, inplace: bool) -> None:
    """Execute one node with NumPy's reference implementation."""
    op = node.op
    vals = [_value_of(a) for a in node.args]
    if op.kind == "write" and not inplace:
        vals[0] = vals[0].copy()
    params = node.params
    out = op.impl(*vals, **params) if params else op.impl(*vals)
    if not isinstance(out, tuple):
        out = _normalize(out, node, vals)
    node.value = out
    node.state = DONE


def _normalize(out, node: Node, vals) -> np.ndarray:
    if type(out) is not np.ndarray:
        out = np.asarray(out)
    if out.dtype != node.dtype:
        out = out.astype(node.dtype)
    if out.shape != node.shape:
        out = out.reshape(node.shape)
    if not out.flags.c_contiguous:
        out = np.ascontiguousarray(out)
    elif out.base is not None and node.op.kind != "write":
        # a NumPy function may hand back a view of its input; lazynp owns its buffers
        for v in vals:
            if type(v) is np.ndarray and np.may_share_memory(out, v):
                out = out.copy()
                break
    return out


def flush(targets, wait: bool = True) -> None:
    """Run the pending subgraph behind ``targets`` (nodes) on the engine."""
    with _lock:
        order = _collect(targets)
        if not order:
            if wait:
                for t in targets:
                    _wait(_root(t))
            return
        STATS["flushes"] += 1
        plan = _Plan(order, targets)
        _schedule(plan)
    if wait:
        for t in targets:
            _wait(_root(t))


def _schedule(plan: _Plan) -> None:
    global _pending_count
    _pending_count = 0
    order = plan.order
    eng = engine.get_engine()
    work = []          # (node, inplace)
    nbytes = 0
    for i, n in enumerate(order):
        if n.op is VIEW:
            n.state = SCHEDULED
            continue
        inplace = False
        if n.op.kind == "write":
            h = n.args[0]
            if plan.last_reader_before(h, i) and h.error is None:
                inplace = True
                n.evar = _root(h).evar if h.evar is not None else None
            STATS["inplace_writes" if inplace else "copy_on_write"] += 1
        if n.evar is None:
            n.evar = eng.new_var()
        n.state = SCHEDULED
        nbytes += n.dtype.itemsize * _prod(n.shape)
        work.append((n, inplace))
    STATS["nodes_executed"] += len(work)
    release = _release_schedule(plan, work)
    if nbytes <= _config.BULK_BYTES or eng.num_workers <= 1:
        _push_bulk(eng, plan, work, release)
    else:
        _push_each(eng, plan, work)


def _release_schedule(plan: _Plan, work) -> list:
    """For each work item, the nodes whose values can be dropped after it ran."""
    remaining = {}
    for n, _ in work:
        for a in n.args:
            if type(a) is Node:
                r = _root(a)
                remaining[id(r)] = remaining.get(id(r), 0) + 1
    rel = []
    for n, _ in work:
        drop = []
        for a in n.args:
            if type(a) is Node:
                r = _root(a)
                k = id(r)
                remaining[k] -= 1
                if remaining[k] == 0 and k in plan.pos and k not in plan.needed:
                    drop.append(r)
        rel.append(drop)
    return rel


def _external_reads(plan: _Plan, work) -> list:
    reads = []
    seen = set()
    for n, _ in work:
        for a in n.args:
            if type(a) is Node:
                r = _root(a)
                if id(r) not in plan.pos and id(r) not in seen and r.evar is not None:
                    seen.add(id(r))
                    reads.append(r.evar)
    return reads


def _fail(items, exc) -> None:
    for n, _ in items:
        if n.state != DONE:
            n.error = exc
            n.state = DONE


def _add_site_note(exc: BaseException, node: Node) -> None:
    if node.site is not None and hasattr(exc, "add_note"):
        exc.add_note("lazynp: operation recorded at " + _site.format_site(node.site))


def _finish(n: Node) -> None:
    if n.op.kind != "view":
        n.args = ()       # detach: the graph behind a computed value can be freed
        n.params = None if n.op.kind != "write" else n.params


def _push_bulk(eng, plan: _Plan, work, release) -> None:
    def run_all():
        for idx, (n, inplace) in enumerate(work):
            try:
                _run(n, inplace)
            except BaseException as exc:
                _add_site_note(exc, n)
                _fail(work[idx:], exc)
                raise
            for r in release[idx]:
                r.value = None
            for a in n.args:
                if type(a) is Node:
                    a.nuse -= 1
            _finish(n)

    writes = [n.evar for n, _ in work]
    eng.push(run_all, _external_reads(plan, work), writes)


def _push_each(eng, plan: _Plan, work) -> None:
    for n, inplace in work:
        reads = []
        for a in n.args:
            if type(a) is Node:
                r = _root(a)
                if r.evar is not None and r.evar is not n.evar:
                    reads.append(r.evar)

        def run_one(n=n, inplace=inplace):
            try:
                _run(n, inplace)
            except BaseException as exc:
                _add_site_note(exc, n)
                n.error = exc
                n.state = DONE
                raise
            with _lock:
                for a in n.args:
                    if type(a) is Node:
                        a.nuse -= 1
                        r = _root(a)
                        if r.nuse <= 0 and id(r) in plan.pos and id(r) not in plan.needed:
                            r.value = None
            _finish(n)

        eng.push(run_one, reads, [n.evar])


def _wait(n: Node) -> None:
    if n.state == SCHEDULED or (n.state == DONE and n.value is None and n.error is None):
        try:
            engine.wait_for_var(n.evar)
        except BaseException as exc:
            if n.error is None:
                n.error = exc
            raise
    if n.error is not None:
        raise n.error


def materialize(n: Node) -> np.ndarray:
    """Force ``n`` and return its NumPy value (a view for view nodes)."""
    if n.state == PENDING:
        flush([n])
    else:
        _wait(_root(n))
    if n.op is VIEW:
        return _value_of(n)
    return n.value


def evaluate_nodes(nodes) -> None:
    """Force several nodes with one flush."""
    flush(list(nodes))


def _prod(shape) -> int:
    p = 1
    for s in shape:
        p *= s
    return p
