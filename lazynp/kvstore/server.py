"""The KVStore server: a dask.distributed actor holding a :class:`ShardStore`.

Every method is ``async``, so dask runs it on the worker's event loop, one at a time between
``await`` points: the state needs no lock, and a pull or barrier that must wait (for the
other workers of a sync round, for an earlier push of the same worker) simply awaits a
condition that every change notifies.  The server never times out on its own; workers
bound their waits (``faults.py``), and :meth:`KVServer.abort` releases every waiting call
with the reason when the driver sees a worker fail.
"""
from __future__ import annotations

import asyncio
import os
from typing import Any, Callable, Hashable

import numpy as np

from .errors import KVStoreError
from .optimizers import Optimizer
from .shard import ShardStore


class KVServer:
    """One parameter server (create it with ``client.submit(KVServer, ..., actor=True)``).

    Parameters
    ----------
    index : int
        This server's number among the store's servers.
    mode : {"sync", "async"}
    """

    def __init__(self, index: int, mode: str) -> None:
        self.index = index
        self.store = ShardStore(mode)
        self._cond: asyncio.Condition | None = None   # made on the event loop, on first use
        self._broken: str | None = None
        self._barriers: dict[int, set[int]] = {}
        self._barrier_done = 0
        self._reports: list[tuple[int, Any]] = []

    # -- waiting ----------------------------------------------------------------------
    def _condition(self) -> asyncio.Condition:
        if self._cond is None:
            self._cond = asyncio.Condition()
        return self._cond

    async def _changed(self) -> None:
        cond = self._condition()
        async with cond:
            cond.notify_all()

    def _check(self, session: int) -> None:
        if self._broken is not None:
            raise KVStoreError(self._broken)
        if session != self.store.session:
            raise KVStoreError(f"server {self.index}: call from an ended session "
                               f"({session}, current {self.store.session})")

    async def _wait_until(self, session: int, pred: Callable[[], bool]) -> None:
        cond = self._condition()
        async with cond:
            while True:
                self._check(session)
                if pred():
                    return
                await cond.wait()

    # -- control ----------------------------------------------------------------------
    async def begin(self, session: int, num_workers: int) -> None:
        """Start a session of ``num_workers`` workers (clears an abort)."""
        self.store.begin(session, num_workers)
        self._broken = None
        self._barriers.clear()
        self._barrier_done = 0
        self._reports.clear()
        await self._changed()

    async def abort(self, reason: str) -> None:
        """Fail every waiting and later call of this session with ``reason``."""
        self._broken = reason
        await self._changed()

    async def info(self) -> dict[str, Any]:
        """Process id, keys, rounds and update counts (for tests and fault reports)."""
        st = self.store
        return {"index": self.index, "pid": os.getpid(), "mode": st.mode,
                "session": st.session, "num_workers": st.num_workers,
                "keys": sorted(map(repr, st.values)),
                "updates": dict(st.updates), "rounds": dict(st.rounds),
                "pending": {sk: sorted(p) for sk, p in st.pending.items() if p},
                "optimizer": None if st.optimizer is None else st.optimizer.config()}

    async def set_optimizer(self, session: int, optimizer: Optimizer | None) -> None:
        self._check(session)
        self.store.set_optimizer(optimizer)

    # -- keys -------------------------------------------------------------------------
    async def init(self, session: int, sk: Hashable, value: np.ndarray) -> None:
        self._check(session)
        self.store.init(sk, value)
        await self._changed()

    async def wait_init(self, session: int, sk: Hashable) -> None:
        await self._wait_until(session, lambda: self.store.has(sk))

    async def push(self, session: int, sk: Hashable, rank: int, seq: int,
                   value: np.ndarray) -> None:
        self._check(session)
        if self.store.push(sk, rank, seq, value):
            await self._changed()
        elif self.store.mode == "async":
            await self._changed()     # an out-of-order push may unblock nothing; cheap

    async def pull(self, session: int, sk: Hashable, rank: int, after: int) -> np.ndarray:
        self._check(session)
        self.store.value(sk)                       # unknown key: fail now, do not wait
        if not self.store.ready(sk, rank, after):
            await self._wait_until(session, lambda: self.store.ready(sk, rank, after))
        return self.store.values[sk]

    async def barrier(self, session: int, rank: int, number: int) -> None:
        """Barrier ``number`` (1, 2, ...) of ``rank``: returns when every worker reached it."""
        self._check(session)
        arrived = self._barriers.setdefault(number, set())
        arrived.add(rank)
        if len(arrived) >= self.store.num_workers:
            del self._barriers[number]
            self._barrier_done = max(self._barrier_done, number)
            await self._changed()
            return
        await self._wait_until(session, lambda: self._barrier_done >= number)

    # -- checkpoints ------------------------------------------------------------------
    async def snapshot(self, session: int) -> dict[str, Any]:
        self._check(session)
        return self.store.snapshot()

    async def restore(self, session: int, items: list[tuple[Hashable, np.ndarray, dict, int]],
                      optimizer: Optimizer | None) -> None:
        self._check(session)
        self.store.set_optimizer(optimizer)
        for sk, value, state, updates in items:
            self.store.restore(sk, value, state, updates)
        await self._changed()

    # -- progress reports (workers to the driver) ------------------------------------------
    async def report(self, session: int, rank: int, message: Any) -> None:
        if session == self.store.session:
            self._reports.append((rank, message))

    async def take_reports(self) -> list[tuple[int, Any]]:
        out, self._reports = self._reports, []
        return out
