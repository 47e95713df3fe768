"""Recording: ``record`` adds a node to the pending graph, or runs the op at once when the
execution policy (:mod:`lazynp.core.policy`) says so; writes into Vars (``record_write``,
``writable_view``), leaves and views; and the hooks through which an open autograd trace
watches the recorder (``install_tape``, ``pause_tape``, ``remove_tape``).

When the C extension is in use, ``record`` is its version, configured at the end of this
module with the Python functions it calls back; ``py_record`` stays the Python one.
"""
from __future__ import annotations

import math
from sys import _getframe, getrefcount

import numpy as np
from numpy._core.umath import _extobj_contextvar as _extobj_var

from .._base import config as _config, native as _native, site as _site, split as _split
from ..kernels import tree as _tree
from ..ops.registry import Op
from . import fusion as _fusion, late_warnings as _late_warnings, policy as _policy
from .executor import bound_flush, compute_now, flush, run_at_call, value_for_eager
from .node_errors import issue_caught
from .nodes import DONE, LEAF, PENDING, VIEW, Node, Var, computed, own_result, root, value_of
from .state import STATS, counts as _counts, fragment_sites, lone_sites, shared as _shared, \
    site_key
from .trees import for_op_at_once as _for_op_at_once, \
    note_copy_on_write as _note_copy_on_write, restart_site, tree_into, \
    tree_structure

_PKG = _site.PACKAGE_DIR
_DEFAULT_EXT = _extobj_var.get()    # NumPy's default error state object
_in_package: dict = {}     # code object -> defined inside lazynp (skipped for error sites)
_caught = _late_warnings.caught
_LOG_DEFAULT = _late_warnings.LOG_DEFAULT
_warnings_state = _late_warnings.state
_warnings = _late_warnings.warnings
_protected = _policy._protected
_MAX_TREE = _tree.MAX_TREE
_RECORD, _NOW, _TREE = _policy.RECORD, _policy.NOW, _policy.TREE
_prod = math.prod


class keeping_graph:
    """Context manager: keep the recorded graph (args/params) of nodes computed inside."""

    def __enter__(self):
        _set_keep_graph(_shared.keep_graph + 1)
        _policy.enter_transform()       # a transform needs the graph: record everything
        return self

    def __exit__(self, *exc):
        _set_keep_graph(_shared.keep_graph - 1)
        _policy.exit_transform()
        return False


def _set_keep_graph(n: int) -> None:
    """Set ``shared.keep_graph`` (:mod:`lazynp.core.state`; the C recorder keeps a copy)."""
    _shared.keep_graph = n
    if _native.ext is not None:
        _native.ext.set_keep_graph(n)


def leaf(value: np.ndarray, exported: bool = False) -> Node:
    """A node holding a concrete NumPy array (C-contiguous, owned by lazynp).  Its engine
    var is made when a flush first reads it (most leaves, made for views of arrays computed
    at once, never meet the engine)."""
    n = Node(LEAF, (), None, value.shape, value.dtype)
    n.value = value
    n.state = DONE
    n.exported = exported
    if _shared.tape is not None:
        _shared.tape.leaf_made(n)
    return n


def install_tape(observer, paused: bool = False) -> None:
    """Let ``observer`` (an open autograd trace) watch the recorder: recorded and view nodes
    go on ``observer.nodes`` unless ``paused``; a write marks the version it replaces as
    read later (``exported``: never overwritten in place); ``observer.flushing``,
    ``observer.leaf_made``, ``observer.array_read`` (``shared.array_hook``) and
    ``observer.value_taken`` (``shared.value_hook``) are called."""
    _shared.tape = observer
    _shared.array_hook = observer.array_read
    _shared.value_hook = observer.value_taken
    pause_tape(paused)


def pause_tape(paused: bool) -> None:
    """Stop (``paused``) or resume putting recorded nodes on the open tape."""
    _shared.tape_paused = paused
    if _native.ext is not None:
        _native.ext.set_tape(_shared.tape.nodes, paused)    # (the C recorder keeps its own copy)


def remove_tape() -> None:
    """The trace is closed: nothing watches the recorder."""
    _shared.tape = _shared.array_hook = _shared.value_hook = None
    _shared.tape_paused = False
    if _native.ext is not None:
        _native.ext.set_tape(None, False)


def _taped(n: Node, op: Op, args: tuple) -> None:
    """``n``, just recorded, on the open tape (``_speedups.record`` does the same in C)."""
    if not _shared.tape_paused:
        _shared.tape.nodes.append(n)
    if op.kind == "write" and args and type(args[0]) is Node:
        # the old version may be read by the backward pass: never overwrite it in place
        root(args[0]).exported = True


def record(op: Op, args: tuple, params: dict | None, shape: tuple, dtype) -> Node:
    """Add a node to the pending graph (no work runs) and return it; or, when the execution
    policy says so (:mod:`lazynp.core.policy`), run ``op`` at once and return a computed node.
    An open autograd trace gets it on its tape (:func:`install_tape`)."""
    n = _record(op, args, params, shape, dtype)
    if _shared.tape is not None:
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
        if tree_structure(n, op, args, shape, True) > _MAX_TREE and not _shared.keep_graph:
            # a chain grown past a tree kernel's size: compute its pending arguments now
            # (each one tree kernel), and start a new tree on their values
            for a in args:
                if type(a) is Node and a.state == PENDING and a.tree is not None:
                    flush([a])
            tree_structure(n, op, args, shape, False)
            if n.site is not None:
                restart_site(n.site)
    else:
        if ext is not _DEFAULT_EXT:
            n.errstate = ext     # the user's np.errstate at the recording line applies when it runs
        for a in args:
            if type(a) is Node:
                a.use_count += 1
    if tree_only and (n.tree is None or lone_sites and
                      _prod(shape) < lone_sites.get(site_key(n.site), 0)
                      or fragment_sites and n.tree[_tree.TREE_SIZE] == 1 and
                      _prod(shape) < fragment_sites.get(site_key(n.site), 0)):
        done = _run_untreed(n)
        if done is not None:
            return done
    st = _counts
    st.pending_count += 1
    st.n_recorded += 1
    if st.pending_count >= st.max_pending:
        bound_flush()
    if op.raises_on_values:
        ws = _late_warnings._current            # (_late_warnings.state(), inlined)
        lst = _warnings.filters
        if lst is not ws.lst or len(lst) != ws.n or (lst[0] if lst else None) is not ws.first:
            ws = _warnings_state()
        site = n.site
        # (the policy's answer is False without asking when nothing can make it True: no
        # trap, default errstate, a caller without try/with blocks)
        if (ws.traps or n.errstate is not None or site is None or
                _protected.get(site[0]) != ()) and _policy.run_at_call(op, site, n.errstate, ws):
            run_at_call(n)
        else:
            n.warnings_state = ws
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
    if pending and not _compute_for_op_at_once(pending):
        return None
    for a in n.args:
        if type(a) is Node:
            a.use_count -= 1        # (counted when ``n`` was made)
    return run_eager(n.op, n.args, n.params, n.shape, n.dtype)


def _view_node_py(base: Node, offset: int, shape: tuple, strides: tuple, dtype) -> Node:
    """A view of ``base``'s buffer (never executed alone; realized by its consumers)."""
    n = Node(VIEW, (base,), {"offset": offset, "shape": shape, "strides": strides, "dtype": dtype},
             shape, dtype)
    base.use_count += 1
    if _shared.tape is not None and not _shared.tape_paused:
        _shared.tape.nodes.append(n)
    return n


view_node = _view_node_py
if _native.ext is not None:
    view_node = _native.ext.view_node      # (the same in C)


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
    if pending is not None and d == _NOW and not shared and len(pending) == 1 and \
            pending[0] is args[0] and _policy.closes_pending_work(op, size) and \
            _fusion.matvec_operands(op, args, shape, args[0].dtype, Node):
        return _RECORD      # (the fusion pass makes it its matrix's kernel's last step)
    if pending is not None and d == _NOW:
        done = _compute_for_op_at_once(pending) if op.kind == "elementwise" else \
            compute_now(pending)
        return _NOW if done else _RECORD
    return d


def _compute_for_op_at_once(pending: list) -> bool:
    """``compute_now(pending)`` for an elementwise op that runs at once: the trees it
    flushes are the short ends of a chain, not lines computed alone (trees.for_op_at_once)."""
    _for_op_at_once[0] += 1
    try:
        return compute_now(pending)
    finally:
        _for_op_at_once[0] -= 1


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


def run_eager(op: Op, args: tuple, params: dict | None, shape: tuple, dtype) -> Node:
    """Run ``op`` now with NumPy's reference implementation; a computed node (errors and
    warnings come from NumPy, here, under the caller's ``np.errstate``)."""
    vals = [value_of(a) if type(a) is Node else a for a in args]
    out = None
    if op.ufunc is not None and not params and _split.enabled:
        out = _split.call(op.ufunc, tuple(vals))     # large work on two threads, or None
    if out is not None:
        pass
    elif op.raises_on_values:
        # NumPy's warnings name the user's line, not this file (late_warnings.py)
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
            vals = [value_of(a) if type(a) is Node else a for a in args]
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
        _note_copy_on_write(buf)
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


def _configure_speedups(ext) -> None:
    """Hand the C recorder the objects it calls back (once, at import; every name
    ``configure`` reads is listed in :data:`lazynp._base.native.INTERFACE`)."""
    ext.configure(
        bound_flush=bound_flush, extobj_var=_extobj_var, default_ext=_DEFAULT_EXT,
        pkg=_PKG, tree_ids=_tree.structure_ids,
        tree_structure=_tree.structure, merge_inputs=_tree.merge_inputs, max_tree=_MAX_TREE,
        max_pending=_config.MAX_PENDING_NODES,
        flush=flush, restart_site=restart_site, run_untreed=_run_untreed, tree_into=tree_into,
        lone_sites=lone_sites, fragment_sites=fragment_sites, for_op_at_once=_for_op_at_once,
        run_eager=run_eager, run_now=run_now, value_for_eager=value_for_eager,
        protected_ranges=_policy.protected_ranges, errstate_traps=_policy.errstate_traps,
        errstate_ignores=_policy.errstate_ignores,
        run_at_call=run_at_call, warnings_state=_late_warnings.state,
        warnings_module=_late_warnings.warnings, log_default=_LOG_DEFAULT,
        caught=_caught, issue_caught=issue_caught)
    ext.set_keep_graph(_shared.keep_graph)


py_record = record          # the pure Python recorder (tests compare the C one against it)
if _native.ext is not None:
    _configure_speedups(_native.ext)
    record = _native.ext.record
