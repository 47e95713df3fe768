"""The execution policy: for every call, run it now on NumPy or record it.

Laziness is a means, not the goal: lazynp must never be slower than NumPy.  This module is
the one place that decides when work runs.  An operation is

* **recorded** (lazy) when its work is large enough for fusion and threads to pay
  (elementwise, reduction and write ops of at least :data:`EAGER_MAX_ELEMS` elements,
  counting the largest operand: it joins the graph of its pending inputs), and always
  while a transform records (``grad``, ``vjp``, ``jvp``, ``jit``,
  ``trace``, ``autograd.record()``: they need the graph), or under ``set_policy("lazy")``;
* **recorded into a tree kernel** (kernels/tree.py) when it is elementwise work from
  :data:`TREE_MIN_ELEMS` elements that joins one (:func:`decide` answers ``TREE``; the
  recorder runs it at once when it does not);
* **run at once** on NumPy otherwise: small work, and every operation that fusion cannot
  improve (matmul, linalg, sorting, creation...).  Pending inputs of such an op are
  computed first (one flush: a small op gains nothing from joining their graph).  Its result is a computed array, errors and warnings come from NumPy at the
  call, and where NumPy returns a scalar the result is NumPy's scalar.

The decision is :func:`decide` (for an op on graph nodes, :func:`decide_on_nodes`;
``graph.run_now`` gathers what it needs), a few comparisons of the work's size with the op's
bounds (:func:`op_bounds`).  The C fast paths (``lazynp._base._speedups``) hold no rule of
their own: they cache what :func:`_sync` hands them and compare sizes with it, namely
``record_all`` and the number of open transforms and scopes (nothing runs at once while
they record); :data:`EAGER_MAX_ELEMS` and :data:`SIZED_KINDS` (:func:`sized_ok`: the
eager calls, methods and dunders run at once below it); ``min(TREE_MIN_ELEMS,
EAGER_MAX_ELEMS)`` and :data:`EAGER_MAX_ELEMS` as the tree band of the elementwise dunders
and ufunc calls, whose ops are tree ops (their :func:`op_bounds`); :data:`TREE_MAX_ELEMS`
(a tree assigned into a region runs as one kernel below it); and, per op, the answers of
:func:`tree_op` and :func:`op_bounds` (the recorder's ``_run_now``: :func:`decide` on
computed arguments; shared or failed arguments and pending work outside the tree band
go to ``graph.run_now``).

One more rule keeps NumPy's errors and warnings where the user handles them: an op that can
raise or warn on its values (``Op.raises_on_values``) and would be recorded **runs at the
call** (:func:`run_at_call`) when the user's line calling it lies inside a ``try`` or
``with`` block (``except LinAlgError``, ``np.errstate``, ``warnings.catch_warnings``,
``pytest.raises``...; not while a transform records), or when the ``np.errstate`` in force
raises or calls back on an error, or a warnings filter makes RuntimeWarning an error.
"""
from __future__ import annotations

import contextlib
import dis
import os
import sys
from typing import Callable

import numpy as _np
from numpy._core.umath import _extobj_contextvar as _extobj_var

from .._base import native as _native

#: Kinds of op whose work fusion or threads can speed up: below the size bound they run
#: at once (when their inputs are computed), from it they are recorded.
SIZED_KINDS = frozenset(("elementwise", "reduction", "write"))

#: Elementwise/reduction/write work of fewer elements than this runs at once on NumPy.
#: Measured on the 2-core reference machine (benchmarks/policy_threshold.py, 2026-12-04):
#: recording a 5-op chain pays from about 2^19 elements, a stencil from 2^15, a softmax row
#: not up to 2^21 (geometric mean about 2^18.6); on 41 ordinary programs (dropin.py) 2^19
#: beat 2^16.  2026-12-05, after large temporaries stopped page-faulting (_malloc.py) and
#: large eager ufuncs use two threads (_split.py), NumPy-at-once got faster at large sizes:
#: policy_threshold.py's crossing moved to about 2^21.3 (the stencil pays from 2^20, the
#: chain and the softmax row not up to 2^21), but on dropin.py 2^19 still beats 2^21
#: (geometric mean 0.945x vs 0.910x at the 10x sizes, equal at the small ones): kept.
#: 2026-12-07, once policy_threshold.py compared what the bound chooses between (policy
#: ``auto`` on both sides, only the bound moved): the crossing measured 3.3M elements (wall
#: clock, two runs) and 2.6M (CPU clock), with 2^19 outside its factor-4 window in all three.
#: 10^6 is the smallest round size inside it; it keeps 1000x1000 work recorded.  At 10^6,
#: dropin.py (two alternating runs each): small sizes 1.240x/1.230x -> 1.266x/1.216x, 10x
#: sizes 1.578x/1.530x -> 1.640x/1.673x; on NPBench it changes one decision at S (2mm:
#: 0.89x -> 1.03x, medians of 3 runs) and one at M (conv2d: 0.98x -> 0.93x, within its
#: run-to-run spread of 0.88-1.13x).
EAGER_MAX_ELEMS = int(os.environ.get("LAZYNP_EAGER_MAX_ELEMS", "1000000"))

#: Elementwise ufunc work from this many elements (and below :data:`EAGER_MAX_ELEMS`) is
#: recorded when it joins a *tree kernel* (kernels/tree.py: a chain of same-shape
#: elementwise ops on computed arrays and views, one loop, computed in the calling thread
#: when read); an op that cannot join one runs at once.  Measured 2026-12-06 on the 2-core
#: machine (float64, NumPy's time / at once / as a tree, us): a 1-D stencil assigned to a
#: region 50/48/50 at 2^15, 122/97/82 at 2^16, 284/270/136 at 2^18; a 5-op chain then max
#: 80/68/67 at 2^15, 177/143/126 at 2^16; a 2-op chain then sum 27/23/45 at 2^15, 70/66/86
#: at 2^16, 88/84/85 at 2^17, 152/146/138 at 2^18.  dropin.py: 2^16 and 2^17 equal within
#: noise, but at 2^16 the backward pass of autodiff.py's MLP (256x256 activations, short
#: trees read at once by a matmul) ran 1.08-1.16x the hand-written gradient's time against
#: 1.05-1.07x at 2^17.  2026-12-07: with :data:`TREE_MIN_WORK` judging each tree, 2^13 made
#: NPBench's heat-3d 1.0x -> 3.1x NumPy's speed at preset M and jacobi-2d 1.2-1.4x -> 2.3x,
#: but lost where lazynp's at-once path already beats NumPy by its temporary elision:
#: dropin.py's channel flow at 130x130, 1.22-1.32x -> 0.65-0.83x; NPBench at S, three
#: alternating runs each, geometric mean 1.104x -> 1.089x.  Kept at 2^17: a tree's cost
#: must be weighed against that at-once path, not NumPy's (``LAZYNP_TREE_MIN_ELEMS=8192``
#: turns the lower bound on).
TREE_MIN_ELEMS = int(os.environ.get("LAZYNP_TREE_MIN_ELEMS", str(1 << 17)))

#: A tree kernel pays its fixed cost (recording, flush, the kernel's dispatch: ~10-20 us)
#: by the passes over memory it saves: NumPy writes and reads back a temporary per op but
#: the last (and copies the last into an assigned region).  A tree saving fewer element-
#: passes than this (its elements times its ops, minus one when its result is read rather
#: than assigned) makes the user lines of its ops run at once below the size from which it
#: would save enough, from its second such run on (core/trees.py, ``lone_sites``).
#: Measured 2026-12-07 on the 2-core machine once a tree's arguments were prepared in C
#: (float64, us, NumPy / at once / as a tree; benchmarks/tree_threshold.py): a 2-op chain
#: then sum at 65536 elements 41/37/46 (65k element-passes), at 131072 71/70/74 (131k);
#: a 5-op chain then max at 16384 21/21/26 (66k), at 32768 43/37/36 (131k), at 65536
#: 77/67/51 (262k); a 1-D 3-point stencil assigned at 32766 27/28/30 (98k), at 65534
#: 50/51/37 (197k); a 2-D 5-point stencil assigned at 15876 39/27/30 (79k), at 32041
#: 78/51/42 (160k); a 15-op 3-D stencil assigned at 12167 96/98/81 (182k).  The passes are
#: float64 ones: a tree of one-byte items (int8, bool) saves an eighth of that per element
#: (NumPy's loops on them are that much faster; dropin.py's game of life at 250x250 with
#: trees from 8192 elements, one 16-op int8/bool tree a step: 3.5x -> 1.8x NumPy's speed
#: before its passes were weighed by their bytes, 3.0-3.4x after).
TREE_MIN_WORK = int(os.environ.get("LAZYNP_TREE_MIN_WORK", str(1 << 17)))

#: Recorded work of fewer elements than this that forms a tree kernel runs as one (in the
#: calling thread); larger work goes to the fusion pass and the engine's threads.  Above
#: :data:`EAGER_MAX_ELEMS` trees still pay: no pass, no engine, a stencil's kernel writing
#: the assigned region itself (dropin.py at 10x, 2026-12-06: heat-3d 2.3x -> 3.8x, game of
#: life 1.8x -> 2.3x NumPy's speed with trees up to 2^21).
TREE_MAX_ELEMS = int(os.environ.get("LAZYNP_TREE_MAX_ELEMS", str(1 << 21)))

MODES = ("auto", "lazy")
_mode = os.environ.get("LAZYNP_POLICY", "auto").strip().lower() or "auto"
if _mode not in MODES:
    raise ValueError(f"LAZYNP_POLICY={_mode!r}: expected one of {MODES}")

#: > 0 while something must record every operation (transforms, lazy mode).  Read by the
#: recorder on every call: kept as a module global (and mirrored in C) for speed.
record_all = 1 if _mode == "lazy" else 0
_transforms = 0
_scopes = 0         # open ``policy(...)`` blocks
_c = _native.ext   # the C extension (None: pure Python), which caches the numbers


def _sync() -> None:
    global record_all
    record_all = (_mode == "lazy") + _transforms
    _bounds.clear()
    if _c is not None:
        _c.set_policy(record_all, EAGER_MAX_ELEMS, min(TREE_MIN_ELEMS, EAGER_MAX_ELEMS),
                      TREE_MAX_ELEMS, SIZED_KINDS, tree_op, op_bounds)
        _c.set_transforms(_transforms + _scopes)


def enter_transform() -> None:
    """A transform starts recording (``graph.keeping_graph``): record everything."""
    global _transforms
    _transforms += 1
    _sync()


def exit_transform() -> None:
    global _transforms
    _transforms -= 1
    _sync()


def get_policy() -> str:
    """The current policy: ``"auto"`` (run small work at once) or ``"lazy"``."""
    return _mode


def set_policy(mode: str) -> None:
    """Choose when work runs.

    Parameters
    ----------
    mode : {"auto", "lazy"}
        ``"auto"`` (the default): small work on computed arrays runs at once on NumPy,
        large or pending work is recorded and fused.  ``"lazy"``: every operation is
        recorded (lazynp's behaviour before the policy existed; useful to study graphs).
    """
    global _mode
    mode = str(mode).strip().lower()
    if mode not in MODES:
        raise ValueError(f"lazynp policy must be one of {MODES}, not {mode!r}")
    _mode = mode
    _sync()


@contextlib.contextmanager
def policy(mode: str):
    """Context manager form of :func:`set_policy`."""
    global _scopes
    old = _mode
    set_policy(mode)
    # a recording scope the user opened: like a transform, its with block does not make
    # ops run at the call (errstate and error-filter rules still apply: run_at_call)
    _scopes += 1
    _sync()
    try:
        yield
    finally:
        _scopes -= 1
        set_policy(old)


def set_eager_max_elems(n: int) -> None:
    """Change :data:`EAGER_MAX_ELEMS` (measurement scripts and tests)."""
    global EAGER_MAX_ELEMS
    EAGER_MAX_ELEMS = int(n)
    _sync()


def set_tree_min_elems(n: int) -> None:
    """Change :data:`TREE_MIN_ELEMS` (measurement scripts and tests)."""
    global TREE_MIN_ELEMS
    TREE_MIN_ELEMS = int(n)
    _sync()


def permuted(a: _np.ndarray) -> bool:
    """Whether NumPy array ``a``'s axes are out of memory order (a transposed view, an
    F-ordered array: a later axis of length > 1 has a larger stride than an earlier one;
    broadcast axes do not count)."""
    return permuted_layout(a.shape, a.strides)


def permuted_layout(shape: tuple, strides: tuple) -> bool:
    """:func:`permuted` for an array of this shape and these strides."""
    last = -1
    for n, s in zip(shape, strides):
        if n < 2 or s == 0:
            continue
        s = abs(s)
        if last >= 0 and s > last:
            return True
        last = s
    return False


def counted_size(a) -> int:
    """How many elements array ``a`` (NumPy or lazynp, or a graph node) counts for against
    the size bound: 0 for arrays of Python objects, whose work always runs at once on
    NumPy's object loops (fusion, kernels, pooled buffers and dtype probes do not take
    references; NumPy's object reductions return the elements' own type), and 0 for a
    computed NumPy value whose axes are out of memory order (:func:`permuted`): NumPy's
    result keeps that order and the next op reads it along memory (a CNN's
    ``conv.transpose(0, 3, 1, 2) + b`` then its max-pool), where a fused kernel writes C order
    and reads the input across cache lines (cnn_inference at 10x: 0.45x NumPy's speed)."""
    dt = a.dtype
    if dt.hasobject:
        return 0
    if type(a) is _np.ndarray and permuted(a):
        return 0
    n = 1
    for s in a.shape:
        n *= s
    return n


#: elementwise ops that run at once at any size (their pending inputs computed first)
AT_ONCE_OPS = frozenset(("copy",))

#: :func:`decide`'s answers
RECORD, NOW, TREE = 0, 1, 2

#: what an attempt to run a call at once answers when it declines (the call is recorded
#: instead): the eager fast paths (lazynp.array.operands, lazynp._numpy.eager) and the
#: device hook (lazynp.devices.dispatch: no device involved)
NOT_EAGER = type("NotEager", (), {"__repr__": lambda self: "NOT_EAGER"})()


#: a size no work reaches: the bound of a band that is empty
NEVER = 1 << 62
_bounds: dict = {}      # op -> op_bounds(op), for the current numbers (_sync clears it)


def op_bounds(op) -> tuple[int, int]:
    """:func:`decide`'s answers for ``op`` as two sizes ``(tree_from, record_from)``: work
    of fewer elements than ``tree_from`` runs at once (:data:`NOW`), from ``tree_from`` and
    below ``record_from`` it joins a tree kernel (:data:`TREE`), from ``record_from`` it is
    recorded (:data:`RECORD`).  Every op's ``tree_from`` is at least
    ``min(TREE_MIN_ELEMS, EAGER_MAX_ELEMS)``; a tree op's bounds are exactly that and
    :data:`EAGER_MAX_ELEMS` (the C fast paths of the elementwise dunders use these two
    numbers)."""
    hit = _bounds.get(op)
    if hit is None:
        if op.kind not in SIZED_KINDS or op.name in AT_ONCE_OPS:
            # (a copy runs at once at any size: ``A = np.asarray(A).copy()`` is then
            # written in place, so it must be materialized; recorded, it kept the work
            # after it waiting)
            hit = (NEVER, NEVER)
        elif tree_op(op):
            hit = (min(TREE_MIN_ELEMS, EAGER_MAX_ELEMS), EAGER_MAX_ELEMS)
        else:
            hit = (EAGER_MAX_ELEMS, EAGER_MAX_ELEMS)
        _bounds[op] = hit
    return hit


def decide(op, size: int) -> int:
    """For an op whose node arguments are computed (or pending) and whose largest operand
    or result has ``size`` elements: :data:`NOW` (run at once), :data:`RECORD`, or
    :data:`TREE` (record it if it joins a tree kernel, else run at once)."""
    tree_from, record_from = op_bounds(op)
    if size < tree_from:
        return NOW
    return TREE if size < record_from else RECORD


def decide_on_nodes(op, size: int, failed: bool, shared: bool, objects: bool,
                    permuted: Callable[[], bool]) -> int:
    """:func:`decide` for an op on graph nodes, from what the recorder saw of them
    (:func:`lazynp.core.graph.run_now`): an argument that ``failed`` keeps the op
    recorded (its error is raised where a value is read); one ``shared`` with the user
    (an array the user's NumPy code holds too) makes it run at once, as NumPy would write
    it; arrays of Python ``objects`` run on NumPy's object loops, at once
    (:func:`counted_size`); and work that would join a tree kernel runs at once when
    ``permuted()`` (a computed argument out of memory order: NumPy's result keeps that
    layout, :func:`counted_size`)."""
    if failed:
        return RECORD
    if shared:
        return NOW
    d = decide(op, 0 if objects else size)
    if d == TREE and permuted():
        return NOW
    return d


def closes_pending_work(op, size: int) -> bool:
    """Is a contraction ``op`` whose largest operand has ``size`` elements recorded when it
    can be the last step of its pending operand's fused kernel (a matrix-vector product of
    pending elementwise work: ``core/fusion.py``'s ``matvec_operands``), rather than run at
    once on that operand's computed value?  From :data:`EAGER_MAX_ELEMS` elements (the
    matrix is recorded work).  The kernel reads the matrix's inputs once; NumPy writes the
    matrix and reads it back in BLAS.  Measured 2026-12-08 on the 2-core machine, NPBench's
    gesummv (``alpha * A @ x + beta * B @ x``, float64, NumPy against lazynp, a call): at
    4000x4000 31 against 18-20 ms; at 2000x2000, whose matrices stay in cache, 3.4-4.8
    against 3.3-4.0 ms (the kernel, 1.4-1.5 ms a product, is slower than BLAS's product
    alone, 0.45 ms: its row sums do not vectorize)."""
    return op.name == "matmul" and size >= EAGER_MAX_ELEMS


def tree_op(op) -> bool:
    """Does medium work of ``op`` join tree kernels?  Elementwise ufuncs but those whose
    kernel form calls libm (exp, sin...): NumPy's math loops may give other bits.  (Powers
    do: the tree takes those by a scalar 2, squares, and leaves the others to NumPy.)"""
    return op.kind == "elementwise" and op.ufunc is not None and \
        (not op.calls_libm or op.name == "power")


def sized_ok(kind: str, size: int) -> bool:
    """May an op of ``kind`` whose largest operand or result has ``size`` elements run at
    once (its inputs being computed)?"""
    return kind not in SIZED_KINDS or size < EAGER_MAX_ELEMS


# --- errors and warnings at the call ----------------------------------------------------------

_protected: dict = {}         # code object -> offsets (start, end, start, end...) of try/with


def protected_ranges(code) -> tuple:
    """Byte offsets ``(start0, end0, start1, end1, ...)`` of the instructions of ``code``
    inside a ``try`` or ``with`` block (an except/finally body too): the ranges of its
    exception table (Python >= 3.11; before, none are known).  A generator's whole-body
    entry (3.12: StopIteration -> RuntimeError) is no user handler and is left out."""
    hit = _protected.get(code)
    if hit is not None:
        return hit
    ranges: list = []
    if sys.version_info >= (3, 11):
        bc = dis.Bytecode(code)
        entries = bc.exception_entries
        if entries:
            targets = {i.offset: i for i in bc}
            for e in entries:
                t = targets.get(e.target)
                if t is not None and t.opname == "CALL_INTRINSIC_1" and \
                        "STOPITERATION" in str(t.argrepr):
                    continue
                ranges += (e.start, e.end)
    if len(_protected) > 4096:     # (code made at run time, by exec: keep the cache bounded)
        _protected.clear()
    hit = _protected[code] = tuple(ranges)
    return hit


def in_handler_block(code, lasti: int) -> bool:
    """True when bytecode offset ``lasti`` of ``code`` lies inside a try/with block."""
    r = _protected.get(code)
    if r is None:
        r = protected_ranges(code)
    for i in range(0, len(r), 2):
        if r[i] <= lasti < r[i + 1]:
            return True
    return False


_errstates: dict = {}   # np.errstate object -> (traps, ignores all)


def _classify_errstate(ext) -> tuple:
    hit = _errstates.get(ext)
    if hit is None:
        token = _extobj_var.set(ext)
        try:
            modes = set(_np.geterr().values())
        finally:
            _extobj_var.reset(token)
        hit = (bool(modes - {"ignore", "warn"}), modes == {"ignore"})
        if len(_errstates) > 256:       # (each ``with np.errstate`` makes a new object)
            _errstates.clear()
        _errstates[ext] = hit
    return hit


def errstate_traps(ext) -> bool:
    """True when the ``np.errstate`` object ``ext`` makes an error raise, call a function or
    log (anything but ignore and warn): NumPy acts at the call, so lazynp runs there."""
    return _classify_errstate(ext)[0]


def errstate_ignores(ext) -> bool:
    """True when the ``np.errstate`` object ``ext`` ignores every floating-point error."""
    return _classify_errstate(ext)[1]


def run_at_call(op, site, ext, wstate) -> bool:
    """Must ``op``, about to be recorded at ``site`` (``(code, bytecode offset)`` of the
    user's line) under the errstate object ``ext`` (None: NumPy's default) and the warnings
    state ``wstate`` (``_late_warnings.WarningsState``), run at once?  True for an op that
    can raise or warn on values, called inside a try/with block, under an errstate that
    raises or a warnings filter that makes RuntimeWarning an error: its error or warning
    must reach the user's handler (or stop the program at the user's line)."""
    if not op.raises_on_values:
        return False
    if wstate.traps or (ext is not None and errstate_traps(ext)):
        return True
    if _transforms or _scopes or site is None or not in_handler_block(site[0], site[1]):
        # (a transform records its function's graph, and its own ops name the user's line
        # calling it: run when the transform's result is read, as before)
        return False
    # in a try/with block: nothing to see when only floating-point errors can arise and
    # they are ignored (``np.errstate(all="ignore")``, ``simplefilter("ignore")``): recorded
    return not (op.fp_errors_only and
                (wstate.ignores or (ext is not None and errstate_ignores(ext))))


_sync()
