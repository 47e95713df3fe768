"""Multi-threaded dependency engine (MXNet's ThreadedEngine, Chen et al. 2015)."""

from __future__ import annotations

import os
import queue
import threading
from collections import deque
from typing import Callable, Sequence

from .base import Engine
from .interrupts import held
from .var import (ASYNC, DELETE, NORMAL, WAIT, WAIT_ABANDONED, EngineVar, Failure, PushedOp,
                  dedupe, run_body)


class ThreadedEngine(Engine):
    """Engine that runs ready operations on a pool of worker threads.

    Each var keeps a queue of pending accesses. An operation is dispatched
    once it holds a grant on every var it touches: a read is granted when no
    write is ahead of it, a write when every earlier access has finished.
    All scheduling state is guarded by one engine lock; operations themselves
    run without it.

    Parameters
    ----------
    num_workers : int, optional
        Size of the worker pool (default ``os.cpu_count()``). Workers are
        daemon threads started by the first push that needs them.
    """

    def __init__(self, num_workers: int | None = None) -> None:
        if num_workers is None:
            num_workers = os.cpu_count() or 1
        if num_workers < 1:
            raise ValueError(f"num_workers must be >= 1, got {num_workers}")
        self._num_workers = num_workers
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._ready: queue.SimpleQueue[PushedOp | None] = queue.SimpleQueue()
        self._workers: list[threading.Thread] | None = None
        self._num_pending = 0  # unfinished user ops (not WAIT markers)
        self._all_waiters = 0
        self._local = threading.local()

    @property
    def num_workers(self) -> int:
        return self._num_workers

    def __repr__(self) -> str:
        return f"ThreadedEngine(num_workers={self._num_workers})"

    def idle(self) -> bool:
        return not self._num_pending

    # -- public API --------------------------------------------------------

    def push(
        self,
        fn: Callable[[], object],
        reads: Sequence[EngineVar],
        writes: Sequence[EngineVar],
        device: str = "cpu",
        context: str | None = None,
    ) -> None:
        rs, ws = dedupe(reads, writes)
        self._submit(PushedOp(fn, rs, ws, NORMAL, context, device))

    def push_async(
        self,
        fn: Callable[[Callable[[BaseException | None], None]], object],
        reads: Sequence[EngineVar],
        writes: Sequence[EngineVar],
        device: str = "cpu",
        context: str | None = None,
    ) -> None:
        rs, ws = dedupe(reads, writes)
        op = PushedOp(None, rs, ws, ASYNC, context, device)

        def done(exc: BaseException | None = None) -> None:
            failure = None if exc is None else (exc, exc.__traceback__)
            with self._lock:
                if op.done:
                    return
                op.done = True
                op.complete = None      # (breaks the op <-> done reference cycle)
                ready = self._complete_locked(op, failure)
                self._dispatch_locked(ready)

        op.fn = lambda: fn(done)
        op.complete = done
        self._submit(op)

    def delete_var(self, var: EngineVar, on_delete: Callable[[], object] | None = None) -> None:
        self._submit(PushedOp(on_delete, (), (var,), DELETE, None, "cpu"))

    def wait_for_var(self, var: EngineVar) -> None:
        if not var._pending and var._failure is None:
            return
        with self._lock:
            if var._pending:
                self._check_not_worker("wait_for_var")
                # Queue a write marker behind everything pushed so far: once
                # it is granted, all earlier accesses have finished.
                op = PushedOp(None, (), (var,), WAIT, None, "cpu")
                op.wait = 1
                var._pending += 1
                if var._queue is None:
                    var._queue = deque()
                var._queue.append((op, True))
                try:
                    while not op.done:
                        if not self._help_locked(var):
                            self._cond.wait()
                except BaseException:
                    if not op.done:
                        op.kind = WAIT_ABANDONED
                    raise
                failure = op.failure
            else:
                failure = var._failure
                var._failure = None
        if failure is not None:
            raise failure[0].with_traceback(failure[1])

    def wait_all(self) -> None:
        if not self._num_pending:
            return
        with self._lock:
            if not self._num_pending:
                return
            self._check_not_worker("wait_all")
            self._all_waiters += 1
            try:
                while self._num_pending:
                    self._cond.wait()
            finally:
                self._all_waiters -= 1

    def shutdown(self) -> None:
        self.wait_all()
        with self._lock:
            workers, self._workers = self._workers, None
            # Any op queued later starts a fresh generation; these Nones only
            # retire as many threads as this generation had.
            for _ in workers or ():
                self._ready.put(None)

    def fork_prepare(self) -> bool:
        self._lock.acquire()
        return not self._num_pending

    def fork_done(self, child: bool) -> None:
        if child:
            # the parent's workers do not exist here: the next push starts new ones
            self._workers = None
            # (threads that waited in the parent are gone: their waiter locks go with them)
            self._cond = threading.Condition(self._lock)
            self._ready = queue.SimpleQueue()
            self._local = threading.local()
            self._all_waiters = 0
        self._lock.release()

    # -- scheduling (everything *_locked runs under self._lock) -------------

    def _check_not_worker(self, what: str) -> None:
        if getattr(self._local, "is_worker", False):
            raise RuntimeError(
                f"{what}() called from inside an engine operation while work is "
                "pending; this could deadlock. Push a dependent operation instead."
            )

    def _submit(self, op: PushedOp) -> None:
        granted = 0
        with self._lock:
            self._num_pending += 1
            for v in op.reads:
                v._pending += 1
                if v._busy >= 0 and not v._queue:
                    v._busy += 1
                    granted += 1
                else:
                    q = v._queue
                    if q is None:
                        q = v._queue = deque()
                    q.append((op, False))
            for v in op.writes:
                v._pending += 1
                if v._busy == 0 and not v._queue:
                    v._busy = -1
                    v._writer = op
                    granted += 1
                else:
                    q = v._queue
                    if q is None:
                        q = v._queue = deque()
                    q.append((op, True))
            op.wait = len(op.reads) + len(op.writes) - granted
            if op.wait == 0:
                if self._workers is None:
                    self._start_workers_locked()
                self._ready.put(op)

    def _start_workers_locked(self) -> None:
        workers = [
            threading.Thread(target=self._worker_main, name=f"lazynp-engine-{i}", daemon=True)
            for i in range(self._num_workers)
        ]
        for t in workers:
            t.start()
        self._workers = workers

    def _grant_locked(self, op: PushedOp, ready: list[PushedOp]) -> None:
        op.wait -= 1
        if op.wait == 0:
            if op.kind >= WAIT:
                self._finish_wait_locked(op, ready)
            else:
                ready.append(op)

    def _grant_next_locked(self, v: EngineVar, ready: list[PushedOp]) -> None:
        """Grant the head of ``v``'s queue; ``v`` must be free (``_busy == 0``)."""
        q = v._queue
        op, is_write = q[0]  # type: ignore[index]
        if is_write:
            q.popleft()  # type: ignore[union-attr]
            v._busy = -1
            v._writer = op
            self._grant_locked(op, ready)
            return
        while q and not q[0][1]:
            op = q.popleft()[0]
            v._busy += 1
            self._grant_locked(op, ready)

    def _finish_wait_locked(self, op: PushedOp, ready: list[PushedOp]) -> None:
        v = op.writes[0]
        if op.kind == WAIT:
            op.failure = v._failure
            v._failure = None
        op.done = True
        v._pending -= 1
        v._busy = 0
        v._writer = None
        if v._queue:
            self._grant_next_locked(v, ready)
        self._cond.notify_all()

    def _help_locked(self, var: EngineVar) -> bool:
        """Run the op holding ``var``'s write grant in this (waiting) thread.

        Only that op, never unrelated work, so the wait cannot be delayed by a
        long independent op. It saves two thread wake-ups per push+wait round
        trip. Returns False if there was nothing to run.
        """
        op = var._writer
        if op is None or op.wait or not op.claim:
            return False
        try:
            op.claim.pop()
        except IndexError:  # a worker got it first
            return False
        local = self._local
        self._lock.release()
        failure = interrupt = None
        ran = False
        try:
            # Mark this thread as a worker so a nested wait raises instead of deadlocking.
            local.is_worker = True
            # Ctrl-C is held until the op is done (it must never become the op's failure)
            # and raised once its grants are released
            with held():
                failure = run_body(op, BaseException)
                ran = True
        except BaseException as exc:    # Ctrl-C (held, or before the op started)
            interrupt = exc
        finally:
            local.is_worker = False
            self._lock.acquire()
        if not ran:         # interrupted before it started: a worker runs it instead
            op.claim = [True]
            if self._workers is None:
                self._start_workers_locked()
            self._ready.put(op)
            raise interrupt
        op.fn = None
        if op.kind == ASYNC:
            self._lock.release()
            try:
                self._async_body_returned(op, failure)
            finally:
                self._lock.acquire()
        else:
            self._dispatch_locked(self._complete_locked(op, failure))
        if interrupt is not None:
            raise interrupt
        return True

    def _dispatch_locked(self, ready: list[PushedOp]) -> None:
        if ready:
            if self._workers is None:
                self._start_workers_locked()
            put = self._ready.put
            for r in ready:
                put(r)

    @staticmethod
    def _async_body_returned(op: PushedOp, failure: Failure | None) -> None:
        """An ASYNC op's body returned: it completes now if it failed (or never ran because
        an input failed), else when its body's ``done`` callback is called."""
        complete = op.complete      # (None once done was called)
        if failure is not None and complete is not None:
            complete(failure[0])

    def _complete_locked(self, op: PushedOp, failure: Failure | None) -> list[PushedOp]:
        """Release ``op``'s grants; return the ops that became ready."""
        ready: list[PushedOp] = []
        if failure is not None:
            for v in op.writes:
                v._failure = failure
        for v in op.reads:
            v._pending -= 1
            v._busy -= 1
            if v._busy == 0 and v._queue:
                self._grant_next_locked(v, ready)
        for v in op.writes:
            v._pending -= 1
            v._busy = 0
            v._writer = None
            if v._queue:
                self._grant_next_locked(v, ready)
        self._num_pending -= 1
        if not self._num_pending and self._all_waiters:
            self._cond.notify_all()
        return ready

    # -- workers -------------------------------------------------------------

    def _worker_main(self) -> None:
        self._local.is_worker = True
        get = self._ready.get
        while True:
            op = get()
            if op is None:  # shutdown token
                return
            while op is not None:
                op = self._execute(op)

    def _execute(self, op: PushedOp) -> PushedOp | None:
        """Run ``op``, release its vars and return one newly ready op to run next."""
        try:
            op.claim.pop()
        except IndexError:  # already run by a thread helping in wait_for_var
            return None
        failure = run_body(op, BaseException)
        op.fn = None  # drop references held by the closure as early as possible
        if op.kind == ASYNC:
            self._async_body_returned(op, failure)
            return None
        with self._lock:
            ready = self._complete_locked(op, failure)
            if not ready:
                return None
            if len(ready) > 1:
                if self._workers is None:
                    self._start_workers_locked()
                put = self._ready.put
                for r in ready[1:]:
                    put(r)
        # Running one successor here saves a queue round trip and keeps its data hot.
        return ready[0]
