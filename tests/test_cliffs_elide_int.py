"""NumPy's temporary elision for integer arrays and NumPy scalar operands (clipping's
``np.clip(a, 2, 10) * np.int64(4) + a2 * np.int64(3) + np.int64(9)``): a temporary that only
the expression holds is written in place when the result keeps its dtype; the values and
dtypes are NumPy's, and an operand that changes the dtype is never elided."""
import numpy
import pytest

import lazynp
from lazynp._base import native as _native

pytestmark = pytest.mark.skipif(_native.ext is None, reason="the C recorder's elision")

N = 100_000      # from NumPy's elision size, below the size bound


@pytest.fixture(autouse=True)
def at_once(monkeypatch):
    """The work runs at once (these lines are no tree kernels: the elision is NumPy's
    at-once path; 100,000 elements are within the trees' band since 2026-12-07)."""
    from lazynp.core import policy
    keep = policy.TREE_MIN_ELEMS
    policy.set_tree_min_elems(1 << 40)
    yield
    policy.set_tree_min_elems(keep)


def _shared(dtype, seed=0):
    rng = numpy.random.default_rng(seed)
    return rng.integers(-1000, 1000, N).astype(dtype)


def _elided(fn):
    before = lazynp.stats()["elided"]
    r = fn()
    return r, lazynp.stats()["elided"] - before


@pytest.mark.parametrize("dtype", [numpy.int64, numpy.int32, numpy.uint16, numpy.float32,
                                   numpy.float64])
@pytest.mark.parametrize("other", ["python int", "numpy scalar", "array"])
def test_integer_and_numpy_scalar_temporaries_are_elided(dtype, other):
    a0 = _shared(dtype)
    b0 = _shared(dtype, 1)
    o = {"python int": 3, "numpy scalar": dtype(3), "array": b0}[other]
    if other == "array":
        def expr(m, a, b):
            return (a * 2) * b + b
        want = expr(numpy, a0, b0)
        got, n = _elided(lambda: expr(lazynp, lazynp.asarray(a0), lazynp.asarray(b0)))
    else:
        def expr(m, a, o):
            return (a * 2) * o - o
        want = expr(numpy, a0, o)
        got, n = _elided(lambda: expr(lazynp, lazynp.asarray(a0), o))
    assert n == 2, "both operations wrote into the temporary"
    numpy.testing.assert_array_equal(numpy.asarray(got), want, strict=True)


@pytest.mark.parametrize("make", [
    lambda a: (a * 2) / 3,                          # a true division makes floats
    lambda a: (a * 2) * 1.5,                        # a Python float makes floats
    lambda a: (a * 2) * numpy.int64(3) if a.dtype != numpy.int64 else (a * 2) * 1.5,
    lambda a: (a * 2) * numpy.float64(3),           # another dtype
])
def test_operands_that_change_the_dtype_are_not_elided(make):
    a0 = _shared(numpy.int32)
    want = make(a0)
    got, n = _elided(lambda: make(lazynp.asarray(a0)))
    assert n == 0
    numpy.testing.assert_array_equal(numpy.asarray(got), want, strict=True)


def test_a_python_int_out_of_range_raises_numpys_error():
    a0 = _shared(numpy.int16)
    with pytest.raises(OverflowError) as want:
        (a0 * 2) * 100_000
    a = lazynp.asarray(a0)
    with pytest.raises(OverflowError) as got:
        (a * 2) * 100_000
    assert str(got.value) == str(want.value)


def test_a_temporary_someone_holds_is_not_written():
    a0 = _shared(numpy.int64)
    a = lazynp.asarray(a0)
    t = a * 2
    r, n = _elided(lambda: t * numpy.int64(3))
    assert n == 0
    numpy.testing.assert_array_equal(numpy.asarray(t), a0 * 2, strict=True)
    numpy.testing.assert_array_equal(numpy.asarray(r), a0 * 2 * 3, strict=True)
