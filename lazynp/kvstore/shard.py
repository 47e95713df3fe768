"""The state of one server: stored arrays, optimizer state, sync rounds, async ordering.

Pure NumPy and synchronous, so that the dask actor (``server.py``) and the in-process
``"local"`` store share it.  Every push carries the pushing worker's rank and a sequence
number (its count of pushes to that key, from 1), which gives MXNet's semantics:

* ``sync``: push number ``s`` of every worker belongs to round ``s``.  A round is applied
  (the contributions summed in rank order, then the optimizer run once) when all
  ``num_workers`` workers pushed, and only in round order; a pull with ``after = s`` is
  answered once round ``s`` is applied.  A push whose round is already applied, or that
  repeats a (rank, round) already held, is ignored: no update is applied twice.
* ``async``: each push is applied on arrival, in each worker's own push order (a push that
  arrives ahead of an earlier one of the same worker waits for it); a pull with
  ``after = s`` is answered once that worker's first ``s`` pushes are applied.

Updates replace arrays instead of writing into them: a pull may still be sending the old
array while the next update runs.
"""
from __future__ import annotations

from typing import Any, Hashable

import numpy as np

from .errors import KVStoreError
from .optimizers import Optimizer

MODES = ("sync", "async")


class ShardStore:
    """Arrays, optimizer states and push bookkeeping of one server.

    Parameters
    ----------
    mode : {"sync", "async"}
    """

    def __init__(self, mode: str) -> None:
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        self.mode = mode
        self.session = 0
        self.num_workers = 1
        self.optimizer: Optimizer | None = None
        self.values: dict[Hashable, np.ndarray] = {}
        self.states: dict[Hashable, dict[str, np.ndarray]] = {}
        self.updates: dict[Hashable, int] = {}       # updates applied, over all sessions
        self.rounds: dict[Hashable, int] = {}        # sync: rounds applied this session
        self.pending: dict[Hashable, dict[int, dict[int, np.ndarray]]] = {}
        self.applied: dict[Hashable, dict[int, int]] = {}   # async: pushes applied per rank
        self.early: dict[Hashable, dict[tuple[int, int], np.ndarray]] = {}

    # -- sessions ---------------------------------------------------------------------
    def begin(self, session: int, num_workers: int) -> None:
        """Start a new set of workers: sequence numbers start again from 1."""
        if num_workers < 1:
            raise ValueError(f"num_workers must be >= 1, got {num_workers}")
        self.session = session
        self.num_workers = num_workers
        self.rounds = dict.fromkeys(self.values, 0)
        self.pending = {k: {} for k in self.values}
        self.applied = {k: {} for k in self.values}
        self.early = {k: {} for k in self.values}

    # -- keys -------------------------------------------------------------------------
    def init(self, sk: Hashable, value: np.ndarray) -> None:
        if sk in self.values:
            raise KVStoreError(f"key {sk[0]!r} is already initialized on this server")
        self._install(sk, np.array(value, copy=True), {}, 0)

    def _install(self, sk, value, state, updates) -> None:
        self.values[sk] = value
        if state:
            self.states[sk] = state
        else:
            self.states.pop(sk, None)
        self.updates[sk] = updates
        self.rounds[sk] = 0
        self.pending[sk] = {}
        self.applied[sk] = {}
        self.early[sk] = {}

    def has(self, sk: Hashable) -> bool:
        return sk in self.values

    def value(self, sk: Hashable) -> np.ndarray:
        try:
            return self.values[sk]
        except KeyError:
            raise KVStoreError(f"key {sk[0]!r} is not initialized on this server") from None

    def set_optimizer(self, optimizer: Optimizer | None) -> None:
        """Use ``optimizer`` from now on; existing optimizer state is dropped if the kind of
        optimizer changes (as a new MXNet updater starts from fresh state)."""
        if optimizer is not None and not isinstance(optimizer, Optimizer):
            raise TypeError(f"expected a lazynp.kvstore optimizer, got {optimizer!r}")
        if type(optimizer) is not type(self.optimizer):
            self.states.clear()
        self.optimizer = optimizer

    # -- pushes -----------------------------------------------------------------------
    def _check(self, sk, value: np.ndarray) -> np.ndarray:
        stored = self.value(sk)
        if value.shape != stored.shape or value.dtype != stored.dtype:
            raise KVStoreError(
                f"push to key {sk[0]!r}: got {value.dtype}{list(value.shape)}, the server "
                f"holds {stored.dtype}{list(stored.shape)}")
        return value

    def push(self, sk: Hashable, rank: int, seq: int, value: np.ndarray) -> bool:
        """Take push ``seq`` of worker ``rank``; True when an update was applied."""
        if not 0 <= rank < self.num_workers:
            raise KVStoreError(f"push from rank {rank}, but this session has "
                               f"{self.num_workers} worker(s)")
        value = self._check(sk, value)
        if self.mode == "sync":
            if seq <= self.rounds[sk]:
                return False                       # a repeat of an applied round
            contrib = self.pending[sk].setdefault(seq, {})
            if rank in contrib:
                return False                       # a repeat within the round
            contrib[rank] = value
            changed = False
            while True:
                nxt = self.rounds[sk] + 1
                ready = self.pending[sk].get(nxt)
                if ready is None or len(ready) < self.num_workers:
                    return changed
                del self.pending[sk][nxt]
                total = ready[0]
                for r in range(1, self.num_workers):   # rank order: deterministic sums
                    total = total + ready[r]
                self._apply(sk, total)
                self.rounds[sk] = nxt
                changed = True
        done = self.applied[sk].get(rank, 0)
        if seq <= done or (rank, seq) in self.early[sk]:
            return False
        if seq > done + 1:
            self.early[sk][(rank, seq)] = value
            return False
        self._apply(sk, value)
        done += 1
        while (rank, done + 1) in self.early[sk]:
            self._apply(sk, self.early[sk].pop((rank, done + 1)))
            done += 1
        self.applied[sk][rank] = done
        return True

    def _apply(self, sk, grad: np.ndarray) -> None:
        opt = self.optimizer
        if opt is None:
            # no optimizer: the (summed) push replaces the stored value, as in MXNet
            new = grad
        else:
            weight = self.values[sk]
            state = self.states.get(sk)
            if state is None:
                state = opt.create_state(weight)
            new, state = opt.update(weight, grad, state)
            if new.dtype != weight.dtype:
                new = new.astype(weight.dtype)
            self.states[sk] = state
        self.values[sk] = new
        self.updates[sk] += 1

    def ready(self, sk: Hashable, rank: int, after: int) -> bool:
        """Is a pull by ``rank`` that follows its push number ``after`` answerable now?"""
        if self.mode == "sync":
            return self.rounds.get(sk, 0) >= after
        return self.applied.get(sk, {}).get(rank, 0) >= after

    # -- checkpoints ------------------------------------------------------------------
    def snapshot(self) -> dict[str, Any]:
        """Every key's value, optimizer state and update count (a consistent checkpoint:
        raises if a sync round or an out-of-order async push is still unapplied)."""
        for sk in self.values:
            if self.pending[sk] or self.early[sk]:
                raise KVStoreError(
                    f"cannot checkpoint key {sk[0]!r}: pushes of an unfinished round are "
                    f"waiting for other workers (call barrier() on every worker first)")
        return {"values": dict(self.values), "states": dict(self.states),
                "updates": dict(self.updates), "optimizer": self.optimizer}

    def restore(self, sk: Hashable, value: np.ndarray, state: dict[str, np.ndarray],
                updates: int) -> None:
        """Replace (or create) ``sk`` with checkpointed contents."""
        self._install(sk, np.array(value, copy=True), dict(state), int(updates))
