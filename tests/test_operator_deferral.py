"""A NumPy scalar or array on the left of an operator whose right operand is a lazynp array.

``numpy.float64(2.0) * a`` first runs NumPy's operator.  lazynp's class shows NumPy
``__array_ufunc__ = None`` while a Python operator is evaluated (``OperatorDeferral``), so
NumPy gives way and Python calls the array's reflected operator; everywhere else NumPy finds
the method.  These tests check that each such expression gives what NumPy gives (type, dtype,
values, exceptions), that in-place operators into NumPy arrays and NumPy's ufuncs called on
lazynp arrays still go through ``__array_ufunc__``, and that a traced function records them.
"""
from __future__ import annotations

import operator
import warnings

import numpy
import pytest

import lazynp
from lazynp._base import native
from lazynp.core import graph

OPERATORS = {
    "+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv,
    "//": operator.floordiv, "%": operator.mod, "**": operator.pow, "&": operator.and_,
    "|": operator.or_, "^": operator.xor, "<<": operator.lshift, ">>": operator.rshift,
    "<": operator.lt, "<=": operator.le, "==": operator.eq, "!=": operator.ne,
    ">": operator.gt, ">=": operator.ge,
}

LEFTS = [numpy.float64(1.5), numpy.float32(-2.5), numpy.int32(3), numpy.int64(-7),
         numpy.uint8(200), numpy.bool_(True), numpy.complex128(1 - 2j),
         numpy.arange(1, 7, dtype=numpy.int16), numpy.linspace(-1, 2, 6)]

RIGHT_DTYPES = ["float64", "float32", "int32", "uint8", "bool", "complex128"]


def _right(dtype, size):
    values = numpy.arange(1, size + 1) % 5 + 1
    return values.astype(dtype)


def _evaluate(src: str, left, right):
    """``left (op) right`` compiled as the operator a user writes (a BINARY_OP or COMPARE_OP
    instruction in the caller's frame): its result or the exception NumPy raises."""
    code = compile(f"left {src} right", "<expr>", "eval")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result = eval(code, {"left": left, "right": right})
        except Exception as e:          # noqa: BLE001 - the exception is compared
            return ("raised", type(e)), [w.category for w in caught]
    return result, [w.category for w in caught]


def _same(expected, got):
    if isinstance(expected, tuple) and expected and expected[0] == "raised":
        assert isinstance(got, tuple) and got[:1] == ("raised",), got
        assert got[1] is expected[1]
        return
    assert type(got) is (lazynp.ndarray if type(expected) is numpy.ndarray else type(expected))
    got = numpy.asarray(got)
    assert got.dtype == numpy.asarray(expected).dtype
    numpy.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("src", list(OPERATORS))
@pytest.mark.parametrize("left", LEFTS, ids=lambda x: f"{type(x).__name__}")
@pytest.mark.parametrize("dtype", RIGHT_DTYPES)
def test_numpy_operand_on_the_left_gives_numpys_result(src, left, dtype):
    right = _right(dtype, 6)
    expected, expected_warnings = _evaluate(src, left, right)
    got, got_warnings = _evaluate(src, left, lazynp.array(right))
    _same(expected, got)
    assert got_warnings == expected_warnings


@pytest.mark.parametrize("src", ["+", "*", "-", "/", "<", "=="])
@pytest.mark.parametrize("kind", ["pending", "view"])
def test_numpy_scalar_on_the_left_of_pending_and_view_operands(src, kind):
    if kind == "pending":           # large enough to be recorded, not run at once
        base = numpy.linspace(0.5, 3.0, 1 << 20)
        lazy = lazynp.array(base) * 3.0
        assert lazynp.explain(lazy) is not None and lazy._node().state != graph.DONE
        expected_right = base * 3.0
    else:
        base = numpy.linspace(0.5, 3.0, 300).reshape(15, 20)
        lazy = lazynp.array(base)[::2, 3:]
        expected_right = base[::2, 3:]
    left = numpy.float64(0.75)
    expected, _ = _evaluate(src, left, expected_right)
    got, _ = _evaluate(src, left, lazy)
    _same(expected, got)


def test_inplace_operators_into_numpy_arrays_still_use_array_ufunc():
    target = numpy.arange(6.0)
    expected = target.copy()
    expected += numpy.arange(6.0) * 2
    target += lazynp.arange(6.0) * 2
    assert type(target) is numpy.ndarray
    numpy.testing.assert_array_equal(target, expected)
    ints = numpy.arange(6)
    ints *= lazynp.arange(6)
    numpy.testing.assert_array_equal(ints, numpy.arange(6) ** 2)


def test_numpy_ufuncs_called_on_lazy_arrays_still_return_lazy_arrays():
    a = lazynp.linspace(0.0, 1.0, 5)
    for result in (numpy.exp(a), numpy.add(numpy.float64(2.0), a), numpy.multiply(a, a),
                   numpy.less(numpy.float32(0.5), a)):
        assert type(result) is lazynp.ndarray
    numpy.testing.assert_array_equal(numpy.asarray(numpy.add(numpy.float64(2.0), a)),
                                     numpy.linspace(0.0, 1.0, 5) + 2.0)
    assert callable(lazynp.ndarray.__array_ufunc__)
    assert getattr(lazynp.ndarray, "__array_ufunc__") is not None


def test_an_operator_inside_a_traced_function_is_recorded():
    def f(x):
        return lazynp.sum(numpy.float64(3.0) * x * x - numpy.float64(1.0) / (x + 2.0))

    x = numpy.linspace(0.5, 2.0, 7)
    g = numpy.asarray(lazynp.grad(f)(x))
    numpy.testing.assert_allclose(g, 6.0 * x + 1.0 / (x + 2.0) ** 2, rtol=1e-12)
    jf = lazynp.jit(f)
    for _ in range(2):
        numpy.testing.assert_allclose(float(jf(lazynp.array(x))), float(f(x)), rtol=1e-12)


@pytest.mark.skipif(native.ext is None, reason="OperatorDeferral is part of the C core")
def test_the_deferral_gives_the_method_outside_operators_and_is_read_only():
    deferral = type(lazynp.ndarray).__dict__["__array_ufunc__"]
    assert type(deferral) is native.ext.OperatorDeferral
    method = lazynp.ndarray.__dict__["__array_ufunc__"]
    assert deferral.__get__(lazynp.ndarray, type(lazynp.ndarray)) is method
    assert lazynp.ndarray.__array_ufunc__ is method
    with pytest.raises((AttributeError, TypeError)):
        lazynp.ndarray.__array_ufunc__ = None
