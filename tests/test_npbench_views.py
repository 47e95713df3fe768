"""Views by basic indices built in C from the shadow's strides (issue 36: the per-step cost of
``A[i + 1:, i]`` in NPBench's trmm/cholesky/gramschmidt loops).

The C builder (``_speedups.basic_view``) must give exactly NumPy's view: the same data
address, shape, strides, flags and base, for every index it takes, and leave to NumPy every
index it does not (NumPy then raises its own errors).  No timing here.
"""
from __future__ import annotations

import itertools

import numpy
import pytest

import lazynp
from lazynp._base import native

ext = native.ext

ARRAYS = {
    "c3": numpy.arange(60.0).reshape(3, 4, 5),
    "f2": numpy.asfortranarray(numpy.arange(30.0).reshape(5, 6)),
    "strided": numpy.arange(200, dtype=numpy.int32).reshape(10, 20)[::2, ::-3],
    "readonly": numpy.arange(12.0).reshape(3, 4),
    "empty": numpy.zeros((0, 4)),
    "vec": numpy.arange(7, dtype=numpy.complex128),
}
ARRAYS["readonly"].flags.writeable = False

ITEMS = [0, 1, -1, 2, -3, slice(None), slice(1, None), slice(None, -1), slice(None, None, -1),
         slice(1, 4, 2), slice(-2, None, -2), slice(5, 1), slice(100, None),
         slice(-100, 2), slice(0, 0)]


def _indices(ndim: int):
    yield from ITEMS
    for k in range(1, ndim + 1):
        yield from itertools.product(ITEMS[::2], repeat=k)


def _address(a: numpy.ndarray) -> int:
    return a.__array_interface__["data"][0]


def _same_view(got: numpy.ndarray, want: numpy.ndarray) -> None:
    assert type(got) is numpy.ndarray
    assert got.shape == want.shape and got.strides == want.strides and got.dtype == want.dtype
    assert _address(got) == _address(want)
    for flag in ("C_CONTIGUOUS", "F_CONTIGUOUS", "WRITEABLE", "ALIGNED", "OWNDATA"):
        assert got.flags[flag] == want.flags[flag], flag
    assert got.base is want.base


@pytest.mark.skipif(ext is None, reason="the C extension is not loaded (pure Python recorder)")
@pytest.mark.parametrize("name", sorted(ARRAYS))
def test_c_built_views_are_numpys_views(name):
    a = ARRAYS[name]
    built = 0
    for index in _indices(a.ndim):
        try:
            want = a[index]
        except (IndexError, ValueError):
            want = None
        got = ext.basic_view(a, index)
        if got is None:
            continue        # left to NumPy
        assert want is not None, index
        _same_view(got, want)
        numpy.testing.assert_array_equal(got, want)
        built += 1
    assert built > 0


@pytest.mark.skipif(ext is None, reason="the C extension is not loaded (pure Python recorder)")
@pytest.mark.parametrize("index", [
    (7,), (-8,), (0, 0, 0), (slice(None),) * 4, (slice(None, None, 0),), (1.0,), (True,),
    (numpy.int64(1),), (slice(numpy.int64(1), None),), (Ellipsis, 0), (None, 1), ([0, 1],),
])
def test_c_builder_leaves_other_indices_to_numpy(index):
    a = numpy.arange(60.0).reshape(3, 4, 5)
    assert ext.basic_view(a, index) is None


@pytest.mark.parametrize("index", [
    (slice(1, None), 2), (3, slice(None, 2)), (slice(None), -1), (slice(None, None, -2),),
    (slice(8, 2, -3), slice(1, 5)), 2, slice(3, None), (slice(5, 1), 0),
])
def test_views_of_a_computed_array_read_and_write_as_numpys(index):
    base = numpy.arange(100.0).reshape(10, 10)
    want = base.copy()
    got = lazynp.array(base)
    v = got[index]
    numpy.testing.assert_array_equal(numpy.asarray(v), want[index])
    v += 1.5                                  # writes go through to the base
    want[index] += 1.5
    numpy.testing.assert_array_equal(numpy.asarray(got), want)


@pytest.mark.parametrize("index,error", [((10, slice(None)), IndexError),
                                         ((slice(None, None, 0),), ValueError),
                                         ((slice(None),) * 3, IndexError)])
def test_bad_basic_indices_raise_numpys_errors(index, error):
    with pytest.raises(error) as want:
        numpy.zeros((10, 10))[index]
    with pytest.raises(error) as got:
        lazynp.zeros((10, 10))[index]
    assert str(got.value) == str(want.value)


@pytest.mark.parametrize("index", [(2, 3), (-1, 0), 3, (1,), -2, (numpy.int64(3), 1)])
def test_integer_index_writes_into_an_array_that_has_views(index):
    # (NPBench's trmm: ``B[i, j] += np.dot(...)`` on a B whose columns were viewed, so B is
    # attached to the graph; the written region is counted from the buffer's axes)
    want = numpy.arange(30.0).reshape(5, 6)
    got = lazynp.array(want)
    col = got[1:, 2]
    wcol = want[1:, 2]
    got[index] += 2.5
    want[index] += 2.5
    got[index] = 7.0
    want[index] = 7.0
    numpy.testing.assert_array_equal(numpy.asarray(got), want)
    numpy.testing.assert_array_equal(numpy.asarray(col), wcol)
    sub = got[1:, :]                 # a view's own integer-index writes
    sub[index] = -1.0
    want[1:, :][index] = -1.0
    numpy.testing.assert_array_equal(numpy.asarray(got), want)
