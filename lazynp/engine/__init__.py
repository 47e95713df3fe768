"""Dependency engine for lazynp (after MXNet's engine, Chen et al. 2015).

The engine schedules opaque callables. Each callable declares the vars
(resource handles, typically one per buffer) it reads and writes; operations
on the same var run in push order, reads between two writes may run in
parallel, and independent operations run concurrently on a thread pool.

The process-wide engine is chosen with the ``LAZYNP_ENGINE`` environment
variable: ``"threaded"`` (default) or ``"naive"`` (synchronous, for
debugging). The module-level functions delegate to :func:`get_engine`.
"""

from __future__ import annotations

import os
import threading
from typing import Callable, Sequence

from .base import Engine
from .naive import NaiveEngine
from .threaded import ThreadedEngine
from .var import EngineVar

__all__ = [
    "Engine",
    "EngineVar",
    "NaiveEngine",
    "ThreadedEngine",
    "delete_var",
    "get_engine",
    "new_var",
    "push",
    "push_async",
    "set_engine",
    "wait_all",
    "wait_for_var",
]

ENGINE_KINDS = ("threaded", "naive")

_engine: Engine | None = None
_engine_lock = threading.Lock()


def _make_engine(kind: str) -> Engine:
    name = kind.strip().lower()
    if name == "threaded":
        return ThreadedEngine()
    if name == "naive":
        return NaiveEngine()
    raise ValueError(f"unknown lazynp engine {kind!r}; expected one of {ENGINE_KINDS}")


def get_engine() -> Engine:
    """Return the process-wide engine, creating it on first use.

    Returns
    -------
    Engine
        The engine selected by ``LAZYNP_ENGINE`` (``"threaded"`` if unset),
        or the one installed by :func:`set_engine`.

    Raises
    ------
    ValueError
        If ``LAZYNP_ENGINE`` names an unknown engine.
    """
    global _engine
    eng = _engine
    if eng is None:
        with _engine_lock:
            if _engine is None:
                _engine = _make_engine(os.environ.get("LAZYNP_ENGINE", "threaded"))
            eng = _engine
    return eng


def set_engine(kind: str | Engine) -> Engine:
    """Replace the process-wide engine.

    The old engine is drained (every pushed operation finishes) before the
    new one takes over, so vars carry over safely, including failure marks.
    Do not push from other threads while switching.

    Parameters
    ----------
    kind : {"threaded", "naive"} or Engine
        Engine kind to create, or an engine instance to install.

    Returns
    -------
    Engine
        The new engine.
    """
    global _engine
    new = _make_engine(kind) if isinstance(kind, str) else kind
    if not isinstance(new, Engine):
        raise TypeError(f"expected an engine kind or Engine, got {type(kind).__name__}")
    with _engine_lock:
        old = _engine
        if old is not None and old is not new:
            old.shutdown()
        _engine = new
    return new


def new_var() -> EngineVar:
    """Create a new var (a handle for one resource).

    Returns
    -------
    EngineVar
        A fresh var with nothing pending.
    """
    return EngineVar()


def push(
    fn: Callable[[], object],
    reads: Sequence[EngineVar],
    writes: Sequence[EngineVar],
    device: str = "cpu",
    context: str | None = None,
) -> None:
    """Schedule ``fn`` on the process-wide engine.

    Parameters
    ----------
    fn : callable
        Called with no arguments once every var is available; its return
        value is ignored. If it raises, the exception is stored on every var
        in ``writes`` and re-raised by :func:`wait_for_var`; later operations
        touching those vars are skipped and inherit the failure.
    reads, writes : sequence of EngineVar
        Vars ``fn`` reads and writes. Duplicates are ignored and a var in both
        lists counts as a write only.
    device : str, optional
        Device the operation targets (recorded only).
    context : str, optional
        Where the user recorded the operation, e.g.
        ``'File "x.py", line 3, in f'``; attached to a raised exception as the
        note ``"lazynp: operation recorded at <context>"``.
    """
    (_engine or get_engine()).push(fn, reads, writes, device, context)


def push_async(
    fn: Callable[[Callable[[BaseException | None], None]], object],
    reads: Sequence[EngineVar],
    writes: Sequence[EngineVar],
    device: str = "cpu",
    context: str | None = None,
) -> None:
    """Schedule an operation that completes through a callback (MXNet's ``PushAsync``).

    ``fn(done)`` runs once the vars are available and may return before the work is
    finished (e.g. after starting a transfer); the operation keeps its vars until
    ``done(None)``, or ``done(exc)`` for a failure, is called from any thread.  No engine
    thread waits in between.  See :meth:`Engine.push_async`.
    """
    (_engine or get_engine()).push_async(fn, reads, writes, device, context)


def wait_for_var(var: EngineVar) -> None:
    """Block until every operation pushed so far that reads or writes ``var`` is done.

    Parameters
    ----------
    var : EngineVar
        The var to wait for.

    Raises
    ------
    BaseException
        The original exception of the operation that failed ``var`` (directly
        or through a failed input). The failure mark is cleared, so ``var``
        can be used again.
    """
    # Hot path: nothing pending and no failure, so no lock and no engine call.
    if not var._pending and var._failure is None:
        return
    (_engine or get_engine()).wait_for_var(var)


def wait_all() -> None:
    """Block until every operation pushed to the process-wide engine is done.

    Stored failures are not raised; use :func:`wait_for_var` for that.
    """
    (_engine or get_engine()).wait_all()


def delete_var(var: EngineVar, on_delete: Callable[[], object] | None = None) -> None:
    """Retire ``var`` after every earlier operation on it has finished.

    Parameters
    ----------
    var : EngineVar
        The var to retire; do not use it afterwards.
    on_delete : callable, optional
        Runs as a write of ``var`` once all earlier readers and writers are
        done (even if ``var`` holds a failure, which is discarded). Typically
        frees the buffer.
    """
    (_engine or get_engine()).delete_var(var, on_delete)
