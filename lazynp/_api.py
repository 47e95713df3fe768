"""Explicit control: ``evaluate``, statistics, strict mode."""
from __future__ import annotations

import contextlib

from ._base import config as _config
from ._base import native as _native
from ._numpy import fallback as _fallback
from .core import graph


def evaluate(*arrays):
    """Force the given lazy arrays with one flush; returns them (a single array if one).

    Parameters
    ----------
    *arrays : lazynp.ndarray
        Arrays to compute now.
    """
    from .array.ndarray import ndarray
    nodes = [a._node() for a in arrays if isinstance(a, ndarray)]
    graph.flush(nodes)
    from . import devices
    if devices.ACTIVE:                                       # (device hook)
        from .cuda.array import evaluate as evaluate_on_device
        evaluate_on_device([a for a in arrays if devices.is_device_array(a)])
    return arrays[0] if len(arrays) == 1 else arrays


def stats() -> dict:
    """Counters: ops recorded, flushes, nodes executed, fallbacks with their call sites.

    A ``dict`` (:class:`lazynp.notebook.jupyter.Stats`) that prints as a table and shows as one in
    Jupyter."""
    from .notebook.jupyter import Stats
    out = Stats(ops_recorded=graph._state.n_recorded)
    out.update(graph.STATS)
    from .kernels import cpu, pool, tree
    out.update(cpu.STATS)
    out.update(pool.STATS)
    out.update(tree.STATS)
    out.update(_fallback.report())
    if _native.ext is not None:
        for k, n in _native.ext.eager_counters().items():
            out[k] = out.get(k, 0) + n
    from . import devices
    if devices.ACTIVE:                                       # (device hook)
        from .engine import streams
        from .cuda import codegen, runtime
        for d in (runtime.STATS, codegen.STATS, streams.STATS):
            out.update(d)
    return out


def reset_stats() -> None:
    """Zero every counter of :func:`stats`."""
    for k in graph.STATS:
        graph.STATS[k] = 0
    graph._state.n_recorded = 0
    from .kernels import cpu, pool, tree
    for d in (cpu.STATS, pool.STATS, tree.STATS):
        for k in d:
            d[k] = 0
    _fallback.reset()
    if _native.ext is not None:
        _native.ext.reset_eager_counters()
    from . import devices
    if devices.ACTIVE:                                       # (device hook)
        from .engine import streams
        from .cuda import codegen, runtime
        for d in (runtime.STATS, codegen.STATS, streams.STATS):
            for k in d:
                d[k] = 0


def set_strict(on: bool = True) -> None:
    """Strict mode: a NumPy fallback raises :class:`lazynp.FallbackError`."""
    _config.STRICT = bool(on)


@contextlib.contextmanager
def strict(on: bool = True):
    """Context manager form of :func:`set_strict`."""
    old = _config.STRICT
    _config.STRICT = bool(on)
    try:
        yield
    finally:
        _config.STRICT = old
