"""The counters behind :func:`lazynp.stats`: a registry of providers.

A module that counts registers its table of counters (or a reader and a resetter) here at
its import; :func:`lazynp.stats` and :func:`lazynp.reset_stats` read and zero them all,
without importing the modules that count (the kernels, the device backend).
"""
from __future__ import annotations

from typing import Callable, Mapping

__all__ = ["register_counters", "register_table", "read_all", "reset_all"]

_providers: list = []     # (read, reset) in registration order


def register_counters(read: Callable[[], Mapping], reset: Callable[[], None]) -> None:
    """Register a provider: ``read()`` answers its counters by name, ``reset()`` zeroes
    them."""
    _providers.append((read, reset))


def register_table(table: dict) -> None:
    """Register a module's dict of counters (read as is, zeroed in place)."""
    def reset() -> None:
        for name in table:
            table[name] = 0
    register_counters(lambda: table, reset)


def read_all() -> dict:
    """Every registered counter by name."""
    out = {}
    for read, _ in _providers:
        out.update(read())
    return out


def reset_all() -> None:
    """Zero every registered counter."""
    for _, reset in _providers:
        reset()
