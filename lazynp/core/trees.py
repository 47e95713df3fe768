"""Tree kernels in the pending graph: which recorded elementwise nodes form a tree that one
cached kernel computes (:func:`tree_structure`, at recording), running such a tree when
its head is flushed or assigned into a buffer (:func:`flush_tree`, :func:`tree_into`), and
the user lines whose ops are better run at once (``lone_sites``, ``restarted_sites``).

The kernels themselves are :mod:`lazynp.kernels.tree`'s; a node's ``tree`` is its structure,
read through that module's ``FX_...`` field names.
"""
from __future__ import annotations

import math

import numpy as np

from ..kernels import tree as _tree
from ..kernels.tree import TREE_FLOATS, TREE_GENERATION, TREE_ID, TREE_INPUTS, TREE_INTS, TREE_SIZE
from ..ops.registry import Op
from . import late_warnings as _late_warnings, policy as _policy
from .nodes import DONE, PENDING, VIEW, Node, computed, live_pending_heads, value_of
from .state import STATS, counts as _counts, lock as _lock, lone_counts, lone_sites, \
    restarted_sites, shared as _shared

_MAX_TREE = _tree.MAX_TREE
_tree_ids = _tree.structure_ids
_warnings_state = _late_warnings.state
_prod = math.prod


def tree_structure(n: Node, op: Op, args: tuple, shape: tuple, count_uses: bool) -> int:
    """Set ``n.tree``, its tree-kernel structure (kernels/tree.py), when ``n`` and its pending
    arguments form a tree of at most ``MAX_TREE`` same-shape elementwise nodes; with
    ``count_uses`` also count the uses of its arguments.  Returns the tree's size (0 when
    ``n`` cannot be a tree kernel)."""
    key = [op]
    ins = kf = ki = ()
    size = 1
    gen = _counts.generation
    ok = True
    shared = False
    if len(args) == 2 and op.name == "power":
        # a scalar exponent 2 is NumPy's square (x * x); other powers (libm's pow) are left
        # to NumPy
        if type(args[1]) is Node or not _tree.squares(args[1], n.dtype):
            if count_uses:
                for a in args:
                    if type(a) is Node:
                        a.use_count += 1
            return 0
        key.append("sq")
        args = args[:1]
    for a in args:
        t = type(a)
        if t is Node:
            if count_uses:
                a.use_count += 1
            if not ok:
                continue
            if a.shape != shape and not (_tree.broadcasts(a.shape, shape) and computed(a)):
                ok = False      # (only a computed input may broadcast)
            elif a.state == PENDING and (a.op is not VIEW or not computed(a)):
                tree = a.tree
                if tree is None:
                    ok = False
                    continue
                if ins:
                    ins, remap = _tree.merge_inputs(ins, tree[TREE_INPUTS])
                    key.append(("t", tree[TREE_ID], remap))
                else:
                    key.append(tree[TREE_ID])
                    ins = tree[TREE_INPUTS]
                if a.use_count > 1:
                    shared = True       # (read elsewhere too: maybe twice in this tree)
                kf += tree[TREE_FLOATS]
                ki += tree[TREE_INTS]
                size += tree[TREE_SIZE]
                if tree[TREE_GENERATION] < gen:
                    gen = tree[TREE_GENERATION]
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
            n.tree = (sid, ins, kf, ki, size, gen)
    return size


def _tree_runnable(t: Node, tree) -> bool:
    """May pending ``t``, whose tree structure is ``tree``, run as a tree kernel now?  Not
    when the structure is stale or a transform keeps the graph, nor when the tree is too
    large (the fusion pass runs it on the engine's threads) or of a medium size with a libm
    math function in it (the fusion pass leaves those to NumPy: its bits)."""
    if tree is None or t.state != PENDING or _shared.keep_graph or not _shared.tree_flushes or \
            tree[TREE_GENERATION] != _counts.generation and not _tree_intact(t, tree):
        return False
    size = _prod(t.shape)
    return size < _policy.TREE_MAX_ELEMS and \
        (size < 4 * _shared.min_fused_work or tree[TREE_ID] not in _tree.with_libm)


def _tree_intact(t: Node, tree) -> bool:
    """Is every node pending ``t``'s tree inlines still pending?  Asked when the generation
    moved on since ``t`` was recorded: some node that pending trees may inline was computed
    meanwhile (its arguments dropped), but often in another tree (Horner's rule: the
    ``p`` chain is still whole after the ``dp`` tree that reads it ran)."""
    inlined = _tree.dag(t, tree[TREE_INPUTS])[0]
    return all(n.state == PENDING and n.tree is not None for n in inlined)


def flush_tree(t: Node) -> bool:
    """The small-flush fast path: compute ``t`` with its cached tree kernel (kernels/tree.py)
    in the calling thread.  False when the ordinary flush must run instead."""
    tree = t.tree
    if not _tree_runnable(t, tree):
        return False
    for x in tree[TREE_INPUTS]:
        if not computed(x):
            return False
    if not _run_tree(t, tree, None, None):
        return False
    if tree[TREE_SIZE] == 1 and t.site is not None:
        _count_lone(t.site)
    return True


def _run_tree(t: Node, tree, dest, vals) -> bool:
    """Run pending ``t``'s tree kernel (into ``dest``, or a new array; ``vals``: its inputs'
    values when known) with the nodes it must also write, and do the flush's bookkeeping."""
    with _lock:
        if t.state != PENDING or t.tree is None:
            return False            # (another thread's flush took it meanwhile)
        store = _tree_stores(t)
        if not _tree.run(t, tree, value_of, dest, store, vals):
            return False
        _tree_done(t, store)
        # (other pending nodes, outside this tree, still count towards the bound flush)
        _counts.pending_count = max(0, _counts.pending_count - tree[TREE_SIZE])
        STATS["flushes"] += 1
        STATS["nodes_executed"] += tree[TREE_SIZE]
    return True


def _tree_stores(t: Node) -> list:
    """The pending nodes inside ``t``'s tree that live arrays hold (a named intermediate:
    ``d = x - m; v = (d * d).mean()``): its kernel writes their values too."""
    heads = [h for h in live_pending_heads() if h is not t and h.use_count]
    if not heads:
        return []
    inside = {id(m) for m in _tree.walk(t, t.tree[TREE_INPUTS])}
    return [h for h in heads if id(h) in inside]


def _tree_done(t: Node, store: list) -> None:
    """Bookkeeping once ``t``'s tree kernel ran (and computed ``store`` too)."""
    if t.use_count or store:
        # pending readers of these recorded them as part of their own trees
        _counts.generation += 1
    for m in [t] + store:
        m.state = DONE
        m.args = ()
        m.tree = None


def restart_site(site) -> None:
    """``site``, a user line, made a tree grow past ``MAX_TREE`` (see ``restarted_sites``)."""
    if len(restarted_sites) > 4096:
        restarted_sites.clear()
    restarted_sites.add(site)


def _count_lone(site) -> None:
    """``site``'s op ran as a tree kernel of that op alone: the second time, it is lone."""
    if site in restarted_sites:
        return
    k = lone_counts.get(site, 0) + 1
    if k >= 2:
        lone_sites.add(site)
        lone_counts.pop(site, None)
    else:
        if len(lone_counts) > 4096:
            lone_counts.clear()
        lone_counts[site] = k


def tree_into(t: Node, dest: np.ndarray) -> bool:
    """Compute pending ``t`` (a tree kernel's head that nothing else reads, of ``dest``'s
    shape and dtype) straight into ``dest``, a region of a computed buffer being assigned
    (``B[1:-1] = (A[:-2] + A[2:]) / 2``: no temporary, no copy).  False when it cannot:
    the caller then computes ``t`` and assigns it.  The tree's inputs must not overlap
    ``dest`` (a kernel reading what it writes would differ from NumPy's temporary)."""
    tree = t.tree
    if t.use_count or not _tree_runnable(t, tree) or _warnings_state().traps:
        # (traps: a rejected kernel leaves ``dest`` half written, and NumPy's error must
        # then leave it untouched)
        return False
    vals = []
    for x in tree[TREE_INPUTS]:
        if not computed(x):
            return False
        v = value_of(x)
        vals.append(v)
        if np.may_share_memory(v, dest):
            return False
    base = dest if dest.base is None else dest.base
    copied = _copied_target[0] == id(base)
    _copied_target[0] = 0
    if not _run_tree(t, tree, dest, vals):
        return False
    if copied and tree[TREE_SIZE] == 1 and t.site is not None:
        # One op written into a buffer that had to be copied first (the op reads the
        # array it is assigned to: ``p[:] = np.minimum(p, q)``): the copy costs the pass
        # the kernel saves, and the tree's machinery (~20 us) is left; counted as a lone
        # op, the line runs at once from then on (160k elements: 116 -> 89 us a step,
        # NumPy's).  Without a copy (``B[1:-1] = A[:-2] + A[2:]``) writing in place pays.
        _count_lone(t.site)
    return True


#: ``id`` of the buffer the last copy-on-write made (recorder.writable_view), for tree_into
_copied_target = [0]


def note_copy_on_write(buf) -> None:
    """``buf`` is the copy a write into a computed array just made (its old version has
    pending readers)."""
    _copied_target[0] = id(buf)
