"""``lazynp._numpy.shortcuts``: NumPy's Python-level functions in fewer steps, against NumPy's own.

Each shortcut must give exactly what NumPy's function gives (values, dtype, shape, memory
layout, the exception class) for every argument form: the forms it takes itself and the ones
it hands to NumPy.  Also checked through the namespace (``lazynp.roll`` on lazy arrays).
"""
from __future__ import annotations

import warnings

import numpy
import pytest

import lazynp
from lazynp._numpy import shortcuts as _shortcuts


def _arrays():
    rng = numpy.random.default_rng(7)
    base = rng.standard_normal((4, 5, 6))
    return [
        numpy.arange(7.0), numpy.arange(12).reshape(3, 4), base, base[:, ::2, 1:],
        numpy.asfortranarray(base), base.transpose(2, 0, 1), numpy.zeros((0, 3)),
        numpy.zeros((3, 0)), numpy.array(5.0), numpy.arange(10, dtype=numpy.int8),
        numpy.array([True, False, True]), numpy.array(["a", "bb", "ccc"]),
        numpy.array([1, "x", None], dtype=object), (base * 1j).astype(numpy.complex64),
        numpy.zeros(3, dtype=[("a", "i4"), ("b", "f8")]),
    ]


def _outcome(fn, *args, **kwargs):
    try:
        return fn(*args, **kwargs)
    except Exception as e:          # noqa: BLE001 - the exception class is compared
        return ("raised", type(e))


def _assert_same(expected, got):
    if isinstance(expected, tuple) and expected[:1] == ("raised",):
        assert isinstance(got, tuple) and got == expected, got
        return
    assert type(got) is type(expected)
    if isinstance(expected, numpy.ndarray):
        assert got.dtype == expected.dtype and got.shape == expected.shape
        assert got.strides == expected.strides
        assert got.flags.c_contiguous == expected.flags.c_contiguous
        assert got.flags.f_contiguous == expected.flags.f_contiguous
        if expected.dtype.kind == "f" or expected.dtype.kind == "c":
            assert numpy.array_equal(got, expected, equal_nan=True)
        else:
            assert got.tobytes() == expected.tobytes() if expected.dtype != object \
                else list(got.ravel()) == list(expected.ravel())
    else:
        assert got == expected or (got != got and expected != expected)


@pytest.mark.parametrize("index", range(len(_arrays())))
@pytest.mark.parametrize("shift", [0, 1, -1, 2, 7, -13, 100, True, numpy.int64(3), 1.0,
                                   (1, 2)])
@pytest.mark.parametrize("axis", [None, 0, 1, -1, 2, -3, 3, (0, 1), numpy.int32(1)])
def test_roll_equals_numpy(index, shift, axis):
    a = _arrays()[index]
    expected = _outcome(numpy.roll, a, shift, axis)
    _assert_same(expected, _outcome(_shortcuts.roll, a, shift, axis))
    if not isinstance(expected, tuple) and a.dtype.kind in "biufc":
        got = numpy.asarray(lazynp.roll(lazynp.array(a), shift, axis))
        assert numpy.array_equal(got, expected) and got.dtype == expected.dtype


@pytest.mark.parametrize("index", range(len(_arrays())))
@pytest.mark.parametrize("kwargs", [{}, {"axis": 0}, {"axis": -1}, {"axis": (0, 1)},
                                    {"axis": 3}, {"dtype": numpy.float32},
                                    {"dtype": numpy.int64, "axis": 0}, {"keepdims": True},
                                    {"initial": 2}, {"axis": None, "keepdims": False},
                                    {"where": False}])
def test_sum_equals_numpy(index, kwargs):
    a = _arrays()[index]
    expected = _outcome(numpy.sum, a, **kwargs)
    _assert_same(expected, _outcome(_shortcuts.sum, a, **kwargs))


def test_sum_of_other_inputs_is_numpys():
    for a in ([1, 2, 3], [[1.5, 2.0]], 4, numpy.float32(2.5), numpy.ma.array([1.0, 2.0])):
        _assert_same(numpy.sum(a), _shortcuts.sum(a))
    out = numpy.zeros(())
    assert _shortcuts.sum(numpy.arange(4.0), out=out) is out and out == 6.0


@pytest.mark.parametrize("index", range(len(_arrays())))
@pytest.mark.parametrize("kwargs", [{}, {"dtype": numpy.float32}, {"dtype": "i2"},
                                    {"dtype": bool}, {"dtype": complex}, {"dtype": object},
                                    {"order": "F"}, {"order": "C"}, {"shape": (2, 3)},
                                    {"subok": False}, {"dtype": "nope"}])
def test_zeros_like_equals_numpy(index, kwargs):
    a = _arrays()[index]
    expected = _outcome(numpy.zeros_like, a, **kwargs)
    _assert_same(expected, _outcome(_shortcuts.zeros_like, a, **kwargs))


def test_the_namespace_runs_the_shortcuts_at_once():
    a = lazynp.arange(12.0).reshape(3, 4) + 1.0
    before = lazynp.stats().get("ops_eager", 0)
    r = lazynp.roll(a, 1, axis=1)
    s = lazynp.sum(a)
    z = lazynp.zeros_like(a)
    assert lazynp.stats().get("ops_eager", 0) - before >= 3
    expected = numpy.arange(12.0).reshape(3, 4) + 1.0
    assert numpy.array_equal(numpy.asarray(r), numpy.roll(expected, 1, axis=1))
    assert type(s) is numpy.float64 and s == expected.sum()
    assert numpy.array_equal(numpy.asarray(z), numpy.zeros((3, 4)))


@pytest.mark.parametrize("index", range(len(_arrays())))
@pytest.mark.parametrize("kwargs", [{}, {"axis": 0}, {"axis": -1}, {"axis": 2}, {"axis": 5},
                                    {"axis": (0, 1)}, {"dtype": numpy.float32},
                                    {"dtype": numpy.float64, "axis": 1}, {"keepdims": True},
                                    {"axis": 0, "keepdims": True}, {"where": True},
                                    {"where": False}, {"axis": numpy.int64(0)},
                                    {"dtype": object}])
def test_mean_equals_numpy(index, kwargs):
    a = _arrays()[index]
    with warnings.catch_warnings(record=True) as expected_warnings:
        warnings.simplefilter("always")
        expected = _outcome(numpy.mean, a, **kwargs)
    with warnings.catch_warnings(record=True) as got_warnings:
        warnings.simplefilter("always")
        got = _outcome(_shortcuts.mean, a, **kwargs)
    _assert_same(expected, got)
    assert [w.category for w in got_warnings] == [w.category for w in expected_warnings]
    if not isinstance(expected, tuple) and not kwargs.get("where") is False:
        method = _outcome(lambda: a.mean(**kwargs))
        _assert_same(method, got)


def test_mean_of_float16_and_other_inputs_is_numpys():
    h = numpy.linspace(0, 1, 7, dtype=numpy.float16)
    for a in (h, h.reshape(7, 1), [1, 2, 4], numpy.float32(3.0),
              numpy.array([1.5, 2.5], dtype=numpy.longdouble)):
        _assert_same(numpy.mean(a), _shortcuts.mean(a))
        _assert_same(_outcome(numpy.mean, a, axis=0), _outcome(_shortcuts.mean, a, axis=0))


def test_lazy_mean_method_and_function_run_the_shortcut_at_once():
    n = numpy.random.default_rng(2).random((6, 5)).astype(numpy.float32)
    a = lazynp.array(n)
    for got, want in ((a.mean(), n.mean()), (lazynp.mean(a), numpy.mean(n)),
                      (a.mean(axis=1), n.mean(axis=1)), (a.mean(0, keepdims=True),
                                                         n.mean(0, keepdims=True))):
        _assert_same(want, got if not isinstance(got, lazynp.ndarray) else numpy.asarray(got))


HISTOGRAM_ARGS = [dict(bins=16, range=(0, 256)), dict(bins=256, range=(0, 256)),
                  dict(bins=10, range=(0, 100)), dict(bins=7, range=(-3, 25)),
                  dict(bins=16, range=(0, 255)), dict(bins=1, range=(5, 6)),
                  dict(bins=4, range=[10, 10]), dict(bins=4, range=(20, 10)),
                  dict(bins=3, range=(0, 2 ** 40)), dict(bins=3), dict(bins="auto"),
                  dict(bins=8, range=(0, 256), density=True),
                  dict(bins=8, range=(0.0, 256.0)), dict(bins=numpy.int64(8), range=(0, 256)),
                  dict(bins=0, range=(0, 8)), dict(bins=-2, range=(0, 8)),
                  dict(bins=5, range=(-1000, 1000))]


@pytest.mark.parametrize("dtype", ["uint8", "int8", "int16", "uint16", "int32", "uint32",
                                   "int64", "float64", "bool"])
@pytest.mark.parametrize("kwargs", HISTOGRAM_ARGS)
def test_histogram_equals_numpy(dtype, kwargs):
    rng = numpy.random.default_rng(4)
    info = numpy.iinfo(dtype) if numpy.dtype(dtype).kind in "iu" else None
    lo, hi = (max(info.min, -300), min(info.max, 300)) if info else (-300, 300)
    for shape in ((64, 64), (0,), (7,), (3, 5, 2)):
        a = rng.integers(lo, hi, shape, endpoint=True).astype(dtype)
        if a.size:
            a.flat[0] = lo
            a.flat[-1] = hi
        expected = _outcome(numpy.histogram, a, **kwargs)
        got = _outcome(_shortcuts.histogram, a, **kwargs)
        if isinstance(expected[0], str):
            assert got == expected
            continue
        for g, e in zip(got, expected):
            _assert_same(e, g)


def test_histogram_weights_and_lazy_arrays():
    a = numpy.arange(20, dtype=numpy.uint8)
    w = numpy.linspace(0, 1, 20)
    for g, e in zip(_shortcuts.histogram(a, bins=4, range=(0, 20), weights=w),
                    numpy.histogram(a, bins=4, range=(0, 20), weights=w)):
        _assert_same(e, g)
    got = lazynp.histogram(lazynp.array(a), bins=5, range=(0, 20))
    want = numpy.histogram(a, bins=5, range=(0, 20))
    assert numpy.array_equal(numpy.asarray(got[0]), want[0])
    assert numpy.array_equal(numpy.asarray(got[1]), want[1])
