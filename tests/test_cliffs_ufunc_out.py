"""``np.add(a, b, a)`` / ``np.add(a, b, out=a)`` on a lazy array is NumPy's ``a += b`` (which
NumPy defines as that very call): the C call path takes the in-place operator's route
(mandelbrot2's ``np.multiply(Z, Z, Z); np.add(Z, C, Z)`` per step cost 6 us a call through
the keyword parsing).  Values, dtypes, the returned object, errors and warnings are NumPy's."""
import warnings

import numpy
import pytest

import lazynp
from lazynp._base import native as _native

UFUNCS = ["add", "subtract", "multiply", "true_divide", "floor_divide", "remainder",
          "bitwise_and", "bitwise_or", "bitwise_xor", "left_shift", "right_shift"]


def _operands(name, dtype):
    rng = numpy.random.default_rng(7)
    if numpy.dtype(dtype).kind in "iu" or name.startswith(("bitwise", "left", "right")):
        a = rng.integers(1, 50, 300).astype(numpy.int64)
        b = rng.integers(1, 6, 300).astype(numpy.int64)
    else:
        a = rng.standard_normal(300).astype(dtype)
        b = rng.standard_normal(300).astype(dtype) + 3
    return a, b


def _spellings(uf, a, b):
    yield lambda: uf(a, b, a)
    yield lambda: uf(a, b, out=a)
    yield lambda: uf(a, b, out=(a,))
    yield lambda: uf(a, a, a)


CASES = [(name, dtype) for name in UFUNCS
         for dtype in [numpy.float64, numpy.complex128, numpy.int64]
         # (the loops NumPy has)
         if not (dtype is numpy.complex128 and name in ("floor_divide", "remainder") or
                 dtype is not numpy.int64 and name.startswith(("bitwise", "left", "right")))]


@pytest.mark.parametrize("name, dtype", CASES)
@pytest.mark.parametrize("other", ["lazy", "numpy", "scalar"])
def test_out_as_first_operand_is_numpys(name, dtype, other):
    a0, b0 = _operands(name, dtype)
    for k in range(4):
        an, bn = a0.copy(), b0.copy()
        al = lazynp.array(a0)
        bl = {"lazy": lazynp.array(b0), "numpy": b0.copy(), "scalar": 3}[other]
        if other == "scalar":
            bn = 3
        try:
            want_r = list(_spellings(getattr(numpy, name), an, bn))[k]()
        except Exception as e:      # noqa: BLE001 - NumPy's error is the oracle
            with pytest.raises(type(e)) as got_e:
                list(_spellings(getattr(lazynp, name), al, bl))[k]()
            assert str(got_e.value) == str(e)
            continue
        got_r = list(_spellings(getattr(lazynp, name), al, bl))[k]()
        assert got_r is al, "NumPy returns the out array itself"
        assert want_r is an
        got = numpy.asarray(al)
        numpy.testing.assert_array_equal(got, an, strict=True)


def test_a_cast_the_operator_refuses_raises_numpys_error():
    a = lazynp.array(numpy.arange(5))
    with pytest.raises(numpy._core._exceptions._UFuncOutputCastingError) as got:
        lazynp.add(a, 1.5, a)
    with pytest.raises(numpy._core._exceptions._UFuncOutputCastingError) as want:
        numpy.add(numpy.arange(5), 1.5, numpy.arange(5))
    assert str(got.value) == str(want.value)


def test_warnings_are_numpys():
    a = lazynp.array(numpy.array([1.0, 0.0, -1.0]))
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        lazynp.true_divide(a, 0.0, a)
        numpy.asarray(a)
    with warnings.catch_warnings(record=True) as want:
        warnings.simplefilter("always")
        numpy.true_divide(numpy.array([1.0, 0.0, -1.0]), 0.0, numpy.array([1.0, 0.0, -1.0]))
    assert [str(w.message) for w in got] == [str(w.message) for w in want]


def test_a_view_as_out_writes_its_base():
    base = numpy.arange(12.0).reshape(3, 4)
    lz = lazynp.array(base)
    v = lz[1:, ::2]
    r = lazynp.multiply(v, 2.0, v)
    assert r is v
    want = base.copy()
    numpy.multiply(want[1:, ::2], 2.0, want[1:, ::2])
    numpy.testing.assert_array_equal(numpy.asarray(lz), want)


@pytest.mark.skipif(_native.ext is None, reason="the C call path")
def test_the_c_path_does_not_reach_the_keyword_parser(monkeypatch):
    a = lazynp.array(numpy.arange(6.0))
    calls = []
    uf = lazynp.multiply
    real = type(uf)._call

    def counting(self, *args, **kwargs):
        calls.append(1)
        return real(self, *args, **kwargs)
    monkeypatch.setattr(type(uf), "_call", counting)
    lazynp.multiply(a, a, a)
    lazynp.add(a, 1.0, out=a)
    assert calls == []
    lazynp.multiply(a, a, lazynp.empty_like(a))        # another out: the general path
    assert calls == [1]
    numpy.testing.assert_array_equal(numpy.asarray(a), numpy.arange(6.0) ** 2 + 1.0)


def test_a_recorded_write_into_a_large_lazy_array_is_numpys():
    """A write that is recorded (a large array only lazynp holds) still takes ``_call``'s
    path, whose recorded write the in-place operator itself uses."""
    rng = numpy.random.default_rng(3)
    a0, b0 = rng.standard_normal(1 << 20), rng.standard_normal(1 << 20)
    a = lazynp.array(a0) * 1.0           # a pending result: only lazynp holds it
    b = lazynp.array(b0)
    r = lazynp.multiply(a, b, a)
    r = lazynp.add(r, 0.5, out=r)
    assert r is a
    want = a0 * 1.0
    numpy.multiply(want, b0, want)
    numpy.add(want, 0.5, want)
    numpy.testing.assert_array_equal(numpy.asarray(a), want, strict=True)
