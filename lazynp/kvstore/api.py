"""The KVStore interface (after MXNet's ``mx.kv``): argument checks, replicas, lists.

:class:`KVStore` checks every call against what ``init`` registered (key known, shape and
dtype equal) before anything is sent, sums the replicas of a push on the worker, fans a
pull out to several outputs, and turns pushes and pulls into engine operations
(``bridge.py``).  Subclasses (``local.py``, ``dist.py``) move the arrays.
"""
from __future__ import annotations

import os
import threading
import time
from typing import Any, Callable, Sequence

import numpy as np

from . import bridge, checkpoint
from .errors import KVStoreError
from .optimizers import Optimizer
from .partition import DEFAULT_BIG_ARRAY_BOUND, Key, KeyMeta, check_key, plan

KINDS = ("local", "dist_sync", "dist_async")


def _is_list(x: Any) -> bool:
    return isinstance(x, (list, tuple))


def _traced(done: Callable[[], None], trace: list, key: Key) -> Callable[[], None]:
    ready = time.perf_counter()

    def traced_done() -> None:
        trace.append((key, ready, time.perf_counter()))
        done()
    return traced_done


class KVStore:
    """A key-value store of arrays shared by data-parallel workers.

    Keys are ints or strs; values are lazynp or NumPy arrays.  Make one with
    :func:`lazynp.kvstore.create`.  A store is a context manager (``close`` on exit).
    """

    #: ``"local"``, ``"dist_sync"`` or ``"dist_async"``
    kind: str = ""

    def __init__(self, num_servers: int = 1, bound: int = DEFAULT_BIG_ARRAY_BOUND) -> None:
        self._num_servers = num_servers
        self._bound = bound
        self._registry: dict[Key, KeyMeta] = {}
        self._seq: dict[Key, int] = {}
        self._clocks: dict[Key, bridge.KeyClock] = {}
        self._push_failures: dict[Key, BaseException] = {}
        self._lock = threading.Lock()
        self._closed = False
        #: when a list: ``(key, ready, acknowledged)`` (``time.perf_counter``) of every push
        #: is appended to it (benchmarks/kvstore.py draws the overlap with the backward pass)
        self.push_trace: list | None = None

    # -- identity ---------------------------------------------------------------------
    @property
    def type(self) -> str:
        """The store's kind (MXNet's name for it)."""
        return self.kind

    @property
    def rank(self) -> int:
        """This worker's rank (0 on the driver and in a ``"local"`` store)."""
        return 0

    @property
    def num_workers(self) -> int:
        """Number of workers pushing to the store in the current session."""
        return 1

    @property
    def keys(self) -> list[Key]:
        """The initialized keys, in ``init`` order."""
        return list(self._registry)

    def __repr__(self) -> str:
        return (f"<lazynp.kvstore {self.kind}: rank {self.rank} of {self.num_workers}, "
                f"{len(self._registry)} keys{', closed' if self._closed else ''}>")

    def __enter__(self) -> "KVStore":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- checks -----------------------------------------------------------------------
    def _check_open(self) -> None:
        if self._closed:
            raise KVStoreError("the KVStore is closed")

    def _meta(self, key: object, what: str) -> KeyMeta:
        k = check_key(key)
        meta = self._registry.get(k)
        if meta is None:
            raise KVStoreError(f"{what} of key {k!r}: the key is not initialized (call "
                               f"kv.init({k!r}, value) first)")
        return meta

    @staticmethod
    def _check_value(meta: KeyMeta, value: Any, what: str) -> Any:
        if value is None:
            raise TypeError(f"{what} of key {meta.key!r}: expected an array, got None")
        v = bridge.as_array(value)
        if tuple(v.shape) != meta.shape:
            raise KVStoreError(f"{what} of key {meta.key!r}: shape {tuple(v.shape)} does not "
                               f"match the shape {meta.shape} it was initialized with")
        if np.dtype(v.dtype) != meta.dtype:
            raise KVStoreError(f"{what} of key {meta.key!r}: dtype {np.dtype(v.dtype)} does "
                               f"not match the dtype {meta.dtype} it was initialized with")
        return v

    @staticmethod
    def _pairs(key: Any, value: Any, what: str, allow_none: bool = False) -> list[tuple]:
        if _is_list(key):
            if value is None and allow_none:
                return [(k, None) for k in key]
            if not _is_list(value) or len(value) != len(key):
                raise KVStoreError(f"{what}: {len(key)} keys need a list of {len(key)} "
                                   f"values, got {type(value).__name__}"
                                   + (f" of {len(value)}" if _is_list(value) else ""))
            return list(zip(key, value))
        return [(key, value)]

    def _clock(self, key: Key) -> bridge.KeyClock:
        c = self._clocks.get(key)
        if c is None:
            c = self._clocks[key] = bridge.KeyClock()
        return c

    def _failure_of(self, key: Key) -> None:
        exc = self._push_failures.get(key)
        if exc is not None:
            raise KVStoreError(f"an earlier push of key {key!r} failed: "
                               f"{type(exc).__name__}: {exc}") from exc

    # -- the API ----------------------------------------------------------------------
    def init(self, key: Key | Sequence[Key], value: Any) -> None:
        """Register key(s) with their initial value(s); rank 0's value is the one stored.

        Parameters
        ----------
        key : int, str or list of them
        value : array or list of arrays (one per key)

        Raises
        ------
        KVStoreError
            A key is already initialized, or appears twice.
        """
        self._check_open()
        pairs = self._pairs(key, value, "init")
        seen = set()
        items = []
        for k, v in pairs:
            k = check_key(k)
            if k in self._registry or k in seen:
                raise KVStoreError(f"init of key {k!r}: the key is already initialized")
            if _is_list(v):
                raise KVStoreError(f"init of key {k!r}: expected one array, got a "
                                   f"{type(v).__name__}")
            seen.add(k)
            arr = np.ascontiguousarray(bridge.to_numpy(bridge.as_array(v)))
            items.append((plan(k, arr.shape, arr.dtype, self._num_servers, self._bound), arr))
        self._init_keys(items)
        for meta, _ in items:
            self._registry[meta.key] = meta

    def push(self, key: Key | Sequence[Key], value: Any, priority: int = 0) -> None:
        """Push value(s) to key(s); a list of arrays for one key (local replicas, e.g. one per
        device) is summed here before one transfer.

        The push is an engine operation: it returns at once and sends the value as soon as
        it is computed.  ``priority`` is accepted for MXNet compatibility; lazynp's engine
        has no priorities, pushes go out in the order their values are ready.

        Raises
        ------
        KVStoreError
            Unknown key (push before init), or a shape or dtype that differs from ``init``;
            nothing is pushed then (for any of the keys).
        """
        self._check_open()
        items = []
        for k, v in self._pairs(key, value, "push"):
            meta = self._meta(k, "push")
            reps = list(v) if _is_list(v) else [v]
            if not reps:
                raise KVStoreError(f"push of key {meta.key!r}: empty list of values")
            items.append((meta, [self._check_value(meta, r, "push") for r in reps]))
        for meta, reps in items:
            self._push_one(meta, reps)

    def _push_one(self, meta: KeyMeta, reps: list) -> None:
        key = meta.key
        total = bridge.add_replicas(reps)
        seq = self._seq.get(key, 0) + 1
        self._seq[key] = seq

        def start(v: np.ndarray | None, exc: BaseException | None,
                  done: Callable[[], None]) -> None:
            def failed(e: BaseException) -> None:
                with self._lock:
                    self._push_failures.setdefault(key, e)
                self._push_failed(key, e)
                done()

            if exc is not None:
                failed(exc)
                return
            trace = self.push_trace
            if trace is not None:
                done = _traced(done, trace, key)
            try:
                self._start_push(meta, seq, v.reshape(-1), done, failed)
            except BaseException as e:
                failed(e)

        # a sum of replicas is a fresh array; a single value is the caller's
        bridge.when_ready(total, self._clock(key), start, snapshot=len(reps) == 1,
                          retained=self._retains_pushes)

    def pull(self, key: Key | Sequence[Key], out: Any = None, priority: int = 0) -> Any:
        """Pull key(s) into ``out``: an array, a list of arrays (replicas) per key, or None.

        The pull is an engine operation: it returns at once, and ``out`` (a lazynp array)
        becomes pending; reading it waits for the value, which reflects every earlier push
        of this worker to the key (and, in ``dist_sync``, the whole round).  A NumPy ``out``
        is written before ``pull`` returns.  With ``out=None`` a new lazy array is returned.

        Returns
        -------
        out, or the new array(s) when ``out`` is None.
        """
        self._check_open()
        items = []
        for k, o in self._pairs(key, out, "pull", allow_none=True):
            meta = self._meta(k, "pull")
            outs = [] if o is None else (list(o) if _is_list(o) else [o])
            for x in outs:
                if not (bridge.is_lazy(x) or isinstance(x, np.ndarray)):
                    raise TypeError(f"pull of key {meta.key!r}: out must be a lazynp or "
                                    f"NumPy array, got {type(x).__name__}")
                self._check_value(meta, x, "pull")
                if isinstance(x, np.ndarray) and not x.flags.writeable:
                    raise KVStoreError(f"pull of key {meta.key!r}: out is read-only")
            items.append((meta, outs))
        results = []
        for meta, outs in items:
            value = self._pull_value(meta)
            for x in outs:
                bridge.write(x, value, only=len(outs) == 1)
            results.append(value)
        if out is not None:
            return out
        return results if _is_list(key) else results[0]

    def _pull_value(self, meta: KeyMeta) -> Any:
        produce = self._make_pull(meta)
        key = meta.key

        def checked() -> np.ndarray:
            self._failure_of(key)
            return produce()

        return bridge.pending_value(meta.shape, meta.dtype, self._clock(key), checked)

    def report(self, message: Any) -> None:
        """Send a small picklable message to the driver (``run_workers(...,
        on_report=...)``) without waiting; a store outside ``run_workers`` drops it."""
        self._check_open()

    def pushpull(self, key: Key | Sequence[Key], value: Any, out: Any = None,
                 priority: int = 0) -> Any:
        """``push(key, value)`` then ``pull(key, out)``."""
        self.push(key, value, priority)
        return self.pull(key, out, priority)

    def set_optimizer(self, optimizer: Optimizer | None) -> None:
        """Run ``optimizer`` on the servers: each (summed) push then updates the stored
        weight instead of replacing it.  ``None`` restores plain replacement."""
        self._check_open()
        if optimizer is not None and not isinstance(optimizer, Optimizer):
            raise TypeError(f"expected a lazynp.kvstore optimizer (SGD, Adam...), got "
                            f"{type(optimizer).__name__}")
        self.wait()
        self._set_optimizer(optimizer)

    def barrier(self) -> None:
        """Return when every worker called ``barrier`` (as often); this worker's pushes are
        applied (async) or received (sync) first."""
        self._check_open()
        self.wait()
        self._barrier()

    def wait(self) -> None:
        """Block until this worker's pushes so far were sent and acknowledged.

        Raises
        ------
        KVStoreError
            A push failed (its value could not be computed, or its server was lost).
        """
        self._check_open()
        for key, clock in list(self._clocks.items()):
            clock.wait()
        for key in list(self._clocks):
            self._failure_of(key)
        self._wait_sent()

    def save(self, path: str | os.PathLike, meta: dict | None = None) -> None:
        """Write a checkpoint of all server state: every key's value, optimizer state and
        update count, the optimizer, and ``meta`` (a JSON-serializable dict).

        Call it on one worker after a ``barrier`` (in ``dist_sync``, a round whose pushes are
        incomplete cannot be checkpointed and raises).
        """
        self._check_open()
        self.wait()
        entries, opt = checkpoint.gather(self._registry, self._snapshots())
        checkpoint.write(path, self.kind, entries, opt, meta)

    def load(self, path: str | os.PathLike) -> dict | None:
        """Replace the server state with a checkpoint written by :meth:`save` (keys,
        values, optimizer and its state; the number of servers may differ).  Returns the
        checkpoint's ``meta``.  Call it where no other worker is running (on the driver)."""
        self._check_open()
        if self.num_workers != 1:
            raise KVStoreError("load() must be called where no other worker runs (on the "
                               "driver, outside run_workers)")
        self.wait()
        entries, opt, meta, _kind = checkpoint.read(path)
        metas = {e.key: plan(e.key, e.value.shape, e.value.dtype, self._num_servers,
                             self._bound) for e in entries}
        self._restore(checkpoint.scatter(entries, metas, self._num_servers), opt)
        self._registry.update(metas)
        self._seq.clear()
        self._new_session()
        return meta

    def close(self) -> None:
        """Release the store (and the embedded cluster it started, if any).  Pushes still
        in flight are dropped: ``wait()`` or pull first."""
        if self._closed:
            return
        self._closed = True
        self._close()

    # -- what subclasses provide -------------------------------------------------------
    def _init_keys(self, items: list[tuple[KeyMeta, np.ndarray]]) -> None:
        raise NotImplementedError

    #: does the store keep a pushed array itself (then a lazy value is copied first)?
    _retains_pushes = True

    def _send_push(self, meta: KeyMeta, seq: int, flat: np.ndarray) -> None:
        """Apply push ``seq`` (called from an engine op; may raise)."""
        raise NotImplementedError

    def _start_push(self, meta: KeyMeta, seq: int, flat: np.ndarray,
                    done: Callable[[], None],
                    failed: Callable[[BaseException], None]) -> None:
        """Start sending push ``seq``; call ``done()`` once it is acknowledged, or
        ``failed(exc)`` (either from any thread; may also raise at once)."""
        self._send_push(meta, seq, flat)
        done()

    def _push_failed(self, key: Key, exc: BaseException) -> None:
        """A push of ``key`` failed: pulls of it still waiting will not be answered."""

    def _make_pull(self, meta: KeyMeta) -> Callable[[], np.ndarray]:
        """Start a pull now; the callable returns its value (shaped, in a buffer nothing
        else holds: it may become the storage of the output array), waiting if needed."""
        raise NotImplementedError

    def _wait_sent(self) -> None:
        pass

    def _set_optimizer(self, optimizer: Optimizer | None) -> None:
        raise NotImplementedError

    def _barrier(self) -> None:
        pass

    def _snapshots(self) -> list[dict]:
        raise NotImplementedError

    def _restore(self, per_server: list[list[tuple]], optimizer: Optimizer | None) -> None:
        raise NotImplementedError

    def _new_session(self) -> None:
        pass

    def _close(self) -> None:
        pass
