"""Explicit control: ``evaluate``, statistics, strict mode."""
from __future__ import annotations

import contextlib

from . import devices
from ._base import config as _config, counters as _counters, native as _native
from ._numpy import fallback as _fallback
from .array.ndarray import ndarray
from .core import graph
from .notebook.jupyter import Stats


def evaluate(*arrays):
    """Force the given lazy arrays with one flush; returns them (a single array if one).

    Parameters
    ----------
    *arrays : lazynp.ndarray
        Arrays to compute now.
    """
    nodes = [a._node() for a in arrays if isinstance(a, ndarray)]
    graph.flush(nodes)
    devices.evaluate(arrays)
    return arrays[0] if len(arrays) == 1 else arrays


def stats() -> dict:
    """Counters: ops recorded, flushes, nodes executed, fallbacks with their call sites.

    A ``dict`` (:class:`lazynp.notebook.jupyter.Stats`) that prints as a table and shows as one in
    Jupyter.  Besides the recorder's and the fallbacks', the counters of every module that
    registered them (:mod:`lazynp._base.counters`: the kernels; the device backend once a
    device is used)."""
    out = Stats(ops_recorded=graph.counts.n_recorded)
    out.update(graph.STATS)
    out.update(_counters.read_all())
    out.update(_fallback.report())
    if _native.ext is not None:
        for k, n in _native.ext.eager_counters().items():
            out[k] = out.get(k, 0) + n
    return out


def reset_stats() -> None:
    """Zero every counter of :func:`stats`."""
    for k in graph.STATS:
        graph.STATS[k] = 0
    graph.counts.n_recorded = 0
    _counters.reset_all()
    _fallback.reset()
    if _native.ext is not None:
        _native.ext.reset_eager_counters()


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
