"""NumPy's floating-point warnings of work run on dask workers, issued on the client at the
read, as the CPU engine issues them after its flush (:mod:`lazynp.core.late_warnings`).

A task (:func:`lazynp.dask.chunks.run_block`, ``run_region``, a block reduction) runs under
:func:`task_errstate`: NumPy's ``"warn"`` entries become ``"log"`` to a per-thread list
(the fused kernel's flags then make the group run again on NumPy, which logs exactly what
it would have warned).  At the end of the task the distinct messages go to the scheduler
as a ``distributed`` event (topic :data:`TOPIC`); without a worker (dask's local
schedulers) they are warned at once.  The client subscribes to the topic
(:func:`listen`, before its first compute), and a read issues the messages that came
(:func:`issue_pending`) as ``RuntimeWarning`` at the user's reading line, each once, unless
``np.errstate`` at the read ignores that kind ("divide by zero" under
``np.errstate(divide="ignore")``).

Messages arrive in the order the scheduler saw them; a message of work persisted
without a read (``lazynp.evaluate``) is issued at the next read on that client.
"""
from __future__ import annotations

import contextlib
import threading
import warnings

import numpy as np

__all__ = ["TOPIC", "task_errstate", "listen", "issue_pending"]

TOPIC = "lazynp-fp-warnings"
_PREFIX = "Warning: "
#: NumPy's message start -> its np.errstate entry
_KINDS = {"divide by zero": "divide", "overflow": "over", "invalid value": "invalid",
          "underflow": "under"}


class _Log:
    """The ``np.errstate(call=...)`` object of a task: messages kept per thread."""

    def __init__(self):
        self.local = threading.local()

    def write(self, msg: str) -> None:
        msgs = getattr(self.local, "msgs", None)
        if msgs is None:
            msgs = self.local.msgs = []
        if msg not in msgs:
            msgs.append(msg)

    def take(self) -> list:
        msgs = getattr(self.local, "msgs", None) or []
        self.local.msgs = None
        return msgs


_LOG = _Log()


@contextlib.contextmanager
def task_errstate():
    """NumPy's default errstate with its warnings logged, then reported (see the module;
    nested: the outermost reports)."""
    local = _LOG.local
    depth = getattr(local, "depth", 0)
    if depth:
        yield
        return
    _LOG.take()
    local.depth = 1
    try:
        with np.errstate(call=_LOG, divide="log", over="log", invalid="log", under="ignore"):
            yield
    finally:
        local.depth = 0
    msgs = _LOG.take()
    if msgs:
        _report([m[len(_PREFIX):].rstrip("\n") if m.startswith(_PREFIX) else m.rstrip("\n")
                 for m in msgs])


def _report(msgs: list) -> None:
    try:
        from distributed import get_worker
        worker = get_worker()
    except (ImportError, ValueError):
        for m in msgs:
            warnings.warn(m, RuntimeWarning, stacklevel=2)
        return
    worker.log_event(TOPIC, {"messages": msgs})


_pending: dict = {}         # id(client) -> messages received, not yet issued
_listening: set = set()
_lock = threading.Lock()


def listen(client) -> None:
    """Subscribe ``client`` to the workers' messages (once per client)."""
    key = id(client)
    if key in _listening:
        return
    _listening.add(key)

    def handler(event):
        _, msg = event
        with _lock:
            _pending.setdefault(key, []).extend(msg.get("messages", ()))
    try:
        client.subscribe_topic(TOPIC, handler)
    except Exception:           # (a client that cannot subscribe: its reads stay silent)
        _listening.discard(key)


def issue_pending(client) -> None:
    """Issue the messages ``client`` received (each once) at the caller's user line."""
    with _lock:
        msgs = _pending.pop(id(client), None)
    if not msgs:
        return
    err = np.geterr()
    seen = []
    for m in msgs:
        kind = next((v for k, v in _KINDS.items() if m.startswith(k)), None)
        if m not in seen and (kind is None or err.get(kind) != "ignore"):
            seen.append(m)
    if seen:
        from ..core import late_warnings
        late_warnings.issue(seen, None)
