"""``"dist_sync"`` and ``"dist_async"``: the store's servers are dask.distributed actors.

One :class:`DistKVStore` lives in every process that uses the store: on the driver (which
created the servers and is rank 0 of a one-worker session until :func:`run_workers` starts
more) and in each worker task started by ``run_workers`` (which joins from a
:class:`StoreSpec`).  Arrays travel as arguments and results of actor method calls, i.e.
through dask's own serialization.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from .api import KVStore
from .errors import KVStoreError
from . import bridge
from .faults import Membership, Watchdog, wait_result
from .optimizers import Optimizer
from .partition import DEFAULT_BIG_ARRAY_BOUND, Key, KeyMeta, subkey
from .server import KVServer


@dataclass(frozen=True)
class ServerRef:
    """Where server ``index`` runs: its dask worker, actor key and process id."""

    index: int
    address: str
    key: str
    pid: int

    def describe(self) -> str:
        return f"server {self.index} ({self.address}, pid {self.pid})"


@dataclass
class StoreSpec:
    """Everything a worker process needs to join a store (picklable, small)."""

    kind: str
    servers: list[ServerRef]
    registry: dict[Key, KeyMeta]
    session: int
    rank: int
    num_workers: int
    peers: dict[int, tuple[str, int]] = field(default_factory=dict)  # rank -> (address, pid)
    timeout: float = 60.0
    poll: float = 0.25
    bound: int = DEFAULT_BIG_ARRAY_BOUND


def _joined(parts: list[np.ndarray], meta: KeyMeta) -> np.ndarray:
    """One writable C-contiguous array of ``meta``'s shape from the servers' slices."""
    if len(parts) == 1:
        v = parts[0]
        if not (v.flags.writeable and v.flags.c_contiguous):
            v = np.array(v, order="C")         # (a transfer's buffer is normally both)
    else:
        v = np.concatenate(parts)
    return v.reshape(meta.shape)


def new_session_id() -> int:
    return random.SystemRandom().getrandbits(62)


def describe_rank(rank: int, address: str, pid: int | None) -> str:
    return f"worker rank {rank} ({address}" + (f", pid {pid})" if pid else ")")


class DistKVStore(KVStore):
    """A store whose keys live on :class:`~lazynp.kvstore.server.KVServer` actors.

    Made by :func:`lazynp.kvstore.create` on the driver, or by ``run_workers`` in a worker.
    """

    def __init__(self, spec: StoreSpec, client: Any = None, owner: Any = None,
                 actor_futures: list | None = None) -> None:
        super().__init__(len(spec.servers), spec.bound)
        self.kind = spec.kind
        self._mode = "sync" if spec.kind == "dist_sync" else "async"
        self._spec = spec
        self._client = client
        self._owner = owner                    # the embedded cluster this store closes
        self._actor_futures = actor_futures or []   # the driver holds them: keeps actors alive
        self._registry.update(spec.registry)
        self._waiting_pulls: dict[Key, set[bridge.Arrival]] = {}
        self._barriers = 0
        self._broken: str | None = None
        self._actors = self._make_actors()
        self._membership = self._make_membership()
        self._watchdog = Watchdog(lambda: self._membership, spec.timeout, spec.poll)

    # -- plumbing ---------------------------------------------------------------------
    def _get_client(self) -> Any:
        if self._client is not None:
            return self._client
        from distributed import get_client
        return get_client()

    def _make_actors(self) -> list:
        from distributed.actor import Actor
        client = self._client
        if client is None:
            return [Actor(KVServer, s.address, s.key) for s in self._spec.servers]
        with client.as_current():
            return [Actor(KVServer, s.address, s.key) for s in self._spec.servers]

    def _make_membership(self) -> Membership:
        spec = self._spec
        watched = {s.address: s.describe() for s in spec.servers}
        for r, (addr, pid) in spec.peers.items():
            if r != spec.rank and addr not in watched:
                watched[addr] = describe_rank(r, addr, pid)
        return Membership(self._get_client, watched, spec.poll)

    @property
    def rank(self) -> int:
        return self._spec.rank

    @property
    def num_workers(self) -> int:
        return self._spec.num_workers

    @property
    def servers(self) -> list[ServerRef]:
        """Where the servers run."""
        return list(self._spec.servers)

    def _check_open(self) -> None:
        super()._check_open()
        if self._broken is not None:
            raise KVStoreError(f"the KVStore is unusable: {self._broken}")

    def _call(self, server: int, method: str, *args: Any) -> Any:
        """Start ``method`` on a server; an ActorFuture."""
        try:
            return getattr(self._actors[server], method)(*args)
        except Exception as exc:        # dask raises when it knows the actor's worker is gone
            raise KVStoreError(f"lazynp.kvstore: {method} on "
                               f"{self._spec.servers[server].describe()} failed: "
                               f"{type(exc).__name__}: {exc}") from exc

    def _wait(self, future: Any, what: str, server: int | None = None,
              timeout: float | None = None) -> Any:
        blame = None if server is None else self._spec.servers[server].describe()
        return wait_result(future, what, self._membership,
                           self._spec.timeout if timeout is None else timeout,
                           self._spec.poll, blame)

    def _all(self, method: str, *args: Any, what: str, servers=None) -> list:
        idx = range(len(self._actors)) if servers is None else servers
        futs = [(i, self._call(i, method, *args)) for i in idx]
        return [self._wait(f, what, i) for i, f in futs]

    # -- keys -------------------------------------------------------------------------
    def _init_keys(self, items: list[tuple[KeyMeta, np.ndarray]]) -> None:
        session = self._spec.session
        futs = []
        for meta, arr in items:
            flat = arr.reshape(-1)
            for i, p in enumerate(meta.parts):
                sk = subkey(meta.key, i)
                if self.rank == 0:
                    f = self._call(p.server, "init", session, sk, flat[p.start:p.stop])
                else:            # rank 0's value is the one stored: wait until it is there
                    f = self._call(p.server, "wait_init", session, sk)
                futs.append((f, p.server, meta.key))
        for f, server, key in futs:
            self._wait(f, f"init of key {key!r}", server)

    _retains_pushes = False         # (a push is serialized to a server, not kept)

    def _start(self, calls: list[tuple[int, str, tuple]], what: str,
               finish: Callable[[list | None, BaseException | None], None]) -> None:
        """Start actor calls ``(server, method, args)`` now; ``finish(results, None)`` or
        ``finish(None, error)`` follows once, from the event loop or the watchdog thread.
        Nothing waits meanwhile: the calls are awaited on dask's event loop, and the
        watchdog ends them with a :class:`KVStoreError` when a process is lost or the
        store's timeout passes."""
        futs = [(server, self._call(server, method, *args)) for server, method, args in calls]
        servers = sorted({server for server, _ in futs})
        blame = ", ".join(self._spec.servers[i].describe() for i in servers)
        once = bridge.Arrival()
        once.then(finish)
        watchdog = self._watchdog
        token = watchdog.add(what, blame, lambda err: once.set(None, err))

        async def collect() -> None:
            results = []
            for server, f in futs:
                try:
                    results.append(await f)
                except BaseException as exc:
                    watchdog.call_failed(token, exc, self._spec.servers[server].describe())
                    return
            watchdog.done(token)
            once.set(results)

        self._get_client().loop.add_callback(collect)

    def _start_push(self, meta, seq, flat, done, failed):
        session, rank = self._spec.session, self._spec.rank
        calls = [(p.server, "push", (session, subkey(meta.key, i), rank, seq,
                                     flat[p.start:p.stop]))
                 for i, p in enumerate(meta.parts)]

        def finish(_results: list | None, exc: BaseException | None) -> None:
            if exc is None:
                done()
            else:
                failed(exc)
        self._start(calls, f"push of key {meta.key!r}", finish)

    def _push_failed(self, key: Key, exc: BaseException) -> None:
        with self._lock:
            waiting = self._waiting_pulls.pop(key, ())
        for arrival in waiting:
            arrival.set(None, self._push_failure_error(key, exc))

    @staticmethod
    def _push_failure_error(key: Key, exc: BaseException) -> KVStoreError:
        err = KVStoreError(f"an earlier push of key {key!r} failed: "
                           f"{type(exc).__name__}: {exc}")
        err.__cause__ = exc
        return err

    def _pull_value(self, meta: KeyMeta) -> Any:
        """The pull request goes to the servers now; the returned array's value is
        written by an engine operation that completes when the answer arrives."""
        key = meta.key
        session, rank = self._spec.session, self._spec.rank
        after = self._seq.get(key, 0)
        arrival = bridge.Arrival()
        with self._lock:
            failure = self._push_failures.get(key)
            if failure is None:
                self._waiting_pulls.setdefault(key, set()).add(arrival)
        if failure is not None:
            arrival.set(None, self._push_failure_error(key, failure))
            return bridge.arriving_value(meta.shape, meta.dtype, arrival)
        what = f"pull of key {key!r}" + (f" (round {after})" if self._mode == "sync"
                                        and after else "")
        calls = [(p.server, "pull", (session, subkey(key, i), rank, after))
                 for i, p in enumerate(meta.parts)]

        def finish(parts: list | None, exc: BaseException | None) -> None:
            with self._lock:
                w = self._waiting_pulls.get(key)
                if w is not None:
                    w.discard(arrival)
            if exc is not None:
                arrival.set(None, exc)
                return
            try:
                value = _joined(parts, meta)
            except BaseException as e:      # (a corrupt answer: no hang, an error)
                arrival.set(None, e)
                return
            arrival.set(value)

        try:
            self._start(calls, what, finish)
        except BaseException:
            with self._lock:
                self._waiting_pulls.get(key, set()).discard(arrival)
            raise
        return bridge.arriving_value(meta.shape, meta.dtype, arrival)

    # -- control ----------------------------------------------------------------------
    def _set_optimizer(self, optimizer: Optimizer | None) -> None:
        if self.rank == 0:
            self._all("set_optimizer", self._spec.session, optimizer, what="set_optimizer")
        if self.num_workers > 1:
            self._barrier()

    def _barrier(self) -> None:
        self._barriers += 1
        f = self._call(0, "barrier", self._spec.session, self.rank, self._barriers)
        self._wait(f, f"barrier {self._barriers} of rank {self.rank}", 0)

    def report(self, message: Any) -> None:
        self._check_open()
        self._call(0, "report", self._spec.session, self.rank, message)

    def info(self) -> list[dict]:
        """Each server's process id, keys, update and round counts."""
        self._check_open()
        return self._all("info", what="info")

    def _snapshots(self) -> list[dict]:
        return self._all("snapshot", self._spec.session, what="checkpoint snapshot")

    def _restore(self, per_server, optimizer):
        session = self._spec.session
        futs = [(i, self._call(i, "restore", session, items, optimizer))
                for i, items in enumerate(per_server)]
        for i, f in futs:
            self._wait(f, "checkpoint restore", i)

    def _new_session(self, num_workers: int = 1) -> int:
        """Driver: start a session of ``num_workers`` workers on every server."""
        session = new_session_id()
        self._all("begin", session, num_workers, what="begin session")
        self._spec.session = session
        self._spec.num_workers = 1
        self._spec.peers = {}
        self._seq.clear()
        self._barriers = 0
        self._membership = self._make_membership()
        return session

    def _abort(self, reason: str, servers: list[int] | None = None) -> None:
        """Best effort: release every call waiting on the servers with ``reason``."""
        for i in range(len(self._actors)) if servers is None else servers:
            try:
                f = self._call(i, "abort", reason)
                wait_result(f, "abort", None, min(5.0, self._spec.timeout), self._spec.poll)
            except KVStoreError:
                pass

    def _close(self) -> None:
        self._watchdog.stop("the KVStore was closed")
        self._actor_futures = []
        self._actors = []
        if self._owner is not None:
            owner, self._owner = self._owner, None
            owner.close()
