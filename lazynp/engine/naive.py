"""Synchronous engine for debugging: every push runs at once in the caller's thread."""

from __future__ import annotations

import threading
from typing import Callable, Sequence

from .base import Engine
from .var import DELETE, NORMAL, EngineVar, PushedOp, dedupe, run_body


class NaiveEngine(Engine):
    """Engine that runs each operation synchronously inside :meth:`push`.

    Failure semantics match :class:`ThreadedEngine`: an exception is stored on
    the vars the operation writes and raised by :meth:`wait_for_var`, so a
    program behaves the same under both engines, just without overlap.
    Pushes from several threads are serialized; nested pushes run inline.
    """

    def __init__(self) -> None:
        self._lock = threading.RLock()

    @property
    def num_workers(self) -> int:
        return 1

    def __repr__(self) -> str:
        return "NaiveEngine()"

    def push(
        self,
        fn: Callable[[], object],
        reads: Sequence[EngineVar],
        writes: Sequence[EngineVar],
        device: str = "cpu",
        context: str | None = None,
    ) -> None:
        rs, ws = dedupe(reads, writes)
        self._run(PushedOp(fn, rs, ws, NORMAL, context, device))

    def delete_var(self, var: EngineVar, on_delete: Callable[[], object] | None = None) -> None:
        self._run(PushedOp(on_delete, (), (var,), DELETE, None, "cpu"))

    def _run(self, op: PushedOp) -> None:
        with self._lock:
            # Only Exception is caught: Ctrl-C during a synchronous op should
            # interrupt the program, as it would in eager NumPy.
            failure = run_body(op, Exception)
            if failure is not None:
                for v in op.writes:
                    v._failure = failure

    def fork_prepare(self) -> bool:
        self._lock.acquire()
        return True

    def fork_done(self, child: bool) -> None:
        self._lock.release()

    def wait_for_var(self, var: EngineVar) -> None:
        if var._failure is None:
            return
        with self._lock:
            failure, var._failure = var._failure, None
        if failure is not None:
            raise failure[0].with_traceback(failure[1])

    def wait_all(self) -> None:
        return None
