"""Keep large temporaries' memory in the process (glibc's malloc), as a plain NumPy process does.

glibc serves allocations above ``M_MMAP_THRESHOLD`` (128 KiB at start) with a fresh
``mmap``, and returns freed memory at the top of the heap to the system above
``M_TRIM_THRESHOLD``.  Its dynamic rule raises both after the first large ``free``, so in a
process that only runs NumPy, an array temporary of a few MB reuses the same pages from the
second iteration of a loop on.  Once Numba is loaded (lazynp compiles kernels with it), that
rule no longer holds here: every temporary above 128 KiB is mapped anew and page-faulted in
(measured on the reference machine: ``c = a + b; d = c * 2.0`` on 510x510 float64 arrays
took 7.5 ms per iteration with 984 page faults, against 0.47 ms and none with the
thresholds fixed), which made NumPy-sized work several times slower than in NumPy's own
process.

:func:`tune` fixes the thresholds at the values glibc's dynamic rule reaches at most
(32 MiB mapped, 64 MiB kept): allocations up to 32 MiB come from the heap and freed memory
is kept for the next one, as in a NumPy process after its first large loop iteration.

It also keeps every thread on the main heap (``M_ARENA_MAX`` 1).  A plain NumPy process
allocates from one thread, so from glibc's main arena; lazynp's threads (the engine's
workers, the split helper) got arenas of their own, whose 64 MiB sub-heaps are unmapped
when they empty and mapped and page-faulted again by the next large result (measured in
``benchmarks/dropin.py``: the Monte-Carlo program's calls alternated between 12 ms and
37-48 ms with ~890 page faults each, by the state of the heaps left by the programs run
before it; with one arena, none).  ``LAZYNP_MALLOC_TUNING=0`` leaves malloc alone.  Nothing
happens outside glibc.
"""
from __future__ import annotations

import ctypes
import os
import platform
import sys

M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
M_ARENA_MAX = -8
MMAP_THRESHOLD_BYTES = 32 << 20
TRIM_THRESHOLD_BYTES = 64 << 20

tuned = False


def tune() -> bool:
    """Fix glibc's mmap and trim thresholds (once per process); True when they are set."""
    global tuned
    if tuned:
        return True
    if os.environ.get("LAZYNP_MALLOC_TUNING", "1").strip() == "0":
        return False
    if not sys.platform.startswith("linux") or platform.libc_ver()[0] != "glibc":
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    tuned = bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES) and
                 mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES) and
                 mallopt(M_ARENA_MAX, 1))
    return tuned
