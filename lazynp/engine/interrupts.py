"""Ctrl-C while recorded work runs: an interrupt never becomes an array's value.

Python turns SIGINT into a ``KeyboardInterrupt`` raised in the main thread at its next
bytecode.  When that thread is running recorded work (a flush run inline, or an engine op
it helps with while it waits), the exception would land inside a node: the node would
store it as its error (every later read of the array raising ``KeyboardInterrupt`` again,
with no signal pending) or an in-place write would stop half done.

While the main thread runs recorded work, :class:`held` therefore holds a SIGINT back: the
work in hand finishes (one engine op, or one small flush run inline: the same grain at
which NumPy itself answers Ctrl-C, after its C loop) and ``KeyboardInterrupt`` is raised
right after, when every node is either computed or still pending.  Waits are not held:
an interrupted wait returns at once and the work goes on in the engine's threads, so a
later read finds it computed.  A SIGINT handler of the user's own is left alone.
"""
from __future__ import annotations

import _signal
import threading

_SIGINT = _signal.SIGINT
_default = _signal.default_int_handler
_main_thread = threading.main_thread
_get_ident = threading.get_ident
_arrived = False        # a SIGINT came while held


def _hold(signum, frame) -> None:
    global _arrived
    _arrived = True


class held:
    """Context manager: while it is entered by the main thread, a SIGINT is held and raised
    as ``KeyboardInterrupt`` when it exits (nested uses hold it until the outermost one)."""

    __slots__ = ("_on",)

    def __enter__(self) -> "held":
        # signals reach only the main thread; another handler (the user's, or an outer
        # ``held``) stays as it is
        self._on = _get_ident() == _main_thread().ident and \
            _signal.getsignal(_SIGINT) is _default
        if self._on:
            _signal.signal(_SIGINT, _hold)
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        global _arrived
        if self._on:
            _signal.signal(_SIGINT, _default)
            if _arrived:
                _arrived = False
                if exc_type is None:
                    raise KeyboardInterrupt
        return False
