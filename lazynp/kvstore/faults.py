"""Bounded waits: an answer, a clear :class:`KVStoreError` naming what was lost, or a timeout.

Every wait of the KVStore (a pull's answer, an acknowledged push, a barrier, a run of
workers) goes through :func:`wait_result`.  It waits on the dask future in slices of
``poll`` seconds; between slices it asks the dask scheduler which workers are alive
(:class:`Membership`, at most once per ``poll``).  A process killed with SIGKILL drops its
connection to the scheduler, which removes the worker at once, so the loss is reported
within about one ``poll``; a process that hangs without dying is reported when the wait
passes ``timeout``.  Nothing here retries: a lost server's keys are gone, and a sync round
that misses a worker can never complete, so the error is final and names the process.
"""
from __future__ import annotations

import asyncio
import time
from typing import Any, Callable

from .errors import KVStoreError


class Membership:
    """The processes a store depends on, watched through the dask scheduler.

    Parameters
    ----------
    get_client : callable
        Returns the ``distributed.Client`` to ask (the worker's own client inside a task).
    watched : dict
        Dask worker address -> description (``"server 0 (tcp://..., pid 123)"``).
    poll : float
        At most one scheduler query per ``poll`` seconds.
    """

    def __init__(self, get_client: Callable[[], Any], watched: dict[str, str],
                 poll: float) -> None:
        self._get_client = get_client
        self.watched = dict(watched)
        self.poll = poll
        self._last = 0.0
        self._lost: list[str] = []

    def lost(self, force: bool = False) -> list[str]:
        """Descriptions of watched processes the scheduler no longer has (cached for
        ``poll`` seconds unless ``force``)."""
        if self._lost:
            return self._lost
        now = time.monotonic()
        if not force and now - self._last < self.poll:
            return []
        self._last = now
        if not self.watched:
            return []
        try:
            alive = set(self._get_client().scheduler_info(n_workers=-1)["workers"])
        except Exception as exc:   # the scheduler itself is unreachable
            self._lost = [f"the dask scheduler ({type(exc).__name__}: {exc})"]
            return self._lost
        self._lost = [d for a, d in self.watched.items() if a not in alive]
        return self._lost


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def wait_result(future: Any, what: str, membership: Membership | None, timeout: float,
                poll: float, blame: str | None = None) -> Any:
    """The result of a dask (actor) future, or a :class:`KVStoreError`.

    Parameters
    ----------
    future : ActorFuture or distributed.Future
    what : str
        The operation, for messages (``"pull of key 'w1'"``).
    membership : Membership or None
        Processes whose loss ends the wait.
    timeout : float
        Seconds without an answer before giving up.
    poll : float
        Slice of each wait between liveness checks.
    blame : str, optional
        The process the future talks to, named when the call itself fails.
    """
    deadline = time.monotonic() + timeout
    while True:
        remaining = deadline - time.monotonic()
        try:
            return future.result(timeout=max(0.001, min(poll, remaining)))
        except (TimeoutError, asyncio.TimeoutError):   # (distinct types before 3.11)
            pass
        except KVStoreError:
            raise
        except Exception as exc:
            lost = membership.lost(force=True) if membership is not None else []
            who = "; lost " + ", ".join(lost) if lost else (f" ({blame})" if blame else "")
            raise KVStoreError(f"lazynp.kvstore: {what} failed{who}: {_describe(exc)}") from exc
        if membership is not None:
            lost = membership.lost()
            if lost:
                raise KVStoreError(f"lazynp.kvstore: {what} failed: lost "
                                   + ", ".join(lost))
        if time.monotonic() >= deadline:
            raise KVStoreError(f"lazynp.kvstore: {what}: no answer within {timeout:g} s"
                               + (f" from {blame}" if blame else "")
                               + " (the process may hang; raise the store's timeout if "
                                 "it is only slow)")
