"""The state that the recorder, the tree kernels and the executor share.

Each part of the pending graph (:mod:`.nodes`, :mod:`.recorder`, :mod:`.trees`,
:mod:`.executor`) reads and writes this module's objects instead of another part's
globals.  None of them is ever rebound: a part imports them by name and sees every change.

* :data:`STATS`: what ran, for ``lazynp.stats``;
* :data:`counts`: the recorder's counters (the C recorder's own object when it is in use);
* :data:`pending_vars`: weakrefs to Vars that got a pending head since the last flush;
* :data:`shared`: the mutable settings and hooks (``keep_graph``, the autograd tape...);
* :data:`lone_sites`, :data:`restarted_sites`: the tree kernels' bookkeeping of user lines;
* :data:`lock`, :data:`book_lock` and the fork hooks that hold them.
"""
from __future__ import annotations

import threading

from .._base import config as _config, native as _native

STATS = {"ops_eager": 0, "flushes": 0, "nodes_executed": 0, "bound_flushes": 0,
         "inplace_writes": 0, "copy_on_write": 0, "tree_ops_on_numpy": 0}


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


#: the recorder's counters: the C recorder's object when the extension is in use
counts = _native.ext.state if _native.ext is not None else RecordState()
#: weakrefs to Vars that got a pending head since the last flush (the C Var appends to its
#: own list, handed out here in its place)
pending_vars: list = _native.ext.pending_vars if _native.ext is not None else []


class GraphState:
    """The mutable settings and hooks that the parts of the pending graph read (one
    instance: :data:`shared`)."""

    __slots__ = ("keep_graph", "tape", "tape_paused", "array_hook", "value_hook",
                 "tree_flushes", "min_fused_work", "min_kernel_work")

    def __init__(self):
        #: While > 0 (autodiff tapes, tracing), computed nodes keep their args and params so
        #: the recorded graph can be walked backwards after a flush.  Set through
        #: :class:`lazynp.core.recorder.keeping_graph` (the C recorder keeps a copy).
        self.keep_graph = 0
        #: the open autograd trace watching the recorder
        #: (:func:`lazynp.core.recorder.install_tape`), or None.  Its ``nodes`` list gets
        #: every node recorded and every view node (unless ``tape_paused``); it is told
        #: ``flushing(targets)`` before a flush and ``leaf_made(node)`` after a leaf is made.
        self.tape = None
        self.tape_paused = False
        #: set by an open autograd trace: called with an array handed to NumPy (``__array__``)
        self.array_hook = None
        #: set by an open autograd trace: called with an array, a name and the Python value
        #: that ``float()``/``complex()``/``item()``/``tolist()`` took out of it
        self.value_hook = None
        #: flushes of one tree kernel's head run it in the calling thread (tests of the
        #: fusion pass turn this off)
        self.tree_flushes = True
        #: below ``4 * min_fused_work`` elements a flush runs no fusion pass (a NumPy call is
        #: cheaper than the pass and the kernel launch it would replace)
        self.min_fused_work = 2048
        #: a fused group runs as a kernel from this much work (elements x nodes); below it
        #: its nodes run one by one on NumPy (from C): measured for 4-op groups, 16k
        #: elements: 64 us as a kernel, 60 us one by one; 32k elements: 177 vs 276 us
        self.min_kernel_work = 65536


shared = GraphState()

#: The dicts below key a user line ``(code, offset)`` by :func:`site_key`.
#: user lines whose op of medium size headed a tree kernel that did not
#: pay more than once (a tree of that op alone: what read it next was no elementwise op,
#: nothing fused with it; or a tree of too little work, ``policy.TREE_MIN_WORK``) -> the
#: number of elements below which their op runs at once from then on
lone_sites: dict = {}
#: user lines seen once so far as such a lone tree kernel: line -> count
lone_counts: dict = {}
#: user lines whose ops made trees of too little work cut short by an op run at once more
#: than once (``1 + a`` read by ``b + shared_input``: a fragment, core/trees.py) -> the
#: number of elements below which their op starts no new tree (it still joins a pending
#: one: elsewhere the same line may be inside a long chain)
fragment_sites: dict = {}
fragment_counts: dict = {}
#: user lines whose op made a tree grow past ``MAX_TREE`` (a long chain: the tree restarted
#: there).  The last tree of such a chain may be that op alone (a loop's last step, read at
#: the end): that does not make the line lone.
restarted_sites: set = set()
#: ``id(code)`` -> code, for each code object a key above names: held, so that no other code
#: object takes its address (its key) while the key is in use
site_codes: dict = {}


def site_key(site):
    """The key of user line ``site`` (``(code, offset)``, or None) in the dicts above:
    ``(id(code), offset)``.  A code object hashes its contents at every lookup (0.45 us for
    dropin.py's 40-line channel flow function, looked up twice by each medium op's tree
    question once lines are lone); an id hashes at once."""
    if site is None:
        return None
    code = site[0]
    k = id(code)
    if k not in site_codes:
        if len(site_codes) >= 16384:
            forget_sites()
        site_codes[k] = code
    return (k, site[1])


def forget_sites() -> None:
    """Forget every user line's tree bookkeeping (and the code objects its keys hold)."""
    for d in (lone_sites, lone_counts, fragment_sites, fragment_counts, restarted_sites,
              site_codes):
        d.clear()

#: held while a flush plans and hands its work to the engine (and while a tree kernel runs)
lock = threading.RLock()
#: use_count/readers_left bookkeeping from engine worker threads
book_lock = threading.Lock()


def fork_prepare_recorder() -> bool:
    """Before ``os.fork()``: hold the recorder's lock, so no flush is half scheduled in
    the child (see :mod:`lazynp.core.lifecycle`)."""
    lock.acquire()
    return True


def fork_done_recorder(child: bool) -> None:
    lock.release()


def fork_prepare_executor() -> bool:
    """Before ``os.fork()``, once the engine is idle: hold the executor's bookkeeping lock."""
    book_lock.acquire()
    return True


def fork_done_executor(child: bool) -> None:
    book_lock.release()
