"""Bounded waits: an answer, a clear :class:`KVStoreError` naming what was lost, or a timeout.

Every wait of the KVStore (a pull's answer, an acknowledged push, a barrier, a run of
workers) goes through :func:`wait_result`. It waits on the dask future in slices of ``poll``
seconds; between slices it asks the dask scheduler which workers are alive
(:class:`Membership`, at most once per ``poll``). A process killed with SIGKILL drops its
connection to the scheduler, which removes the worker at once, so the loss is reported
within about one ``poll``; a process that hangs without dying is reported when the wait
passes ``timeout``; the error then names the watched processes whose heartbeats to the
scheduler stopped (a stopped or hung process, :meth:`Membership.silent`), and only when
there is none the process the call talked to. Nothing here retries: a lost server's keys are
gone, and a sync round that misses a worker can never complete, so the error is final and
names the process.
"""
from __future__ import annotations

import asyncio
import threading
import time
from typing import Any, Callable

from .errors import KVStoreError

#: seconds without a heartbeat after which :meth:`Membership.silent` names a process
#: (dask workers of small clusters send one every 0.5-1 s)
SILENT_AFTER = 3.0


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
            alive = set(alive_workers(self._get_client(), max(5.0, 4 * self.poll)))
        except Exception:
            # (no answer this time: a loaded scheduler, a dropped connection.  Not a loss:
            # a request that gets no answer ends at its timeout, naming what it waited for)
            return []
        self._lost = [d for a, d in self.watched.items() if a not in alive]
        return self._lost

    def silent(self, at_least: float = SILENT_AFTER) -> list[str]:
        """Descriptions of watched processes the scheduler still lists but has not heard
        from (no heartbeat) for ``at_least`` seconds, longest silence first, each with the
        time (``"worker rank 1 (tcp://..., pid 123), silent for 7 s"``).

        A stopped (SIGSTOP) or hung process keeps its connections open, so the scheduler
        keeps it; its heartbeats stop.  The silence is measured against the newest
        heartbeat of any worker (the scheduler's clock, not this machine's).
        """
        if not self.watched:
            return []
        try:
            info = alive_workers(self._get_client(), max(5.0, 4 * self.poll))
        except Exception:
            return []
        seen = [w.get("last_seen") for w in info.values()]
        seen = [t for t in seen if isinstance(t, (int, float))]
        if not seen:
            return []
        newest = max(seen)
        quiet = []
        for addr, desc in self.watched.items():
            last = info.get(addr, {}).get("last_seen")
            if isinstance(last, (int, float)) and newest - last >= at_least:
                quiet.append((newest - last, f"{desc}, silent for {newest - last:.0f} s"))
        return [d for _, d in sorted(quiet, reverse=True)]


def alive_workers(client: Any, timeout: float) -> dict:
    """The scheduler's current workers, asked now.  (``Client.scheduler_info`` is not used:
    when its query fails it returns the identity cached at connection time, which may list
    no workers at all, and every watched process would look lost.)"""
    info = client.sync(client.scheduler.identity, n_workers=-1, callback_timeout=timeout)
    return info["workers"]


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def no_answer(what: str, timeout: float, blame: str | None,
              membership: Membership | None) -> str:
    """The message of a wait that got no answer within ``timeout``: it names the watched
    processes that stopped answering the scheduler (stopped, hung), or else the process
    the call talked to (``blame``), which may hang or only be slow."""
    # (half the wait at least: a live process on a loaded machine may miss a few
    # heartbeats, one stopped since the wait began has missed them all)
    silent = membership.silent(max(SILENT_AFTER, timeout / 2)) \
        if membership is not None else []
    if silent:
        return (f"lazynp.kvstore: {what}: no answer within {timeout:g} s; "
                f"{'; '.join(silent)}: it stopped answering (a stopped or hung process: "
                f"end it, then resume from the last checkpoint)")
    return (f"lazynp.kvstore: {what}: no answer within {timeout:g} s"
            + (f" from {blame}" if blame else "")
            + " (the process may hang; raise the store's timeout if it is only slow)")


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
            raise KVStoreError(no_answer(what, timeout, blame, membership))


class Watchdog:
    """Bounds the asynchronous requests of a store (pushes in flight, pulls whose answer
    is awaited by an engine operation): each one ends with its answer, or with a
    :class:`KVStoreError` naming a lost process within about ``poll`` seconds, or naming
    the request after ``timeout`` seconds without an answer.  Nothing waits on a request
    but this one thread, which runs only while requests are outstanding.

    Parameters
    ----------
    membership : callable
        Returns the current :class:`Membership` (it changes with the store's session).
    timeout, poll : float
        As for :func:`wait_result`.
    """

    _IDLE_EXIT = 2.0        # seconds without requests before the thread ends

    def __init__(self, membership: Callable[[], Membership], timeout: float,
                 poll: float) -> None:
        self._membership = membership
        self.timeout = timeout
        self.poll = poll
        self._cond = threading.Condition()
        self._requests: dict[int, tuple[float, str, str | None, Callable]] = {}
        self._failed: list[tuple[int, BaseException, str | None]] = []
        self._next = 0
        self._thread: threading.Thread | None = None
        self._stopped = False

    def add(self, what: str, blame: str | None,
            fail: Callable[[KVStoreError], None]) -> int:
        """Watch a request (``what``: ``"pull of key 'w'"``; ``blame``: the process it
        talks to); ``fail(error)`` ends it.  Returns a token for :meth:`done`."""
        with self._cond:
            self._next += 1
            token = self._next
            self._requests[token] = (time.monotonic() + self.timeout, what, blame, fail)
            if self._thread is None:
                self._thread = threading.Thread(target=self._main, daemon=True,
                                                name="lazynp-kvstore-watchdog")
                self._thread.start()
        return token

    def done(self, token: int) -> None:
        """The request answered: stop watching it."""
        with self._cond:
            self._requests.pop(token, None)

    def call_failed(self, token: int, exc: BaseException, blame: str | None = None) -> None:
        """A call of the request raised ``exc`` (talking to ``blame``): the request ends
        with a :class:`KVStoreError` naming the lost process if there is one (asked by the
        watchdog thread: not on the event loop, where this is called)."""
        with self._cond:
            self._failed.append((token, exc, blame))
            self._cond.notify()

    def stop(self, reason: str) -> None:
        """End every outstanding request with ``reason``; later ones are ended at once."""
        with self._cond:
            self._stopped = True
            reqs, self._requests = self._requests, {}
            self._cond.notify()
        for _, what, _, fail in reqs.values():
            fail(KVStoreError(f"lazynp.kvstore: {what}: {reason}"))

    def _main(self) -> None:
        idle_since = None
        while True:
            with self._cond:
                if not self._failed:
                    self._cond.wait(self.poll)
                failed, self._failed = self._failed, []
                if not self._requests and not failed:
                    now = time.monotonic()
                    idle_since = idle_since or now
                    if now - idle_since > self._IDLE_EXIT or self._stopped:
                        self._thread = None
                        return
                    continue
                idle_since = None
                reqs = dict(self._requests)
            self._check(reqs, failed)

    def _end(self, token: int, error: KVStoreError) -> None:
        with self._cond:
            req = self._requests.pop(token, None)
        if req is not None:
            req[3](error)

    def _check(self, reqs: dict, failed: list) -> None:
        membership = self._membership()
        for token, exc, culprit in failed:
            req = reqs.get(token)
            if req is None:
                continue
            _, what, blame, _ = req
            blame = culprit or blame
            if isinstance(exc, KVStoreError):
                self._end(token, exc)
                continue
            lost = membership.lost(force=True) if membership is not None else []
            who = "; lost " + ", ".join(lost) if lost else (f" ({blame})" if blame else "")
            err = KVStoreError(f"lazynp.kvstore: {what} failed{who}: {_describe(exc)}")
            err.__cause__ = exc
            self._end(token, err)
        lost = membership.lost() if membership is not None else []
        now = time.monotonic()
        for token, (deadline, what, blame, _) in reqs.items():
            if lost:
                self._end(token, KVStoreError(f"lazynp.kvstore: {what} failed: lost "
                                              + ", ".join(lost)))
            elif now >= deadline:
                self._end(token, KVStoreError(no_answer(what, self.timeout, blame,
                                                        membership)))
