"""``lazynp._shortcuts``: NumPy's Python-level functions in fewer steps, against NumPy's own.

Each shortcut must give exactly what NumPy's function gives (values, dtype, shape, memory
layout, the exception class) for every argument form: the forms it takes itself and the ones
it hands to NumPy.  Also checked through the namespace (``lazynp.roll`` on lazy arrays).
"""
from __future__ import annotations

import numpy
import pytest

import lazynp
from lazynp import _shortcuts


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
