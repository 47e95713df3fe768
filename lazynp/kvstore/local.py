"""The ``"local"`` store: one process, several replicas, optimizer applied in place of a
server (MXNet's ``kvstore='local'``)."""
from __future__ import annotations

import threading
from typing import Callable

import numpy as np

from . import bridge
from .api import KVStore
from .optimizers import Optimizer
from .partition import DEFAULT_BIG_ARRAY_BOUND, KeyMeta, subkey
from .shard import ShardStore


class LocalKVStore(KVStore):
    """In-process store: pushes are applied by engine ops, in push order per key."""

    kind = "local"

    def __init__(self, bound: int = DEFAULT_BIG_ARRAY_BOUND) -> None:
        super().__init__(1, bound)
        self._shard = ShardStore("sync")
        self._shard.begin(0, 1)
        self._slock = threading.Lock()

    def _init_keys(self, items):
        with self._slock:
            for meta, arr in items:
                self._shard.init(subkey(meta.key, 0), arr.reshape(-1))

    def _send_push(self, meta, seq, flat):
        with self._slock:
            self._shard.push(subkey(meta.key, 0), 0, seq, flat)

    def _make_pull(self, meta: KeyMeta) -> Callable[[], np.ndarray]:
        sk = subkey(meta.key, 0)
        holder: list[np.ndarray] = []

        def take() -> None:
            # stored arrays are replaced by updates, never written: a reference is a snapshot
            with self._slock:
                holder.append(self._shard.values[sk])

        # ordered after this key's earlier pushes and before its later ones
        bridge.in_order(self._clock(meta.key), take)

        def produce() -> np.ndarray:
            return holder[0].reshape(meta.shape).copy()
        return produce

    def _set_optimizer(self, optimizer: Optimizer | None) -> None:
        with self._slock:
            self._shard.set_optimizer(optimizer)

    def _snapshots(self):
        with self._slock:
            return [self._shard.snapshot()]

    def _restore(self, per_server, optimizer):
        with self._slock:
            self._shard.set_optimizer(optimizer)
            for sk, value, state, updates in per_server[0]:
                self._shard.restore(sk, value, state, updates)

    def _new_session(self):
        with self._slock:
            self._shard.begin(self._shard.session + 1, 1)
