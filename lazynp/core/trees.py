"""Tree kernels in the pending graph: which recorded elementwise nodes form a tree that one
cached kernel computes (:func:`tree_structure`, at recording), running such a tree when
its head is flushed or assigned into a buffer (:func:`flush_tree`, :func:`tree_into`), and
the user lines whose ops are better run at once (``lone_sites``, ``restarted_sites``).

The kernels themselves are :mod:`lazynp.kernels.tree`'s; a node's ``tree`` is its structure,
read through that module's ``FX_...`` field names.
"""
from __future__ import annotations

import math
import time

import numpy as np

from ..kernels import cpu as _cpu, tree as _tree
from ..kernels.tree import TREE_FLOATS, TREE_GENERATION, TREE_ID, TREE_INPUTS, TREE_INTS, TREE_SIZE
from ..ops.registry import Op
from . import late_warnings as _late_warnings, policy as _policy
from .nodes import DONE, PENDING, VIEW, Node, computed, live_pending_heads, value_of
from .state import STATS, counts as _counts, fragment_counts, fragment_sites, lock as _lock, \
    lone_counts, lone_sites, restarted_sites, shared as _shared, site_key

_MAX_TREE = _tree.MAX_TREE
_tree_ids = _tree.structure_ids
_warnings_state = _late_warnings.state
_prod = math.prod
_thread_time = time.thread_time


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
    fragment = for_op_at_once[0]
    short = _short_tree_sites(t, tree, fragment_counts if fragment else lone_counts)
    if not _run_tree(t, tree, None, None):
        return False
    if fragment:
        if short is not None or tree[TREE_SIZE] == 1 and t.site is not None and \
                not _policy.record_all:
            # (one op's fragment pays from TREE_MIN_WORK elements: its tree spared the pass
            # of a later op that ran at once)
            _count_lone(t.site, min(_work_bound(t, tree), _policy.TREE_MIN_WORK), short or (),
                        fragment_sites, fragment_counts)
    elif short is not None:
        _count_lone(t.site, _work_bound(t, tree), short)
    elif tree[TREE_SIZE] == 1 and t.site is not None:
        _count_lone(t.site, _ALWAYS)
    return True


#: [> 0 while an elementwise op that runs at once computes its pending arguments]: a tree
#: flushed then is a *fragment*, the short end of a chain cut by that op (run at once as a
#: lone line, or reading an array NumPy shares), not a line computed alone nor a statement
#: of too little work.  Its lines, when it does too little work, become fragment lines
#: (``fragment_sites``): below the bound their ops start no new tree but still join a
#: pending one.  (Made lone instead, they broke the same lines' long chains elsewhere:
#: NPBench runs each kernel on inputs NumPy shares and on its own, and heat-3d's 15-op
#: statement fell apart in the second after its fragments in the first.)
for_op_at_once = [0]


#: a lone site's bound when its op runs at once at every size (a tree of that op alone)
_ALWAYS = 1 << 62


def _short_tree_sites(t: Node, tree, counts: dict, assigned: bool = False):
    """None when ``t``'s tree (of more than one op) does enough work for its fixed cost, or
    has no user line; else the user lines of its ops when running it now makes its head's
    line lone (:func:`_count_lone`: its second such run), else ``()``.  All the ops of a
    short tree then run at once below the same size: marking the head alone would leave a
    shorter tree below it, itself short, and a chain would fall apart one op per call, each
    op marked lone by a fragment instead of by the chain it belongs to."""
    if tree[TREE_SIZE] == 1 or t.site is None or _policy.record_all or \
            not _too_little_work(t, tree, assigned):
        return None     # (while everything records, as under policy "lazy", lines count not)
    key = site_key(t.site)
    if key in restarted_sites or counts.get(key, 0) < 1:
        return ()
    return [n.site for n in _tree.walk(t, tree[TREE_INPUTS]) if n.site is not None]


def _too_little_work(t: Node, tree, assigned: bool = False) -> bool:
    """``t``'s tree saved less work than a tree kernel's fixed cost pays for: it has fewer
    elements than :func:`_work_bound`."""
    return _prod(t.shape) < _work_bound(t, tree, assigned)


def _saved_passes(tree, assigned: bool) -> int:
    return tree[TREE_SIZE] - (0 if assigned else 1)


def _work_bound(t: Node, tree, assigned: bool = False) -> int:
    """The elements from which a tree of ``tree``'s size and ``t``'s dtype pays (a tree of
    one op, not assigned, never does).  It pays its fixed cost by the passes over memory of
    NumPy's temporaries it does without (``policy.TREE_MIN_WORK``, in passes over float64
    elements), each of its elements weighed by its bytes (an int8 or bool pass moves an
    eighth of a float64 one, and NumPy's loops on them are that much faster): one per op
    but the last, whose result is a new array as NumPy's is, unless ``assigned`` into a
    region (NumPy's temporary and copy).  An element's bytes are the largest of the
    tree's inputs' and result's (a comparison of float64 arithmetic has a bool result but
    float64 temporaries)."""
    item = t.dtype.itemsize
    for x in tree[TREE_INPUTS]:
        if x.dtype.itemsize > item:
            item = x.dtype.itemsize
    passes = _saved_passes(tree, assigned) * item
    if not passes:
        return _ALWAYS
    return -(-_policy.TREE_MIN_WORK * 8 // passes)


def _run_tree(t: Node, tree, dest, vals) -> bool:
    """Run pending ``t``'s tree kernel (into ``dest``, or a new array; ``vals``: its inputs'
    values when known) with the nodes it must also write, and do the flush's bookkeeping."""
    with _lock:
        if t.state != PENDING or t.tree is None:
            return False            # (another thread's flush took it meanwhile)
        walked = _tree.dag(t, tree[TREE_INPUTS]) if tree[TREE_ID] in _tree.may_share else None
        store, walked = _tree_stores(t, walked)
        _cpu.forget_declined()
        done = _tree.run(t, tree, value_of, dest, store, vals, walked)
        if done is None:
            done = _run_ops_on_numpy(t, tree, dest, store)
        if not done:
            return False
        _tree_done(t, store)
        # (other pending nodes, outside this tree, still count towards the bound flush)
        _counts.pending_count = max(0, _counts.pending_count - tree[TREE_SIZE])
        STATS["flushes"] += 1
        STATS["nodes_executed"] += tree[TREE_SIZE]
    return True


def _run_ops_on_numpy(t: Node, tree, dest, store: list) -> bool:
    """While ``t``'s kernel is not ready: its tree's ops one by one on NumPy, here, each
    pending node once (into ``dest`` for the head when given); ``t`` and ``store`` get their
    values.  NumPy's own calls give NumPy's bits.  False, with nothing set, when an op
    raised a floating-point condition (the ordinary flush then runs it, and NumPy's warning
    comes at the recording line) or gave another dtype or shape than recorded.

    Without this the flush fell back to the fusion pass and the engine, about 1.7 ms for a
    15-op statement that NumPy runs in 0.1 ms (heat-3d's, NPBench at S): a medium tree's
    first calls, while its kernel compiles, cost many times NumPy's."""
    ins = tree[TREE_INPUTS]
    order = _tree.dag(t, ins)[0]
    values = {id(x): value_of(x) for x in ins}
    t0 = _thread_time()
    try:
        with np.errstate(all="raise"):
            for m in order:
                vals = [values[id(a)] if type(a) is Node else a for a in m.args]
                if m is t and dest is not None:
                    v = m.op.ufunc(*vals, out=dest)
                else:
                    v = m.op.ufunc(*vals)
                if type(v) is not np.ndarray or v.dtype != m.dtype or v.shape != m.shape:
                    return False
                values[id(m)] = v
    except (FloatingPointError, KeyError):
        return False
    finally:
        _cpu.charge_op_by_op(_thread_time() - t0)     # (the kernel's ski-rental rule)
    t.value = values[id(t)]
    for m in store:
        m.value = values[id(m)]
    STATS["tree_ops_on_numpy"] += len(order)
    return True


def _tree_stores(t: Node, walked) -> tuple:
    """The pending nodes inside ``t``'s tree that live arrays hold (a named intermediate:
    ``d = x - m; v = (d * d).mean()``): its kernel writes their values too.  With
    ``walked``, the tree's :func:`~lazynp.kernels.tree.dag` when known (else computed here
    if needed, and returned for the kernel's run: one walk a flush)."""
    heads = [h for h in live_pending_heads() if h is not t and h.use_count]
    if not heads:
        return [], walked
    if walked is None:
        walked = _tree.dag(t, t.tree[TREE_INPUTS])
    inside = {id(m) for m in walked[0]}
    return [h for h in heads if id(h) in inside], walked


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
    restarted_sites.add(site_key(site))


def _count_lone(site, below: int, others=(), sites: dict = lone_sites,
                counts: dict = lone_counts) -> None:
    """``site``'s op ran as the head of a tree kernel that did not pay (that op alone, or
    too little work): the second time, it is lone (runs at once).  ``below``: the number
    of elements from which its op pays as the head of such a tree (the site runs at once
    below it); ``others``: the lines of the tree's other ops, which become lone with it.
    (``sites``, ``counts``: ``fragment_sites`` and its counts for a fragment's lines.)"""
    site = site_key(site)
    if site in restarted_sites:
        return
    k = counts.get(site, 0) + 1
    if k >= 2:
        for line in [site, *map(site_key, others)]:
            sites[line] = max(below, sites.get(line, 0))
        counts.pop(site, None)
    else:
        if len(counts) > 4096:
            counts.clear()
        counts[site] = k


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
    short = _short_tree_sites(t, tree, lone_counts, True)
    if not _run_tree(t, tree, dest, vals):
        return False
    if t.site is not None and copied and tree[TREE_SIZE] == 1:
        # One op written into a buffer that had to be copied first (the op reads the
        # array it is assigned to: ``p[:] = np.minimum(p, q)``): the copy costs the pass
        # the kernel saves, and the tree's machinery (~20 us) is left; counted as a lone
        # op, the line runs at once from then on (160k elements: 116 -> 89 us a step,
        # NumPy's).  Without a copy (``B[1:-1] = A[:-2] + A[2:]``) writing in place pays,
        # when the tree does enough work (``_too_little_work``).
        _count_lone(t.site, _ALWAYS)
    elif short is not None:
        _count_lone(t.site, _work_bound(t, tree, True), short)
    elif t.site is not None and tree[TREE_SIZE] == 1 and _too_little_work(t, tree, True):
        _count_lone(t.site, _work_bound(t, tree, True))
    return True


#: ``id`` of the buffer the last copy-on-write made (recorder.writable_view), for tree_into
_copied_target = [0]


def note_copy_on_write(buf) -> None:
    """``buf`` is the copy a write into a computed array just made (its old version has
    pending readers)."""
    _copied_target[0] = id(buf)
