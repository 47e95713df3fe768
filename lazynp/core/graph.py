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

import math
import threading
import weakref
from sys import _getframe, getrefcount

import numpy as np

from .._base import config as _config, native as _native, site as _site, split as _split
from . import late_warnings as _late_warnings, policy as _policy
from .. import engine
from ..engine.interrupts import held as _held
from numpy._core.umath import _extobj_contextvar as _extobj_var

from ..kernels import fused as _fused
from ..kernels import cpu as _cpu
from ..kernels import pool as _pool
from ..kernels import tree as _tree
from . import fusion as _fusion
from ..ops.registry import Op, register

PENDING, SCHEDULED, DONE = 0, 1, 2
_PKG = _site.PACKAGE_DIR
_DEFAULT_EXT = None  # set below, once NumPy's default error state object is known


class Node:
    """One recorded value: ``op(*args, **params)`` with known shape and dtype."""

    __slots__ = ("op", "args", "params", "shape", "dtype", "value", "state", "nuse", "evar",
                 "site", "exported", "error", "fl", "pos", "uses", "rem", "needed", "ext",
                 "fx", "wstate", "__weakref__")

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
        self.exported = False
        self.error = None
        self.fl = 0
        self.needed = False
        self.ext = None
        self.fx = None          # tree-kernel structure (kernels/tree.py), elementwise only
        self.wstate = None      # the warnings filters at the call (_late_warnings.py)

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


# --- leaves and the view op -------------------------------------------------------------

#: While > 0 (autodiff tapes, tracing), computed nodes keep their args and params so the
#: recorded graph can be walked backwards after a flush.  Use :func:`keeping_graph`.
keep_graph = 0


class keeping_graph:
    """Context manager: keep the recorded graph (args/params) of nodes computed inside."""

    def __enter__(self):
        _set_keep_graph(keep_graph + 1)
        _policy.enter_transform()       # a transform needs the graph: record everything
        return self

    def __exit__(self, *exc):
        _set_keep_graph(keep_graph - 1)
        _policy.exit_transform()
        return False


def _set_keep_graph(n: int) -> None:
    """Set :data:`keep_graph` (the C recorder keeps a copy)."""
    global keep_graph
    keep_graph = n
    if _speedups is not None:
        _speedups.set_keep_graph(n)


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


def _view_impl(base, offset, shape, strides, dtype):
    return np.ndarray(shape, dtype, buffer=base, offset=offset, strides=strides)


VIEW = register(Op("view", "view", _view_impl, raises_on_values=False))


def leaf(value: np.ndarray, exported: bool = False) -> Node:
    """A node holding a concrete NumPy array (C-contiguous, owned by lazynp).  Its engine
    var is made when a flush first reads it (most leaves, made for views of arrays computed
    at once, never meet the engine)."""
    n = Node(LEAF, (), None, value.shape, value.dtype)
    n.value = value
    n.state = DONE
    n.exported = exported
    if tape is not None:
        tape.leaf_made(n)
    return n


# --- recording -----------------------------------------------------------------------------

_lock = threading.RLock()
_book_lock = threading.Lock()     # nuse/rem bookkeeping from engine worker threads
_pending_vars: list = []          # weakrefs to Vars that got a pending head since last flush


class RecordState:
    """Counters shared by the recorder and the flushes."""

    __slots__ = ("pending_count", "n_recorded", "generation", "max_pending")

    def __init__(self):
        self.pending_count = 0          # nodes recorded since the last flush
        self.n_recorded = 0             # nodes recorded in total (lazynp.stats)
        #: bumped when a flush computes a node that pending nodes still read: their tree
        #: structures (kernels/tree.py), recorded while it was pending, are then stale
        self.generation = 0
        self.max_pending = _config.MAX_PENDING_NODES    # a bound flush runs past this


_state = RecordState()

# --- the tape: what an open autograd trace observes -----------------------------------------

#: the open autograd trace watching the recorder (:func:`install_tape`), or None.  Its
#: ``nodes`` list gets every node recorded and every view node (unless paused); it is told
#: ``flushing(targets)`` before a flush and ``leaf_made(node)`` after a leaf is made.
tape = None
tape_paused = False
#: set by an open autograd trace: called with an array handed to NumPy (``__array__``)
array_hook = None
#: set by an open autograd trace: called with an array, a name and the Python value that
#: ``float()``/``complex()``/``item()``/``tolist()`` took out of it
value_hook = None


def install_tape(observer, paused: bool = False) -> None:
    """Let ``observer`` (an open autograd trace) watch the recorder: recorded and view nodes
    go on ``observer.nodes`` unless ``paused``; a write marks the version it replaces as
    read later (``exported``: never overwritten in place); ``observer.flushing``,
    ``observer.leaf_made``, ``observer.array_read`` (:data:`array_hook`) and
    ``observer.value_taken`` (:data:`value_hook`) are called."""
    global tape, array_hook, value_hook
    tape = observer
    array_hook = observer.array_read
    value_hook = observer.value_taken
    pause_tape(paused)


def pause_tape(paused: bool) -> None:
    """Stop (``paused``) or resume putting recorded nodes on the open tape."""
    global tape_paused
    tape_paused = paused
    if _speedups is not None:
        _speedups.set_tape(tape.nodes, paused)      # (the C recorder keeps its own copy)


def remove_tape() -> None:
    """The trace is closed: nothing watches the recorder."""
    global tape, tape_paused, array_hook, value_hook
    tape = array_hook = value_hook = None
    tape_paused = False
    if _speedups is not None:
        _speedups.set_tape(None, False)


def _taped(n: Node, op: Op, args: tuple) -> None:
    """``n``, just recorded, on the open tape (``_speedups.record`` does the same in C)."""
    if not tape_paused:
        tape.nodes.append(n)
    if op.kind == "write" and args and type(args[0]) is Node:
        # the old version may be read by the backward pass: never overwrite it in place
        _root(args[0]).exported = True


_DEFAULT_EXT = _extobj_var.get()


def _engine_idle() -> None:
    engine.get_engine().wait_all()


_cpu.set_before_compile(_engine_idle)
_last_bound: list = []
STATS = {"ops_eager": 0, "flushes": 0, "nodes_executed": 0, "bound_flushes": 0,
         "inplace_writes": 0, "copy_on_write": 0}


def record(op: Op, args: tuple, params: dict | None, shape: tuple, dtype) -> Node:
    """Add a node to the pending graph (no work runs) and return it; or, when the execution
    policy says so (:mod:`lazynp.core.policy`), run ``op`` at once and return a computed node.
    An open autograd trace gets it on its tape (:func:`install_tape`)."""
    n = _record(op, args, params, shape, dtype)
    if tape is not None:
        _taped(n, op, args)
    return n


def _record(op: Op, args: tuple, params: dict | None, shape: tuple, dtype) -> Node:
    tree_only = False
    if not _policy.record_all and op.kind != "write":     # (writes: record_write)
        d = run_now(op, args, shape)
        if d == _NOW:
            return run_eager(op, args, params, shape, dtype)
        tree_only = d == _TREE
    n = Node(op, args, params, shape, dtype)
    f = _getframe(1)
    while f is not None:
        c = f.f_code
        inside = _in_package.get(c)
        if inside is None:
            inside = _in_package[c] = c.co_filename.startswith(_PKG)
        if not inside:
            n.site = (c, f.f_lasti)     # the line is looked up only when reported
            break
        f = f.f_back
    ext = _extobj_var.get()
    if ext is _DEFAULT_EXT and params is None and op.ufunc is not None and \
            op.kind == "elementwise":
        if _tree_structure(n, op, args, shape, True) > _MAX_TREE and not keep_graph:
            # a chain grown past a tree kernel's size: compute its pending arguments now
            # (each one tree kernel), and start a new tree on their values
            for a in args:
                if type(a) is Node and a.state == PENDING and a.fx is not None:
                    flush([a])
            _tree_structure(n, op, args, shape, False)
            if n.site is not None:
                restart_site(n.site)
    else:
        if ext is not _DEFAULT_EXT:
            n.ext = ext     # the user's np.errstate at the recording line applies when it runs
        for a in args:
            if type(a) is Node:
                a.nuse += 1
    if tree_only and (n.fx is None or lone_sites and n.site in lone_sites):
        done = _run_untreed(n)
        if done is not None:
            return done
    st = _state
    st.pending_count += 1
    st.n_recorded += 1
    if st.pending_count >= st.max_pending:
        _bound_flush()
    if op.raises_on_values:
        ws = _late_warnings._current            # (_late_warnings.state(), inlined)
        lst = _warnings.filters
        if lst is not ws.lst or len(lst) != ws.n or (lst[0] if lst else None) is not ws.first:
            ws = _warnings_state()
        site = n.site
        # (the policy's answer is False without asking when nothing can make it True: no
        # trap, default errstate, a caller without try/with blocks)
        if (ws.traps or n.ext is not None or site is None or
                _protected.get(site[0]) != ()) and _policy.run_at_call(op, site, n.ext, ws):
            run_at_call(n)
        else:
            n.wstate = ws
    return n


def _run_untreed(n: Node) -> Node:
    """``n``, just made for an op of medium size that joins no tree kernel, run at once
    instead (its pending arguments computed first); None when one has no value (``n``
    stays recorded)."""
    pending = []
    for a in n.args:
        if type(a) is Node:
            r = a.args[0] if a.op is VIEW else a
            if r.state != DONE or r.value is None:
                pending.append(r)
    if pending and not compute_now(pending):
        return None
    for a in n.args:
        if type(a) is Node:
            a.nuse -= 1        # (counted when ``n`` was made)
    return run_eager(n.op, n.args, n.params, n.shape, n.dtype)


def run_at_call(n: Node) -> None:
    """Compute ``n``, just recorded, before its call returns (the policy's
    :func:`lazynp.core.policy.run_at_call`): its error is raised and its warnings issued now,
    in the user's ``try``/``with`` block.  Work that has no value yet (a traced
    placeholder behind it) stays recorded."""
    if not symbolic([n]):
        flush([n])


def _tree_structure(n: Node, op: Op, args: tuple, shape: tuple, count_uses: bool) -> int:
    """Set ``n.fx``, its tree-kernel structure (kernels/tree.py), when ``n`` and its pending
    arguments form a tree of at most ``MAX_TREE`` same-shape elementwise nodes; with
    ``count_uses`` also count the uses of its arguments.  Returns the tree's size (0 when
    ``n`` cannot be a tree kernel)."""
    key = [op]
    ins = kf = ki = ()
    size = 1
    gen = _state.generation
    ok = True
    shared = False
    if len(args) == 2 and op.name == "power":
        # a scalar exponent 2 is NumPy's square (x * x); other powers (libm's pow) are left
        # to NumPy
        if type(args[1]) is Node or not _tree.squares(args[1], n.dtype):
            if count_uses:
                for a in args:
                    if type(a) is Node:
                        a.nuse += 1
            return 0
        key.append("sq")
        args = args[:1]
    for a in args:
        t = type(a)
        if t is Node:
            if count_uses:
                a.nuse += 1
            if not ok:
                continue
            if a.shape != shape and not (_tree.broadcasts(a.shape, shape) and computed(a)):
                ok = False      # (only a computed input may broadcast)
            elif a.state == PENDING and (a.op is not VIEW or not computed(a)):
                fx = a.fx
                if fx is None:
                    ok = False
                    continue
                if ins:
                    ins, remap = _tree.merge_inputs(ins, fx[1])
                    key.append(("t", fx[0], remap))
                else:
                    key.append(fx[0])
                    ins = fx[1]
                if a.nuse > 1:
                    shared = True       # (read elsewhere too: maybe twice in this tree)
                kf += fx[2]
                ki += fx[3]
                size += fx[4]
                if fx[5] < gen:
                    gen = fx[5]
            elif a in ins:
                key.append(~ins.index(a))        # an input already used (negative)
            else:
                key.append(a.dtype)
                ins += (a,)
        elif t is float:
            key.append(float)
            kf += (a,)
        elif t is np.float64:
            key.append(np.float64)      # (a NumPy scalar: a float64 operand, not a weak one)
            kf += (a,)
        elif t is int and 0 <= a <= 127:
            key.append(int)
            ki += (a,)
        else:
            ok = False
    if not ok or not ins:
        return 0
    if size <= _MAX_TREE:
        if shared:
            key.append("dup")
        key = tuple(key)
        sid = _tree_ids.get(key, -1)
        if sid == -1:
            sid = _tree.structure(key, n)
        if sid is not None:
            n.fx = (sid, ins, kf, ki, size, gen)
    return size


_in_package: dict = {}     # code object -> defined inside lazynp (skipped for error sites)
_caught = _late_warnings.caught
_LOG_DEFAULT = _late_warnings.LOG_DEFAULT
_warnings_state = _late_warnings.state
_warnings = _late_warnings.warnings
_protected = _policy._protected
_MAX_TREE = _tree.MAX_TREE
_tree_ids = _tree.structure_ids


def view_node(base: Node, offset: int, shape: tuple, strides: tuple, dtype) -> Node:
    """A view of ``base``'s buffer (never executed alone; realized by its consumers)."""
    n = Node(VIEW, (base,), {"offset": offset, "shape": shape, "strides": strides, "dtype": dtype},
             shape, dtype)
    base.nuse += 1
    if tape is not None and not tape_paused:
        tape.nodes.append(n)
    return n


# --- running at once (the execution policy decides: lazynp/_policy.py) --------------------

def computed(n: Node) -> bool:
    """True when ``n`` (a view: its base) holds its value."""
    if n.op is VIEW:
        n = n.args[0]
    return n.state == DONE and n.error is None and n.value is not None


def run_now(op: Op, args: tuple, shape: tuple) -> int:
    """The policy's decision for one op (:func:`lazynp.core.policy.decide_on_nodes`, from
    what this function sees of its node arguments): ``_NOW`` (1), ``_RECORD`` (0), or
    ``_TREE`` (2): record it if it joins a tree kernel (:func:`record` decides; pending
    arguments are left as they are).

    Small work on *pending* arguments computes them first (one flush) and then runs at
    once: recording it would join their graph, but a small op gains nothing from fusion,
    and every recorded op costs more than NumPy's call (a loop of small writes into a
    large pending array would otherwise record every step)."""
    size = _prod(shape)
    pending = None
    shared = False
    objects = False
    failed = False
    for a in args:
        if type(a) is Node:
            r = a.args[0] if a.op is VIEW else a
            if r.error is not None:
                failed = True
                break
            if r.state != DONE or r.value is None:
                if pending is None:
                    pending = []
                pending.append(r)
            elif r.exported is True:
                shared = True
            objects = objects or a.dtype.hasobject
            n = _prod(a.shape)
            if n > size:
                size = n
    d = _policy.decide_on_nodes(op, size, failed, shared, objects, lambda: _permuted_args(args))
    if pending is not None and d == _NOW:
        return _NOW if compute_now(pending) else _RECORD
    return d


def _permuted_args(args: tuple) -> bool:
    """Is a computed node argument out of memory order (_policy.permuted)?"""
    for a in args:
        if type(a) is not Node or not computed(a):
            continue
        if a.op is VIEW:
            if _policy.permuted_layout(a.params["shape"], a.params["strides"]):
                return True
        elif type(a.value) is np.ndarray and _policy.permuted(a.value):
            return True
    return False


def symbolic(nodes) -> bool:
    """True when the pending work behind ``nodes`` reads a placeholder (``symbol.var``,
    a traced argument): it has no value, so it can only be recorded."""
    stack = [n for n in nodes if type(n) is Node and n.state != DONE]
    seen = set()
    while stack:
        n = stack.pop()
        if n.op is PLACEHOLDER:
            return True
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


def run_eager(op: Op, args: tuple, params: dict | None, shape: tuple, dtype) -> Node:
    """Run ``op`` now with NumPy's reference implementation; a computed node (errors and
    warnings come from NumPy, here, under the caller's ``np.errstate``)."""
    vals = [_value_of(a) if type(a) is Node else a for a in args]
    out = None
    if op.ufunc is not None and not params and _split.enabled:
        out = _split.call(op.ufunc, tuple(vals))     # large work on two threads, or None
    if out is not None:
        pass
    elif op.raises_on_values:
        # NumPy's warnings name the user's line, not this file (_late_warnings.py)
        cur = _extobj_var.get()
        token = _extobj_var.set(_LOG_DEFAULT if cur is _DEFAULT_EXT else
                                _late_warnings.logging_ext(cur))
        try:
            out = op.impl(*vals, **params) if params else op.impl(*vals)
        finally:
            _extobj_var.reset(token)
            if _caught:
                msgs = _late_warnings.take()
                if msgs:
                    _late_warnings.issue(msgs, None)
    else:
        out = op.impl(*vals, **params) if params else op.impl(*vals)
    STATS["ops_eager"] += 1
    if not isinstance(out, tuple):
        out = own_result(out, shape, dtype, vals)
    n = Node(LEAF, (), None, shape, dtype)
    n.value = out
    n.state = DONE
    return n


def record_write(var: "Var", op: Op, args: tuple, params: dict, region: tuple) -> None:
    """Write ``op(head, *args, **params)`` into ``var`` (``region``: the written shape).

    Small writes with computed inputs happen at once (in the buffer, or copy-on-write:
    :func:`writable_view`); anything else is recorded: a new pending head, whose flush
    decides between in place and a copy."""
    if not _policy.record_all and (run_now(op, args, region) or _into_shared(var, args)) and \
            (computed(var.head) or compute_now([var.head])):
        h = var.head
        # references: var.head, h, getrefcount's argument, and this op's own arguments
        # (``a += b`` reads the head it writes: it runs now, so that is no other reader)
        refs = getrefcount(h) - sum(1 for a in args if a is h)
        del h
        if refs <= 3:
            buf = var.head.value
            STATS["inplace_writes"] += 1
        elif _policy.sized_ok(op.kind, _prod(var.head.shape)):
            buf = var.head.value.copy()
            var.head = leaf(buf)
            STATS["copy_on_write"] += 1
        else:
            buf = None
        if buf is not None:
            vals = [_value_of(a) if type(a) is Node else a for a in args]
            op.impl(buf, *vals, **params)
            return
    old = var.head
    node = record(op, (old,) + args, params, old.shape, old.dtype)
    var.set_head(node)


def _into_shared(var: "Var", args: tuple) -> bool:
    """A write into a buffer the user holds too runs at once, whatever its size (the
    user's array sees it, as in NumPy): True once its node arguments are computed."""
    if var.head.exported is not True:
        return False
    return compute_now([a.args[0] if a.op is VIEW else a for a in args if type(a) is Node])


def writable_view(arr, region: int, large_in_place: bool = False):
    """The NumPy array through which ``arr`` (a lazynp array) may be written at once, for
    a write of ``region`` elements with computed inputs; None when the write must be
    recorded (a pending array, a large write, or pending readers of a large array).
    ``large_in_place``: a large write may run at once too, into the computed buffer itself
    when nothing else holds it (an assignment by index, which no kernel fuses: recording
    it would only add the graph's costs, and a copy when something reads the old version).

    The buffer itself when nothing but ``arr``'s Var holds its current version (no pending
    reader, no tape); otherwise, for an array small enough to copy, a copy that becomes the
    Var's new computed head (copy-on-write: what was recorded before keeps the old data).
    A view's read-only flag (``broadcast_to``, ``writeable = False``) is carried over, so
    NumPy raises its own error."""
    if _policy.record_all:
        return None
    small = _policy.sized_ok("write", region)
    var = arr._v
    if var is None:
        return arr._val if small or arr._ext or large_in_place else None
    h = var.head
    # references: var.head, h, getrefcount's argument (more: pending readers)
    if not small and h.exported is not True and (not large_in_place or getrefcount(h) > 3):
        return None
    if h.state != DONE and h.error is None:
        del h
        compute_now([var.head])           # a small write into a pending array: run it
        h = var.head
    if h.state != DONE or h.value is None or h.error is not None or \
            type(h.value) is not np.ndarray:
        return None
    # references: var.head, h, getrefcount's argument
    if getrefcount(h) > 3:
        if not _policy.sized_ok("write", _prod(h.shape)) or h.exported is True:
            return None      # (a shared buffer is not copied away from its other holder)
        buf = h.value.copy()
        var.head = leaf(buf)
        STATS["copy_on_write"] += 1
    else:
        buf = h.value
        STATS["inplace_writes"] += 1
    sh = arr._shadow
    if sh is None:
        return buf
    if var.shadow is buf:
        return sh
    g = arr._geom
    out = np.ndarray(g[1], g[3], buffer=buf, offset=g[0], strides=g[2]) if g is not None \
        else buf.view()
    if not sh.flags.writeable:
        out.flags.writeable = False
    return out


def fork_prepare_recorder() -> bool:
    """Before ``os.fork()``: hold the recorder's lock, so no flush is half scheduled in
    the child (see :mod:`lazynp.core.lifecycle`)."""
    _lock.acquire()
    return True


def fork_done_recorder(child: bool) -> None:
    _lock.release()


def fork_prepare_executor() -> bool:
    """Before ``os.fork()``, once the engine is idle: hold the executor's bookkeeping lock."""
    _book_lock.acquire()
    return True


def fork_done_executor(child: bool) -> None:
    _book_lock.release()


def _bound_flush() -> None:
    """Flush every live pending head: keeps a long Python loop's graph bounded.  Waits for
    the previous bound flush first, so recording never runs far ahead of the engine."""
    global _last_bound
    STATS["bound_flushes"] += 1
    for t in _last_bound:
        try:
            _wait(_root(t))
        except Exception:
            pass        # raised again when that array itself is read
    _last_bound = flush_live()
    _state.pending_count = 0      # every live pending head is flushed: start counting afresh


def _live_pending_heads() -> list:
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


def flush_live() -> list:
    """Flush the heads of all live Vars that are pending; returns them."""
    targets = _live_pending_heads()
    if targets:
        flush(targets, wait=False)
    return targets


# --- flush ---------------------------------------------------------------------------------
#
# Per-flush scratch data lives on the nodes (``fl`` = flush epoch, ``uses`` = in-flush
# readers, ``rem`` = readers of its buffer not yet run) so planning is a few linear passes.

_epoch = 0


def _root(n: Node) -> Node:
    return n.args[0] if n.op is VIEW else n


def pending_order(targets, epoch: int, node_type: type | None = None) -> list:
    """Pending nodes behind ``targets``, in topological order (iterative DFS); the nodes
    visited are marked ``fl = epoch``.  ``node_type``: the class of the graph's nodes
    (default: this module's ``Node``, the C one when built; the device graph passes its
    own: kernels/cuda/runtime.py)."""
    if node_type is None:
        node_type = Node
    order = []
    for t in targets:
        if t.state != PENDING or t.fl == epoch:
            continue
        t.fl = epoch
        stack = [(t, 0)]
        while stack:
            node, i = stack[-1]
            args = node.args
            n_args = len(args)
            while i < n_args:
                a = args[i]
                i += 1
                if type(a) is node_type and a.state == PENDING and a.fl != epoch:
                    a.fl = epoch
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
    for h in _live_pending_heads():
        h.needed = True


class _Plan:
    """One flush: topological order, in-flush uses, what must outlive the flush."""

    def __init__(self, order: list, targets, epoch: int):
        self.order = order
        self.epoch = epoch
        self.external = []        # computed nodes outside the flush that are read
        self.has_writes = False
        self._consumers = None
        if _plan_counts is not None:      # (the C version of the loops below)
            self.external, self.has_writes, bumps = _plan_counts(order, targets, epoch)
            _state.generation += bumps
            return
        for n in order:
            n.uses = 0
            n.rem = 0
        ext_seen = set()
        for n in order:
            if n.op.kind == "write":
                self.has_writes = True
            for a in n.args:
                if type(a) is Node:
                    r = a.args[0] if a.op is VIEW else a
                    if a.fl == epoch:
                        a.uses += 1
                    if r.fl == epoch:
                        if n.op is not VIEW:
                            r.rem += 1
                    elif id(r) not in ext_seen:
                        ext_seen.add(id(r))
                        self.external.append(r)
        for t in targets:
            if t.fl == epoch:
                t.needed = True
        for n in order:
            if n.nuse > n.uses:
                n.needed = True
                _state.generation += 1    # pending readers recorded n inside their trees
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
            if node.fl == self.epoch:
                if node.needed:
                    return False
            elif node.nuse != len(self.consumers(node)) or node.exported:
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


def _value_of(a):
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


def _run(node: Node, inplace: bool) -> None:
    """Execute one node with NumPy's reference implementation."""
    op = node.op
    vals = [(a.value if a.op is not VIEW and a.value is not None else _value_of(a))
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
            out = _normalize(out, node, vals)
    node.value = out
    node.state = DONE


def _normalize(out, node: Node, vals) -> np.ndarray:
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


def flush(targets, wait: bool = True) -> None:
    """Run the pending subgraph behind ``targets`` (nodes) on the engine."""
    global _epoch
    if tape is not None:
        tape.flushing(targets)
    for t in targets:       # (computed already, e.g. evaluate() of a replayed gradient)
        if t.state != DONE or t.value is None or t.error is not None:
            break
    else:
        return
    if len(targets) == 1 and _flush_tree(targets[0]):
        return
    with _lock:
        _epoch += 1
        order = _collect(targets, _epoch)
        if order:
            _mark_live_heads()
            STATS["flushes"] += 1
            _schedule(_Plan(order, targets, _epoch), wait)
    if wait:
        for t in targets:
            _wait(_root(t))


#: flushes of one tree kernel's head run it in the calling thread (tests of the fusion pass
#: turn this off)
tree_flushes = True


def _tree_runnable(t: Node, fx) -> bool:
    """May pending ``t``, whose tree structure is ``fx``, run as a tree kernel now?  Not
    when the structure is stale or a transform keeps the graph, nor when the tree is too
    large (the fusion pass runs it on the engine's threads) or of a medium size with a libm
    math function in it (the fusion pass leaves those to NumPy: its bits)."""
    if fx is None or t.state != PENDING or keep_graph or not tree_flushes or \
            fx[5] != _state.generation and not _tree_intact(t, fx):
        return False
    size = _prod(t.shape)
    return size < _policy.TREE_MAX_ELEMS and \
        (size < 4 * _MIN_FUSED_WORK or fx[0] not in _tree.with_libm)


def _tree_intact(t: Node, fx) -> bool:
    """Is every node pending ``t``'s tree inlines still pending?  Asked when the generation
    moved on since ``t`` was recorded: some node that pending trees may inline was computed
    meanwhile (its arguments dropped), but often in another tree (Horner's rule: the
    ``p`` chain is still whole after the ``dp`` tree that reads it ran)."""
    return all(n.state == PENDING and n.fx is not None for n in _tree.dag(t, fx[1])[0])


def _flush_tree(t: Node) -> bool:
    """The small-flush fast path: compute ``t`` with its cached tree kernel (kernels/tree.py)
    in the calling thread.  False when the ordinary flush must run instead."""
    fx = t.fx
    if not _tree_runnable(t, fx):
        return False
    for x in fx[1]:
        if not computed(x):
            return False
    if not _run_tree(t, fx, None, None):
        return False
    if fx[4] == 1 and t.site is not None:
        _count_lone(t.site)
    return True


def _run_tree(t: Node, fx, dest, vals) -> bool:
    """Run pending ``t``'s tree kernel (into ``dest``, or a new array; ``vals``: its inputs'
    values when known) with the nodes it must also write, and do the flush's bookkeeping."""
    with _lock:
        if t.state != PENDING or t.fx is None:
            return False            # (another thread's flush took it meanwhile)
        store = _tree_stores(t)
        if not _tree.run(t, fx, _value_of, dest, store, vals):
            return False
        _tree_done(t, store)
        # (other pending nodes, outside this tree, still count towards the bound flush)
        _state.pending_count = max(0, _state.pending_count - fx[4])
        STATS["flushes"] += 1
        STATS["nodes_executed"] += fx[4]
    return True


def _tree_stores(t: Node) -> list:
    """The pending nodes inside ``t``'s tree that live arrays hold (a named intermediate:
    ``d = x - m; v = (d * d).mean()``): its kernel writes their values too."""
    heads = [h for h in _live_pending_heads() if h is not t and h.nuse]
    if not heads:
        return []
    inside = {id(m) for m in _tree.walk(t, t.fx[1])}
    return [h for h in heads if id(h) in inside]


def _tree_done(t: Node, store: list) -> None:
    """Bookkeeping once ``t``'s tree kernel ran (and computed ``store`` too)."""
    if t.nuse or store:
        # pending readers of these recorded them as part of their own trees
        _state.generation += 1
    for m in [t] + store:
        m.state = DONE
        m.args = ()
        m.fx = None


#: user lines (``(code, offset)``) whose op of medium size was computed as a tree kernel of
#: that op alone more than once (what read it next was no elementwise op: nothing fused
#: with it, and recording cost more than NumPy's call): their ops run at once from then on
lone_sites: set = set()
_lone_counts: dict = {}


#: user lines whose op made a tree grow past ``MAX_TREE`` (a long chain: the tree restarted
#: there).  The last tree of such a chain may be that op alone (a loop's last step, read at
#: the end): that does not make the line lone.
restarted_sites: set = set()


def restart_site(site) -> None:
    if len(restarted_sites) > 4096:
        restarted_sites.clear()
    restarted_sites.add(site)


def _count_lone(site) -> None:
    if site in restarted_sites:
        return
    k = _lone_counts.get(site, 0) + 1
    if k >= 2:
        lone_sites.add(site)
        _lone_counts.pop(site, None)
    else:
        if len(_lone_counts) > 4096:
            _lone_counts.clear()
        _lone_counts[site] = k


def tree_into(t: Node, dest: np.ndarray) -> bool:
    """Compute pending ``t`` (a tree kernel's head that nothing else reads, of ``dest``'s
    shape and dtype) straight into ``dest``, a region of a computed buffer being assigned
    (``B[1:-1] = (A[:-2] + A[2:]) / 2``: no temporary, no copy).  False when it cannot:
    the caller then computes ``t`` and assigns it.  The tree's inputs must not overlap
    ``dest`` (a kernel reading what it writes would differ from NumPy's temporary)."""
    fx = t.fx
    if t.nuse or not _tree_runnable(t, fx) or _warnings_state().traps:
        # (traps: a rejected kernel leaves ``dest`` half written, and NumPy's error must
        # then leave it untouched)
        return False
    vals = []
    for x in fx[1]:
        if not computed(x):
            return False
        v = _value_of(x)
        vals.append(v)
        if np.may_share_memory(v, dest):
            return False
    return _run_tree(t, fx, dest, vals)


def _schedule(plan: _Plan, wait: bool = False) -> None:
    """Hand the flush's work to the engine (``wait``: the caller waits for it next)."""
    # (pending nodes outside this flush still count towards the bound flush)
    _state.pending_count = max(0, _state.pending_count - len(plan.order))
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
                    n.evar = (h.args[0] if h.op is VIEW else h).evar
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
    items = _small_groups_unfused(_fusion.fuse(work, Node)) if _config.FUSION and \
        max_elems >= 4 * _MIN_FUSED_WORK else work
    # MXNet's bulk execution for flushes of small ops: handing an op of a few tens of KB to a
    # worker thread costs more than the op (demo programs: 64x64 stencil 51 -> 30 ms)
    if nbytes <= _config.BULK_BYTES * max(1, len(items) // 4) or eng.num_workers <= 1:
        _push_bulk(eng, plan, items, wait)
    else:
        _push_each(eng, plan, items)


def _small_groups_unfused(items: list) -> list:
    """Groups with too little work for a kernel call (~50 us of Python around it) become
    single nodes again, which run on NumPy from C (graph._run_node)."""
    out = []
    for it in items:
        if type(it) is not tuple and _prod(it.shape) * len(it.nodes()) < _MIN_KERNEL_WORK:
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
        return m.needed or m.nuse > internal.get(id(m), 0)
    return stored


def _run_item(item, epoch: int) -> None:
    """Run one work item: a ``(node, inplace)`` pair or a fused group.  A failure is stored
    on the item's nodes (raised when they are read) and re-raised."""
    first = item[0] if type(item) is tuple else item.members[0]
    # the errstate of the recording line, its warnings logged for _late_warnings to issue
    want = _LOG_DEFAULT if first.ext is None else _late_warnings.logging_ext(first.ext)
    token = _extobj_var.set(want) if _extobj_var.get() is not want else None
    try:
        _run_item_in_state(item, epoch)
    finally:
        if token is not None:
            _extobj_var.reset(token)
        if _caught:
            _issue_caught(first)


def _issue_caught(n: Node) -> None:
    """Issue the warnings NumPy logged in this thread while ``n`` ran, at ``n``'s recording
    line through the warnings filters of its call.  A filter that turns them into errors
    makes ``n`` fail, as the call would have in NumPy."""
    msgs = _late_warnings.take()
    if msgs:
        try:
            _late_warnings.issue(msgs, n.site, n.wstate)
        except BaseException as exc:
            _node_failed(n, exc)
            n.value = None
            raise


def _run_item_in_state(item, epoch: int) -> None:
    if type(item) is tuple:
        n, inplace = item
        if not inplace and _run_node is not None and _run_node(n, epoch):
            if _caught:
                _issue_caught(n)
            return      # (the C version of the lines below, for a plain node)
        try:
            _run(n, inplace)
        except BaseException as exc:
            if _caught:
                _issue_caught(n)
            _node_failed(n, exc)
            raise
        _after_run(n, epoch)
        if _caught:
            _issue_caught(n)
        return
    nodes = item.nodes()
    try:
        # (groups with less work than _MIN_KERNEL_WORK were unfused by _schedule)
        ok = _fused.run_group(item, Node, _value_of, _store_checker(item))
    except BaseException as exc:
        _add_site_note(exc, nodes[0])
        _fail([(m, False) for m in nodes], exc)
        raise
    if ok:
        for m in nodes:
            m.state = DONE
            _after_run(m, epoch)
        return
    _run_group_numpy(item, epoch)


def _run_group_numpy(group, epoch: int) -> None:
    """A group whose kernel is not ready, op by op on NumPy, writing each ufunc result into a
    dead intermediate of the group when one fits (NumPy's temporary elision) or a pooled
    buffer, so the first call costs about what NumPy costs."""
    stored = _store_checker(group)
    keep = {id(m) for m in group.nodes() if stored(m)}   # decided before nuse changes
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
        vals = [_value_of(a) for a in m.args]
        try:
            if out is None:
                out = _pool.empty(m.shape, m.dtype)
            op.ufunc(*vals, out=out)
        except BaseException as exc:
            if _caught:
                _issue_caught(m)
            _add_site_note(exc, m)
            m.error = exc
            m.state = DONE
            raise
        m.value = out
        m.state = DONE
        if _caught:
            _issue_caught(m)
        for a in m.args:
            if type(a) is Node:
                left[id(a)] -= 1
        _after_run(m, epoch)


_MIN_FUSED_WORK = 2048
_RECORD, _NOW, _TREE = _policy.RECORD, _policy.NOW, _policy.TREE
#: a fused group runs as a kernel from this much work (elements x nodes); below it its nodes
#: run one by one on NumPy (from C): measured for 4-op groups, 16k elements: 64 us as a
#: kernel, 60 us one by one; 32k elements: 177 vs 276 us
_MIN_KERNEL_WORK = 65536


def _fail(items, exc) -> None:
    for n, _ in items:
        if n.state != DONE:
            n.error = exc
            n.state = DONE


def _node_failed(n: Node, exc: BaseException) -> None:
    _add_site_note(exc, n)
    n.error = exc
    n.state = DONE


_SITE_NOTE = "lazynp: operation recorded at "


def _add_site_note(exc: BaseException, node: Node) -> None:
    """Name the line that recorded the failing operation (once: an error read again by a
    later node keeps the note of the node where it arose)."""
    if node.site is not None and hasattr(exc, "add_note") and \
            not any(n.startswith(_SITE_NOTE) for n in getattr(exc, "__notes__", ())):
        exc.add_note(_SITE_NOTE + _site.format_site(node.site))


def _after_run(n: Node, epoch: int) -> None:
    """Bookkeeping once ``n`` ran: release buffers nobody reads any more, detach args."""
    with _book_lock:
        for a in n.args:
            if type(a) is Node:
                a.nuse -= 1
                r = a.args[0] if a.op is VIEW else a
                if r.fl == epoch:
                    r.rem -= 1
                    if r.rem == 0 and not r.needed:
                        r.value = None
    n.fx = None       # (a computed node's tree inputs would chain back without end)
    if not keep_graph:
        n.params = None
        n.args = ()   # detach: the graph behind a computed value can be freed


def _push_bulk(eng, plan: _Plan, items, wait: bool = False) -> None:
    """MXNet's bulk execution: one engine op runs the whole (small) flush in order.  When
    the caller waits for it and the engine has nothing in flight, it runs here at once:
    handing it to a worker thread and back costs ~40 us, more than a small flush's work.
    (Safe: flushes push only under ``_lock``, held now, and nothing pushed is pending.)"""
    epoch = plan.epoch
    shared = eng.new_var()
    writes = [shared]
    for it in items:
        for n, inplace in ((it,) if type(it) is tuple else _pairs(it)):
            if n.evar is None:
                n.evar = shared
            elif inplace:
                writes.append(n.evar)

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
            if r.evar is None and r.op is LEAF:
                r.evar = eng.new_var()      # (a leaf's var: later writes wait for this read)
            if r.evar is not None:
                reads.append(r.evar)
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


def _push_each(eng, plan: _Plan, items) -> None:
    epoch = plan.epoch
    new_var = eng.new_var
    for it in items:
        pairs = _pairs(it)
        first, inplace = pairs[0]
        if inplace:
            # an in-place write runs on the var of the buffer it writes, taken now: a head
            # written earlier in this flush got its var when it was pushed (at _schedule it
            # had none, and a fresh var would not wait for that head's readers)
            base = _root(first.args[0])
            if base.evar is None:
                base.evar = new_var()
            first.evar = base.evar
        ev = first.evar
        if ev is None:
            ev = new_var()
        for n, inplace in pairs:
            if n.evar is None:
                n.evar = ev
        reads = []
        for n, _ in pairs:
            for a in n.args:
                if type(a) is Node:
                    r = _root(a)
                    if r.evar is None:
                        # (a computed leaf: an in-place write into it later in this flush
                        # takes this var, and must wait for this read)
                        r.evar = new_var()
                    if r.evar is not ev:
                        reads.append(r.evar)

        def run_one(it=it):
            _run_item(it, epoch)

        eng.push(run_one, reads, [ev])


def _wait(n: Node) -> None:
    if n.state == SCHEDULED or (n.state == DONE and n.value is None and n.error is None):
        ev = n.evar
        if ev is None:
            # scheduled by a flush of another thread that is still handing its work to the
            # engine (under _lock): its engine var is set once that is done
            with _lock:
                ev = n.evar
        if ev is not None:
            try:
                engine.wait_for_var(ev)
            except Exception as exc:     # (an interrupt of the wait is not the node's error)
                if n.error is None:
                    n.error = exc
                raise
    if n.error is not None:
        raise n.error


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


def value_for_eager(n: Node):
    """``n``'s value for an op run at once (computing it when pending), or None when it
    has none to give (placeholders behind it, or it failed)."""
    if not compute_now([n.args[0] if n.op is VIEW else n]):
        return None
    return _value_of(n) if n.op is VIEW else n.value


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


_prod = math.prod


# --- the C recorder ---------------------------------------------------------------------------

def _configure_speedups(ext) -> None:
    """Hand the C recorder this module's objects (once, at import; every name
    ``configure`` reads is listed in :data:`lazynp._base.native.INTERFACE`)."""
    ext.configure(
        bound_flush=_bound_flush, extobj_var=_extobj_var, default_ext=_DEFAULT_EXT,
        pkg=_PKG, tree_ids=_tree_ids,
        tree_structure=_tree.structure, merge_inputs=_tree.merge_inputs, max_tree=_MAX_TREE,
        max_pending=_state.max_pending,
        flush=flush, restart_site=restart_site, run_untreed=_run_untreed, tree_into=tree_into,
        lone_sites=lone_sites,
        run_eager=run_eager, run_now=run_now, value_for_eager=value_for_eager,
        protected_ranges=_policy.protected_ranges, errstate_traps=_policy.errstate_traps,
        errstate_ignores=_policy.errstate_ignores,
        run_at_call=run_at_call, warnings_state=_late_warnings.state,
        warnings_module=_late_warnings.warnings, log_default=_LOG_DEFAULT,
        caught=_caught, issue_caught=_issue_caught)
    ext.set_keep_graph(keep_graph)


_speedups = _native.ext
if _speedups is not None:
    _configure_speedups(_speedups)
py_record = record          # the pure Python recorder (tests compare the C one against it)
if _speedups is not None:
    Node = _speedups.Node
    Var = _speedups.Var
    record = _speedups.record
    _state = _speedups.state
    _pending_vars = _speedups.pending_vars
    _live_pending_heads = _speedups.live_pending_heads
    _speedups.configure_executor(view=VIEW, book_lock=_book_lock,
                                 pool_min_bytes=_pool.MIN_BYTES, value_of=_value_of,
                                 normalize=_normalize, node_failed=_node_failed,
                                 ndarray=np.ndarray)
    _run_node = _speedups.run_node
    _plan_counts = _speedups.plan_counts
    _schedule_scan = _speedups.schedule_scan
    _run_bulk = _speedups.run_bulk
    py_collect = _collect       # (tests compare the C planning against the Python one)
    _collect = _speedups.collect
else:
    _run_node = _plan_counts = _schedule_scan = _run_bulk = None
