"""Large elementwise work run at once on two threads (lazynp/_split.py): results are NumPy's
bit for bit, warnings and errors are NumPy's at the user's line, and calls from several
threads or after a fork still work."""
import os
import sys
import threading
import warnings

import numpy
import pytest

import lazynp
from lazynp._base import split as _split

pytestmark = pytest.mark.skipif(not _split.enabled, reason="single core or LAZYNP_SPLIT=0")

N = 1 << 18          # above both split bounds for the costly ufuncs, below for cheap ones
BIG = 1 << 20


def _counting():
    """Count the calls that were split (a wrapper around _split.call)."""
    counts = {"split": 0}
    real = _split.call

    def call(uf, args):
        r = real(uf, args)
        if r is not None:
            counts["split"] += 1
        return r
    return counts, call


@pytest.fixture
def counted(monkeypatch):
    counts, call = _counting()
    monkeypatch.setattr(_split, "call", call)
    if lazynp._base.native.ext is not None:
        lazynp._base.native.ext.configure_split(
            call, _split.SPLIT_MIN_COSTLY, _split.SPLIT_MIN, [numpy.exp, numpy.log, numpy.sin],
            {"add": numpy.add, "sub": numpy.subtract, "mul": numpy.multiply,
             "truediv": numpy.true_divide})
    yield counts
    _split.install(lazynp._base.native.ext)


CASES = [
    ("exp", lambda m, a, b: m.exp(a)),
    ("log of negatives", lambda m, a, b: m.log(a - 0.5)),
    ("sin float32", lambda m, a, b: m.sin(a.astype(numpy.float32))),
    ("power", lambda m, a, b: m.power(a, b)),
    ("add", lambda m, a, b: a + b),
    ("divide by zero", lambda m, a, b: a / (b * 0.0)),
    ("int add", lambda m, a, b: (a * 100).astype(numpy.int64) + 7),
    ("int floor_divide by zero", lambda m, a, b: (a * 100).astype(numpy.int64) // 0),
    ("complex", lambda m, a, b: m.exp(a + 1j * b)),
    ("arctan2 with scalar", lambda m, a, b: m.arctan2(a, 0.5)),
]


@pytest.mark.parametrize("size", [N, BIG + 12345])
@pytest.mark.parametrize("name,f", CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("shared", [False, True])
def test_equals_numpy_with_its_warnings(name, f, size, shared, counted):
    rng = numpy.random.default_rng(size)
    a, b = rng.random(size), rng.random(size)
    la, lb = (lazynp.asarray(a), lazynp.asarray(b)) if shared else \
        (lazynp.asarray(a.copy()), lazynp.asarray(b.copy()))
    with warnings.catch_warnings(record=True) as w1:
        warnings.simplefilter("always")
        want = f(numpy, a, b)
    with warnings.catch_warnings(record=True) as w2:
        warnings.simplefilter("always")
        got = numpy.asarray(f(lazynp, la, lb))
    assert got.dtype == want.dtype and got.shape == want.shape
    numpy.testing.assert_array_equal(got, want)      # bit for bit (NaN where NumPy's are)
    assert [(w.category, str(w.message), w.lineno) for w in w2] == \
        [(w.category, str(w.message), w.lineno) for w in w1]


def test_large_calls_are_split(counted):
    a = lazynp.asarray(numpy.random.default_rng(1).random(BIG + 64))
    numpy.asarray(lazynp.exp(a))
    numpy.asarray(a * 3.0 + a)
    assert counted["split"] >= 2


def test_errstate_raise_at_the_call():
    a = lazynp.asarray(numpy.linspace(-1, 1, BIG))
    with numpy.errstate(invalid="raise"):
        with pytest.raises(FloatingPointError, match="invalid value encountered in log"):
            lazynp.log(a)
    with numpy.errstate(all="ignore"):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            r = numpy.asarray(lazynp.log(a))
    assert numpy.isnan(r[: BIG // 2 - 1]).all()


def test_calls_from_several_threads():
    rng = numpy.random.default_rng(2)
    data = [rng.random(N) for _ in range(4)]
    want = [numpy.exp(d) * 2.0 + numpy.sin(d) for d in data]
    errors, got = [], [None] * 4

    def work(i):
        try:
            for _ in range(20):
                x = lazynp.asarray(data[i])
                got[i] = numpy.asarray(lazynp.exp(x) * 2.0 + lazynp.sin(x))
        except BaseException as e:     # noqa: BLE001
            errors.append(e)
    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors
    for g, w in zip(got, want):
        numpy.testing.assert_array_equal(g, w)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork")
def test_after_fork_the_child_splits_again():
    a = lazynp.asarray(numpy.random.default_rng(3).random(N))
    numpy.asarray(lazynp.exp(a))            # the helper thread exists in the parent
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:                             # pragma: no cover (child)
        try:
            ok = numpy.array_equal(numpy.asarray(lazynp.exp(a)), numpy.exp(numpy.asarray(a)))
            os.write(w, b"1" if ok else b"0")
        finally:
            os._exit(0)
    os.close(w)
    got = os.read(r, 1)
    os.waitpid(pid, 0)
    assert got == b"1"


# --- compiled plans (lazynp.jit, the gradient replay) write into their own buffers -------------

@pytest.mark.parametrize("inplace", [False, True])
@pytest.mark.parametrize("name, uf, args", [
    ("tanh", numpy.tanh, lambda a: (a,)),
    ("exp overflow", numpy.exp, lambda a: (a * 1000.0,)),
    ("log of negatives", numpy.log, lambda a: (a - 0.5,)),
    ("power", numpy.power, lambda a: (a, 2.5)),
])
def test_into_equals_numpy_with_its_warnings(name, uf, args, inplace):
    a = numpy.random.RandomState(1).rand(N)
    ops = list(args(a))
    with warnings.catch_warnings(record=True) as expected:
        warnings.simplefilter("always")
        want = uf(*ops)
    if inplace:
        out = ops[0] = ops[0].copy()
    else:
        out = numpy.empty_like(want)
    calls = []
    real = _split._halves

    def halves(*a):
        calls.append(1)
        return real(*a)
    _split._halves, saved = halves, _split._halves
    try:
        with warnings.catch_warnings(record=True) as got:
            warnings.simplefilter("always")
            _split.into(uf, tuple(ops), out)
    finally:
        _split._halves = saved
    assert calls, "the call was not split"
    numpy.testing.assert_array_equal(out, want)
    assert [(w.category, str(w.message)) for w in got] == \
        [(w.category, str(w.message)) for w in expected]


def test_into_leaves_other_overlaps_to_numpy():
    a = numpy.random.RandomState(2).rand(N + 1)
    want = a.copy()
    # NumPy's own call on the same overlap is the oracle: on AVX-512 CPUs its result differs
    # by an ulp in a few elements from exp of a separate input
    numpy.exp(want[1:], out=want[:-1])
    _split.into(numpy.exp, (a[1:],), a[:-1])          # shifted overlap: one NumPy call
    numpy.testing.assert_array_equal(a, want)


def test_jit_plan_splits_and_warns_once():
    f = lazynp.jit(lambda x: lazynp.exp(x) * 2.0)
    x = numpy.linspace(0, 800, N)
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        r = numpy.asarray(f(x))
    with numpy.errstate(over="ignore"):
        numpy.testing.assert_array_equal(r, numpy.exp(x) * 2.0)
    assert [str(w.message) for w in got].count("overflow encountered in exp") == 1


@pytest.mark.skipif(lazynp._base.cpus._getcpu is None or len(lazynp._base.cpus.allowed_cpus()) < 2,
                    reason="CPU placement needs glibc and two CPUs")
def test_helper_runs_off_the_callers_cpu():
    """The helper thread is woken on another CPU than the caller's (Linux's wake-affine
    choice would otherwise put both halves on one CPU)."""
    _split.call(numpy.exp, (numpy.ones(N),))
    helper = _split._helper
    cpu = lazynp._base.cpus._getcpu()
    _split.call(numpy.exp, (numpy.ones(N),))
    allowed = os.sched_getaffinity(helper._thread.native_id)
    if lazynp._base.cpus._getcpu() == cpu:          # (the caller did not move in between)
        assert cpu not in allowed


@pytest.mark.parametrize("product", [
    lambda a, x: a @ x,                                   # the C operator
    lambda a, x: lazynp.matmul(a, x),                     # the recorded call, run at once
    lambda a, x: lazynp.dot(a, x),
])
def test_no_split_while_blas_workers_spin(product, monkeypatch):
    """After a product large enough for OpenBLAS's threads, their workers spin for its
    thread timeout: nothing is split for ``BLAS_SPIN_SECONDS`` (a split then ran three busy
    threads on two CPUs); the values stay NumPy's.  A small product changes nothing."""
    monkeypatch.setattr(_split, "_blas_until", 0.0)
    monkeypatch.setattr(_split, "BLAS_SPIN_SECONDS", 3600.0)
    rng = numpy.random.default_rng(7)
    small, x3 = lazynp.array(rng.random((3, 3))), lazynp.array(rng.random(3))
    numpy.asarray(product(small, x3))
    assert _split._blas_until == 0.0
    a = rng.random((120, 120))
    x = rng.random(120)
    got = numpy.asarray(product(lazynp.array(a), lazynp.array(x)))
    numpy.testing.assert_array_equal(got, a @ x)
    assert _split._blas_until > 0.0
    assert _split._both(numpy.add, (numpy.ones(4),), {}, (numpy.ones(4),), {}) is None
    y = rng.random(BIG)
    numpy.testing.assert_array_equal(numpy.asarray(lazynp.exp(lazynp.asarray(y))),
                                     numpy.exp(y))


def test_splits_resume_once_blas_workers_sleep(monkeypatch):
    monkeypatch.setattr(_split, "_blas_until", 0.0)
    monkeypatch.setattr(_split, "BLAS_SPIN_SECONDS", 0.0)
    a = lazynp.array(numpy.ones((120, 120)))
    numpy.asarray(a @ a[0])
    mine, theirs = _split._both(numpy.add, (numpy.ones(4), 1.0), {}, (numpy.ones(4), 2.0), {})
    numpy.testing.assert_array_equal(theirs, numpy.full(4, 3.0))
