"""What lazynp changes in the process, and its switches: :func:`show_config`,
:func:`configure`, :func:`clear_kernel_cache` (exported as ``lazynp.show_config`` ...).

=====================  ==================================  ==============================
change                 environment variable (at import)    at run time
=====================  ==================================  ==============================
Numba threading layer  ``LAZYNP_THREADING_LAYER``          ``configure(threading_layer=)``
glibc malloc tuning    ``LAZYNP_MALLOC_TUNING=0``          ``configure(malloc_tuning=)``
kernel cache folder    ``LAZYNP_CACHE_DIR``                ``configure(kernel_cache_dir=)``
kernel cache bound     ``LAZYNP_CACHE_MAX_BYTES``          ``configure(
                                                           kernel_cache_max_bytes=)``
=====================  ==================================  ==============================

Each process-wide change is skipped when the user configured the same thing
(``NUMBA_THREADING_LAYER``, ``MALLOC_ARENA_MAX``...): see :mod:`.threading_layer` and
:mod:`lazynp._base.malloc`.
"""
from __future__ import annotations

import importlib.util
import sys

from .. import engine
from .._base import config as _config, malloc as _malloc, native as _native
from . import cache as _cache, cpu as _cpu, threading_layer as _threading_layer

_UNSET = object()


def _recorder() -> str:
    if _native.ext is not None:
        return "C extension (lazynp._base._speedups)"
    if _config.PURE_PYTHON:
        return "pure Python (LAZYNP_PURE_PYTHON=1)"
    if importlib.util.find_spec("lazynp._base._speedups") is None:
        return "pure Python (the C extension is not built: no C compiler at install time)"
    return "pure Python (the C extension is built but failed to import)"


def _malloc_line() -> str:
    report = _malloc.report
    if "all" in report:
        return report["all"]
    parts = []
    for name, what in report.items():
        parts.append(f"{name}={what}" if isinstance(what, int) else f"{name} {what}")
    return ("tuned by lazynp: " if _malloc.tuned else "") + "; ".join(parts) + \
        " (LAZYNP_MALLOC_TUNING=0 leaves malloc alone)"


def _mib(n: int) -> str:
    return f"{n / (1 << 20):.1f} MiB"


def config_info() -> dict:
    """What :func:`show_config` prints, as a dict of strings."""
    nbytes, nkernels, nfiles = _cache.size()
    bound = _cache.max_bytes()
    layer = _threading_layer.ensure_chosen()     # (imports Numba)
    active = _threading_layer.running()
    return {
        "recorder": _recorder(),
        "engine": repr(engine.get_engine()),
        "numba threading layer": layer + (f"; running: {active!r}" if active else
                                          "; not launched yet"),
        "glibc malloc": _malloc_line(),
        "kernel cache": (f"{_cache.directory()}: {_mib(nbytes)} in {nkernels} kernels "
                         f"({nfiles} files), bound "
                         f"{_mib(bound) if bound else 'none'}, least recently used evicted "
                         "(LAZYNP_CACHE_DIR, LAZYNP_CACHE_MAX_BYTES)"),
        "kernel compiles": ("in a background thread" if _cpu.compiles_available else
                            "off in this forked child (a compile was running at the fork): "
                            "fused groups run on NumPy"),
    }


def show_config(mode: str = "stdout"):
    """NumPy's ``show_config``, after lazynp's own section: which recorder runs (the C
    extension or pure Python), the engine, Numba's threading layer and who chose it,
    glibc's malloc settings, the kernel cache (folder, size, bound), and whether kernels
    compile.

    Parameters
    ----------
    mode : {"stdout", "dicts"}
        As in NumPy: print (returns None), or return NumPy's dict with a ``"lazynp"`` entry
        (:func:`config_info`).
    """
    import numpy
    info = config_info()
    if mode == "dicts":
        out = numpy.show_config(mode="dicts")
        out["lazynp"] = info
        return out
    if mode != "stdout":
        raise AttributeError(f"lazynp.show_config: invalid mode {mode!r}; expected 'stdout' "
                             "or 'dicts'")
    width = max(map(len, info))
    print("lazynp:")
    for key, value in info.items():
        print(f"  {key + ':':{width + 1}s} {value}")
    print()
    return numpy.show_config(mode="stdout")


def configure(*, threading_layer=_UNSET, malloc_tuning=_UNSET, kernel_cache_dir=_UNSET,
              kernel_cache_max_bytes=_UNSET) -> dict:
    """Change lazynp's process settings at run time (each also has an environment variable
    read at import; see the module's table).

    Parameters
    ----------
    threading_layer : str, optional
        Numba's threading layer (``"workqueue"``, ``"omp"``, ``"tbb"``... or ``"default"``
        for Numba's own choice).  Only before the first parallel kernel runs in the
        process (RuntimeError after).
    malloc_tuning : bool, optional
        False gives back glibc's malloc settings that lazynp changed at import (glibc's
        start values; its dynamic threshold rule stays off); True applies lazynp's.
    kernel_cache_dir : str or path, optional
        The folder compiled kernels are kept in from now on.
    kernel_cache_max_bytes : int or str, optional
        The kernel cache's size bound (``"256M"`` works; 0: none); evicts at once.

    Returns
    -------
    dict
        :func:`show_config`'s information after the change.
    """
    if threading_layer is not _UNSET:
        _threading_layer.set_layer(threading_layer)
    if malloc_tuning is not _UNSET:
        if malloc_tuning:
            _malloc.tune(enabled=True)
        else:
            _malloc.untune()
    if kernel_cache_dir is not _UNSET:
        _cache.set_directory(kernel_cache_dir)
    if kernel_cache_max_bytes is not _UNSET:
        n = kernel_cache_max_bytes
        _cache.set_max_bytes(_config.parse_bytes(n, "kernel_cache_max_bytes")
                             if isinstance(n, str) else n)
    return config_info()


def clear_kernel_cache() -> int:
    """Delete the compiled kernels kept on disk (in :func:`lazynp.show_config`'s kernel
    cache folder).  Kernels already loaded in this process keep working.  Returns the
    number of files deleted."""
    return _cache.clear()
