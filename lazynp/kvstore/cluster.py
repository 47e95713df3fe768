"""Processes: the embedded LocalCluster, where servers and workers run, ``run_workers``.

With no client, ``create("dist_*")`` starts a ``dask.distributed.LocalCluster`` of processes
(one per server plus ``workers`` for training ranks, one thread each) and closes it with the
store.  With a ``Client`` (or a scheduler address) it uses that cluster: servers go on the
first workers (by name), ranks on the others, sharing workers with servers only when there
are too few.  Actors and tasks are pinned to their worker (``allow_other_workers=False``),
so dask never silently re-creates a lost server empty on another worker or reruns a lost
rank: a loss is reported instead (``faults.py``).
"""
from __future__ import annotations

import logging
import os
import time
import uuid
from typing import Any, Callable

from .dist import DistKVStore, ServerRef, StoreSpec, describe_rank, new_session_id
from .errors import KVStoreError
from .faults import Membership, alive_workers, wait_result
from .partition import DEFAULT_BIG_ARRAY_BOUND
from .server import KVServer


class EmbeddedCluster:
    """A LocalCluster of worker processes and its client, owned by one store."""

    def __init__(self, n_workers: int, silence_logs: int = logging.ERROR,
                 **cluster_kwargs: Any) -> None:
        from distributed import Client, LocalCluster
        # (without a dashboard the scheduler's HTTP server still binds port 8787 unless
        # told another: a free one, with no warning when 8787 is taken)
        kw = dict(n_workers=n_workers, threads_per_worker=1, processes=True,
                  dashboard_address=None, memory_limit=0, silence_logs=silence_logs,
                  scheduler_kwargs={"dashboard": False, "dashboard_address": ":0"})
        kw.update(cluster_kwargs)
        self.cluster = LocalCluster(**kw)
        try:
            self.client = Client(self.cluster, set_as_default=False, direct_to_workers=True)
        except BaseException:
            self.cluster.close()
            raise

    def scale(self, n: int, timeout: float) -> None:
        """At least ``n`` workers, waiting for them."""
        if len(alive_workers(self.client, timeout)) < n:
            self.cluster.scale(n)
            self.client.wait_for_workers(n, timeout=timeout)

    def close(self) -> None:
        try:
            self.client.close(timeout=10)
        finally:
            self.cluster.close(timeout=10)


def _workers_by_name(client: Any) -> list[str]:
    info = alive_workers(client, 60.0)
    return sorted(info, key=lambda a: (str(info[a].get("name", a)), a))


def _pids(client: Any, addresses: list[str]) -> dict[str, int]:
    return client.run(os.getpid, workers=list(addresses))


def start_servers(client: Any, mode: str, num_servers: int, timeout: float
                  ) -> tuple[list[ServerRef], list]:
    """Create ``num_servers`` :class:`KVServer` actors on the first workers."""
    addrs = _workers_by_name(client)
    if not addrs:
        raise KVStoreError("the dask cluster has no workers to run KVStore servers on")
    placed = [addrs[i % len(addrs)] for i in range(num_servers)]
    token = uuid.uuid4().hex[:8]
    futs = [client.submit(KVServer, i, mode, actor=True, workers=[a],
                          allow_other_workers=False, pure=False,
                          key=f"lazynp-kvserver-{i}-{token}")
            for i, a in enumerate(placed)]
    with client.as_current():
        for f in futs:
            f.result(timeout=timeout)
    pids = _pids(client, placed)
    refs = [ServerRef(i, a, f.key, pids[a]) for i, (a, f) in enumerate(zip(placed, futs))]
    return refs, futs


def create_dist(kind: str, client: Any = None, num_servers: int = 1, *, workers: int = 2,
                timeout: float = 60.0, poll_interval: float = 0.25,
                big_array_bound: int = DEFAULT_BIG_ARRAY_BOUND,
                cluster_kwargs: dict | None = None,
                connect_timeout: float = 10.0) -> DistKVStore:
    """Start servers (and an embedded cluster when ``client`` is None); see ``create``."""
    owner = None
    if client is None:
        owner = EmbeddedCluster(num_servers + workers, **(cluster_kwargs or {}))
        client = owner.client
    elif isinstance(client, str):
        client = connect(client, connect_timeout)
        owner = _ClientOwner(client)
    try:
        mode = "sync" if kind == "dist_sync" else "async"
        refs, futs = start_servers(client, mode, num_servers, timeout)
        spec = StoreSpec(kind=kind, servers=refs, registry={}, session=0, rank=0,
                         num_workers=1, timeout=timeout, poll=poll_interval,
                         bound=big_array_bound)
        kv = DistKVStore(spec, client=client, owner=owner, actor_futures=futs)
        kv._new_session()
        return kv
    except BaseException:
        if owner is not None:
            owner.close()
        raise


def connect(address: str, timeout: float) -> Any:
    """A ``distributed.Client`` of the scheduler at ``address``, or a :class:`KVStoreError`
    saying it cannot be reached within ``timeout`` seconds."""
    from distributed import Client
    from distributed.comm import get_address_host_port
    if not address.startswith("inproc://"):
        try:
            get_address_host_port(address)
        except ValueError as exc:
            # (checked first: a Client failing on it times out again when collected)
            raise KVStoreError(f"lazynp.kvstore: {address!r} is not a dask scheduler "
                               f"address like tcp://HOST:8786 ({exc})") from None
    try:
        return Client(address, set_as_default=False, timeout=timeout,
                      direct_to_workers=True)
    except (OSError, TimeoutError, ValueError) as exc:
        detail = " ".join(str(exc).split()) or type(exc).__name__
        raise KVStoreError(f"lazynp.kvstore: cannot reach the dask scheduler at "
                           f"{address!r} within {timeout:g} s ({detail})") from exc


class _ClientOwner:
    """Closes a client that ``create`` opened from a scheduler address."""

    def __init__(self, client: Any) -> None:
        self.client = client

    def close(self) -> None:
        self.client.close(timeout=10)


# -- running workers ------------------------------------------------------------------------

def _rank_main(fn: Callable, spec: StoreSpec, args: tuple, kwargs: dict) -> Any:
    """The task run by each rank: join the store, run ``fn``, wait for its pushes."""
    from distributed import get_client
    kv = DistKVStore(spec, client=get_client())
    try:
        out = fn(kv, spec.rank, *args, **kwargs)
        kv.wait()
        # the driver learns the keys rank 0 initialized
        return out, (dict(kv._registry) if spec.rank == 0 else None)
    finally:
        kv._closed = True     # (a rank's store owns nothing: closing releases nothing)


def _slots(client: Any, server_addrs: set[str], timeout: float) -> list[str]:
    """One dask worker address per thread that can run a rank: workers without a server
    first (a server is an actor on the event loop: it takes no thread, but its process is
    busier), one rank per worker before any worker gets a second."""
    info = alive_workers(client, timeout)
    order = sorted(info, key=lambda a: (a in server_addrs, str(info[a].get("name", a)), a))
    threads = {a: max(1, int(info[a].get("nthreads") or 1)) for a in order}
    slots = []
    for k in range(max(threads.values(), default=0)):
        slots.extend(a for a in order if threads[a] > k)
    return slots


def _place(kv: DistKVStore, n: int) -> list[str]:
    """The worker of each of ``n`` ranks.  Every rank occupies one worker thread for the
    whole run (the ranks of a round wait for each other), so ``n`` threads must exist: an
    embedded cluster is scaled up, any other cluster with too few threads is an error (two
    ranks queued on one thread would wait for each other until the store's timeout)."""
    client = kv._client
    owner = kv._owner
    server_addrs = {s.address for s in kv._spec.servers}
    slots = _slots(client, server_addrs, kv._spec.timeout)
    if len(slots) < n and isinstance(owner, EmbeddedCluster):
        owner.scale(len(server_addrs) + n, kv._spec.timeout)
        slots = _slots(client, server_addrs, kv._spec.timeout)
    if len(slots) < n:
        workers = len(set(slots))
        raise KVStoreError(f"lazynp.kvstore: {n} worker ranks need {n} dask worker threads "
                           f"(each rank holds one for the whole run), but the cluster has "
                           f"{len(slots)} ({workers} worker(s)): start more dask workers or "
                           f"run at most {len(slots)} ranks")
    return slots[:n]


def run_workers(fn: Callable[..., Any], n: int, kv: DistKVStore, *args: Any,
                timeout: float | None = None,
                on_report: Callable[[int, Any], None] | None = None,
                **kwargs: Any) -> list[Any]:
    """Run ``fn(kv, rank, *args, **kwargs)`` on ``n`` dask workers; their results by rank.

    Each rank gets its own store (joined to ``kv``'s servers) in a worker process; ``fn``
    travels to it with dask's serialization (a module-level function, or cloudpickled).
    In ``dist_sync`` every push round waits for all ``n`` ranks.

    Parameters
    ----------
    fn : callable
    n : int
        Number of worker ranks.
    kv : DistKVStore
        The driver's store (made by ``create("dist_sync" | "dist_async")``).
    timeout : float, optional
        Give up (``KVStoreError``) after this many seconds in all; default: no limit
        (losses are still reported within the store's ``timeout``).
    on_report : callable, optional
        ``on_report(rank, message)`` for each ``kv.report(message)`` of a rank, called on
        this thread while waiting.

    Raises
    ------
    KVStoreError
        A rank's or a server's process was lost (SIGKILL, crash); the message names it.
        Every rank still waiting on the servers is released with the same reason.
    BaseException
        The exception a rank raised (with a note naming the rank).
    """
    if not isinstance(kv, DistKVStore) or kv._client is None or kv._owner is None and \
            not kv._actor_futures:
        raise KVStoreError("run_workers needs the driver's store, made by "
                           "lazynp.kvstore.create('dist_sync' | 'dist_async')")
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    kv._check_open()
    kv.wait()
    client = kv._client
    spec = kv._spec
    addrs = _place(kv, n)
    pids = _pids(client, sorted(set(addrs)))
    peers = {r: (a, pids.get(a, 0)) for r, a in enumerate(addrs)}
    session = new_session_id()
    kv._all("begin", session, n, what="begin session")
    spec.session, spec.num_workers, spec.peers = session, n, peers
    token = uuid.uuid4().hex[:8]
    futures = []
    for r, a in enumerate(addrs):
        rspec = StoreSpec(kind=spec.kind, servers=list(spec.servers),
                          registry=dict(kv._registry), session=session, rank=r,
                          num_workers=n, peers=peers, timeout=spec.timeout, poll=spec.poll,
                          bound=spec.bound)
        futures.append(client.submit(_rank_main, fn, rspec, args, kwargs, workers=[a],
                                     allow_other_workers=False, pure=False,
                                     key=f"lazynp-rank-{r}-{token}"))
    watched = {s.address: s.describe() for s in spec.servers}
    for r, (a, pid) in peers.items():
        watched.setdefault(a, describe_rank(r, a, pid))
    membership = Membership(lambda: client, watched, spec.poll)
    deadline = None if timeout is None else time.monotonic() + timeout
    failure: BaseException | None = None
    try:
        while True:
            _drain_reports(kv, on_report, membership)
            states = [f.status for f in futures]
            if all(s == "finished" for s in states):
                results = client.gather(futures)
                _drain_reports(kv, on_report, membership)
                kv._registry.update(results[0][1])
                return [r[0] for r in results]
            errs = [r for r, s in enumerate(states) if s in ("error", "cancelled", "lost")]
            if errs:
                r = errs[0]
                lost = membership.lost(force=True)
                try:
                    exc = futures[r].exception(timeout=spec.timeout)
                except BaseException as e:          # (cancelled futures)
                    exc = e
                if lost:
                    failure = KVStoreError("lazynp.kvstore: run_workers failed: lost "
                                           + ", ".join(lost))
                    failure.__cause__ = exc
                else:
                    if isinstance(exc, BaseException) and hasattr(exc, "add_note"):
                        exc.add_note(f"lazynp.kvstore: raised in worker rank {r} "
                                     f"({addrs[r]})")
                    failure = exc
                raise failure
            lost = membership.lost()
            if lost:
                failure = KVStoreError("lazynp.kvstore: run_workers failed: lost "
                                       + ", ".join(lost))
                raise failure
            if deadline is not None and time.monotonic() > deadline:
                failure = KVStoreError(f"lazynp.kvstore: run_workers: the workers did not "
                                       f"finish within {timeout:g} s")
                raise failure
            try:
                from distributed import wait
                wait(futures, timeout=spec.poll, return_when="FIRST_EXCEPTION")
            except (TimeoutError, Exception):
                pass
    finally:
        _finish(kv, futures, failure)


def _drain_reports(kv: DistKVStore, on_report, membership: Membership | None = None) -> None:
    if on_report is None:
        return
    try:
        # (with the run's membership: a call to a killed server would otherwise wait for
        # dask's connect timeout, 30 s, before the loss is reported)
        msgs = wait_result(kv._call(0, "take_reports"), "progress reports", membership,
                           kv._spec.timeout, kv._spec.poll)
    except KVStoreError:
        return            # (a lost server is reported by the watch loop)
    for rank, msg in msgs:
        on_report(rank, msg)


def _finish(kv: DistKVStore, futures: list, failure: BaseException | None) -> None:
    """After a run: release the ranks' tasks and waiting calls, start the driver's session."""
    try:
        alive = set(alive_workers(kv._client, kv._spec.timeout))
    except Exception as exc:
        kv._broken = f"lost the dask scheduler ({type(exc).__name__}: {exc})"
        return
    lost = [s.describe() for s in kv._spec.servers if s.address not in alive]
    if failure is not None:
        reason = str(failure) if isinstance(failure, KVStoreError) else \
            f"lazynp.kvstore: a worker failed: {type(failure).__name__}: {failure}"
        kv._abort(reason, [s.index for s in kv._spec.servers if s.address in alive])
    try:
        kv._client.cancel([f for f in futures if not f.done()])
    except Exception:
        pass
    if lost:
        kv._broken = "lost " + ", ".join(lost)
        return
    try:
        kv._new_session()
    except KVStoreError as exc:
        kv._broken = str(exc)
