"""Running the pending graph: ``flush(targets)`` runs the live subgraph behind ``targets``
on the engine and returns when the targets are ready.

A flush collects the pending nodes behind its targets (:func:`pending_order`), plans them
(:class:`_FlushPlan`: in-flush uses, what must outlive the flush), groups them (the fusion
pass, :mod:`lazynp.core.fusion`) and hands them to the engine, in bulk or one item each
(:func:`_schedule`).  It is the seam for the graph passes (prune, CSE, fusion, memory
planning): they rewrite the node list between ``_collect`` and ``_schedule``.  A flush of
one tree kernel's head runs that kernel in the calling thread (:mod:`.trees`).

Per-flush scratch data lives on the nodes (``flush_epoch``, ``uses`` = in-flush readers,
``readers_left`` = readers of its buffer not yet run) so planning is a few linear passes.
When the C extension is in use, the inner loops of planning and running are its versions
(bound at the end of this module).
"""
from __future__ import annotations

import math
from time import thread_time as _thread_time

import numpy as np
from numpy._core.umath import _extobj_contextvar as _extobj_var

from .._base import config as _config, native as _native
from .. import engine
from ..engine.interrupts import held as _held
from ..kernels import cpu as _cpu, fused as _fused, pool as _pool
from . import fusion as _fusion, late_warnings as _late_warnings
from .node_errors import add_site_note, fail, issue_caught, node_failed
from .nodes import DONE, LEAF, PENDING, PLACEHOLDER, SCHEDULED, VIEW, Node, live_pending_heads, \
    normalize, root, value_of
from .state import STATS, book_lock as _book_lock, counts as _counts, lock as _lock, \
    shared as _shared
from .trees import flush_tree

_caught = _late_warnings.caught
_LOG_DEFAULT = _late_warnings.LOG_DEFAULT
_prod = math.prod
_epoch = 0      # the last flush's number (the nodes it visits get ``flush_epoch = _epoch``)
_last_bound: list = []  # the targets of the last bound flush


def _engine_idle() -> None:
    engine.get_engine().wait_all()


_cpu.set_before_compile(_engine_idle)


def symbolic(nodes) -> bool:
    """True when the pending work behind ``nodes`` reads a placeholder (``symbol.var``,
    a traced argument): it has no value, so it can only be recorded.  A node with a tree
    structure is not walked: a tree's inputs are arrays with values (core/trees.py), so
    none of its nodes reads a placeholder."""
    stack = [n for n in nodes if type(n) is Node and n.state != DONE]
    seen = set()
    while stack:
        n = stack.pop()
        if n.op is PLACEHOLDER:
            return True
        if n.tree is not None:
            continue
        for a in n.args:
            if type(a) is Node and a.state != DONE and id(a) not in seen:
                seen.add(id(a))
                stack.append(a)
    return False


def compute_now(nodes: list) -> bool:
    """Flush ``nodes`` (pending) so that an op on them can run at once; False when one of
    them cannot give a value (it reads a placeholder, it failed, or its value was not
    kept)."""
    todo = [n for n in nodes if n.state != DONE]
    if todo:
        if symbolic(todo):
            return False
        flush(todo)
    for n in nodes:
        if n.state != DONE or n.value is None or n.error is not None:
            return False
    return True


def run_at_call(n: Node) -> None:
    """Compute ``n``, just recorded, before its call returns (the policy's
    :func:`lazynp.core.policy.run_at_call`): its error is raised and its warnings issued now,
    in the user's ``try``/``with`` block.  Work that has no value yet (a traced
    placeholder behind it) stays recorded."""
    if not symbolic([n]):
        flush([n])


def bound_flush() -> None:
    """Flush every live pending head: keeps a long Python loop's graph bounded.  Waits for
    the previous bound flush first, so recording never runs far ahead of the engine."""
    global _last_bound
    STATS["bound_flushes"] += 1
    for t in _last_bound:
        try:
            _wait(root(t))
        except Exception:
            pass        # raised again when that array itself is read
    _last_bound = flush_live()
    _counts.pending_count = 0      # every live pending head is flushed: start counting afresh


def flush_live() -> list:
    """Flush the heads of all live Vars that are pending; returns them."""
    targets = live_pending_heads()
    if targets:
        flush(targets, wait=False)
    return targets


def pending_order(targets, epoch: int, node_type: type | None = None) -> list:
    """Pending nodes behind ``targets``, in topological order (iterative DFS); the nodes
    visited are marked ``flush_epoch = epoch``.  ``node_type``: the class of the graph's nodes
    (default: ``nodes.Node``, the C one when built; the device graph passes its
    own: kernels/cuda/runtime.py)."""
    if node_type is None:
        node_type = Node
    order = []
    for t in targets:
        if t.state != PENDING or t.flush_epoch == epoch:
            continue
        t.flush_epoch = epoch
        stack = [(t, 0)]
        while stack:
            node, i = stack[-1]
            args = node.args
            n_args = len(args)
            while i < n_args:
                a = args[i]
                i += 1
                if type(a) is node_type and a.state == PENDING and a.flush_epoch != epoch:
                    a.flush_epoch = epoch
                    stack[-1] = (node, i)
                    stack.append((a, 0))
                    break
            else:
                stack.pop()
                order.append(node)
    return order


_collect = pending_order


def _mark_live_heads() -> None:
    """Heads of live Vars outlive any flush."""
    for h in live_pending_heads():
        h.needed = True


class _FlushPlan:
    """One flush: topological order, in-flush uses, what must outlive the flush."""

    def __init__(self, order: list, targets, epoch: int):
        self.order = order
        self.epoch = epoch
        self.external = []        # computed nodes outside the flush that are read
        self.has_writes = False
        self._consumers = None
        if _plan_counts is not None:      # (the C version of the loops below)
            self.external, self.has_writes, bumps = _plan_counts(order, targets, epoch)
            _counts.generation += bumps
            return
        for n in order:
            n.uses = 0
            n.readers_left = 0
        ext_seen = set()
        for n in order:
            if n.op.kind == "write":
                self.has_writes = True
            for a in n.args:
                if type(a) is Node:
                    r = a.args[0] if a.op is VIEW else a
                    if a.flush_epoch == epoch:
                        a.uses += 1
                    if r.flush_epoch == epoch:
                        if n.op is not VIEW:
                            r.readers_left += 1
                    elif id(r) not in ext_seen:
                        ext_seen.add(id(r))
                        self.external.append(r)
        for t in targets:
            if t.flush_epoch == epoch:
                t.needed = True
        for n in order:
            if n.use_count > n.uses:
                n.needed = True
                _counts.generation += 1    # pending readers recorded n inside their trees
            elif n.exported:
                n.needed = True
        for n in order:  # a view that outlives the flush keeps its base buffer alive
            if n.op is VIEW and n.needed:
                n.args[0].needed = True

    def consumers(self, node: Node) -> list:
        if self._consumers is None:
            cons: dict = {}
            for i, n in enumerate(self.order):
                n.pos = i
                for a in n.args:
                    if type(a) is Node:
                        cons.setdefault(id(a), []).append(i)
            self._consumers = cons
        return self._consumers.get(id(node), ())

    def last_reader_before(self, node: Node, limit: int) -> bool:
        """True when every in-flush reader of ``node`` (direct or through a view) is at a
        position <= ``limit`` and nothing outside the flush still reads it."""
        if node.op is not VIEW:
            if node.flush_epoch == self.epoch:
                if node.needed:
                    return False
            elif node.use_count != len(self.consumers(node)) or node.exported:
                # (a computed node read by a write is no longer any Var's head)
                return False
        for p in self.consumers(node):
            c = self.order[p]
            if c.op is VIEW:
                if c.needed or not self.last_reader_before(c, limit):
                    return False
            elif p > limit:
                return False
        return True


def _run(node: Node, inplace: bool) -> None:
    """Execute one node with NumPy's reference implementation."""
    op = node.op
    vals = [(a.value if a.op is not VIEW and a.value is not None else value_of(a))
            if type(a) is Node else a for a in node.args]
    if op.kind == "write" and not inplace:
        vals[0] = vals[0].copy()
    params = node.params
    if op.impl_out is not None and op.kind != "write" and \
            node.dtype.itemsize * _prod(node.shape) >= _pool.MIN_BYTES:
        # large results go to a pooled buffer: no fresh page faults for repeated work
        out = _pool.empty(node.shape, node.dtype)
        if params:
            op.impl_out(out, *vals, **params)
        else:
            op.impl_out(out, *vals)
    else:
        out = op.impl(*vals, **params) if params else op.impl(*vals)
    if type(out) is not np.ndarray or out.dtype != node.dtype or out.shape != node.shape \
            or out.base is not None or not out.flags.c_contiguous:
        if not isinstance(out, tuple):
            out = normalize(out, node, vals)
    node.value = out
    node.state = DONE


def flush(targets, wait: bool = True) -> None:
    """Run the pending subgraph behind ``targets`` (nodes) on the engine."""
    global _epoch
    if _shared.tape is not None:
        _shared.tape.flushing(targets)
    for t in targets:       # (computed already, e.g. evaluate() of a replayed gradient)
        if t.state != DONE or t.value is None or t.error is not None:
            break
    else:
        return
    if len(targets) == 1 and flush_tree(targets[0]):
        return
    with _lock:
        _epoch += 1
        order = _collect(targets, _epoch)
        if order:
            _mark_live_heads()
            STATS["flushes"] += 1
            _schedule(_FlushPlan(order, targets, _epoch), wait)
    if wait:
        for t in targets:
            _wait(root(t))


def _schedule(plan: _FlushPlan, wait: bool = False) -> None:
    """Hand the flush's work to the engine (``wait``: the caller waits for it next)."""
    # (pending nodes outside this flush still count towards the bound flush)
    _counts.pending_count = max(0, _counts.pending_count - len(plan.order))
    order = plan.order
    eng = engine.get_engine()
    if _schedule_scan is not None:    # (the C version of the loop below)
        work, nbytes, max_elems, n_inplace, n_copy = _schedule_scan(order, plan)
        STATS["inplace_writes"] += n_inplace
        STATS["copy_on_write"] += n_copy
    else:
        work = []          # (node, inplace)
        nbytes = 0
        max_elems = 0
        for i, n in enumerate(order):
            n.state = SCHEDULED
            op = n.op
            if op is VIEW:
                continue
            inplace = False
            if op.kind == "write":
                h = n.args[0]
                if h.error is None and plan.last_reader_before(h, i):
                    inplace = True
                    n.engine_var = (h.args[0] if h.op is VIEW else h).engine_var
                STATS["inplace_writes" if inplace else "copy_on_write"] += 1
            size = _prod(n.shape)
            nbytes += n.dtype.itemsize * size
            if size > max_elems:
                max_elems = size
            work.append((n, inplace))
    STATS["nodes_executed"] += len(work)
    # Small arrays stay on the NumPy path: below about 8k elements a NumPy call is cheaper
    # than the fusion pass and kernel launch it would replace (measured: benchmarks/overhead.py;
    # also for long flushes of small ops, which run in bulk: the demo's 64x64 stencil 37 ->
    # 29 ms, its 400x8 logistic regression 45 -> 32 ms without the pass; long elementwise
    # chains are cut into tree kernels while they are recorded)
    items = _small_groups_unfused(_fusion.fuse(work, Node, matvec=True)) if _config.FUSION and \
        max_elems >= 4 * _shared.min_fused_work else work
    # MXNet's bulk execution for flushes of small ops: handing an op of a few tens of KB to a
    # worker thread costs more than the op (demo programs: 64x64 stencil 51 -> 30 ms)
    if nbytes <= _config.BULK_BYTES * max(1, len(items) // 4) or eng.num_workers <= 1:
        _push_bulk(eng, plan, items, wait)
    else:
        _push_each(eng, plan, items)


def _small_groups_unfused(items: list) -> list:
    """Groups with too little work for a kernel call (~50 us of Python around it) become
    single nodes again, which run on NumPy from C (``_run_node``)."""
    out = []
    for it in items:
        if type(it) is not tuple and _prod(it.shape) * len(it.nodes()) < _shared.min_kernel_work:
            out.extend([(m, False) for m in it.nodes()])
        else:
            out.append(it)
    return out


def _store_checker(group):
    """``stored(member)``: must the member's value be written (read outside the group)?"""
    internal: dict = {}
    for n in group.nodes():
        for a in n.args:
            if type(a) is Node:
                internal[id(a)] = internal.get(id(a), 0) + 1

    def stored(m):
        return m.needed or m.use_count > internal.get(id(m), 0)
    return stored


def _run_item(item, epoch: int) -> None:
    """Run one work item: a ``(node, inplace)`` pair or a fused group.  A failure is stored
    on the item's nodes (raised when they are read) and re-raised."""
    first = item[0] if type(item) is tuple else item.members[0]
    # the errstate of the recording line, its warnings logged for _late_warnings to issue
    want = _LOG_DEFAULT if first.errstate is None else _late_warnings.logging_ext(first.errstate)
    token = _extobj_var.set(want) if _extobj_var.get() is not want else None
    try:
        _run_item_in_state(item, epoch)
    finally:
        if token is not None:
            _extobj_var.reset(token)
        if _caught:
            issue_caught(first)


def _run_item_in_state(item, epoch: int) -> None:
    if type(item) is tuple:
        n, inplace = item
        if not inplace and _run_node is not None and _run_node(n, epoch):
            if _caught:
                issue_caught(n)
            return      # (the C version of the lines below, for a plain node)
        try:
            _run(n, inplace)
        except BaseException as exc:
            if _caught:
                issue_caught(n)
            node_failed(n, exc)
            raise
        _after_run(n, epoch)
        if _caught:
            issue_caught(n)
        return
    nodes = item.nodes()
    _cpu.forget_declined()
    try:
        # (groups with less work than _shared.min_kernel_work were unfused by _schedule)
        ok = _fused.run_group(item, Node, value_of, _store_checker(item))
    except BaseException as exc:
        add_site_note(exc, nodes[0])
        fail([(m, False) for m in nodes], exc)
        raise
    if ok:
        for m in nodes:
            m.state = DONE
            _after_run(m, epoch)
        return
    t0 = _thread_time()
    _run_group_numpy(item, epoch)
    # (while its kernel is pending: what the op-by-op run cost counts toward getting the
    # kernel ready in this thread, lazynp.kernels.cpu's rule)
    _cpu.charge_op_by_op(_thread_time() - t0)


def _run_group_numpy(group, epoch: int) -> None:
    """A group whose kernel is not ready, op by op on NumPy, writing each ufunc result into a
    dead intermediate of the group when one fits (NumPy's temporary elision) or a pooled
    buffer, so the first call costs about what NumPy costs."""
    stored = _store_checker(group)
    keep = {id(m) for m in group.nodes() if stored(m)}   # decided before use_count changes
    members = group.members
    left = {}
    for m in group.nodes():
        for a in m.args:
            if type(a) is Node:
                left[id(a)] = left.get(id(a), 0) + 1
    ids = {id(m) for m in members}
    for m in group.nodes():
        op = m.op
        if op.ufunc is None or m.params is not None or op.kind != "elementwise":
            _run_item_in_state((m, False), epoch)
            continue
        out = None
        for a in m.args:
            if type(a) is Node and id(a) in ids and left.get(id(a)) == 1 and \
                    a.value is not None and id(a) not in keep and a.dtype == m.dtype and \
                    a.shape == m.shape:
                out = a.value
                break
        vals = [value_of(a) for a in m.args]
        try:
            if out is None:
                out = _pool.empty(m.shape, m.dtype)
            op.ufunc(*vals, out=out)
        except BaseException as exc:
            if _caught:
                issue_caught(m)
            add_site_note(exc, m)
            m.error = exc
            m.state = DONE
            raise
        m.value = out
        m.state = DONE
        if _caught:
            issue_caught(m)
        for a in m.args:
            if type(a) is Node:
                left[id(a)] -= 1
        _after_run(m, epoch)


def _after_run(n: Node, epoch: int) -> None:
    """Bookkeeping once ``n`` ran: release buffers nobody reads any more, detach args."""
    with _book_lock:
        for a in n.args:
            if type(a) is Node:
                a.use_count -= 1
                r = a.args[0] if a.op is VIEW else a
                if r.flush_epoch == epoch:
                    r.readers_left -= 1
                    if r.readers_left == 0 and not r.needed:
                        r.value = None
    n.tree = None       # (a computed node's tree inputs would chain back without end)
    if not _shared.keep_graph:
        n.params = None
        n.args = ()   # detach: the graph behind a computed value can be freed


def _push_bulk(eng, plan: _FlushPlan, items, wait: bool = False) -> None:
    """MXNet's bulk execution: one engine op runs the whole (small) flush in order.  When
    the caller waits for it and the engine has nothing in flight, it runs here at once:
    handing it to a worker thread and back costs ~40 us, more than a small flush's work.
    (Safe: flushes push only under ``_lock``, held now, and nothing pushed is pending.)"""
    epoch = plan.epoch
    shared = eng.new_var()
    writes = [shared]
    for it in items:
        for n, inplace in ((it,) if type(it) is tuple else _pairs(it)):
            if n.engine_var is None:
                n.engine_var = shared
            elif inplace:
                writes.append(n.engine_var)

    def run_all():
        # A failing item marks only its own nodes; items reading them fail in turn when
        # they read the value; unrelated items still run.  Nothing is raised to the engine,
        # which would mark the shared var of every node in the bulk.
        token = _extobj_var.set(_LOG_DEFAULT) if _extobj_var.get() is not _LOG_DEFAULT \
            else None       # (what most nodes run under: set once for the whole bulk)
        try:
            if _run_bulk is not None:     # (the C version of the loop below)
                _run_bulk(items, epoch, _run_item, _bulk_item_failed)
                return
            for it in items:
                try:
                    _run_item(it, epoch)
                except BaseException as exc:
                    _bulk_item_failed(it, exc)
        finally:
            if token is not None:
                _extobj_var.reset(token)

    if wait and eng.idle():
        with _held():       # (Ctrl-C: raised once the flush is done, never a node's error)
            run_all()
    else:
        reads = []
        for r in plan.external:
            if r.engine_var is None and r.op is LEAF:
                r.engine_var = eng.new_var()      # (a leaf's var: later writes wait for this read)
            if r.engine_var is not None:
                reads.append(r.engine_var)
        eng.push(run_all, reads, writes)


def _bulk_item_failed(item, exc: BaseException) -> None:
    for n, _ in _pairs(item):
        if n.state != DONE or n.error is None and n.value is None:
            n.state = DONE
            n.error = exc


def _pairs(item) -> list:
    if type(item) is tuple:
        return [item]
    return [(m, False) for m in item.nodes()]


def _push_each(eng, plan: _FlushPlan, items) -> None:
    epoch = plan.epoch
    new_var = eng.new_var
    for it in items:
        pairs = _pairs(it)
        first, inplace = pairs[0]
        if inplace:
            # an in-place write runs on the var of the buffer it writes, taken now: a head
            # written earlier in this flush got its var when it was pushed (at _schedule it
            # had none, and a fresh var would not wait for that head's readers)
            base = root(first.args[0])
            if base.engine_var is None:
                base.engine_var = new_var()
            first.engine_var = base.engine_var
        ev = first.engine_var
        if ev is None:
            ev = new_var()
        for n, inplace in pairs:
            if n.engine_var is None:
                n.engine_var = ev
        reads = []
        for n, _ in pairs:
            for a in n.args:
                if type(a) is Node:
                    r = root(a)
                    if r.engine_var is None:
                        # (a computed leaf: an in-place write into it later in this flush
                        # takes this var, and must wait for this read)
                        r.engine_var = new_var()
                    if r.engine_var is not ev:
                        reads.append(r.engine_var)

        def run_one(it=it):
            _run_item(it, epoch)

        eng.push(run_one, reads, [ev])


def _wait(n: Node) -> None:
    if n.state == SCHEDULED or (n.state == DONE and n.value is None and n.error is None):
        ev = n.engine_var
        if ev is None:
            # scheduled by a flush of another thread that is still handing its work to the
            # engine (under _lock): its engine var is set once that is done
            with _lock:
                ev = n.engine_var
        if ev is not None:
            try:
                engine.wait_for_var(ev)
            except Exception as exc:     # (an interrupt of the wait is not the node's error)
                if n.error is None:
                    n.error = exc
                raise
    if n.error is not None:
        raise n.error


def value_for_eager(n: Node):
    """``n``'s value for an op run at once (computing it when pending), or None when it
    has none to give (placeholders behind it, or it failed)."""
    if not compute_now([n.args[0] if n.op is VIEW else n]):
        return None
    return value_of(n) if n.op is VIEW else n.value


def materialize(n: Node) -> np.ndarray:
    """Force ``n`` and return its NumPy value (a view for view nodes)."""
    if n.state == PENDING:
        flush([n])
    else:
        _wait(root(n))
    if n.op is VIEW:
        return value_of(n)
    return n.value


def evaluate_nodes(nodes) -> None:
    """Force several nodes with one flush."""
    flush(list(nodes))


py_collect = _collect       # (tests compare the C planning against the Python one)
if _native.ext is not None:     # the C versions of the planning and running loops
    _native.ext.configure_executor(view=VIEW, book_lock=_book_lock,
                                   pool_min_bytes=_pool.MIN_BYTES, value_of=value_of,
                                   normalize=normalize, node_failed=node_failed,
                                   ndarray=np.ndarray)
    _run_node = _native.ext.run_node
    _plan_counts = _native.ext.plan_counts
    _schedule_scan = _native.ext.schedule_scan
    _run_bulk = _native.ext.run_bulk
    _collect = _native.ext.collect
else:
    _run_node = _plan_counts = _schedule_scan = _run_bulk = None
