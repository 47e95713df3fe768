"""lazynp on chunked arrays against dask.array, on an embedded ``LocalCluster``.

Each workload is one NumPy-style function written once and called twice: with ``lazynp``
on chunked arrays (``lazynp.asarray`` of the same persisted dask arrays, under
``lazynp.default_device("dask")``) and with ``dask.array``.  Both run on the same cluster
of this machine (2 worker processes, one thread each, a memory limit per worker):

* W1 ``a*b + c*d - e*0.5`` (the result stays on the cluster),
* W2 ``sum(a*b + c)``,
* softmax of each row of a matrix,
* a 2-D stencil (Jacobi) time loop,
* standardizing the columns of a matrix,
* a linear-regression fit by gradient descent (lazynp: ``lazynp.grad`` of the loss, the
  backward pass on the cluster and the parameters' gradient gathered once per step; dask:
  the hand-written gradient ``2/m X.T (X w - y)``, computed once per step),
* out of core: ``sum(a*b + c)`` over inputs 4x the cluster's memory limit, generated
  chunk-wise (a seed per chunk) on a cluster of its own, run once per side.

Columns: the first call (lowering and compiling included), the median of the following
calls (interleaved, so that load changes hit both sides alike), the ratio of the medians
(dask.array / lazynp: above 1 means lazynp is faster), the peak worker memory above the
idle level during one call (each worker's RSS sampled every 5 ms by a thread on the worker,
summed over the workers: distributed's ``MemorySampler`` reads the heartbeat's figure, every
0.5 s, which misses sub-second peaks), and the tasks per chunk (tasks the scheduler ran
during that call, over the number of chunks of the largest input).  The answers of both
sides are compared (NumPy's ``allclose``); a disagreement fails the run.

    python benchmarks/dask_arrays.py                 # full sizes
    python benchmarks/dask_arrays.py --quick         # a quarter of the sizes, 3 repetitions
    python benchmarks/dask_arrays.py --smoke         # tiny sizes, in-process cluster (tests)
"""
from __future__ import annotations

import contextlib
import dataclasses
import gc
import math
import os
import statistics
import sys
import time
import traceback
from typing import Any, Callable

import numpy

from _common import (Summary, fmt_time, header, make_parser, parse_args, print_table,
                     write_table)
import _common

os.environ.setdefault("LAZYNP_DASK_PROGRESS", "0")      # no progress bars in the timings
# the workers run as lazynp's embedded cluster's do: no buffer pool (a chunk's result leaves
# the task; pooled buffers would stay in the worker, hiding the next call's memory)
os.environ.setdefault("LAZYNP_DASK_WORKER", "1")

import dask
import dask.array as da
from distributed import Client, LocalCluster, wait
from distributed.diagnostics.plugin import SchedulerPlugin

import lazynp

MiB = 2**20
GiB = 2**30


# --- the workloads: one function, called with lazynp and with dask.array ------------------------

def w1(xp, a, b, c, d, e):
    return a * b + c * d - e * 0.5


def w2(xp, a, b, c):
    return xp.sum(a * b + c)


def softmax(xp, x):
    e = xp.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def stencil(xp, u, steps):
    u = u.copy()
    for _ in range(steps):
        u[1:-1, 1:-1] = 0.25 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:])
    return u


def _jacobi_block(b):
    out = b.copy()
    out[1:-1, 1:-1] = 0.25 * (b[:-2, 1:-1] + b[2:, 1:-1] + b[1:-1, :-2] + b[1:-1, 2:])
    return out


def stencil_dask(xp, u, steps):
    """The stencil as dask.array users write it: halos exchanged by ``map_overlap``.

    ``stencil(da, u, steps)`` runs too, but each step's shifted slices split the chunks and
    the graph grows with the square of the steps (73,546 tasks for 10 steps of 4x4 chunks).
    """
    for _ in range(steps):
        u = u.map_overlap(_jacobi_block, depth=1, boundary="none", dtype=u.dtype)
    return u


def standardize(xp, x):
    return (x - x.mean(axis=0)) / x.std(axis=0)


def linreg_loss(w, x, y):
    r = x @ w - y
    return (r * r).mean()


def linreg_lazynp(x, y, w0, steps, lr):
    grad = lazynp.grad(linreg_loss)
    w = w0
    for _ in range(steps):
        w = w - lr * _as_numpy(grad(w, x, y))
    return w


def linreg_numpy(x, y, w0, steps, lr):
    m = x.shape[0]
    w = w0
    for _ in range(steps):
        w = w - lr * (2.0 / m) * (x.T @ (x @ w - y))
    return w


def linreg_dask(x, y, w0, steps, lr):
    m = x.shape[0]
    w = w0
    for _ in range(steps):
        g = (2.0 / m) * (x.T @ (x @ w - y))
        w = w - lr * g.compute()
    return w


# --- sizes ---------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Sizes:
    n: int                  # W1, W2: elements per input
    n_chunk: int
    rows: int               # softmax, standardize: a (rows, cols) matrix
    cols: int
    row_chunk: int
    grid: int               # stencil: a (grid, grid) array in (grid_chunk, grid_chunk) blocks
    grid_chunk: int
    steps: int
    fit_rows: int           # linear regression: X (fit_rows, features)
    features: int
    fit_chunk: int
    fit_steps: int
    worker_memory: int      # the memory limit of each worker (bytes)
    ooc_worker_memory: int  # the out-of-core cluster's limit per worker
    ooc_chunk: int
    repeat: int


FULL = Sizes(n=20_000_000, n_chunk=2_000_000, rows=20_000, cols=1_000, row_chunk=2_000,
             grid=4_000, grid_chunk=1_000, steps=5, fit_rows=200_000, features=100,
             fit_chunk=20_000, fit_steps=10, worker_memory=3 * GiB, ooc_worker_memory=1 * GiB,
             ooc_chunk=8_000_000, repeat=5)
QUICK = Sizes(n=5_000_000, n_chunk=500_000, rows=5_000, cols=1_000, row_chunk=500,
              grid=2_000, grid_chunk=500, steps=5, fit_rows=50_000, features=100,
              fit_chunk=5_000, fit_steps=5, worker_memory=2 * GiB,
              ooc_worker_memory=1 * GiB, ooc_chunk=8_000_000, repeat=3)
SMOKE = Sizes(n=4_000, n_chunk=1_000, rows=40, cols=30, row_chunk=10, grid=24, grid_chunk=8,
              steps=3, fit_rows=400, features=5, fit_chunk=100, fit_steps=3,
              worker_memory=1 * GiB, ooc_worker_memory=0, ooc_chunk=1_000, repeat=1)


# --- measuring on the workers --------------------------------------------------------------

class TaskCounter(SchedulerPlugin):
    """Counts the tasks the scheduler saw computed (``processing -> memory``)."""

    name = "lazynp-benchmark-task-counter"

    def __init__(self) -> None:
        self.count = 0

    def transition(self, key, start, finish, *args, **kwargs) -> None:
        if start == "processing" and finish == "memory":
            self.count += 1


def _tasks_done(dask_scheduler) -> int:
    return dask_scheduler.plugins[TaskCounter.name].count


def _trim_memory(dask_worker=None) -> None:
    """Give freed memory back to the system (glibc), so that RSS measures what is held."""
    import ctypes
    import gc as gc_
    gc_.collect()
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)


def _peak_start(dask_worker, interval: float = 0.005) -> None:
    """Start a thread on the worker that keeps the peak of its RSS."""
    import threading

    import psutil
    proc = psutil.Process()
    rss = proc.memory_info().rss
    state = {"base": rss, "peak": rss, "stop": threading.Event()}

    def sample() -> None:
        while not state["stop"].wait(interval):
            now = proc.memory_info().rss
            if now > state["peak"]:
                state["peak"] = now

    threading.Thread(target=sample, daemon=True, name="peak-rss").start()
    dask_worker._lazynp_benchmark_peak = state


def _peak_stop(dask_worker) -> int:
    """Stop the sampler; the worker's peak RSS above its level at the start (bytes)."""
    state = dask_worker._lazynp_benchmark_peak
    state["stop"].set()
    return state["peak"] - state["base"]


@dataclasses.dataclass
class Probe:
    """One call measured on the cluster: peak worker memory above idle, tasks run."""
    peak_bytes: int
    tasks: int


def _held(dask_worker) -> int:
    return len(dask_worker.data)


def settle(client: Client, held: int, limit_s: float = 10.0) -> None:
    """Wait until the workers hold no more chunks than ``held`` (the persisted inputs): a
    released result is deleted asynchronously, and its memory would otherwise be counted
    in the next call's idle level (and reused by it)."""
    end = time.monotonic() + limit_s
    while sum(client.run(_held).values()) > held and time.monotonic() < end:
        time.sleep(0.02)


def probe(client: Client, fn: Callable[[], Any]) -> Probe:
    settle(client, client.inputs_held)
    client.run(_trim_memory)
    _trim_memory()
    before = client.run_on_scheduler(_tasks_done)
    client.run(_peak_start)
    try:
        fn()
    finally:
        peaks = client.run(_peak_stop)
    tasks = client.run_on_scheduler(_tasks_done) - before
    return Probe(sum(peaks.values()), tasks)


# --- one row -------------------------------------------------------------------------------

@dataclasses.dataclass
class Side:
    """One side of a row: how to run it, and what it measured."""
    run: Callable[[], Any]           # one call, waited for; returns the answer (for checks)
    release: Callable[[], None] = lambda: None   # drops what the call kept on the cluster
    first: float = math.nan
    median: float = math.nan
    probe: Probe | None = None
    answer: Any = None
    error: str | None = None
    cached_calls: int = 0      # timed calls that ran no task (found their result held)


@dataclasses.dataclass
class Row:
    name: str
    size: str
    chunks: int
    lazynp: Side
    dask: Side
    reference: Callable[[], Any] | None = None      # NumPy's answer (smoke runs only)
    agree: bool | None = None
    numpy_agree: dict[str, bool] = dataclasses.field(default_factory=dict)


def _call(side: Side) -> Any:
    out = side.run()
    side.release()
    return out


def check_against_numpy(row: Row) -> None:
    """Each side's answer against NumPy's, on the gathered inputs (small sizes only)."""
    expected = row.reference()
    for name, side in (("lazynp", row.lazynp), ("dask", row.dask)):
        if side.error is None:
            row.numpy_agree[name] = _agree(side.answer, expected)


def measure_row(client: Client, row: Row, repeat: int) -> Row:
    """First call, interleaved medians, one probed call, and the answers compared."""
    sides = {"lazynp": row.lazynp, "dask": row.dask}
    for name, side in sides.items():
        try:
            t0 = time.perf_counter()
            side.answer = _as_numpy(side.run())
            side.first = time.perf_counter() - t0
            side.release()
        except Exception as exc:          # a side that cannot run is reported, not fatal
            side.error = f"{type(exc).__name__}: {exc}".splitlines()[0][:160]
            traceback.print_exc(limit=3, file=sys.stderr)
    live = {k: s for k, s in sides.items() if s.error is None}
    if live:
        samples: dict[str, list[float]] = {k: [] for k in live}
        order = list(live)
        for i in range(repeat):
            order = order[::-1] if i % 2 else order     # alternate who goes first
            for name in order:
                # (a result still held on the cluster would be found there by the next
                # call, whose keys are the same: wait until it is gone)
                settle(client, client.inputs_held)
                before = client.run_on_scheduler(_tasks_done)
                gc.disable()
                t0 = time.perf_counter()
                try:
                    live[name].run()
                finally:
                    samples[name].append(time.perf_counter() - t0)
                    gc.enable()
                if client.run_on_scheduler(_tasks_done) == before:
                    live[name].cached_calls += 1
                live[name].release()
        for name, side in live.items():
            side.median = statistics.median(samples[name])
            side.probe = probe(client, lambda s=side: _call(s))
    if row.lazynp.error is None and row.dask.error is None:
        row.agree = _agree(row.lazynp.answer, row.dask.answer)
    return row


def _as_numpy(x: Any) -> Any:
    """The answer as a NumPy value (a chunked result is gathered: only for the check)."""
    if isinstance(x, da.Array):
        return x.compute()
    if isinstance(x, lazynp.ndarray):
        dev = getattr(x, "device", None)
        if dev is not None and str(dev) != "cpu":
            x = x.to_device("cpu")
        return numpy.asarray(x)
    return numpy.asarray(x)


def _agree(x: Any, y: Any) -> bool:
    x, y = numpy.asarray(x), numpy.asarray(y)
    return x.shape == y.shape and bool(numpy.allclose(x, y, rtol=1e-9, atol=1e-9))


# --- the two sides of each workload ----------------------------------------------------------

def _persisted(client: Client, arrays: dict[str, da.Array]) -> dict[str, da.Array]:
    out = dict(zip(arrays, client.persist(list(arrays.values()))))
    wait(list(out.values()))
    return out


def _random(shape, chunks, seed: int) -> da.Array:
    return da.random.default_rng(seed).random(shape, chunks=chunks)


class LazynpLarge:
    """A lazynp call whose result stays on the cluster: evaluated, then released."""

    def __init__(self, fn: Callable[[], Any]):
        self.fn, self.kept = fn, None

    def run(self) -> Any:
        self.kept = self.fn()
        lazynp.evaluate(self.kept)
        wait(self.kept.to_dask())    # evaluate persists: the futures are awaited here
        return self.kept

    def release(self) -> None:
        self.kept = None


class DaskLarge:
    """A dask.array call whose result stays on the cluster: persisted, waited, released."""

    def __init__(self, client: Client, fn: Callable[[], da.Array]):
        self.client, self.fn, self.kept = client, fn, None

    def run(self) -> Any:
        self.kept = self.client.persist(self.fn())
        wait(self.kept)
        return self.kept

    def release(self) -> None:
        self.kept = None


def chunked(a: da.Array) -> Any:
    """``lazynp.asarray`` of a dask array, checked to stay chunked on the cluster (not
    gathered: the benchmark would then time lazynp on one machine)."""
    x = lazynp.asarray(a)
    if str(getattr(x, "device", "cpu")) == "cpu":
        raise RuntimeError("lazynp.asarray(dask_array) gathered the array to the CPU: "
                           "lazynp's dask device is not available in this checkout")
    return x


def _large_row(client, name, size, chunks, program, dask_inputs, extra=(),
               dask_program=None) -> Row:
    lz_inputs = [_lazy_input(a) for a in dask_inputs]
    lz = LazynpLarge(lambda: (_check_inputs(lz_inputs), program(lazynp, *lz_inputs, *extra))[1])
    dk = DaskLarge(client, lambda: (dask_program or program)(da, *dask_inputs, *extra))
    return Row(name, size, chunks, Side(lz.run, lz.release), Side(dk.run, dk.release),
               reference=lambda: program(numpy, *[a.compute() for a in dask_inputs], *extra))


def _lazy_input(a: da.Array) -> Callable[[], Any]:
    """The lazynp side's input: ``chunked(a)``, or the error that makes it, raised when
    the side runs (so that the dask side is still measured)."""
    try:
        return chunked(a)
    except Exception as exc:
        return _Unavailable(exc)


class _Unavailable:
    def __init__(self, exc: Exception):
        self.exc = exc

    def __getattr__(self, name):
        raise self.exc


def _check_inputs(inputs) -> None:
    for x in inputs:
        if isinstance(x, _Unavailable):
            raise x.exc


def _small_row(name, size, chunks, program, dask_inputs) -> Row:
    lz_inputs = [_lazy_input(a) for a in dask_inputs]

    def run_lazynp():
        _check_inputs(lz_inputs)
        return _as_numpy(program(lazynp, *lz_inputs))

    return Row(name, size, chunks, Side(run_lazynp),
               Side(lambda: program(da, *dask_inputs).compute()),
               reference=lambda: program(numpy, *[a.compute() for a in dask_inputs]))


def build_rows(client: Client, s: Sizes) -> list[Row]:
    rows: list[Row] = []
    vec = _persisted(client, {k: _random(s.n, s.n_chunk, i) for i, k in enumerate("abcde")})
    n_chunks = math.ceil(s.n / s.n_chunk)
    size = f"5 x {s.n:,} f8"
    rows.append(_large_row(client, "W1 a*b + c*d - e*0.5", size, n_chunks, w1,
                           [vec[k] for k in "abcde"]))
    rows.append(_small_row("W2 sum(a*b + c)", f"3 x {s.n:,} f8", n_chunks, w2,
                           [vec[k] for k in "abc"]))
    mat = _persisted(client, {"x": _random((s.rows, s.cols), (s.row_chunk, s.cols), 10)})
    m_chunks = math.ceil(s.rows / s.row_chunk)
    rows.append(_large_row(client, "softmax of rows", f"{s.rows:,} x {s.cols:,} f8", m_chunks,
                           softmax, [mat["x"]]))
    rows.append(_large_row(client, "standardize columns", f"{s.rows:,} x {s.cols:,} f8",
                           m_chunks, standardize, [mat["x"]]))
    grid = _persisted(client, {"u": _random((s.grid, s.grid), s.grid_chunk, 11)})
    rows.append(_large_row(client, f"stencil, {s.steps} steps", f"{s.grid:,}^2 f8",
                           math.ceil(s.grid / s.grid_chunk) ** 2, stencil, [grid["u"]],
                           extra=(s.steps,), dask_program=stencil_dask))
    rows.append(_linreg_row(client, s))
    client.inputs_held = sum(client.run(_held).values())
    return rows


def _linreg_row(client: Client, s: Sizes) -> Row:
    rng = numpy.random.default_rng(12)
    w_true = rng.standard_normal(s.features)
    x = _random((s.fit_rows, s.features), (s.fit_chunk, s.features), 13)
    noise = _random(s.fit_rows, s.fit_chunk, 14)
    data = _persisted(client, {"x": x, "y": x @ w_true + 0.01 * noise})
    w0, lr = numpy.zeros(s.features), 0.1
    lx, ly = _lazy_input(data["x"]), _lazy_input(data["y"])

    def run_lazynp():
        _check_inputs((lx, ly))
        return linreg_lazynp(lx, ly, w0, s.fit_steps, lr)
    return Row(f"linear regression, {s.fit_steps} steps", f"{s.fit_rows:,} x {s.features} f8",
               math.ceil(s.fit_rows / s.fit_chunk),
               Side(run_lazynp),
               Side(lambda: linreg_dask(data["x"], data["y"], w0, s.fit_steps, lr)),
               reference=lambda: linreg_numpy(data["x"].compute(), data["y"].compute(), w0,
                                              s.fit_steps, lr))


# --- out of core -----------------------------------------------------------------------------

def _generated(n: int, chunk: int, seed: int) -> da.Array:
    """``n`` uniform numbers generated chunk by chunk where they are used (a seed per chunk)."""
    return da.map_blocks(lambda block_info=None: numpy.random.default_rng(
        (seed, *block_info[None]["chunk-location"])).random(block_info[None]["chunk-shape"]),
        chunks=(da.core.normalize_chunks(chunk, (n,))[0],), dtype=numpy.float64,
        meta=numpy.empty(0))


def out_of_core_row(client: Client, s: Sizes, limit: int) -> Row:
    """``sum(a*b + c)`` over three generated inputs 4x the cluster's memory in all."""
    total = 4 * limit
    n = total // (3 * 8)
    inputs = [_generated(n, s.ooc_chunk, seed) for seed in (21, 22, 23)]
    chunks = math.ceil(n / s.ooc_chunk)
    row = _small_row(f"out of core: sum(a*b + c), inputs 4x the {limit / GiB:.2g} GiB limit",
                     f"3 x {n:,} f8 ({3 * n * 8 / GiB:.1f} GiB)", chunks, w2, inputs)
    return row


def measure_once(client: Client, row: Row) -> Row:
    """The out-of-core row: one probed call per side (too long to repeat)."""
    for side in (row.lazynp, row.dask):
        try:
            t0 = time.perf_counter()
            holder = {}
            side.probe = probe(client, lambda: holder.setdefault("x", side.run()))
            side.first = side.median = time.perf_counter() - t0
            side.answer = _as_numpy(holder["x"])
        except Exception as exc:
            side.error = f"{type(exc).__name__}: {exc}".splitlines()[0][:160]
            traceback.print_exc(limit=3, file=sys.stderr)
    if row.lazynp.error is None and row.dask.error is None:
        row.agree = _agree(row.lazynp.answer, row.dask.answer)
    return row


# --- the cluster -------------------------------------------------------------------------------

@contextlib.contextmanager
def cluster(memory_limit: int, processes: bool):
    """A LocalCluster of 2 single-threaded workers, its client, lazynp's dask device on it."""
    with dask.config.set({"distributed.worker.daemon": False}), \
            LocalCluster(n_workers=2, threads_per_worker=1, memory_limit=memory_limit,
                         processes=processes, dashboard_address=":0") as lc, \
            Client(lc) as client:
        client.register_plugin(TaskCounter())
        try:
            device = lazynp.default_device("dask", client=client)
            device.__enter__()
        except Exception as exc:              # the dask side is still measured
            print(f"(lazynp's dask device is not available: {type(exc).__name__}: {exc})")
            device = contextlib.nullcontext()
        try:
            yield client
        finally:
            device.__exit__(None, None, None)


# --- output ----------------------------------------------------------------------------------

HEADERS = ("workload", "size", "chunks", "lazynp first", "lazynp median", "dask first",
           "dask median", "dask / lazynp", "result MiB", "lazynp peak MiB", "dask peak MiB",
           "memory lazynp / dask", "tasks/chunk lazynp", "tasks/chunk dask", "agree")


def _t(x: float) -> str:
    return "-" if math.isnan(x) else fmt_time(x)


def _median(side: Side) -> str:
    cached = f" ({side.cached_calls} call(s) ran no task)" if side.cached_calls else ""
    return _t(side.median) + cached


def _result_mib(r: Row) -> str:
    """The size of the answer (what a call keeps on the cluster, for the large results)."""
    answer = r.dask.answer if r.dask.error is None else r.lazynp.answer
    return "-" if answer is None else f"{numpy.asarray(answer).nbytes / MiB:.0f}"


def table_rows(rows: list[Row]) -> list[tuple]:
    out = []
    for r in rows:
        lz, dk = r.lazynp, r.dask

        def peak(side: Side) -> str:
            return "-" if side.probe is None else f"{side.probe.peak_bytes / MiB:.0f}"

        def tasks(side: Side) -> str:
            return "-" if side.probe is None else f"{side.probe.tasks / r.chunks:.1f}"

        speed = dk.median / lz.median if lz.error is None and dk.error is None else math.nan
        mem = (lz.probe.peak_bytes / dk.probe.peak_bytes
               if lz.probe and dk.probe and dk.probe.peak_bytes > 0 else math.nan)
        out.append((r.name, r.size, r.chunks,
                    _t(lz.first) if lz.error is None else f"error: {lz.error}", _median(lz),
                    _t(dk.first) if dk.error is None else f"error: {dk.error}", _median(dk),
                    "-" if math.isnan(speed) else f"{speed:.2f}x", _result_mib(r), peak(lz),
                    peak(dk),
                    "-" if math.isnan(mem) else f"{mem:.2f}x", tasks(lz), tasks(dk),
                    _agreement(r)))
    return out


def _agreement(r: Row) -> str:
    text = {True: "yes", False: "NO", None: "-"}[r.agree]
    if r.numpy_agree:
        text += "; NumPy: " + ", ".join(f"{k} {'yes' if v else 'NO'}"
                                        for k, v in r.numpy_agree.items())
    return text


def summarize(rows: list[Row], ooc: Row | None) -> Summary:
    summary = Summary()
    by_name = {r.name.split(" ")[0]: r for r in rows}
    for key in ("W1", "W2", "softmax"):
        r = by_name[key]
        ok = r.lazynp.error is None and r.dask.error is None
        speed = r.dask.median / r.lazynp.median if ok else math.nan
        summary.add(f"{key}: lazynp speed / dask.array's", ">= 1.5x",
                    f"{speed:.2f}x" if ok else f"lazynp: {r.lazynp.error or r.dask.error}",
                    ok and speed >= 1.5)
    w1 = by_name["W1"]
    if w1.lazynp.probe and w1.dask.probe and w1.dask.probe.peak_bytes > 0:
        mem = w1.lazynp.probe.peak_bytes / w1.dask.probe.peak_bytes
        summary.add("W1: lazynp peak worker memory / dask.array's", "<= 0.5x", f"{mem:.2f}x",
                    mem <= 0.5)
    else:
        summary.add("W1: lazynp peak worker memory / dask.array's", "<= 0.5x",
                    "not measured (a side failed)", False)
    for r in rows + ([ooc] if ooc else []):
        if r.agree is False:
            summary.add(f"{r.name}: answers agree", "allclose", "NO", False, kind="check")
        for side, ok in r.numpy_agree.items():
            if not ok:
                summary.add(f"{r.name}: {side} agrees with NumPy", "allclose", "NO", False,
                            kind="check")
    if ooc is not None:
        done = ooc.lazynp.error is None
        summary.add("out of core (lazynp) completes", "no memory error",
                    "completed" if done else ooc.lazynp.error, done, kind="check")
        summary.add("out of core (dask.array) completes", "no memory error",
                    "completed" if ooc.dask.error is None else ooc.dask.error,
                    ooc.dask.error is None, kind="info")
    return summary


def w1_memory_note(rows: list[Row]) -> str | None:
    """Why W1's memory target is out of reach while its result stays on the cluster: the
    arithmetic from this run's figures (None when a side did not run)."""
    w1 = next((r for r in rows if r.name.startswith("W1")), None)
    if w1 is None or w1.lazynp.probe is None or w1.dask.probe is None or \
            w1.dask.answer is None:
        return None
    result = numpy.asarray(w1.dask.answer).nbytes / MiB
    lz, dk = w1.lazynp.probe.peak_bytes / MiB, w1.dask.probe.peak_bytes / MiB
    return (f"W1's memory: both sides keep the {result:.0f} MiB result on the workers (the "
            f"call persists it; the program does not read it back). lazynp's peak, "
            f"{lz:.0f} MiB, is that result and {max(lz - result, 0):.0f} MiB more (its fused "
            f"kernel writes each chunk's result and nothing else); dask.array's, {dk:.0f} MiB, "
            f"adds {max(dk - result, 0):.0f} MiB of temporaries. 0.5x of dask.array's peak "
            f"is {dk / 2:.0f} MiB, less than the result itself: with the result kept, "
            f"{result / dk:.2f}x is the floor, which lazynp reaches.")


LOAD_NOTE = ("The machine is shared with other sessions running builds and tests: the figures "
             "are taken under that load (the load average is in the machine line), both sides "
             "in the same run, interleaved.")


def main(argv: list[str] | None = None) -> int:
    parser = make_parser(__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true",
                        help="tiny sizes on an in-process cluster: checks that both sides "
                             "run and agree (figures meaningless)")
    parser.add_argument("--no-out-of-core", action="store_true",
                        help="skip the out-of-core row")
    args = parse_args(__doc__, argv, parser)
    write = _common._write_table_requested     # the table is written here, not by Summary
    _common._write_table_requested = False
    s = SMOKE if args.smoke else QUICK if args.quick else FULL
    processes = not args.smoke
    header(f"lazynp (chunked, dask device) vs dask.array: 2 workers x 1 thread, "
           f"{s.worker_memory / GiB:.0f} GiB each" + (" (in-process)" if not processes else ""))
    print(LOAD_NOTE)
    with cluster(s.worker_memory, processes) as client:
        rows = [measure_row(client, r, s.repeat) for r in build_rows(client, s)]
        if args.smoke:
            for r in rows:
                check_against_numpy(r)
        ooc = None
        if args.smoke and not args.no_out_of_core:
            ooc = measure_once(client, out_of_core_row(client, s, s.worker_memory // 2**20))
            ooc.name = "out of core (smoke: tiny, not out of core)"
            check_against_numpy(ooc)
    if not args.smoke and not args.no_out_of_core:
        with cluster(s.ooc_worker_memory, True) as client:
            client.inputs_held = 0
            ooc = measure_once(client, out_of_core_row(client, s, 2 * s.ooc_worker_memory))
    shown = rows + ([ooc] if ooc else [])
    print_table(table_rows(shown), HEADERS)
    summary = summarize(rows, ooc)
    status = summary.print(strict=args.strict)
    memory_note = w1_memory_note(rows)
    if memory_note:
        print("\n" + memory_note)
    if write:
        notes = [LOAD_NOTE,
                 "Columns: `first` is the first call (lowering and Numba compilation "
                 "included), `median` the median of the following calls, interleaved; "
                 "`dask / lazynp` the ratio of the medians (above 1: lazynp faster); `peak "
                 "MiB` the workers' RSS above their idle level during one call, sampled every "
                 "5 ms on each worker and summed over both (the inputs are persisted on the "
                 "workers before, so they are not counted; a result kept on the cluster is: "
                 "`result MiB` is its size); "
                 "`tasks/chunk` the tasks the scheduler ran in that call over the input's "
                 "chunks.",
                 *([memory_note] if memory_note else []),
                 "Summary:\n\n| benchmark | target | measured | result |\n|---|---|---|---|\n"
                 + "\n".join("| " + " | ".join(str(c).replace("|", "\\|") for c in row) + " |"
                             for row in summary.table_rows())]
        path = write_table("dask_arrays", HEADERS, table_rows(shown), notes=notes)
        print(f"\n(table written to {path})")
    return status


if __name__ == "__main__":
    sys.exit(main())
