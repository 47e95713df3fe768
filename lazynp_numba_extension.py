"""Numba's extension entry point for lazynp (``numba_extensions`` / ``init`` in pyproject.toml).

Numba calls :func:`init` of every installed extension before its first compile.  lazynp
does not import Numba at ``import lazynp``, so when Numba is imported after lazynp this is
where lazynp arrays become arguments Numba can type (``numba.njit(f)(lazy_array)``) and
where lazynp's threading-layer choice is made, before Numba's threads can start.

A top-level module, not part of the ``lazynp`` package: importing a ``lazynp`` submodule
imports lazynp itself, and a process that uses Numba without lazynp should neither pay for
that import nor get lazynp's threading layer.  So :func:`init` acts only on a lazynp that
the process imported already (a lazynp imported later registers itself at its import).
"""
from __future__ import annotations

import sys


def init() -> None:
    """Register lazynp arrays with Numba and make lazynp's threading-layer choice, when lazynp
    is imported; otherwise nothing."""
    arrays = sys.modules.get("lazynp.array.ndarray")
    # (a lazynp still being imported has no register_with_numba yet: its import registers)
    register = getattr(arrays, "register_with_numba", None)
    if register is not None:
        register()
    layers = sys.modules.get("lazynp.kernels.threading_layer")
    ensure_chosen = getattr(layers, "ensure_chosen", None)
    if ensure_chosen is not None:
        ensure_chosen()
