"""A split ufunc call (lazynp/_base/split.py) when other threads of the process keep a CPU
busy (OpenBLAS's workers spin for about 0.1 s after each threaded BLAS call: gesummv's
``alpha * A @ x + beta * B @ x``): the call is made on one thread; otherwise the two threads
take chunks of the flat range in turn.  Either way the values are NumPy's bit for bit."""
import numpy
import pytest

from lazynp._base import cpus as _cpus
from lazynp._base import split as _split

pytestmark = pytest.mark.skipif(not _split.enabled, reason="single core or LAZYNP_SPLIT=0")


class FakeClocks:
    """Process, thread, per-thread and wall clocks that a test moves by hand."""

    def __init__(self):
        self.process = self.thread = self.wall = 0.0
        self.per_thread = {}

    def clocks(self):
        return (lambda: self.process, lambda: self.thread,
                lambda c: self.per_thread[c], lambda: self.wall)


def test_other_threads_busy_from_their_share_of_the_wall_time(monkeypatch):
    monkeypatch.setattr(_cpus, "_yielding_clocks", set())     # (no compiler thread here)
    fake = FakeClocks()
    others = _cpus.OtherThreads(fake.clocks())
    assert others.busy() is False               # (no window yet)
    fake.wall += 0.010
    fake.thread += 0.010                        # the caller itself ran: not busy
    assert others.busy() is False
    fake.wall += 0.010
    fake.process += 0.010 + 0.009               # another thread ran 90% of the window
    fake.thread += 0.010
    assert others.busy() is True
    fake.wall += 0.010
    fake.process += 0.002                       # 20%: a CPU is free
    assert others.busy() is False


def test_helper_and_low_priority_threads_do_not_count(monkeypatch):
    fake = FakeClocks()
    fake.per_thread = {"helper": 0.0, "compiler": 0.0}
    monkeypatch.setattr(_cpus, "_yielding_clocks", {"compiler"})
    others = _cpus.OtherThreads(fake.clocks())
    assert others.busy(("helper",)) is False
    fake.wall += 0.010
    fake.process += 0.020                       # the helper and the compiler, 10 ms each
    fake.per_thread["helper"] += 0.010
    fake.per_thread["compiler"] += 0.010
    assert others.busy(("helper",)) is False
    fake.wall += 0.010
    fake.process += 0.010                       # a thread lazynp does not know
    assert others.busy(("helper",)) is True


def test_a_low_priority_thread_that_ended_is_dropped(monkeypatch):
    fake = FakeClocks()
    monkeypatch.setattr(_cpus, "_yielding_clocks", {"gone"})

    def clock(c):
        if c == "gone":
            raise OSError("no such thread")
        return 0.0
    others = _cpus.OtherThreads((lambda: fake.process, lambda: 0.0, clock, lambda: fake.wall))
    assert others.busy() is False
    assert _cpus._yielding_clocks == set()


class _Stub:
    def __init__(self, answer):
        self.answer = answer

    def busy(self, helper_clocks=()):
        return self.answer


@pytest.mark.parametrize("size", [(1 << 20) + 37, 3 << 20, 2000 * 2000])
@pytest.mark.parametrize("uf, make", [
    (numpy.multiply, lambda a: (1.5, a)),
    (numpy.add, lambda a: (a, a[::-1].copy())),
    (numpy.exp, lambda a: (a,)),
])
def test_chunks_give_numpys_bits(monkeypatch, size, uf, make):
    monkeypatch.setattr(_split, "_others", _Stub(False))
    a = numpy.random.default_rng(size).standard_normal(size)
    a[::97] = -0.0
    args = make(a)
    taken = []
    real = _split._chunk_bounds
    monkeypatch.setattr(_split, "_chunk_bounds", lambda n: taken.extend(real(n)) or real(n))
    got = _split.call(uf, args)
    assert got is not None, "the call was not split"
    assert len(taken) > 2
    want = uf(*args)
    numpy.testing.assert_array_equal(got, want, strict=True)
    assert numpy.array_equal(numpy.signbit(got), numpy.signbit(want))


@pytest.mark.parametrize("size", [1 << 15, (1 << 18) + 5, (1 << 20) + 37, 16 * (1 << 20) + 64])
def test_chunk_bounds_cover_the_range_on_aligned_cuts(size):
    bounds = _split._chunk_bounds(size)
    assert bounds[0][0] == 0 and bounds[-1][1] == size
    assert all(hi == lo2 for (_, hi), (lo2, _) in zip(bounds, bounds[1:]))
    assert all(lo % _split._ALIGN == 0 and hi > lo for lo, hi in bounds)
    assert len(bounds) <= _split.SPLIT_CHUNKS
    assert all(hi - lo >= _split.SPLIT_CHUNK_MIN for lo, hi in bounds[:-1])


def test_busy_cpus_make_one_call_with_numpys_values(monkeypatch):
    a = numpy.random.default_rng(3).standard_normal(3 << 20)
    monkeypatch.setattr(_split, "_others", _Stub(True))
    assert _split.call(numpy.multiply, (1.5, a)) is None     # the caller makes NumPy's call
    out = numpy.empty_like(a)
    _split.into(numpy.multiply, (1.5, a), out)
    numpy.testing.assert_array_equal(out, 1.5 * a, strict=True)
    monkeypatch.setattr(_split, "_others", _Stub(False))
    numpy.testing.assert_array_equal(_split.call(numpy.multiply, (1.5, a)), 1.5 * a,
                                     strict=True)


def test_other_threads_counts_a_real_busy_thread():
    """Not timed: the real clocks see the CPU time of a thread that sorts without pause
    while the caller sleeps (any share of it counts, with the threshold set near zero)."""
    import threading
    import time
    stop = threading.Event()
    data = numpy.random.default_rng(0).standard_normal(1 << 16)

    def spin():
        while not stop.is_set():
            numpy.sort(data)

    class AnyShare(_cpus.OtherThreads):
        __slots__ = ()
        BUSY_SHARE = 1e-9
    others = AnyShare()
    t = threading.Thread(target=spin)
    t.start()
    try:
        others.busy()
        time.sleep(0.05)
        assert others.busy() is True
    finally:
        stop.set()
        t.join()


def test_the_helper_keeps_no_array_of_a_finished_split(monkeypatch):
    """The helper thread's frame dropped the job's arrays: once the caller lets go of the
    operands and the result of a split, they are freed (clipping at L held 2 GB arrays)."""
    import gc
    import weakref
    monkeypatch.setattr(_split, "_others", _Stub(False))
    a = numpy.random.default_rng(5).standard_normal(3 << 20)
    r = _split.call(numpy.multiply, (a, 2.0))
    assert r is not None, "the call was not split"
    alive = [weakref.ref(a), weakref.ref(r)]
    del a, r
    gc.collect()
    assert [w() is None for w in alive] == [True, True]
