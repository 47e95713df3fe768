"""Complex arithmetic on large (recorded, fused) arrays gives NumPy's bits: NumPy's complex
multiply, square and absolute use fused multiply-adds in their SIMD loops, so a kernel's
own ``a * b`` differed in a quarter of the elements; and ``z ** 2`` is NumPy's ``square``
(its operator's fast path), not ``np.power``."""
import functools

import numpy
import pytest

import lazynp
from lazynp.kernels import cpu

N = 1 << 20       # recorded (above the policy's size bound): the fusion pass runs it


@functools.lru_cache(maxsize=None)
def _generated_pair(dtype, seed):
    rng = numpy.random.default_rng(seed)
    a = (rng.standard_normal(N) + 1j * rng.standard_normal(N)).astype(dtype)
    b = (rng.standard_normal(N) + 1j * rng.standard_normal(N)).astype(dtype)
    return a, b


def _pair(dtype, seed=1):
    # (generating them takes 75 ms, more than most of the tests: made once, copies handed out)
    a, b = _generated_pair(dtype, seed)
    return a.copy(), b.copy()


CASES = {
    "add": lambda m, x, y: (x + y) - y,
    "multiply": lambda m, x, y: (x * y) - y,
    "divide": lambda m, x, y: (x / y) - y,
    "absolute": lambda m, x, y: m.abs(x - y) * 2.0,
    "square": lambda m, x, y: m.square(x - y) - y,
    "conjugate": lambda m, x, y: m.conj(x - y) - y,
    "negative": lambda m, x, y: -(x - y) - y,
    "reciprocal": lambda m, x, y: m.reciprocal(x - y) - y,
    "equal": lambda m, x, y: (x - y) == (y - x),
    "by a real scalar": lambda m, x, y: (x - y) * 2.5 - y,
    "by a complex scalar": lambda m, x, y: (x - y) * (0.5 - 2j) + y,
}


@pytest.mark.parametrize("dtype", ["complex128", "complex64"])
@pytest.mark.parametrize("name", list(CASES))
def test_fused_complex_ops_are_numpys_bits(name, dtype):
    a, b = _pair(dtype)
    la, lb = lazynp.array(a), lazynp.array(b)
    fn = CASES[name]
    for _ in range(2):            # (the second call runs the compiled kernel, if any)
        got = numpy.asarray(fn(lazynp, la, lb))
        cpu.wait_compiles()
    expected = fn(numpy, a, b)
    numpy.testing.assert_array_equal(got, expected, strict=True)


POWERS = [2, -1, 0.5, 2.0, -1.0, 3, 1, numpy.int64(2), numpy.float64(0.5)]


@pytest.mark.parametrize("dtype", ["complex128", "complex64", "float64", "float32"])
@pytest.mark.parametrize("size", [100, N])
@pytest.mark.parametrize("e", POWERS, ids=[repr(e) for e in POWERS])
def test_scalar_powers_follow_numpys_operator(e, size, dtype):
    a, _ = _pair("complex128", seed=2)
    a = a[:size]
    a = (a if numpy.dtype(dtype).kind == "c" else a.real * 3).astype(dtype)
    with numpy.errstate(all="ignore"):
        expected = a ** e
        got = numpy.asarray(lazynp.array(a) ** e)
        numpy.testing.assert_array_equal(got, expected, strict=True)
        inplace = a.copy()
        inplace **= e
        lz = lazynp.array(a)
        lz **= e
        numpy.testing.assert_array_equal(numpy.asarray(lz), inplace, strict=True)
