"""A matrix-vector product of pending elementwise work closes that work's fused kernel
(core/fusion.py's ``matvec_operands``, policy.closes_pending_work): NumPy's values within
rounding, NumPy's warnings and errors, and the decision as designed."""
import warnings

import numpy
import pytest

import lazynp as np
from lazynp.core import policy

N = 1001     # 1,002,001 elements: recorded work (policy.EAGER_MAX_ELEMS)


def _inputs(dtype=numpy.float64, seed=0):
    rng = numpy.random.default_rng(seed)
    a = rng.standard_normal((N, N)).astype(dtype)
    b = rng.standard_normal((N, N)).astype(dtype)
    x = rng.standard_normal(N).astype(dtype)
    return a, b, x


def _fused_matvecs():
    return np.stats()["fused_groups_run"] + np.stats()["fused_groups_numpy"]


def test_the_matrix_size_is_recorded_work():
    assert N * N >= policy.EAGER_MAX_ELEMS


@pytest.mark.parametrize("expr", [
    lambda m, a, b, x: 1.5 * m(a) @ m(x),
    lambda m, a, b, x: (m(a) * m(b)) @ m(x),
    lambda m, a, b, x: 0.5 * m(a) @ m(x) + 2.5 * m(b) @ m(x),
    lambda m, a, b, x: (m(a) * m(x)) @ m(x),        # the vector inside the matrix's work too
])
def test_values_are_numpys_within_rounding(expr):
    a, b, x = _inputs()
    want = expr(lambda v: v, a, b, x)
    before = np.stats()["fused_groups_run"]
    for _ in range(3):      # (the first calls may run on NumPy while the kernel compiles)
        got = expr(np.array, a, b, x)
        assert isinstance(got, np.ndarray)
        got = numpy.asarray(got)
    np.kernels.cpu.wait_compiles()
    got = numpy.asarray(expr(np.array, a, b, x))
    assert got.dtype == want.dtype and got.shape == want.shape
    numpy.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-11 * numpy.abs(want).max())
    assert np.stats()["fused_groups_run"] > before


def test_the_product_is_recorded_as_its_matrix_kernels_last_step():
    a, _, x = _inputs()
    y = 1.5 * np.array(a) @ np.array(x)
    text = str(np.explain(y))
    assert "multiply, matmul" in text or "kernel 1: multiply" in text, text
    numpy.testing.assert_allclose(numpy.asarray(y), 1.5 * a @ x, rtol=1e-12, atol=1e-9)


def test_a_column_vector_and_float32():
    a, _, x = _inputs(numpy.float32)
    want = (2.0 * a) @ x[:, None]
    for _ in range(2):
        got = numpy.asarray((2.0 * np.array(a)) @ np.array(x)[:, None])
    np.kernels.cpu.wait_compiles()
    got = numpy.asarray((2.0 * np.array(a)) @ np.array(x)[:, None])
    assert got.dtype == numpy.float32 and got.shape == (N, 1)
    numpy.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3)


def test_integer_products_stay_exact():
    rng = numpy.random.default_rng(1)
    a = rng.integers(-5, 5, (N, N))
    x = rng.integers(-5, 5, N)
    got = numpy.asarray((3 * np.array(a)) @ np.array(x))
    assert got.dtype == numpy.int64
    numpy.testing.assert_array_equal(got, (3 * a) @ x)


def test_a_vector_numpy_shares_is_read_at_the_call():
    a, _, x = _inputs()
    lx = np.asarray(x)              # the user's NumPy array, shared
    want = (1.5 * a) @ x
    y = (1.5 * np.array(a)) @ lx
    x[:] = 0.0                      # written after the call: NumPy's product saw the old x
    numpy.testing.assert_allclose(numpy.asarray(y), want, rtol=1e-12, atol=1e-9)


def test_overflow_warns_as_numpys_matmul():
    a = numpy.full((N, N), 1e300)
    x = numpy.full(N, 1e300)
    with warnings.catch_warnings(record=True) as want_w:
        warnings.simplefilter("always")
        want = (0.5 * a) @ x
    la, lx = np.array(a), np.array(x)
    with warnings.catch_warnings(record=True) as got_w:
        warnings.simplefilter("always")
        got = numpy.asarray((0.5 * la) @ lx)
    numpy.testing.assert_array_equal(got, want)
    assert [str(w.message) for w in want_w] == ["overflow encountered in matmul"]
    assert [str(w.message) for w in got_w] == ["overflow encountered in matmul"]


def test_overflow_raises_under_errstate():
    la, lx = np.array(numpy.full((N, N), 1e300)), np.array(numpy.full(N, 1e300))
    with np.errstate(over="raise"):
        with pytest.raises(FloatingPointError, match="overflow encountered in matmul"):
            numpy.asarray((0.5 * la) @ lx)


def test_a_shape_mismatch_raises_numpys_error():
    a, _, x = _inputs()
    with pytest.raises(ValueError) as want:
        (1.5 * a) @ x[:-1]
    with pytest.raises(ValueError) as got:
        numpy.asarray((1.5 * np.array(a)) @ np.array(x)[:-1])
    assert str(got.value) == str(want.value)


def test_np_matmul_takes_the_same_path():
    a, _, x = _inputs()
    before = np.stats()["fused_groups_run"]
    for _ in range(2):
        got = numpy.asarray(np.matmul(1.5 * np.array(a), np.array(x)))
    np.kernels.cpu.wait_compiles()
    got = numpy.asarray(np.matmul(1.5 * np.array(a), np.array(x)))
    numpy.testing.assert_allclose(got, (1.5 * a) @ x, rtol=1e-12, atol=1e-9)
    assert np.stats()["fused_groups_run"] > before
