"""Large elementwise work run at once, on two threads.

NumPy runs a ufunc on one core.  An elementwise ufunc that the execution policy runs at once
(lazynp._policy: an input the caller shares, or work that cannot wait) on a large array is
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

import numpy as np

from ._cpus import Apart, allowed_cpus

#: Elements from which a cheap elementwise ufunc (add, multiply...) is split.  Measured on the
#: 2-core reference machine where it matters, on an operand the previous op just wrote (in
#: the caller's cache, not the helper's): ``t * 0.3`` at 2^18.6 elements 117 us on one thread,
#: 164 us split; at 2^20 670 -> 570 us; at 2^21 1.83 -> 1.27 ms.  (In a tight loop on the same
#: arrays the split paid from 2^18: that is not how programs use it; at 2^18 it made the
#: drop-in stencils 20-25% slower.)
SPLIT_MIN = int(os.environ.get("LAZYNP_SPLIT_MIN", str(1 << 20)))
#: The same for transcendental ufuncs: ``exp`` at 2^14 elements 83 us on one thread, 115 us
#: split; at 2^15 165 -> 115 us; at 2^16 327 -> 210 us.
SPLIT_MIN_COSTLY = int(os.environ.get("LAZYNP_SPLIT_MIN_COSTLY", str(1 << 15)))
COSTLY = frozenset(("exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sin", "cos",
                    "tan", "arcsin", "arccos", "arctan", "arctan2", "sinh", "cosh", "tanh",
                    "arcsinh", "arccosh", "arctanh", "power", "float_power", "hypot", "cbrt",
                    "logaddexp", "logaddexp2", "deg2rad", "rad2deg"))
_ALIGN = 64          # elements: the cut falls on a multiple of this

enabled = os.environ.get("LAZYNP_SPLIT", "1").strip() != "0" and len(allowed_cpus()) > 1


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
        self._apart = Apart()         # (the helper runs on another CPU than its caller)
        self._thread = threading.Thread(target=self._loop, name="lazynp-split", daemon=True)
        self._thread.start()

    def _loop(self):
        self._apart.bind(threading.get_native_id())
        with np.errstate(all="call", call=self.noted):
            while True:
                self._go.acquire()
                uf, args, out = self._job
                self._job = None
                try:
                    uf(*args, out=out)
                except BaseException as e:         # noqa: BLE001 (the caller reruns)
                    self._error = e
                self._done.release()

    def start(self, uf, args, out):
        self.noted.hit = False
        self._error = None
        self._job = (uf, args, out)
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
    global _helper
    if not _lock.acquire(blocking=False):
        return False                         # (another thread is splitting: NumPy's call)
    try:
        if _helper is None:
            _helper = _Helper()
        cut = (size // 2) // _ALIGN * _ALIGN
        flat_out = out.reshape(-1)
        lo = tuple(a.reshape(-1)[:cut] if type(a) is np.ndarray else a for a in args)
        hi = tuple(a.reshape(-1)[cut:] if type(a) is np.ndarray else a for a in args)
        _helper.start(uf, hi, flat_out[cut:])
        clean = False
        try:
            _mine.hit = False
            with np.errstate(all="call", call=_mine):
                uf(*lo, out=flat_out[:cut])
            clean = not _mine.hit
        except Exception:                    # noqa: BLE001 (NumPy's own call raises it)
            clean = False
        finally:
            clean = _helper.finish() and clean
    finally:
        _lock.release()
    return clean


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


def reset_after_fork() -> None:
    """In a forked child: the helper thread is gone (a new one starts on first use)."""
    global _helper, _lock
    _helper = None
    _lock = threading.Lock()


def install(speedups) -> None:
    """Let the C fast paths (``lazynp._speedups``, when built) split their NumPy calls."""
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
