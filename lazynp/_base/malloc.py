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
before it; with one arena, none).

These settings apply to the whole process (glibc has one allocator).  lazynp leaves each of
them alone when the user configured it: ``MALLOC_MMAP_THRESHOLD_``, ``MALLOC_TRIM_THRESHOLD_``,
``MALLOC_ARENA_MAX`` or the matching ``glibc.malloc.*`` entry of ``GLIBC_TUNABLES`` set.
``LAZYNP_MALLOC_TUNING=0`` leaves malloc alone altogether; :func:`untune`
(``lazynp.configure(malloc_tuning=False)``) undoes the settings after import, as far as
glibc allows (its start values come back, not its dynamic threshold rule).
:data:`report` says what was done (:func:`lazynp.show_config`).  Nothing happens outside
glibc.
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

ARENA_MAX = 1
#: glibc's start values, which :func:`untune` sets back
GLIBC_MMAP_THRESHOLD = GLIBC_TRIM_THRESHOLD = 128 << 10

#: parameter -> (mallopt number, lazynp's value, the user's environment variable, the
#: matching GLIBC_TUNABLES name)
PARAMETERS = {
    "M_MMAP_THRESHOLD": (M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES, "MALLOC_MMAP_THRESHOLD_",
                         "glibc.malloc.mmap_threshold"),
    "M_TRIM_THRESHOLD": (M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES, "MALLOC_TRIM_THRESHOLD_",
                         "glibc.malloc.trim_threshold"),
    "M_ARENA_MAX": (M_ARENA_MAX, ARENA_MAX, "MALLOC_ARENA_MAX", "glibc.malloc.arena_max"),
}

tuned = False
#: what :func:`tune` did: parameter -> value set, or the reason it was left alone
report: dict = {}


def _mallopt():
    if not sys.platform.startswith("linux") or platform.libc_ver()[0] != "glibc":
        return None
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return None
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    return mallopt


def _users_setting(env_name: str, tunable: str, environ) -> str | None:
    if env_name in environ:
        return f"{env_name}={environ[env_name]}"
    if tunable in environ.get("GLIBC_TUNABLES", ""):
        return f"GLIBC_TUNABLES names {tunable}"
    return None


def tune(enabled: bool | None = None, environ=None) -> bool:
    """Fix glibc's mmap and trim thresholds and its arena count (once per process), each
    unless the user set it; True when lazynp set any.  ``enabled`` defaults to
    ``LAZYNP_MALLOC_TUNING``'s setting; :data:`report` records the outcome."""
    global tuned
    if tuned:
        return True
    from . import config
    environ = os.environ if environ is None else environ
    report.clear()
    if not (config.MALLOC_TUNING if enabled is None else enabled):
        report["all"] = "left alone (LAZYNP_MALLOC_TUNING=0)"
        return False
    mallopt = _mallopt()
    if mallopt is None:
        report["all"] = "left alone (not glibc)"
        return False
    for name, (param, value, env_name, tunable) in PARAMETERS.items():
        users = _users_setting(env_name, tunable, environ)
        if users is not None:
            report[name] = f"left as the user set it ({users})"
        elif mallopt(param, value):
            report[name] = value
            tuned = True
    return tuned


def untune() -> None:
    """Give back what :func:`tune` set: glibc's start values for the thresholds (glibc's
    rule that raises them after a large ``free`` stays off once they were set) and one
    arena per core x 8 (glibc's default bound)."""
    global tuned
    mallopt = _mallopt()
    if mallopt is None or not tuned:
        return
    restore = {"M_MMAP_THRESHOLD": GLIBC_MMAP_THRESHOLD,
               "M_TRIM_THRESHOLD": GLIBC_TRIM_THRESHOLD,
               "M_ARENA_MAX": 8 * (os.cpu_count() or 1)}
    for name, value in restore.items():
        if isinstance(report.get(name), int):
            mallopt(PARAMETERS[name][0], value)
            report[name] = f"lazynp's value given back: glibc's {value} (lazynp.configure)"
    tuned = False
