"""The options of the open ``default_device("dask", chunks=..., client=...)`` blocks.

Per thread, innermost last; the dask backend (:mod:`lazynp.dask`) reads them when it makes
an array or picks the client a flush runs on.
"""
from __future__ import annotations

import threading

__all__ = ["dask_options", "push_dask_options", "pop_dask_options"]

_local = threading.local()
_DEFAULTS = {"chunks": "auto", "client": None}


def dask_options() -> dict:
    """``{"chunks": ..., "client": ...}`` of this thread's innermost open
    ``default_device("dask", ...)`` block, or the defaults (``"auto"``, None)."""
    stack = getattr(_local, "stack", None)
    return stack[-1] if stack else _DEFAULTS


def push_dask_options(chunks="auto", client=None) -> None:
    """Enter a ``default_device("dask", chunks=..., client=...)`` block (this thread)."""
    if not hasattr(_local, "stack"):
        _local.stack = []
    _local.stack.append({"chunks": chunks, "client": client})


def pop_dask_options() -> None:
    """Leave the innermost ``default_device("dask", ...)`` block."""
    _local.stack.pop()
