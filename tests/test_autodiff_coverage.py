"""Autodiff never gives a silently wrong gradient (issue 15): construction functions carry
gradients, values taken out of lazynp raise on the differentiated path, and every public
function that takes a float array is either correct to finite differences or raises."""
from __future__ import annotations

import numpy
import pytest

import lazynp as lnp
from lazynp.autograd import AutogradError

from test_autodiff import check_grads


# --- the examples --------------------------------------------------------------------

def test_array_of_traced_scalars():
    g = lnp.grad(lambda x: lnp.sum(lnp.array([x, x * 1.0, x + 2.5])))(3.0)
    assert float(g) == 3.0


def test_r_of_traced_arrays():
    g = lnp.grad(lambda x: lnp.sum(lnp.r_[x, x * 2.0]))(numpy.array([1.0, 2.0]))
    numpy.testing.assert_array_equal(numpy.asarray(g), [3.0, 3.0])


def test_linspace_with_traced_endpoints():
    g = lnp.grad(lambda x: lnp.sum(lnp.linspace(x, x * 3, 5)))(1.0)
    assert float(g) == pytest.approx(10.0)


def test_real_of_complex_square():
    g = lnp.grad(lambda z: lnp.sum(lnp.real(z * z)))(1.1 + 1.2j)
    assert complex(g) == pytest.approx(2.2 + 2.4j)


def test_abs_of_complex_is_autograds_convention():
    g = lnp.grad(lnp.abs)(1.1 + 1.2j)
    assert complex(g) == pytest.approx(complex(1.1, -1.2) / abs(1.1 + 1.2j))


# --- construction functions carry the gradient -------------------------------------------------

X3 = numpy.array([0.3, -1.2, 2.1])


@pytest.mark.parametrize("f", [
    lambda x: lnp.array([[x[0], 2.0], [x[1] * x[2], x[0]]]),
    lambda x: lnp.asarray([x, x * x]),
    lambda x: lnp.array((x[0], x[1]), dtype=numpy.float64, ndmin=2),
    lambda x: lnp.r_[x, 1.0, x[:2] * 3.0, 0:2],
    lambda x: lnp.c_[x, x * 2.0],
    lambda x: lnp.linspace(x[0], x[1], 4, endpoint=False),
    lambda x: lnp.linspace(x[:2], x[1:], 5, axis=1),
    lambda x: lnp.linspace(x[0], x[1], 4, retstep=True)[1] * lnp.ones(2),
    lambda x: lnp.logspace(x[0], x[1], 4, base=3.0),
    lambda x: lnp.geomspace(x[2], x[2] * 5.0, 4),
    lambda x: lnp.geomspace(-x[2], -x[2] * 3.0, 3, endpoint=False),
    lambda x: lnp.append(x, x[:2] * 2.0),
    lambda x: lnp.append(lnp.reshape(x, (1, 3)), lnp.reshape(x, (1, 3)), axis=0),
    lambda x: lnp.insert(x, 1, x[2] * 5.0),
    lambda x: lnp.insert(x, [0, 3], [7.0, x[1]]),
    lambda x: lnp.insert(lnp.outer(x, x), 1, x, axis=1),
    lambda x: lnp.block([[lnp.reshape(x, (3, 1)), lnp.outer(x, x[:2])], [x[:1] * 0.5, x[:2]]]),
    lambda x: lnp.block([x, x * 2.0]),
], ids=lambda f: "")
def test_construction_carries_gradient(f):
    check_grads(f, X3, order=2)


def test_put_and_place_carry_gradient():
    def f_put(x):
        a = x * 1.0
        lnp.put(a, [0, 2], x[1] * 3.0)
        return a

    def f_place(x):
        a = x * 2.0
        lnp.place(a, numpy.array([True, False, True]), lnp.sin(x[:1]))
        return a
    check_grads(f_put, X3, order=2)
    check_grads(f_place, X3, order=2)


def test_construction_values_unchanged_outside_transforms():
    x = lnp.asarray(X3)
    numpy.testing.assert_array_equal(lnp.r_[x, 1.0], numpy.r_[X3, 1.0])
    numpy.testing.assert_array_equal(lnp.append(x, [[1.0]]), numpy.append(X3, [[1.0]]))
    numpy.testing.assert_array_equal(lnp.insert(x, 1, 9.0), numpy.insert(X3, 1, 9.0))
    assert type(lnp.r_[1, 2]) is numpy.ndarray           # NumPy's own object, as before


def test_traced_construction_values_equal_numpy():
    seen = {}

    def f(x):
        seen["lin"] = numpy.array(lnp.autograd.stop_gradient(lnp.linspace(x[0], x[1], 7)))
        seen["geo"] = numpy.array(lnp.autograd.stop_gradient(lnp.geomspace(x[2], x[2] * 8, 4)))
        seen["ins"] = numpy.array(lnp.autograd.stop_gradient(lnp.insert(x, [1, 1], x[:2])))
        seen["blk"] = numpy.array(lnp.autograd.stop_gradient(lnp.block([[x, x], [x, x]])))
        return lnp.sum(x)
    lnp.grad(f)(X3)
    numpy.testing.assert_allclose(seen["lin"], numpy.linspace(X3[0], X3[1], 7), rtol=1e-15)
    numpy.testing.assert_allclose(seen["geo"], numpy.geomspace(X3[2], X3[2] * 8, 4),
                                  rtol=1e-14)
    numpy.testing.assert_array_equal(seen["ins"], numpy.insert(X3, [1, 1], X3[:2]))
    numpy.testing.assert_array_equal(seen["blk"], numpy.block([[X3, X3], [X3, X3]]))


# --- values taken out of lazynp never give a silent zero --------------------------------------

def test_numpy_asarray_of_traced_value_raises():
    with pytest.raises(AutogradError, match="asarray"):
        lnp.grad(lambda x: lnp.sum(lnp.asarray(numpy.asarray(x) * 2.0)))(X3)


def test_float_of_traced_value_on_the_path_raises():
    with pytest.raises(AutogradError, match="float"):
        lnp.grad(lambda x: lnp.asarray(float(lnp.sum(x))) * 2.0)(X3)
    with pytest.raises(AutogradError, match="tolist"):
        lnp.grad(lambda x: lnp.sum(x) + lnp.sum(lnp.array(x.tolist())))(X3)
    with pytest.raises(AutogradError, match="item"):
        lnp.grad(lambda x: lnp.sum(x) * lnp.array([x[0].item(), 1.0])[0])(X3)


def test_float_as_a_constant_is_fine():
    def f(x):
        if float(lnp.sum(x)) > 0:          # control flow on a value: fine
            return lnp.sum(x * x)
        return lnp.sum(x)
    numpy.testing.assert_allclose(numpy.asarray(lnp.grad(f)(X3)), 2 * X3)


def test_fallback_on_the_path_raises():
    with pytest.raises(AutogradError, match="numpy"):
        lnp.grad(lambda x: lnp.sum(lnp.unique(x)))(X3)
    with pytest.raises(AutogradError, match="mgrid|arange"):
        lnp.grad(lambda x: lnp.sum(lnp.arange(x[0], 5.0)))(X3)


def test_grad_of_complex_output_raises_type_error():
    with pytest.raises(TypeError, match="real"):
        lnp.grad(lambda z: z * z)(1.0 + 2.0j)
