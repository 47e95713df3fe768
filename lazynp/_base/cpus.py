"""Keeping a helper thread on another CPU than the thread that hands it work.

When a thread wakes a sleeping helper, Linux's scheduler tends to wake the helper on the
waker's own CPU (the "wake-affine" choice: the data is hot in that CPU's cache) and moves it
only when its load balancer next looks.  For a hand-off of a few hundred microseconds of work
that is too late: both halves then share one CPU and the "parallel" call takes as long as
one thread alone (measured on the 2-CPU reference machine: ``tanh`` on 2^16 float64 elements
in two halves 900 us, the same as one call, whenever the helper had slept for a millisecond
or more; 470 us with the helper kept off the caller's CPU).

:class:`Apart` restricts the helper's CPU affinity to the process's CPUs minus the one the
caller is running on, re-checked at each hand-off (~0.3 us; the affinity changes only when
the caller moved).  Off Linux/glibc it does nothing.
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

    __slots__ = ("_tid", "_avoid", "_cpus")

    def __init__(self):
        self._tid = None
        self._avoid = -1
        self._cpus = allowed_cpus()

    def bind(self, tid: int) -> None:
        self._tid = tid

    def handoff(self) -> None:
        """Called by the thread about to hand work to the helper."""
        if _getcpu is None or self._tid is None:
            return
        cpu = _getcpu()
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
