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
import threading
import time

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


#: CPU clocks of this process's low-priority threads (the background compiler, at nice 19):
#: a helper thread at the normal priority takes the CPU from them, so their CPU time does
#: not count as a busy CPU.  (A clock whose thread ended is dropped when it fails.)
_yielding_clocks: set = set()


def register_yielding_thread() -> None:
    """Called by a thread that runs at a low priority (nice 19), for :class:`OtherThreads`."""
    try:
        _yielding_clocks.add(time.pthread_getcpuclockid(threading.get_ident()))
    except (AttributeError, OSError):
        pass


class OtherThreads:
    """Whether other threads of this process kept a CPU busy lately.

    On a machine with few CPUs a helper thread only pays when a CPU is free for it.  One that
    is often not: OpenBLAS's worker threads spin after each threaded BLAS call until their
    timeout (measured on the 2-CPU reference machine: 100-105 ms of one CPU after a
    2000 x 2000 matrix-vector product; the timeout is 2^28 cycles unless
    ``OPENBLAS_THREAD_TIMEOUT`` says otherwise).  A split handed out meanwhile puts three
    running threads on two CPUs: ``1.5 * A`` on 2000 x 2000 float64 took 2.7 ms in two
    halves right after the product, 1.8 ms on one thread, and up to 9.8 ms when the caller
    lost its CPU to the spinning thread for a time slice.

    :meth:`busy` compares the CPU time the process's other threads (all but the caller and
    the helpers it names) used since the last call with the wall time that passed: the share
    of a CPU they took.  The clocks cost about 2 us a call."""

    __slots__ = ("_wall", "_others", "_clocks")

    #: the share of one CPU, over the last window, from which the other threads count as busy
    BUSY_SHARE = 0.5

    def __init__(self, clocks=None):
        """``clocks``: ``(process_cpu, thread_cpu, clock_cpu, wall)`` functions (tests give
        their own); by default ``time.process_time``, ``time.thread_time``,
        ``time.clock_gettime`` and ``time.perf_counter``."""
        self._wall = None
        self._others = 0.0
        self._clocks = clocks or (time.process_time, time.thread_time, time.clock_gettime,
                                  time.perf_counter)

    def busy(self, helper_clocks=()) -> bool:
        """True when, since the last call, the process's threads other than the calling one,
        those whose CPU clocks (``time.pthread_getcpuclockid``) are ``helper_clocks`` and
        the low-priority ones (:func:`register_yielding_thread`) ran for at least :data:`BUSY_SHARE` of the wall time that passed (False at the
        first call, or when a clock cannot be read)."""
        process_cpu, thread_cpu, clock_cpu, wall_clock = self._clocks
        try:
            others = process_cpu() - thread_cpu()
            for clock in helper_clocks:
                others -= clock_cpu(clock)
        except (OSError, ValueError):       # (a helper thread gone, or no such clocks)
            self._wall = None
            return False
        for clock in tuple(_yielding_clocks):
            try:
                others -= clock_cpu(clock)
            except (OSError, ValueError):   # (its thread ended: from now on, not counted)
                _yielding_clocks.discard(clock)
                self._wall = None
                return False
        wall = wall_clock()
        last, self._wall = self._wall, wall
        used, self._others = others - self._others, others
        return last is not None and used >= self.BUSY_SHARE * (wall - last)
