"""Abstract engine interface shared by the threaded and naive engines."""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from typing import Callable, Sequence

from .var import EngineVar


class Engine(ABC):
    """Schedules opaque callables according to the vars they read and write.

    Operations touching the same var run in push order, except that
    consecutive reads may run concurrently. Failures are stored on the vars an
    operation writes and re-raised by :meth:`wait_for_var`.
    """

    @property
    @abstractmethod
    def num_workers(self) -> int:
        """Number of operations that can execute at the same time."""

    def idle(self) -> bool:
        """True when no pushed operation is waiting or running (a synchronous engine always
        is): the caller may then run work inline instead of pushing it and waiting."""
        return True

    def new_var(self) -> EngineVar:
        """Create a new var (a handle for one resource).

        Returns
        -------
        EngineVar
            A fresh var with nothing pending.
        """
        return EngineVar()

    @abstractmethod
    def push(
        self,
        fn: Callable[[], object],
        reads: Sequence[EngineVar],
        writes: Sequence[EngineVar],
        device: str = "cpu",
        context: str | None = None,
    ) -> None:
        """Schedule ``fn`` to run once its vars are available.

        Parameters
        ----------
        fn : callable
            Called with no arguments; its return value is ignored.
        reads, writes : sequence of EngineVar
            Vars ``fn`` reads and writes. Duplicates are ignored and a var in
            both lists counts as a write only.
        device : str, optional
            Device the operation targets. Recorded only; the engine itself is
            device agnostic.
        context : str, optional
            Where the user recorded the operation. Added as a note to any
            exception ``fn`` raises.
        """

    def push_async(
        self,
        fn: Callable[[Callable[[BaseException | None], None]], object],
        reads: Sequence[EngineVar],
        writes: Sequence[EngineVar],
        device: str = "cpu",
        context: str | None = None,
    ) -> None:
        """Schedule an operation that completes later, through a callback (MXNet's
        ``PushAsync``): ``fn(done)`` runs once its vars are available and may return at
        once; the operation holds its vars until ``done(None)`` (success) or ``done(exc)``
        (failure, stored on ``writes`` as for :meth:`push`) is called, from any thread.
        Calls of ``done`` after the first are ignored; if ``fn`` raises, that is the
        operation's failure.  No engine thread waits meanwhile (for I/O: transfers).

        This default runs ``fn`` as an ordinary operation that waits for ``done``.
        """
        finished = threading.Event()
        outcome: list[BaseException | None] = []

        def done(exc: BaseException | None = None) -> None:
            if not outcome:
                outcome.append(exc)
                finished.set()

        def body() -> None:
            try:
                fn(done)
            except BaseException as exc:
                done(exc)
            finished.wait()
            if outcome[0] is not None:
                raise outcome[0]

        self.push(body, reads, writes, device, context)

    @abstractmethod
    def wait_for_var(self, var: EngineVar) -> None:
        """Block until every operation pushed so far that touches ``var`` is done.

        Raises
        ------
        BaseException
            The exception stored on ``var`` by a failed operation (the original
            object). The failure mark is cleared afterwards, so ``var`` is
            usable again.
        """

    @abstractmethod
    def wait_all(self) -> None:
        """Block until every pushed operation is done. Never raises stored failures."""

    @abstractmethod
    def delete_var(self, var: EngineVar, on_delete: Callable[[], object] | None = None) -> None:
        """Retire ``var`` once all earlier operations on it have finished.

        Parameters
        ----------
        var : EngineVar
            The var to retire. It must not be used afterwards.
        on_delete : callable, optional
            Runs (as a write of ``var``) after every earlier reader and
            writer finished, even if ``var`` holds a failure, which is
            discarded.
        """

    def fork_prepare(self) -> bool:
        """Before ``os.fork()``, after :meth:`wait_all`: hold the scheduling state still, so
        the child starts with nothing in flight.  Returns False when work is pending
        (pushed meanwhile by another thread): release with :meth:`fork_done`."""
        return True

    def fork_done(self, child: bool) -> None:
        """After ``os.fork()`` (in the parent and in the child): undo :meth:`fork_prepare`;
        in the child, forget the parent's worker threads (they do not exist there)."""

    def shutdown(self) -> None:
        """Wait for pending work and release worker threads, if any.

        The engine stays usable: a later push starts workers again.
        """
        self.wait_all()
