"""Element reads and writes (``a[i]``, ``a[i, j]``, iteration) on computed arrays: lazynp's C
fast path reads and writes the element itself; NumPy is the oracle for values, scalar types,
casts, warnings and errors."""
import warnings

import numpy
import pytest

import lazynp

DTYPES = ["f8", "f4", "f2", "i1", "u1", "i2", "u2", "i4", "u4", "i8", "u8", "c8", "c16", "?",
          "m8[s]", "M8[D]", ">f8", "<i4", "U3", "S2", "O"]


def _make(dt):
    if dt in ("U3", "S2", "O"):
        return numpy.array([["a", "bb", "c", "d"], ["e", "f", "g", "h"], ["i", "j", "k", "l"]],
                           dtype=dt)
    return numpy.arange(12).reshape(3, 4).astype(dt)


def _outcome(fn):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            r = fn()
            err = None
        except Exception as e:         # noqa: BLE001 (the exception is compared with NumPy's)
            r, err = None, (type(e), str(e))
    return r, err, [(w.category, str(w.message)) for w in caught]


INDICES = [(0, 1), (2, 3), (-1, -4), (-3, 0), (numpy.int64(1), numpy.int32(-1)),
           (numpy.uint8(2), 2), (3, 0), (0, 4), (-4, 0), (10 ** 30, 0), (0, numpy.int64(-5))]


@pytest.mark.parametrize("dt", DTYPES)
def test_reads_match_numpy(dt):
    n = _make(dt)
    for lz in (lazynp.asarray(n.copy()), lazynp.asarray(n.copy())[::-1][::-1]):
        for idx in INDICES:
            r1, e1, _ = _outcome(lambda: n[idx])
            r2, e2, _ = _outcome(lambda: lz[idx])
            assert e1 == e2, (dt, idx)
            if e1 is None:
                assert type(r1) is type(r2), (dt, idx)
                assert numpy.array_equal(numpy.asarray(r1), numpy.asarray(r2)), (dt, idx)
        row = n[1]
        lrow = lz[1]
        for i in (0, -1, numpy.int16(2), 7, -9):
            r1, e1, _ = _outcome(lambda: row[i])
            r2, e2, _ = _outcome(lambda: lrow[i])
            assert e1 == e2 and type(r1) is type(r2), (dt, i)
        got = list(lrow)
        want = list(row)
        assert [type(x) for x in got] == [type(x) for x in want]
        assert numpy.array_equal(numpy.array(got, dtype=n.dtype), numpy.array(want))


VALUES = [1.7, 3, -1, 300, 2 ** 40, True, 1 + 2j, float("nan"), float("inf"),
          numpy.float32(2.5), numpy.int64(-5), numpy.uint8(255), numpy.float64(1e300),
          numpy.bool_(True), "7", None]


@pytest.mark.parametrize("dt", ["f8", "f4", "i1", "u1", "i8", "u8", "c16", "?"])
def test_writes_match_numpy(dt):
    for v in VALUES:
        for idx in [(1, 2), (-1, 0), (numpy.int64(2), numpy.int8(-1)), (3, 0), (0, -5)]:
            n = _make(dt)
            lz = lazynp.asarray(n.copy())
            r1 = _outcome(lambda: n.__setitem__(idx, v))
            r2 = _outcome(lambda: lz.__setitem__(idx, v))
            assert r1[1] == r2[1], (dt, v, idx)             # the same exception
            assert r1[2] == r2[2], (dt, v, idx)             # the same warnings
            numpy.testing.assert_array_equal(numpy.asarray(lz), n)


def test_write_to_read_only_and_shared_buffers():
    n = numpy.arange(5.0)
    n.flags.writeable = False
    lz = lazynp.asarray(n)
    with pytest.raises(ValueError, match="read-only"):
        lz[1] = 2.0
    shared = numpy.zeros(4)
    lz = lazynp.asarray(shared)           # shares the caller's buffer
    lz[2] = 5.0
    assert shared[2] == 5.0               # seen through NumPy at once, as in NumPy
    shared[1] = 7.0
    assert lz[1] == 7.0 and type(lz[1]) is numpy.float64


def test_element_writes_and_pending_readers():
    """A recorded reader of the old version keeps the old value (copy-on-write); an element
    write to a fresh array is seen by what is recorded after it."""
    with lazynp.policy("lazy"):
        a = lazynp.arange(6.0)
        b = a * 2.0                       # recorded: reads a's current version
        a[0] = 100.0
        c = a + 1.0
    numpy.testing.assert_array_equal(numpy.asarray(b), numpy.arange(6.0) * 2)
    want = numpy.arange(6.0)
    want[0] = 100.0
    numpy.testing.assert_array_equal(numpy.asarray(c), want + 1)


def test_iteration_sees_writes_made_during_the_loop():
    n = numpy.arange(6.0)
    lz = lazynp.asarray(n.copy())
    seen_n, seen_l = [], []
    for k, x in enumerate(n):
        seen_n.append(x)
        if k + 1 < len(n):
            n[k + 1] += 10
    for k, x in enumerate(lz):
        seen_l.append(x)
        if k + 1 < len(lz):
            lz[k + 1] += 10
    assert seen_n == seen_l and [type(x) for x in seen_l] == [type(x) for x in seen_n]


@pytest.mark.parametrize("index", [numpy.int64(2), numpy.int32(-3), 2, (numpy.int64(3),),
                                   (numpy.int64(1), numpy.int8(2))])
@pytest.mark.parametrize("bound", [None, 1])
def test_writes_into_pending_arrays_with_numpy_integer_indices(index, bound):
    """A one-element (or one-row) write into an array whose head is pending (a large write
    recorded before it).  (A NumPy integer index once crashed the interpreter: the written
    region was read as an array from what is NumPy's scalar.)"""
    saved = lazynp.core.policy.EAGER_MAX_ELEMS
    if bound is not None:
        lazynp.core.policy.set_eager_max_elems(bound)
    try:
        for shape in [(1 << 20,), (1024, 1024), (5,), (3, 4)]:
            want = numpy.arange(numpy.prod(shape)).reshape(shape)
            got = lazynp.arange(numpy.prod(shape)).reshape(shape)
            for a in (want, got):
                a[:] = 5
                a[1:1] = 100
            try:
                want[index] = 7
            except IndexError:
                with pytest.raises(IndexError):
                    got[index] = 7
            else:
                got[index] = 7
            numpy.testing.assert_array_equal(numpy.asarray(got), want)
    finally:
        lazynp.core.policy.set_eager_max_elems(saved)
