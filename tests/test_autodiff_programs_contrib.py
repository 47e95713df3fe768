"""lazynp.contrib: odeint's adjoint gradient against a finite-difference gradient of the
solver itself, and fixed_point's implicit gradient against finite differences."""
from __future__ import annotations

import numpy
import pytest

import lazynp as lnp
from finite_differences import fd_grad
from lazynp.autograd import AutogradError
from lazynp.contrib import fixed_point, odeint




def dynamics(y, t, A, b):
    return lnp.tanh(A @ y) + b * lnp.sin(t)


A = numpy.array([[0.1, -0.5], [0.4, 0.2]])
B = numpy.array([0.3, -0.2])
Y0 = numpy.array([0.5, -1.0])
TS = numpy.array([0.0, 0.5, 1.2])


def ode_loss(y0, ts, a, b):
    ys = odeint(dynamics, y0, ts, a, b, n_steps=20)
    return lnp.sum(ys ** 2) + lnp.sum(ys[-1] * numpy.array([1.0, -3.0]))


def test_odeint_values_match_a_reference_solution():
    """Exponential decay: the RK4 solution against the exact one (to RK4 accuracy)."""
    ys = odeint(lambda y, t, k: -k * y, numpy.array([1.0, 2.0]), numpy.array([0.0, 0.5, 2.0]),
                0.7)
    ts = numpy.array([0.0, 0.5, 2.0])[:, None]
    numpy.testing.assert_allclose(numpy.asarray(ys), numpy.exp(-0.7 * ts) * [1.0, 2.0],
                                  rtol=1e-6)
    assert ys.shape == (3, 2)


@pytest.mark.parametrize("which", [0, 1, 2, 3])
def test_odeint_adjoint_gradient_matches_finite_differences_of_the_solver(which):
    args = [Y0, TS, A, B]
    g = lnp.grad(ode_loss, argnums=which)(*args)

    def f(v):
        a = list(args)
        a[which] = v
        return ode_loss(*a)
    ref = fd_grad(f, args[which])
    # (the adjoint is the derivative of the exact solution: it matches the discrete solver
    # to the solver's accuracy)
    numpy.testing.assert_allclose(g, ref, rtol=1e-6, atol=1e-7)


def test_odeint_gradient_under_repeated_calls_and_time_end():
    gT = lnp.grad(lambda T: lnp.sum(odeint(dynamics, Y0, lnp.stack([0.0, T]), A, B)[-1]))
    for T in (0.7, 1.0, 1.6):
        ref = fd_grad(lambda t: numpy.sum(numpy.asarray(
            odeint(dynamics, Y0, numpy.array([0.0, float(t)]), A, B)[-1])), numpy.array(T))
        numpy.testing.assert_allclose(gT(T), ref, rtol=1e-6, atol=1e-8)


def test_odeint_closure_over_a_differentiated_value_raises():
    def L(k, y0):
        return lnp.sum(odeint(lambda y, t: -k * y, y0, TS))
    with pytest.raises(AutogradError, match="args"):
        lnp.grad(L, argnums=(0, 1))(0.5, Y0)
    # with no traced argument, the solver's own operations are differentiated: correct too
    g = lnp.grad(lambda k: L(k, Y0))(0.5)
    numpy.testing.assert_allclose(g, fd_grad(lambda k: L(float(k), Y0), 0.5), rtol=1e-6)


def newton_sqrt(a):
    return fixed_point(lambda a, x: 0.5 * (x + a / x), a, lnp.ones_like(a))


def test_fixed_point_value_and_gradient():
    a = numpy.array([2.0, 9.0, 0.25])
    numpy.testing.assert_allclose(numpy.asarray(newton_sqrt(a)), numpy.sqrt(a), rtol=1e-12)
    g = lnp.grad(lambda a: lnp.sum(lnp.sin(newton_sqrt(a))))(a)
    numpy.testing.assert_allclose(g, numpy.cos(numpy.sqrt(a)) / (2 * numpy.sqrt(a)),
                                  rtol=1e-9)


def test_fixed_point_pytree_params_against_finite_differences():
    W = numpy.array([[0.2, -0.3, 0.1], [0.05, 0.1, -0.2], [0.3, 0.0, 0.15]])
    c = numpy.array([0.5, -1.0, 0.3])

    def f(p, x):
        return lnp.tanh(p["W"] @ x + p["c"])

    def L(Wv, cv):
        x = fixed_point(f, {"W": Wv, "c": cv}, lnp.zeros(3))
        return lnp.sum(x * numpy.array([1.0, 2.0, -1.0]))

    gW, gc = lnp.grad(L, argnums=(0, 1))(W, c)
    numpy.testing.assert_allclose(gW, fd_grad(lambda w: L(w, c), W), rtol=1e-6, atol=1e-9)
    numpy.testing.assert_allclose(gc, fd_grad(lambda v: L(W, v), c), rtol=1e-6, atol=1e-9)


def test_fixed_point_that_does_not_converge_raises():
    with pytest.raises(RuntimeError, match="converge"):
        fixed_point(lambda a, x: 2.0 * x + a, 1.0, 1.0, max_iter=50)


def test_odeint_second_order_and_jit():
    f = lambda y, t, k: -k * y * y
    y0, ts = numpy.array([1.0, 0.5]), numpy.array([0.0, 1.0])
    L = lambda k: lnp.sum(odeint(f, y0, ts, k, n_steps=10))
    g = lnp.grad(L)
    numpy.testing.assert_allclose(lnp.jit(g)(0.7), g(0.7), rtol=1e-12)
    eps = 1e-5
    numpy.testing.assert_allclose(lnp.grad(g)(0.7), (g(0.7 + eps) - g(0.7 - eps)) / (2 * eps),
                                  rtol=1e-6)
