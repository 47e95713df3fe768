"""Large elementwise work run at once, on two threads.

NumPy runs a ufunc on one core.  An elementwise ufunc that the execution policy runs at once
(lazynp.core.policy: an input the caller shares, or work that cannot wait) on a large array is
cut in two halves of its flat range: a helper thread computes one, the calling thread the
other (NumPy releases the GIL inside its loops).  The result is NumPy's, bit for bit: each
element goes through the same loop, and the cut falls on a multiple of 64 elements so every
element meets the same vector or tail code as in one call.

Floating-point errors: both halves run under an ``np.errstate`` that only notes them; when
either half noted one (or raised), the halves are dropped and the caller makes NumPy's own
call under the user's errstate, so its warnings and errors are NumPy's (once, at the call).

Only plain calls are split: one or two operands, NumPy arrays all of one shape, C-ordered,
aligned and in native byte order, or scalars; one output; a size from :data:`SPLIT_MIN`
(:data:`SPLIT_MIN_COSTLY` for transcendental ufuncs, whose loops are slow enough to pay
sooner).  Anything else returns None and runs as NumPy runs it.  On a single-core machine
nothing is split.  ``LAZYNP_SPLIT=0`` turns it off.
"""
from __future__ import annotations

import os
import threading
import time
from typing import Any, Callable, NamedTuple

import numpy as np

from .cpus import Apart, allowed_cpus

#: Elements from which a cheap elementwise ufunc (add, multiply...) is split.  Measured on the
#: 2-core reference machine where it matters, on an operand the previous op just wrote (in
#: the caller's cache, not the helper's): ``t * 0.3`` at 2^18.6 elements 117 us on one thread,
#: 164 us split; at 2^20 670 -> 570 us; at 2^21 1.83 -> 1.27 ms.  (In a tight loop on the same
#: arrays the split paid from 2^18: that is not how programs use it; at 2^18 it made the
#: drop-in stencils 20-25% slower.)
SPLIT_MIN = int(os.environ.get("LAZYNP_SPLIT_MIN", str(1 << 20)))
#: The same for transcendental ufuncs.  2026-12-05 (a tight loop of ``exp`` calls): at 2^15
#: elements 165 us on one thread, 115 us split; at 2^16 327 -> 210 us.  2026-12-06, with 0.3 ms
#: of other work before each call as in a program (waking the helper's CPU then costs
#: 50-100 us on this 2-CPU virtual machine): at 2^16 330 -> 438 us, 2^17 656 -> 745 us,
#: 2^18 1347 -> 1364 us, 2^19 4108 -> 2737 us; logistic regression on 50,000 rows (an
#: ``exp`` of 50,000 elements per step) ran 0.83-0.86x NumPy's speed with splits from 2^15,
#: 0.98-1.00x from 2^17.
SPLIT_MIN_COSTLY = int(os.environ.get("LAZYNP_SPLIT_MIN_COSTLY", str(1 << 18)))
COSTLY = frozenset(("exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sin", "cos",
                    "tan", "arcsin", "arccos", "arctan", "arctan2", "sinh", "cosh", "tanh",
                    "arcsinh", "arccosh", "arctanh", "power", "float_power", "hypot", "cbrt",
                    "logaddexp", "logaddexp2", "deg2rad", "rad2deg"))
_ALIGN = 64          # elements: the cut falls on a multiple of this

enabled = os.environ.get("LAZYNP_SPLIT", "1").strip() != "0" and len(allowed_cpus()) > 1

#: Seconds after a BLAS call that OpenBLAS runs on several threads during which nothing is
#: split.  OpenBLAS's workers do not sleep when a call ends: they spin for its thread
#: timeout, 2^28 cycles by default (about 0.1 s at 2.5-3 GHz), so on two CPUs a split right
#: after a product runs three busy threads on two CPUs.  Measured 2026-12-07 on the 2-core
#: machine, gesummv at NPBench's S (``alpha * A @ x + beta * B @ x``, 2000x2000): the
#: split ``beta * B`` took 3.2 ms against NumPy's 1.8-2.1 ms on one thread, and the call ran
#: 6-23 ms (NumPy 7-9 ms).  0 turns the rule off.
BLAS_SPIN_SECONDS = float(os.environ.get("LAZYNP_BLAS_SPIN_SECONDS", "0.1"))
#: Elements of a product's larger operand from which OpenBLAS may use its threads (its
#: gemv threads from 2304 x GEMM_MULTITHREAD_THRESHOLD = 9216 matrix elements; gemm later):
#: smaller products leave its workers asleep.
BLAS_THREADED_MIN = 9216
#: NumPy's functions that run products on BLAS
BLAS_FUNCTIONS = frozenset((np.matmul, np.dot, np.vdot, np.inner, np.tensordot))
_blas_until = 0.0


def note_blas() -> None:
    """A product large enough for OpenBLAS's threads just ran (``a @ b``, ``np.dot``...):
    no split until its workers are asleep again (:data:`BLAS_SPIN_SECONDS`)."""
    global _blas_until
    _blas_until = time.monotonic() + BLAS_SPIN_SECONDS


def note_blas_for(args) -> None:
    """:func:`note_blas` when an operand in ``args`` (a product's NumPy arguments) is large
    enough for OpenBLAS's threads."""
    for a in args:
        if type(a) is np.ndarray and a.size >= BLAS_THREADED_MIN:
            note_blas()
            return


class _Noted:
    """An ``np.errstate(call=...)`` target that remembers that an error happened."""

    __slots__ = ("hit",)

    def __init__(self):
        self.hit = False

    def write(self, *args):       # (errstate "log" mode API; unused)
        self.hit = True

    def __call__(self, err, flag):
        self.hit = True


class _Helper:
    """One daemon thread that runs a half when asked (two plain locks: no Condition)."""

    def __init__(self):
        self._go = threading.Lock()
        self._go.acquire()
        self._done = threading.Lock()
        self._done.acquire()
        self._job = None
        self.noted = _Noted()
        self._error = None
        self.result = None
        self._apart = Apart()         # (the helper runs on another CPU than its caller)
        self._thread = threading.Thread(target=self._loop, name="lazynp-split", daemon=True)
        self._thread.start()

    def _loop(self):
        self._apart.bind(threading.get_native_id())
        with np.errstate(all="call", call=self.noted):
            while True:
                self._go.acquire()
                fn, args, kwargs = self._job
                self._job = None
                try:
                    self.result = fn(*args, **kwargs)
                except BaseException as e:         # noqa: BLE001 (the caller reruns)
                    self._error = e
                # (this frame's names would keep the job's arrays, the operands and the
                # output of a split, alive until the next split: clipping at L held
                # 2 GB arrays that way)
                fn = args = kwargs = None
                self._done.release()

    def start(self, fn, args, kwargs):
        """Run ``fn(*args, **kwargs)`` on the helper thread (its value: ``result``)."""
        self.noted.hit = False
        self._error = None
        self.result = None
        self._job = (fn, args, kwargs)
        self._apart.handoff()
        self._go.release()

    def finish(self):
        """Wait for the half; True when it ran without an error or a floating-point flag."""
        self._done.acquire()
        failed = self._error is not None
        self._error = None
        return not (failed or self.noted.hit)


_helper = None
_lock = threading.Lock()       # one split at a time (calls from several threads)
_mine = _Noted()
_dtypes: dict = {}


def _result_dtype(uf, keys):
    dt = _dtypes.get((uf, keys))
    if dt is None:
        dt = uf.resolve_dtypes(keys + (None,))[-1]
        if len(_dtypes) > 4096:
            _dtypes.clear()
        _dtypes[(uf, keys)] = dt
    return dt


def _loop_keys(args, shape):
    """``(keys, shape)``: what the operands contribute to the loop's dtype resolution, and
    the shape of the array operands, all of one ``shape`` (None: the first array's) and
    splittable; None when an operand is not one to split."""
    keys = []
    for a in args:
        t = type(a)
        if t is np.ndarray:
            if not _splittable(a) or (shape is not None and a.shape != shape):
                return None
            shape = a.shape
            keys.append(a.dtype)
        elif t is float or t is int or t is complex:
            keys.append(t)
        elif isinstance(a, np.generic):
            keys.append(a.dtype)
        else:
            return None
    return tuple(keys), shape


def _splittable(a) -> bool:
    f = a.flags
    return f.c_contiguous and f.aligned and a.dtype.isnative and a.dtype.kind in "biufc"


def call(uf: np.ufunc, args: tuple):
    """NumPy's ``uf(*args)`` computed on two threads, or None when the call is not one to
    split or a half met an error or a floating-point flag: the caller then makes NumPy's call
    (from C: NumPy's warnings name the user's line)."""
    if not enabled or uf.nout != 1 or len(args) != uf.nin:
        return None
    for a in args:             # (small work leaves first: this is on NumPy-at-once paths)
        if type(a) is np.ndarray and a.size >= SPLIT_MIN_COSTLY:
            break
    else:
        return None
    loop = _loop_keys(args, None)
    if loop is None or loop[1] is None:
        return None
    keys, shape = loop
    size = 1
    for s in shape:
        size *= s
    if size < (SPLIT_MIN_COSTLY if uf.__name__ in COSTLY else SPLIT_MIN):
        return None
    try:
        dt = _result_dtype(uf, keys)
    except (TypeError, ValueError):          # (no loop: NumPy's call raises its own error)
        return None
    out = np.empty(shape, dt)
    # an error or a floating-point flag in a half: None, and the caller makes NumPy's own
    # call (its warning or error then comes at the user's line, as NumPy's does)
    return out if _halves(uf, args, out, size) else None


def _halves(uf: np.ufunc, args: tuple, out: np.ndarray, size: int) -> bool:
    """``uf(*args, out=out)`` in two halves (``out`` C-contiguous, of ``size`` elements);
    True when both ran clean (no error, no floating-point flag)."""
    cut = (size // 2) // _ALIGN * _ALIGN
    flat_out = out.reshape(-1)
    lo = tuple(a.reshape(-1)[:cut] if type(a) is np.ndarray else a for a in args)
    hi = tuple(a.reshape(-1)[cut:] if type(a) is np.ndarray else a for a in args)
    return _both(uf, lo, {"out": flat_out[:cut]}, hi, {"out": flat_out[cut:]}) is not None


def _both(fn, lo: tuple, lo_kw: dict, hi: tuple, hi_kw: dict):
    """``fn(*hi, **hi_kw)`` on the helper thread while this one runs ``fn(*lo, **lo_kw)``:
    the two results, or None when either half raised or met a floating-point flag (the
    caller then makes NumPy's own call, for its errors), or when another thread is
    splitting (one split at a time)."""
    if _blas_until and time.monotonic() < _blas_until:
        return None         # (OpenBLAS's workers still spin: one thread is faster)
    if not _lock.acquire(blocking=False):
        return None
    try:
        return _both_locked(fn, lo, lo_kw, hi, hi_kw)
    finally:
        _lock.release()


def _both_locked(fn, lo: tuple, lo_kw: dict, hi: tuple, hi_kw: dict):
    global _helper
    if _helper is None:
        _helper = _Helper()
    _helper.start(fn, hi, hi_kw)
    clean = False
    mine = None
    try:
        _mine.hit = False
        with np.errstate(all="call", call=_mine):
            mine = fn(*lo, **lo_kw)
        clean = not _mine.hit
    except Exception:                    # noqa: BLE001 (NumPy's own call raises it)
        clean = False
    finally:
        clean = _helper.finish() and clean
    theirs = _helper.result
    _helper.result = None
    return (mine, theirs) if clean else None


def into(uf: np.ufunc, args: tuple, out: np.ndarray) -> None:
    """``uf(*args, out=out)``, on two threads when the call is one :func:`call` would split
    and ``out`` (C-ordered, of the operands' shape and the loop's result dtype) is an operand
    itself or shares no memory with one; a half that met an error or a floating-point flag makes the
    whole call again on one thread, so warnings and errors are NumPy's.  (A compiled plan's
    steps, whose output buffers are allocated once.)"""
    size = out.size
    if enabled and size >= SPLIT_MIN_COSTLY and uf.nout == 1 and len(args) == uf.nin and \
            size >= (SPLIT_MIN_COSTLY if uf.__name__ in COSTLY else SPLIT_MIN) and \
            _splittable(out):
        inplace = _plain_operands(uf, args, out)
        if inplace is not None:
            # (an operand that is ``out`` itself is kept for the one-thread call)
            kept = tuple(a.copy() if i in inplace else a for i, a in enumerate(args))
            if _halves(uf, args, out, size):
                return
            args = kept
    uf(*args, out=out)


def _plain_operands(uf, args, out):
    """None when ``uf(*args, out=out)`` is not one to split (operands of ``out``'s shape,
    ``out`` of the loop's result dtype), else the positions of the operands that are
    ``out`` itself (in place, elementwise: each half reads only what it writes; any other
    overlap is not split)."""
    loop = _loop_keys(args, out.shape)
    if loop is None:
        return None
    same = []
    for i, a in enumerate(args):
        if type(a) is np.ndarray and np.may_share_memory(a, out):
            if a.dtype != out.dtype or \
                    a.__array_interface__["data"][0] != out.__array_interface__["data"][0]:
                return None
            same.append(i)
    try:
        return same if _result_dtype(uf, loop[0]) == out.dtype else None
    except (TypeError, ValueError):
        return None


# --- products without a sum, into a given output ------------------------------------------
#
# ``einsum("...ik,...kj->...ij", a, b, out=out)`` where ``k`` has length 1 is a stack of outer
# products (vmap's per-example weight gradient of a dense layer: 411 MB for a 784x256 layer
# and 256 examples, bound by memory writes).  When every operand's ellipsis covers as many
# axes as the output's, their first axes are the output's first axis: each chunk of it is
# computed from that chunk of the operands alone.  Each output element is a product of one
# element per operand (no letter summed over more than one term), so the chunks give the bits
# of one call, whatever the loop NumPy picks for each.


#: Chunks of the first axis that the two threads take in turn (a thread that gets the CPU
#: late, on a loaded machine, takes fewer of them instead of holding up the other with a
#: whole half).
EINSUM_CHUNKS = 16


def _einsum_rows(args: tuple, kwargs: dict, out: np.ndarray) -> bool:
    """True when ``np.einsum(*args, out=out, **kwargs)`` may be cut along the first axis."""
    subs = args[0] if args else None
    if type(subs) is not str or kwargs or out.ndim < 1 or out.shape[0] < 2:
        return False
    subs = subs.replace(" ", "")
    if "->" not in subs:
        return False
    ins, res = subs.split("->")
    terms = ins.split(",")
    ops = args[1:]
    if len(terms) != len(ops) or not res.startswith("..."):
        return False
    lead = out.ndim - (len(res) - 3)
    if lead < 1:
        return False
    sizes: dict = {}
    for t, a in zip(terms, ops):
        if type(a) is not np.ndarray or not t.startswith("...") or "." in t[3:] or \
                a.ndim - (len(t) - 3) != lead or a.shape[0] != out.shape[0] or \
                np.may_share_memory(a, out):
            return False
        for c, n in zip(t[3:], a.shape[lead:]):
            sizes[c] = max(sizes.get(c, 1), n)
    return "." not in res[3:] and all(n == 1 for c, n in sizes.items() if c not in res)


def einsum_into(args: tuple, kwargs: dict, out: np.ndarray, rows=None) -> None:
    """``np.einsum(*args, out=out, **kwargs)``: on two threads, which take chunks of the
    output's first axis in turn (:data:`EINSUM_CHUNKS`), when it is a product without a sum
    (``"...ik,...kj->...ij"`` with ``k`` of length 1: a stack of outer products) of operands
    whose first axis is the output's, none sharing memory with ``out``, of at least
    :data:`SPLIT_MIN` elements; else as one call.  A thread that raised or met a
    floating-point flag makes the whole call again on this thread, so NumPy's errors and
    warnings come as NumPy gives them.  ``rows``: a function ``rows(lo, hi)`` that writes
    rows ``lo:hi`` of the same result (a compiled kernel), run in place of NumPy's einsum."""
    if enabled and out.size >= SPLIT_MIN and _einsum_rows(args, kwargs, out):
        n = out.shape[0]
        step = -(-n // min(n, EINSUM_CHUNKS))
        starts = iter(range(0, n, step))    # (shared: each start is taken by one thread)
        subs, ops = args[0], args[1:]

        def take_chunks():
            for i in starts:
                if rows is not None:
                    rows(i, min(i + step, n))
                else:
                    np.einsum(subs, *[a[i:i + step] for a in ops], out=out[i:i + step])
        if _both(take_chunks, (), {}, (), {}) is not None:
            return
    if rows is not None:
        try:
            rows(0, out.shape[0])
            return
        except Exception:          # noqa: BLE001 (NumPy's own call raises it)
            pass
    np.einsum(*args, out=out, **kwargs)


# --- functions of independent rows -----------------------------------------------------------
#
# Sorting, quantiles, cumulative ops and reductions along an axis other than the first
# compute each index of the first axis from that slice of the input alone (each row sorted,
# each series' percentile, each row's running sum or mean: the same loop, the same bits
# whatever the other rows are).  On two threads each takes half the rows; the results are
# put together along the output's axis that the input's first axis became.

#: Elements from which sorting and quantiles split (their loops cost ~10-40 ns an element:
#: ``np.percentile`` of 1200 x 2000 along axis 1 41 -> 21 ms on two threads, ``np.sort``
#: 19 -> 11 ms); the cumulative ops (memory-bound) split from :data:`SPLIT_MIN`
#: (``np.cumsum`` of 1200 x 2000 along axis 1 9.1 -> 4.6 ms).
SPLIT_MIN_ROWS = int(os.environ.get("LAZYNP_SPLIT_MIN_ROWS", str(1 << 16)))


def _axis_arg(args: tuple, kwargs: dict, pos: int, default):
    if len(args) > pos:
        return args[pos]
    return kwargs.get("axis", default)


def _sort_rule(args: tuple, kwargs: dict):
    """``sort``/``argsort(a, axis=-1, kind=None, order=None, *, stable=None)``: rows stay
    in place (output axis 0)."""
    if len(args) > 3 or kwargs.get("order") is not None or \
            len(args) == 3 and args[2] is not None:
        return None
    return _axis_arg(args, kwargs, 1, -1), 0, SPLIT_MIN_ROWS


def _quantile_rule(args: tuple, kwargs: dict):
    """``percentile``/``quantile(a, q, axis=None, out=None, overwrite_input=False,
    method="linear", keepdims=False, *, weights=None)``: the input's rows are the output's
    axis after ``q``'s axes."""
    if len(args) < 2 or len(args) > 3 or any(kwargs.get(k) is not None for k in
                                             ("out", "weights", "interpolation")):
        return None
    return _axis_arg(args, kwargs, 2, None), np.ndim(args[1]), SPLIT_MIN_ROWS


def _scan_rule(args: tuple, kwargs: dict):
    """``cumsum``/``cumprod(a, axis=None, dtype=None, out=None)`` and
    ``ufunc.accumulate(a, axis=0, dtype=None, out=None)``: rows stay in place."""
    if len(args) > 2 or kwargs.get("out") is not None:
        return None
    return _axis_arg(args, kwargs, 1, None), 0, SPLIT_MIN


def _reduce_rule(args: tuple, kwargs: dict):
    """``sum``/``mean``/``std``/``max``/``argmax``/``median``...``(a, axis=None, ...)``
    along one axis (not the first): each row reduced alone, rows stay in place (memory-bound:
    from :data:`SPLIT_MIN`)."""
    if len(args) > 2 or kwargs.get("out") is not None or kwargs.get("where", True) is not True:
        return None
    return _axis_arg(args, kwargs, 1, None), 0, SPLIT_MIN


_ROW_RULES = {np.sort: _sort_rule, np.argsort: _sort_rule, np.percentile: _quantile_rule,
              np.quantile: _quantile_rule, np.cumsum: _scan_rule, np.cumprod: _scan_rule}
_ROW_RULES.update((fn, _reduce_rule) for fn in (
    np.sum, np.prod, np.mean, np.std, np.var, np.max, np.min, np.argmax, np.argmin, np.all,
    np.any, np.ptp, np.median, np.count_nonzero))


def _row_rule(fn):
    rule = _ROW_RULES.get(fn)
    if rule is None and getattr(fn, "__name__", None) == "accumulate" and \
            type(getattr(fn, "__self__", None)) is np.ufunc:
        return _scan_rule       # (``np.maximum.accumulate``: a new bound method each time)
    return rule


def run(fn, args: tuple, kwargs: dict):
    """NumPy's ``fn(*args, **kwargs)``: on two threads, half the rows each, when ``fn`` is
    a function of independent rows (sort, argsort, percentile, quantile, cumsum, cumprod,
    ``ufunc.accumulate``, reductions such as sum, mean, std, max, argmax, median) on a large
    array along another axis than the first, else as one call.  A half that raised or met a floating-point flag makes the whole call again on
    this thread, so NumPy's errors and warnings come as NumPy gives them."""
    if enabled and args and type(args[0]) is np.ndarray:
        args = tuple(args)
        r = None
        if args[0].ndim >= 2:
            rule = _row_rule(fn)
            if rule is not None:
                r = _run_rows(fn, rule, args, kwargs)
        elif fn is np.argsort:
            r = _stable_argsort(args, kwargs)
        if r is not None:
            return r
    return fn(*args, **kwargs)


#: Elements from which a 1-D stable argsort sorts its halves on two threads and merges
#: them (1.5M int64 keys: 112 -> 71 ms)
SPLIT_MIN_ARGSORT = int(os.environ.get("LAZYNP_SPLIT_MIN_ARGSORT", str(1 << 18)))


def _stable_argsort(args: tuple, kwargs: dict):
    """``np.argsort(a, axis=-1, kind=..., order=None, *, stable=...)`` of a 1-D array,
    stable (``kind="stable"``, ``"mergesort"`` or ``stable=True``): each half's stable
    argsort on its own thread, then one merge (kernels/merge.py).  None when not such a
    call, or while the merge kernel compiles."""
    a = args[0]
    kind = args[2] if len(args) > 2 else kwargs.get("kind")
    if len(args) > 3 or a.size < SPLIT_MIN_ARGSORT or kwargs.get("order") is not None or \
            not (kind in ("stable", "mergesort") or kwargs.get("stable") is True) or \
            _axis_arg(args, kwargs, 1, -1) not in (-1, 0, None) or \
            set(kwargs) - {"axis", "kind", "stable", "order"}:
        return None
    merger = _stable_merge
    if merger is None or not merger.mergeable(a):
        return None
    kernel = merger.kernel_for(a)
    if kernel is None:
        return None
    cut = a.shape[0] // 2
    halves = _both(np.argsort, (a[:cut],), {"kind": "stable"}, (a[cut:],), {"kind": "stable"})
    if halves is None:
        return None
    return merger.merge(kernel, a, halves[0], halves[1], cut)


class StableMerge(NamedTuple):
    """The merge of two stably argsorted halves (kernels/merge.py provides it)."""

    #: ``mergeable(keys)``: can the merge compare these keys as NumPy's sort does?
    mergeable: Callable[[np.ndarray], bool]
    #: ``kernel_for(keys)``: the compiled merge for the keys' type, or None while it compiles
    kernel_for: Callable[[np.ndarray], Any]
    #: ``merge(kernel, keys, lo, hi, cut)``: the argsort of ``keys`` from its halves' ones
    merge: Callable[..., np.ndarray]


_stable_merge: StableMerge | None = None


def register_stable_merge(merger: StableMerge) -> None:
    """Let a stable argsort run on two threads, its halves joined by ``merger``
    (registered once, by :func:`lazynp.core.lifecycle.install`); until then such an
    argsort runs in one call."""
    global _stable_merge
    _stable_merge = merger


def _run_rows(fn, rule, args: tuple, kwargs: dict):
    a = args[0]
    plan = rule(args, kwargs)
    if plan is None or a.dtype.kind not in "biuf" or a.shape[0] < 2 or \
            not a.flags.c_contiguous:
        # (a C-ordered input: NumPy's result is C-ordered too, as the joined halves are)
        return None
    axis, out_axis, least = plan
    if type(axis) is not int or a.size < least or not -a.ndim <= axis < a.ndim or \
            axis % a.ndim == 0:
        return None
    h = a.shape[0] // 2
    halves = _both(fn, (a[:h],) + args[1:], kwargs, (a[h:],) + args[1:], kwargs)
    if halves is None:
        return None
    lo, hi = halves
    if type(lo) is not np.ndarray or type(hi) is not np.ndarray:
        return None
    return np.concatenate(halves, axis=out_axis)


def reset_after_fork() -> None:
    """In a forked child: the helper thread is gone (a new one starts on first use)."""
    global _helper, _lock
    _helper = None
    _lock = threading.Lock()


def install(speedups) -> None:
    """Let the C fast paths (``lazynp._base._speedups``, when built) split their NumPy calls."""
    if speedups is None or not enabled:
        return
    kinds = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "truediv": np.true_divide,
             "floordiv": np.floor_divide, "mod": np.remainder, "and": np.bitwise_and,
             "or": np.bitwise_or, "xor": np.bitwise_xor, "lshift": np.left_shift,
             "rshift": np.right_shift}
    # (``**`` is left out: NumPy's operator takes fast paths of its own for exponents
    # 2, 0.5, -1... whose results can differ from ``np.power``'s in the last bit)
    costly = [getattr(np, name) for name in COSTLY if isinstance(getattr(np, name, None),
                                                                 np.ufunc)]
    speedups.configure_split(call, SPLIT_MIN_COSTLY, SPLIT_MIN, costly, kinds)
    speedups.configure_blas_note(note_blas, BLAS_THREADED_MIN, BLAS_FUNCTIONS)
    speedups.configure_row_split(run, SPLIT_MIN_ROWS)
