"""Programs of the shapes where lazynp was slower than NumPy on NPBench (issue 36).

Small programs written for these tests (not NPBench's code), each of the same shape as a
kernel that was slow: their values must be NumPy's, and the fast paths taken must be the
designed ones (views share the buffer, writes go through).  No timing here.
"""
from __future__ import annotations

import numpy
import pytest

import lazynp


def _toeplitz_solve(np, r):
    """A Levinson-style recursion on a growing prefix: reversed views, dots, in-place adds."""
    y = np.empty_like(r)
    alpha = -r[0]
    beta = 1.0
    y[0] = -r[0]
    for k in range(1, r.shape[0]):
        beta *= 1.0 - alpha * alpha
        alpha = -(r[k] + np.dot(np.flip(r[:k]), y[:k])) / beta
        y[:k] += alpha * np.flip(y[:k])
        y[k] = alpha
    return y


@pytest.mark.parametrize("n", [7, 60])
def test_reversed_prefix_recursion_matches_numpy(n):
    r = numpy.linspace(2.0, 1.0, n) / n
    expected = _toeplitz_solve(numpy, r.copy())
    got = _toeplitz_solve(lazynp, lazynp.array(r))
    numpy.testing.assert_array_equal(numpy.asarray(got), expected)


@pytest.mark.parametrize("shape,axis", [
    ((5,), None), ((5,), 0), ((5,), -1), ((3, 4), None), ((3, 4), 0), ((3, 4), 1),
    ((3, 4), (0, 1)), ((2, 3, 4), (0, 2)), ((2, 3, 4), -2), ((0, 3), None), ((3, 0), 1),
])
def test_flip_is_numpys_view(shape, axis):
    a = numpy.arange(int(numpy.prod(shape)), dtype=float).reshape(shape)
    la = lazynp.array(a)
    got = lazynp.flip(la, axis)
    expected = numpy.flip(a, axis)
    assert got.shape == expected.shape
    if got.size:          # (an empty result's strides are lazynp's own, as before)
        assert got.strides == expected.strides
    numpy.testing.assert_array_equal(numpy.asarray(got), expected)
    if got.size:                                   # a view: writes reach the original
        got[(0,) * got.ndim] = -1.0
        expected[(0,) * expected.ndim] = -1.0
        numpy.testing.assert_array_equal(numpy.asarray(la), a)


def test_flip_of_a_strided_prefix_view_writes_through():
    a = numpy.arange(10.0)
    la = lazynp.array(a)
    v = lazynp.flip(la[1:8:2])
    v += 100.0
    w = numpy.flip(a[1:8:2])
    w += 100.0
    numpy.testing.assert_array_equal(numpy.asarray(la), a)


@pytest.mark.parametrize("axis", [2, -3, (0, 0)])
def test_flip_bad_axis_raises_as_numpy(axis):
    a = numpy.zeros((2, 3))
    with pytest.raises(Exception) as np_err:
        numpy.flip(a, axis)
    with pytest.raises(type(np_err.value)):
        lazynp.flip(lazynp.array(a), axis)


def test_flip_of_zero_dim_and_flipud_fliplr_match_numpy():
    numpy.testing.assert_array_equal(numpy.asarray(lazynp.flip(lazynp.array(3.0))),
                                     numpy.flip(numpy.array(3.0)))
    a = numpy.arange(12.0).reshape(3, 4)
    for name in ("flipud", "fliplr"):
        got = getattr(lazynp, name)(lazynp.array(a))
        expected = getattr(numpy, name)(a)
        assert got.strides == expected.strides
        numpy.testing.assert_array_equal(numpy.asarray(got), expected)
    for name, bad in (("flipud", numpy.array(1.0)), ("fliplr", numpy.arange(3.0))):
        with pytest.raises(ValueError):
            getattr(numpy, name)(bad)
        with pytest.raises(ValueError):
            getattr(lazynp, name)(lazynp.array(bad))


def test_flip_of_a_pending_array_matches_numpy():
    a = numpy.arange(600_000.0)
    la = lazynp.array(a)
    with lazynp.policy("lazy"):
        p = la * 2.0 + 1.0
        got = lazynp.flip(p)[::1000]
    numpy.testing.assert_array_equal(numpy.asarray(got), numpy.flip(a * 2.0 + 1.0)[::1000])


def test_flip_of_a_lazynp_array_takes_the_indexing_path(monkeypatch):
    """The reversed view is made by lazynp's indexing (one C call), not by NumPy's Python
    ``flip`` on the shadow followed by the view machinery (~1.7 us more per call)."""
    la = lazynp.array(numpy.arange(12.0).reshape(3, 4))

    def no_numpy_flip(*args, **kwargs):
        raise AssertionError("numpy.flip called")
    monkeypatch.setattr(numpy, "flip", no_numpy_flip)
    for axis in (None, 0, 1, (0, 1)):
        lazynp.flip(la, axis)
    lazynp.flipud(la)
    lazynp.fliplr(la)
