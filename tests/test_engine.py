"""Tests for the lazynp dependency engine (lazynp.engine)."""

from __future__ import annotations

import faulthandler
import random
import sys
import threading
import time
import traceback

import pytest

import lazynp.engine as eng
from lazynp.engine import Engine, EngineVar, NaiveEngine, ThreadedEngine

HANG_TIMEOUT_S = 120
WAIT_P = 0.06  # share of steps in a stress sequence that are wait_for_var calls


@pytest.fixture(autouse=True)
def _no_hang():
    # A scheduling bug usually shows up as a deadlock: dump stacks and fail
    # loudly instead of hanging the whole suite.
    faulthandler.dump_traceback_later(HANG_TIMEOUT_S, exit=True)
    yield
    faulthandler.cancel_dump_traceback_later()


@pytest.fixture(params=["threaded", "naive"])
def engine(request):
    e = ThreadedEngine(num_workers=4) if request.param == "threaded" else NaiveEngine()
    yield e
    e.shutdown()


@pytest.fixture
def threaded():
    e = ThreadedEngine(num_workers=4)
    yield e
    e.shutdown()


# -- basics ----------------------------------------------------------------------


def test_ordering_write_read_write(engine: Engine):
    v = engine.new_var()
    out = engine.new_var()
    buf: list[int] = []
    seen: list[list[int]] = []

    def w1():
        time.sleep(0.01)
        buf.append(1)

    engine.push(w1, [], [v])
    engine.push(lambda: seen.append(list(buf)), [v], [out])
    engine.push(lambda: buf.append(2), [], [v])
    engine.wait_for_var(v)
    assert buf == [1, 2]
    engine.wait_for_var(out)
    assert seen == [[1]]


def test_chain_of_writes_keeps_order(engine: Engine):
    v = engine.new_var()
    buf: list[int] = []
    for i in range(200):
        engine.push(lambda i=i: buf.append(i), [], [v])
    engine.wait_for_var(v)
    assert buf == list(range(200))


def test_reads_after_write_run_concurrently():
    e = ThreadedEngine(num_workers=2)
    try:
        v, o1, o2 = e.new_var(), e.new_var(), e.new_var()
        barrier = threading.Barrier(2, timeout=5)
        started = []

        def write():
            time.sleep(0.02)  # make sure both reads queue up behind the write

        def read(tag):
            started.append(tag)
            barrier.wait()  # both reads must be running at the same time

        e.push(write, [], [v])
        e.push(lambda: read("a"), [v], [o1])
        e.push(lambda: read("b"), [v], [o2])
        e.wait_for_var(o1)
        e.wait_for_var(o2)
        assert sorted(started) == ["a", "b"]
    finally:
        e.shutdown()


def test_write_waits_for_earlier_reads(engine: Engine):
    v = engine.new_var()
    outs = [engine.new_var() for _ in range(3)]
    finished: list[int] = []
    lock = threading.Lock()
    observed: list[int] = []

    def read(i):
        time.sleep(0.02)
        with lock:
            finished.append(i)

    for i, o in enumerate(outs):
        engine.push(lambda i=i: read(i), [v], [o])
    engine.push(lambda: observed.append(len(finished)), [], [v])
    engine.wait_for_var(v)
    assert observed == [3]


def test_read_does_not_wait_for_later_write(threaded: ThreadedEngine):
    # A read pushed before a write must not be delayed behind it, and the
    # write must not start until the read ends.
    v, o = threaded.new_var(), threaded.new_var()
    log: list[str] = []
    threaded.push(lambda: (time.sleep(0.02), log.append("read")), [v], [o])
    threaded.push(lambda: log.append("write"), [], [v])
    threaded.wait_for_var(v)
    assert log == ["read", "write"]


def test_wait_runs_only_the_awaited_op_when_workers_are_busy():
    # One worker, blocked. wait_for_var(a) may run a's own pending writer in
    # the waiting thread, but must not pick up unrelated ready work.
    e = ThreadedEngine(num_workers=1)
    try:
        blocker, x, a = e.new_var(), e.new_var(), e.new_var()
        gate = threading.Event()
        log: list[str] = []
        e.push(lambda: gate.wait(10), [], [blocker])
        time.sleep(0.02)  # let the worker pick up the blocker
        e.push(lambda: log.append("x"), [], [x])
        e.push(lambda: log.append("a"), [], [a])
        e.wait_for_var(a)
        assert log == ["a"]
        gate.set()
        e.wait_for_var(x)
        assert log == ["a", "x"]
    finally:
        gate.set()
        e.shutdown()


def test_independent_vars_overlap():
    e = ThreadedEngine(num_workers=2)
    try:
        a, b = e.new_var(), e.new_var()
        barrier = threading.Barrier(2, timeout=5)
        e.push(barrier.wait, [], [a])
        e.push(barrier.wait, [], [b])
        e.wait_for_var(a)
        e.wait_for_var(b)
    finally:
        e.shutdown()


def test_duplicates_and_read_write_overlap(engine: Engine):
    v, w = engine.new_var(), engine.new_var()
    buf = [0]
    engine.push(lambda: buf.append(buf[-1] + 1), [v, v, w, w], [v, v])
    engine.push(lambda: buf.append(buf[-1] + 1), [v], [v, v])
    engine.wait_for_var(v)
    engine.wait_for_var(w)
    engine.wait_all()
    assert buf == [0, 1, 2]


def test_op_without_vars_runs(engine: Engine):
    done = threading.Event()
    engine.push(done.set, [], [])
    engine.wait_all()
    assert done.is_set()


def test_wait_on_idle_var_returns(engine: Engine):
    v = engine.new_var()
    engine.wait_for_var(v)
    eng.wait_for_var(v)


def test_wait_all(engine: Engine):
    vars_ = [engine.new_var() for _ in range(10)]
    count = [0]
    lock = threading.Lock()

    def bump():
        time.sleep(0.001)
        with lock:
            count[0] += 1

    for _ in range(5):
        for v in vars_:
            engine.push(bump, [], [v])
    engine.wait_all()
    assert count[0] == 50


def test_nested_push(engine: Engine):
    v, w = engine.new_var(), engine.new_var()
    log: list[str] = []

    def outer():
        log.append("outer")
        # Depends on v, which this very op holds: must run after it.
        engine.push(lambda: log.append("inner-v"), [v], [w])
        engine.push(lambda: log.append("inner-w"), [], [w])

    engine.push(outer, [], [v])
    engine.wait_for_var(v)
    engine.wait_for_var(w)
    assert log == ["outer", "inner-v", "inner-w"]


def test_deep_nested_push(engine: Engine):
    v = engine.new_var()
    log: list[int] = []

    def step(n):
        log.append(n)
        if n < 50:
            engine.push(lambda: step(n + 1), [], [v])

    engine.push(lambda: step(0), [], [v])
    # Each step pushes the next from inside the op, so wait_all is the barrier.
    engine.wait_all()
    engine.wait_for_var(v)
    assert log == list(range(51))


def test_push_from_many_threads(engine: Engine):
    shared = engine.new_var()
    counter = [0]
    per_thread = 300
    privates = [engine.new_var() for _ in range(4)]
    private_bufs: list[list[int]] = [[] for _ in range(4)]

    def incr():
        x = counter[0]
        time.sleep(0)
        counter[0] = x + 1

    def user(t):
        for i in range(per_thread):
            engine.push(incr, [], [shared])
            engine.push(lambda i=i: private_bufs[t].append(i), [shared], [privates[t]])

    threads = [threading.Thread(target=user, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    engine.wait_for_var(shared)
    for t, p in enumerate(privates):
        engine.wait_for_var(p)
        assert private_bufs[t] == list(range(per_thread))
    assert counter[0] == 4 * per_thread


# -- failures --------------------------------------------------------------------


def test_failure_propagates_and_clears(engine: Engine):
    a, b, c, other = (engine.new_var() for _ in range(4))
    raised: list[BaseException] = []
    ran: list[str] = []

    def bad():
        exc = ValueError("operands could not be broadcast")
        raised.append(exc)
        raise exc

    engine.push(bad, [], [a], context='File "x.py", line 3, in f')
    engine.push(lambda: ran.append("reader"), [a], [b])  # skipped, b inherits the failure
    engine.push(lambda: ran.append("writer"), [], [a])  # skipped too
    engine.push(lambda: ran.append("other"), [], [other])

    engine.wait_for_var(other)  # unaffected
    with pytest.raises(ValueError) as ei:
        engine.wait_for_var(a)
    assert ei.value is raised[0]
    assert 'lazynp: operation recorded at File "x.py", line 3, in f' in ei.value.__notes__
    with pytest.raises(ValueError) as ei_b:
        engine.wait_for_var(b)
    assert ei_b.value is raised[0]
    assert ran == ["other"]

    # Marks are cleared: both vars work again and a second wait is clean.
    engine.wait_for_var(a)
    engine.wait_for_var(b)
    engine.push(lambda: ran.append("again"), [a], [b, c])
    engine.wait_for_var(b)
    engine.wait_for_var(c)
    assert ran == ["other", "again"]


def test_failure_traceback_points_at_fn_and_does_not_grow(engine: Engine):
    a, b = engine.new_var(), engine.new_var()

    def bad_kernel():
        raise TypeError("ufunc 'add' did not contain a loop with signature matching types")

    engine.push(bad_kernel, [], [a])
    engine.push(lambda: None, [a], [b])
    tbs = []
    for v in (a, b):
        with pytest.raises(TypeError) as ei:
            engine.wait_for_var(v)
        tbs.append([f.name for f in traceback.extract_tb(ei.value.__traceback__)])
    for names in tbs:
        assert "bad_kernel" in names
        assert names.count("wait_for_var") == 1, names


def test_failure_without_context_has_no_note(engine: Engine):
    v = engine.new_var()
    engine.push(lambda: 1 / 0, [], [v])
    with pytest.raises(ZeroDivisionError) as ei:
        engine.wait_for_var(v)
    assert not getattr(ei.value, "__notes__", [])


def test_failure_wait_while_pending(threaded: ThreadedEngine):
    # The failure arrives while the waiter is already blocked.
    v = threaded.new_var()
    gate = threading.Event()

    def bad():
        gate.wait(5)
        raise KeyError("late")

    threaded.push(bad, [], [v])
    threaded.push(lambda: None, [v], [v])
    t = threading.Timer(0.02, gate.set)
    t.start()
    with pytest.raises(KeyError):
        threaded.wait_for_var(v)
    t.join()
    threaded.wait_for_var(v)


def test_wait_all_does_not_raise(engine: Engine):
    v = engine.new_var()
    engine.push(lambda: [][1], [], [v])
    engine.wait_all()
    with pytest.raises(IndexError):
        engine.wait_for_var(v)


def test_worker_survives_base_exception(threaded: ThreadedEngine):
    vs = [threaded.new_var() for _ in range(2 * threaded.num_workers)]
    for v in vs:
        threaded.push(lambda: sys.exit(3), [], [v])
    for v in vs:
        with pytest.raises(SystemExit):
            threaded.wait_for_var(v)
    out: list[int] = []
    w = threaded.new_var()
    threaded.push(lambda: out.append(1), [], [w])
    threaded.wait_for_var(w)
    assert out == [1]


def test_wait_inside_worker_raises_instead_of_deadlocking(threaded: ThreadedEngine):
    v, w = threaded.new_var(), threaded.new_var()
    threaded.push(lambda: time.sleep(0.05), [], [w])
    threaded.push(lambda: threaded.wait_for_var(w), [], [v])
    with pytest.raises(RuntimeError, match="inside an engine operation"):
        threaded.wait_for_var(v)


# -- delete ----------------------------------------------------------------------


def test_delete_runs_after_readers(engine: Engine):
    v = engine.new_var()
    outs = [engine.new_var() for _ in range(3)]
    finished: list[int] = []
    lock = threading.Lock()
    deleted_after: list[int] = []

    def read(i):
        time.sleep(0.01)
        with lock:
            finished.append(i)

    for i, o in enumerate(outs):
        engine.push(lambda i=i: read(i), [v], [o])
    engine.delete_var(v, lambda: deleted_after.append(len(finished)))
    engine.wait_all()
    assert deleted_after == [3]


def test_delete_failed_var_still_runs(engine: Engine):
    v = engine.new_var()
    called: list[bool] = []
    engine.push(lambda: 1 / 0, [], [v])
    engine.delete_var(v, lambda: called.append(True))
    engine.delete_var(engine.new_var())  # no callback
    engine.wait_all()
    assert called == [True]
    engine.wait_for_var(v)  # failure discarded by the delete


# -- stress ----------------------------------------------------------------------


class Boom(Exception):
    pass


def _plan(seed: int):
    rng = random.Random(seed)
    nvars = rng.randint(3, 5)
    steps = []
    for i in range(rng.randint(20, 50)):
        if rng.random() < WAIT_P:
            steps.append(("wait", rng.randrange(nvars)))
            continue
        reads = [rng.randrange(nvars) for _ in range(rng.randint(0, 3))]
        writes = [rng.randrange(nvars) for _ in range(rng.choice((0, 1, 1, 1, 2)))]
        steps.append(
            (
                "op",
                i,
                reads,
                writes,
                rng.randint(0, 100),
                rng.random() < 0.02,  # fail
                rng.random() < 0.3,  # sleep
            )
        )
    return nvars, steps


def _make_fn(bufs, obs, i, reads, writes, k, fail, sleep, tracker=None):
    def fn():
        if tracker is not None:
            tracker.enter(reads, writes)
        try:
            if sleep:
                time.sleep(0)
            seen = tuple(bufs[r][-1] for r in reads)
            obs[i] = seen
            if fail:
                raise Boom(i)
            s = k + sum(seen)
            for w in dict.fromkeys(writes):
                b = bufs[w]
                b.append((s * 31 + b[-1] * 7 + len(b)) % 1_000_003)
        finally:
            if tracker is not None:
                tracker.exit(reads, writes)

    return fn


class _Tracker:
    """Checks the reader/writer exclusion rules from inside the ops."""

    def __init__(self, nvars: int) -> None:
        self.lock = threading.Lock()
        self.readers = [0] * nvars
        self.writers = [0] * nvars
        self.violations: list[str] = []

    def _split(self, reads, writes):
        ws = set(writes)
        return set(reads) - ws, ws

    def enter(self, reads, writes):
        rs, ws = self._split(reads, writes)
        with self.lock:
            for r in rs:
                if self.writers[r]:
                    self.violations.append(f"read of {r} during write")
                self.readers[r] += 1
            for w in ws:
                if self.writers[w] or self.readers[w]:
                    self.violations.append(f"write of {w} overlaps")
                self.writers[w] += 1

    def exit(self, reads, writes):
        rs, ws = self._split(reads, writes)
        with self.lock:
            for r in rs:
                self.readers[r] -= 1
            for w in ws:
                self.writers[w] -= 1


def _outcome(exc):
    return None if exc is None else (type(exc).__name__, exc.args)


def _reference(nvars, steps):
    """Plain sequential execution with the engine's failure rules."""
    bufs = [[v] for v in range(nvars)]
    obs: dict[int, tuple] = {}
    failed: list[BaseException | None] = [None] * nvars
    waits = []
    for step in steps:
        if step[0] == "wait":
            waits.append(_outcome(failed[step[1]]))
            failed[step[1]] = None
            continue
        _, i, reads, writes, k, fail, sleep = step
        ws = list(dict.fromkeys(writes))
        rs = [r for r in dict.fromkeys(reads) if r not in ws]
        exc = next((failed[v] for v in rs + ws if failed[v] is not None), None)
        if exc is None:
            try:
                _make_fn(bufs, obs, i, reads, writes, k, fail, sleep)()
            except Boom as e:
                exc = e
        if exc is not None:
            for w in ws:
                failed[w] = exc
    for v in range(nvars):
        waits.append(_outcome(failed[v]))
    return bufs, obs, waits


def _on_engine(e: Engine, nvars, steps):
    bufs = [[v] for v in range(nvars)]
    obs: dict[int, tuple] = {}
    tracker = _Tracker(nvars)
    vars_ = [e.new_var() for _ in range(nvars)]
    waits = []

    def wait(v):
        try:
            e.wait_for_var(vars_[v])
        except Boom as exc:
            assert f"lazynp: operation recorded at op{exc.args[0]}" in exc.__notes__
            return _outcome(exc)
        return None

    for step in steps:
        if step[0] == "wait":
            waits.append(wait(step[1]))
            continue
        _, i, reads, writes, k, fail, sleep = step
        fn = _make_fn(bufs, obs, i, reads, writes, k, fail, sleep, tracker)
        e.push(fn, [vars_[r] for r in reads], [vars_[w] for w in writes], context=f"op{i}")
    for v in range(nvars):
        waits.append(wait(v))
    e.wait_all()
    return bufs, obs, waits, tracker.violations


@pytest.mark.parametrize("kind", ["threaded", "naive"])
def test_stress_random_sequences(kind):
    e = ThreadedEngine(num_workers=4) if kind == "threaded" else NaiveEngine()
    try:
        n = 1000 if kind == "threaded" else 200
        for seed in range(n):
            nvars, steps = _plan(seed)
            want_bufs, want_obs, want_waits = _reference(nvars, steps)
            bufs, obs, waits, violations = _on_engine(e, nvars, steps)
            assert not violations, f"seed {seed}: {violations}"
            assert bufs == want_bufs, f"seed {seed}"
            assert obs == want_obs, f"seed {seed}"
            assert waits == want_waits, f"seed {seed}"
    finally:
        e.shutdown()


# -- engine selection ------------------------------------------------------------


def test_engine_selection_env(monkeypatch):
    monkeypatch.setattr(eng, "_engine", None)  # restored after the test
    monkeypatch.setenv("LAZYNP_ENGINE", "naive")
    assert isinstance(eng.get_engine(), NaiveEngine)
    assert eng.get_engine() is eng.get_engine()

    v = eng.new_var()
    out: list[int] = []
    eng.push(lambda: out.append(1), [], [v])
    assert out == [1]  # naive: ran synchronously

    new = eng.set_engine("threaded")
    assert isinstance(new, ThreadedEngine)
    assert eng.get_engine() is new
    assert new.num_workers >= 1
    eng.push(lambda: out.append(2), [v], [v])
    eng.wait_for_var(v)
    eng.wait_all()
    assert out == [1, 2]

    assert isinstance(eng.set_engine("naive"), NaiveEngine)
    with pytest.raises(ValueError):
        eng.set_engine("bogus")

    monkeypatch.setattr(eng, "_engine", None)
    monkeypatch.delenv("LAZYNP_ENGINE")
    assert isinstance(eng.get_engine(), ThreadedEngine)  # the default
    eng.get_engine().shutdown()

    monkeypatch.setattr(eng, "_engine", None)
    monkeypatch.setenv("LAZYNP_ENGINE", "nope")
    with pytest.raises(ValueError, match="unknown lazynp engine"):
        eng.get_engine()


def test_module_level_failure_roundtrip(monkeypatch):
    monkeypatch.setattr(eng, "_engine", None)
    monkeypatch.delenv("LAZYNP_ENGINE", raising=False)
    v, w = eng.new_var(), eng.new_var()
    assert isinstance(v, EngineVar)
    eng.push(lambda: int("x"), [], [v], context="here")
    eng.push(lambda: None, [v], [w])
    with pytest.raises(ValueError):
        eng.wait_for_var(w)
    with pytest.raises(ValueError):
        eng.wait_for_var(v)
    eng.wait_for_var(v)
    done: list[bool] = []
    eng.delete_var(v, lambda: done.append(True))
    eng.wait_all()
    assert done == [True]
    eng.get_engine().shutdown()


def test_shutdown_then_reuse():
    e = ThreadedEngine(num_workers=2)
    v = e.new_var()
    out: list[int] = []
    for round_ in range(3):
        e.push(lambda r=round_: out.append(r), [], [v])
        e.wait_for_var(v)
        e.shutdown()
    assert out == [0, 1, 2]


def test_var_is_cheap():
    v = EngineVar()
    assert not hasattr(v, "__dict__")
    assert "pending=0" in repr(v)


# --- push_async: operations that complete through a callback (MXNet's PushAsync) ----------

def test_push_async_holds_its_vars_until_done_without_holding_a_thread():
    e = ThreadedEngine(num_workers=1)
    try:
        v, other = eng.new_var(), eng.new_var()
        pending = []
        log = []
        e.push_async(lambda done: pending.append(done), [], [v])
        e.push(lambda: log.append("after"), [v], [other])   # waits for the async op
        e.push(lambda: log.append("free"), [], [eng.new_var()])
        deadline = time.monotonic() + 10
        while "free" not in log and time.monotonic() < deadline:
            time.sleep(0.01)
        # the only worker thread ran unrelated work while the async op was outstanding
        assert log == ["free"] and len(pending) == 1
        threading.Timer(0.05, pending[0]).start()
        e.wait_for_var(other)
        assert log == ["free", "after"]
        pending[0]()                                   # later calls of done are ignored
        e.wait_all()
    finally:
        e.shutdown()


def test_push_async_keeps_its_reads_until_done(engine: Engine):
    v = eng.new_var()
    log = []

    def reader(done):
        log.append("read starts")
        threading.Timer(0.1, lambda: (log.append("read done"), done())).start()

    engine.push_async(reader, [v], [])
    engine.push(lambda: log.append("write"), [], [v])
    engine.wait_for_var(v)
    assert log == ["read starts", "read done", "write"]


@pytest.mark.parametrize("how", ["done(exc)", "raises", "input failed"])
def test_push_async_failures_are_stored_on_its_writes(engine: Engine, how):
    v, src = eng.new_var(), eng.new_var()
    if how == "input failed":
        engine.push(lambda: 1 / 0, [], [src])
    started = []

    def fn(done):
        started.append(True)
        if how == "raises":
            raise KeyError("at the start")
        threading.Timer(0.05, done, (ValueError("on arrival"),)).start()

    engine.push_async(fn, [src], [v])
    expected = {"done(exc)": ValueError, "raises": KeyError,
                "input failed": ZeroDivisionError}[how]
    with pytest.raises(expected):
        engine.wait_for_var(v)
    assert started == ([] if how == "input failed" else [True])
    engine.push(lambda: None, [], [v])                 # the var is usable again
    engine.wait_for_var(v)
