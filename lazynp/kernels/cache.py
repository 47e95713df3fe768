"""The on-disk kernel cache: where compiled kernels are kept between processes, its size
bound, least-recently-used eviction, and clearing it.

A fused kernel's generated source is written to ``<dir>/lazynp_k_<digest>.py`` and imported
from there, so that Numba's ``cache=True`` keeps its compiled code next to it
(``<dir>/__pycache__/lazynp_k_<digest>.*``: the bytecode, Numba's index ``.nbi`` and one
``.nbc`` per compiled signature; under ``$NUMBA_CACHE_DIR`` when that is set).  Every file
whose name starts with ``lazynp_k_<digest>`` belongs to that kernel, and a kernel is
evicted as a whole.

*Location*: ``LAZYNP_CACHE_DIR`` (default ``~/.cache/lazynp/kernels``) or
:func:`set_directory` (``lazynp.configure(kernel_cache_dir=...)``).

*Bound*: ``LAZYNP_CACHE_MAX_BYTES`` (bytes, or with a ``K``/``M``/``G`` suffix; default
256M; ``0`` means no bound) or :func:`set_max_bytes`.  After each kernel compiled anew
(not a cache hit) the cache is measured and, when it is over the bound, the kernels used
least recently are deleted until it is under.  A kernel's last use is the access time of
its ``.py`` file, which lazynp sets each time a process loads the kernel (the modification
time stays: Numba checks it to know its cached code is current).  A kernel in use keeps
working when its files go: its compiled code is in memory, and its source is written again
when it compiles for new argument types.

*Clearing*: :func:`clear` (``lazynp.clear_kernel_cache()``).
"""
from __future__ import annotations

import os
import sys
import threading
import time

from .._base import config as _config, counters as _counters

PREFIX = "lazynp_k_"

_lock = threading.Lock()
_directory: str = _config.KERNEL_CACHE_DIR
_max_bytes: int = _config.KERNEL_CACHE_MAX_BYTES
STATS = {"kernel_cache_evictions": 0}


def directory() -> str:
    """The folder the kernel sources (and, in its ``__pycache__``, Numba's compiled code)
    are written to."""
    return _directory


def set_directory(path: str) -> None:
    """Use ``path`` for the kernels compiled from now on (created when needed).  Kernels
    already loaded keep working; the old folder is left as it is."""
    global _directory
    _directory = os.path.abspath(os.path.expanduser(os.fspath(path)))


def max_bytes() -> int:
    """The size bound in bytes (0: none)."""
    return _max_bytes


def set_max_bytes(n: int) -> None:
    """Bound the cache to ``n`` bytes (0: no bound) and evict at once if it is over."""
    global _max_bytes
    n = int(n)
    if n < 0:
        raise ValueError(f"lazynp.configure: kernel_cache_max_bytes must be >= 0, got {n}")
    _max_bytes = n
    evict()


def source_path(name: str) -> str:
    """The path of kernel ``name``'s source file (``name`` = ``lazynp_k_<digest>``)."""
    return os.path.join(_directory, name + ".py")


def write_source(name: str, source: str) -> str:
    """Write kernel ``name``'s source unless it is there (atomically: other processes may
    write the same kernel at once); returns its path."""
    os.makedirs(_directory, exist_ok=True)
    path = source_path(name)
    if not os.path.exists(path):
        tmp = f"{path}.{os.getpid()}.{threading.get_native_id()}.tmp"
        with open(tmp, "w") as f:
            f.write(source)
        os.replace(tmp, path)
    return path


def mark_used(name: str, path: str) -> None:
    """Record that kernel ``name`` is used now: its source's access time is set (the least
    recently used kernels are evicted first)."""
    try:
        st = os.stat(path)
        os.utime(path, ns=(time.time_ns(), st.st_mtime_ns))
    except OSError:
        pass


def _folders() -> list:
    """The folders holding the cache's files: the sources' folder, its ``__pycache__``, and
    Numba's own folder for them when ``NUMBA_CACHE_DIR`` is set."""
    folders = [_directory, os.path.join(_directory, "__pycache__")]
    numba_config = sys.modules.get("numba.core.config")
    # (before Numba is loaded, which import lazynp no longer does: the variable it will read)
    numba_dir = getattr(numba_config, "CACHE_DIR", "") if numba_config else \
        os.environ.get("NUMBA_CACHE_DIR", "")
    if numba_dir:
        try:
            from numba.core.caching import _CacheLocator
            sub = _CacheLocator.get_suitable_cache_subpath(os.path.join(_directory, "k.py"))
            folders.append(os.path.join(numba_dir, sub))
        except (ImportError, AttributeError):
            pass
    return folders


def _kernel_of(filename: str) -> str | None:
    if not filename.startswith(PREFIX):
        return None
    end = filename.find(".", len(PREFIX))
    return filename if end < 0 else filename[:end]


def entries() -> dict:
    """The cache's kernels: name -> ``[bytes, last use (ns), paths]``."""
    kernels: dict = {}
    for folder in _folders():
        try:
            it = os.scandir(folder)
        except OSError:
            continue
        with it:
            for e in it:
                name = _kernel_of(e.name)
                if name is None or e.name.endswith(".tmp"):
                    continue
                try:
                    st = e.stat()
                except OSError:
                    continue
                entry = kernels.setdefault(name, [0, 0, []])
                entry[0] += st.st_size
                entry[2].append(e.path)
                if e.name == name + ".py":
                    entry[1] = st.st_atime_ns
    return kernels


def size() -> tuple:
    """``(bytes, kernels, files)`` on disk now."""
    kernels = entries()
    return (sum(e[0] for e in kernels.values()), len(kernels),
            sum(len(e[2]) for e in kernels.values()))


def _remove(paths) -> None:
    for p in paths:
        try:
            os.remove(p)
        except OSError:       # (another process evicted it first)
            pass


def evict() -> int:
    """Delete the least recently used kernels until the cache is within its bound; returns
    how many were deleted."""
    if not _max_bytes:
        return 0
    with _lock:
        kernels = entries()
        total = sum(e[0] for e in kernels.values())
        if total <= _max_bytes:
            return 0
        evicted = 0
        for name, (nbytes, _, paths) in sorted(kernels.items(), key=lambda kv: kv[1][1]):
            if total <= _max_bytes:
                break
            _remove(sorted(paths, key=lambda p: p.endswith(".py")))   # (the source last)
            total -= nbytes
            evicted += 1
        STATS["kernel_cache_evictions"] += evicted
        return evicted


def clear() -> int:
    """Delete every kernel in the cache folder (kernels already loaded keep working: their
    sources are written again when they compile for new argument types).  Returns the
    number of files deleted."""
    with _lock:
        paths = [p for e in entries().values() for p in e[2]]
        _remove(paths)
        return len(paths)


_counters.register_table(STATS)
