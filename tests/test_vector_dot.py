"""``a @ b`` of two 1-D lazynp arrays computed at once: the C fast path calls the dtype's dot
function exactly as NumPy's matmul loop does.  Results must equal NumPy's bit for bit (type,
dtype, value), with NumPy's warnings and errors for flagged results, for every layout."""
from __future__ import annotations

import warnings

import numpy
import pytest

import lazynp


def _base(rng, dtype, n):
    """An (n, 4) matrix of values of many magnitudes (rounding differs with the order)."""
    v = rng.standard_normal((n, 4)) * 10.0 ** rng.integers(-3, 4, (n, 4))
    if numpy.dtype(dtype).kind == "c":
        v = v + 1j * rng.standard_normal((n, 4))
    return v.astype(dtype)


#: Pairs of vectors taken the same way from the NumPy matrix and from the lazynp copy of
#: it (so the layouts, and so the order of NumPy's sums, are the same in both).
LAYOUTS = [
    lambda M: (M[:, 0], M[:, 1]),                       # columns: stride 4 items
    lambda M: (M.T[0], M.T[1]),                         # the same, through .T
    lambda M: (M[::-1, 2], M[:, 3]),                    # a negative stride
    lambda M: (M[::-1, 2], M[::-1, 0]),
    lambda M: (M.reshape(-1)[: M.shape[0]], M[:, 1]),   # contiguous with strided
    lambda M: (M.reshape(-1)[: M.shape[0]], M.reshape(-1)[M.shape[0]: 2 * M.shape[0]]),
    lambda M: (M[1:, 0], M[:-1, 0]),                    # overlapping reads of one column
]


def _result(x, y):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            r = x @ y
        except Exception as e:          # noqa: BLE001 - the class is compared
            return ("raised", type(e)), []
    return r, [str(w.message) for w in caught]


def _same(expected, got):
    assert type(got) is type(expected)
    if isinstance(expected, tuple):
        assert got == expected
        return
    assert numpy.array(got).tobytes() == numpy.array(expected).tobytes(), (got, expected)


@pytest.mark.parametrize("dtype", ["float64", "float32", "complex128", "complex64"])
@pytest.mark.parametrize("n", [1, 2, 7, 31, 32, 33, 100, 513])
def test_vector_dot_equals_numpys_matmul_bit_for_bit(dtype, n):
    M = _base(numpy.random.default_rng(n), dtype, n)
    L = lazynp.array(M)
    assert numpy.asarray(L).strides == M.strides
    for layout in LAYOUTS:
        a, b = layout(M)
        la, lb = layout(L)
        expected, expected_warnings = _result(a, b)
        got, got_warnings = _result(la, lb)
        _same(expected, got)
        assert got_warnings == expected_warnings


@pytest.mark.parametrize("case", ["overflow", "invalid", "nan", "inf", "tiny"])
def test_flagged_results_warn_and_raise_as_numpy(case):
    values = {"overflow": ([1e308, 1e308], [10.0, 10.0]), "invalid": ([numpy.inf, 0.0], [0.0, 1.0]),
              "nan": ([numpy.nan, 1.0], [1.0, 1.0]), "inf": ([numpy.inf, 1.0], [1.0, 1.0]),
              "tiny": ([1e-300, 1e-300], [1e-300, 1e-300])}[case]
    a, b = (numpy.array(v) for v in values)
    for settings in ({}, {"all": "raise"}, {"all": "ignore"}, {"under": "warn"}):
        with numpy.errstate(**settings):
            expected, expected_warnings = _result(a, b)
            got, got_warnings = _result(lazynp.array(a), lazynp.array(b))
        _same(expected, got)
        assert got_warnings == expected_warnings


def test_other_vectors_take_numpys_call():
    rng = numpy.random.default_rng(1)
    pairs = [(numpy.arange(5), numpy.arange(5)), (numpy.arange(5.0), numpy.arange(5)),
             (numpy.arange(4.0, dtype=numpy.float16), numpy.ones(4, numpy.float16)),
             (numpy.zeros(0), numpy.zeros(0)), (numpy.arange(3.0), numpy.arange(4.0)),
             (rng.random(6).astype(">f8"), rng.random(6)),
             (numpy.frombuffer(numpy.arange(7.0).tobytes()[1:-7], dtype=numpy.float64),
              numpy.arange(6.0)),
             (numpy.arange(6.0).reshape(2, 3), numpy.arange(3.0)),
             (numpy.array([1, "x"], dtype=object), numpy.array([2, 1], dtype=object))]
    for a, b in pairs:
        expected, expected_warnings = _result(a, b)
        got, got_warnings = _result(lazynp.array(a), lazynp.array(b))
        if isinstance(expected, numpy.ndarray):
            assert isinstance(got, lazynp.ndarray)
            numpy.testing.assert_array_equal(numpy.asarray(got), expected)
        else:
            _same(expected, got)
        assert got_warnings == expected_warnings
