"""The one door to the C extension (``lazynp._base._speedups``, built from ``_speedups.pyx``).

Every module that uses the extension takes it from here (:data:`ext`), never by importing
it: so there is one place that decides whether it is used.  It is None when it is not built
(no C compiler at install time) or when ``LAZYNP_PURE_PYTHON=1`` is set; lazynp then runs
the pure Python versions of the same code (``core/graph.py``, ``_numpy/ufunc.py``...),
which are the reference the extension is tested against.
"""
from __future__ import annotations

from types import ModuleType

from . import config as _config


def _load() -> ModuleType | None:
    """The extension module, or None (not built, or ``LAZYNP_PURE_PYTHON`` set)."""
    if _config.PURE_PYTHON:
        return None
    try:
        from . import _speedups
    except ImportError:
        return None
    return _speedups


#: The C extension module, or None: the pure Python code runs instead.
ext: ModuleType | None = _load()
