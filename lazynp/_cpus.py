"""Keeping a helper thread on another CPU than the thread that hands it work.

When a thread wakes a sleeping helper, Linux's scheduler tends to wake the helper on the
waker's own CPU (the "wake-affine" choice: the data is hot in that CPU's cache) and moves it
only when its load balancer next looks.  For a hand-off of a few hundred microseconds of work
that is too late: both halves then share one CPU and the "parallel" call takes as long as
one thread alone (measured on the 2-CPU reference machine: ``tanh`` on 2^16 float64 elements
in two halves 900 us, the same as one call, whenever the helper had slept for a millisecond
or more; 470 us with the helper kept off the caller's CPU).

:class:`Apart` restricts the helper's CPU affinity to the process's CPUs minus the one the
caller is running on when it hands work over, and the helper lifts the restriction as soon as
it runs (two system calls, ~2 us, per hand-off): the wake-up lands on another CPU than the
caller's, and the scheduler may still balance the two threads while they work.  Off
Linux/glibc it does nothing.
"""
from __future__ import annotations

import ctypes
import os

_getcpu = None
try:
    _getcpu = ctypes.CDLL(None).sched_getcpu
    _getcpu.restype = ctypes.c_int
    _getcpu.argtypes = []
except (OSError, AttributeError):       # (not glibc)
    _getcpu = None


def allowed_cpus() -> set:
    """The CPUs this process may run on (all of them where affinity is unknown)."""
    try:
        return set(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return set(range(os.cpu_count() or 1))


class Apart:
    """Keeps one helper thread (its native id given to :meth:`bind`, from that thread) on
    other CPUs than the caller of :meth:`handoff`."""

    __slots__ = ("_tid", "_avoid", "_cpus", "woke_on", "caller_on")

    def __init__(self):
        self._tid = None
        self._avoid = -1
        self._cpus = allowed_cpus()
        self.woke_on = self.caller_on = -1      # (the last hand-off's CPUs, for tests)

    def bind(self, tid: int) -> None:
        self._tid = tid

    def handoff(self) -> None:
        """Called by the thread about to hand work to the helper."""
        if _getcpu is None or self._tid is None:
            return
        cpu = self.caller_on = _getcpu()
        if cpu == self._avoid or cpu < 0:
            return
        others = self._cpus - {cpu}
        if not others:
            return
        try:
            os.sched_setaffinity(self._tid, others)
            self._avoid = cpu
        except OSError:            # (the CPU set changed under us: stop placing)
            self._tid = None

    def started(self) -> None:
        """Called by the helper once it runs: it may move again.  (Pinned while the work
        lasts, it shared one CPU with its caller whenever the caller moved onto it: a
        2-thread kernel of 6 ms took 3 ms at the median and 5 ms in one call of four.)"""
        if _getcpu is not None:
            self.woke_on = _getcpu()
        if self._avoid < 0 or self._tid is None:
            return
        try:
            os.sched_setaffinity(0, self._cpus)
            self._avoid = -1
        except OSError:
            self._tid = None
