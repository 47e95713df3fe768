"""scipy.optimize with lazynp gradients: called with NumPy arrays, the transforms return
NumPy values, so every method that takes a gradient (and Hessian products) works."""
from __future__ import annotations

import warnings

import numpy
import pytest

import lazynp as lnp

so = pytest.importorskip("scipy.optimize")


def rosen(x):
    return lnp.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2)


X0 = numpy.array([1.3, 0.7, 0.8, 1.9, 1.2])


def test_transforms_return_numpy_for_numpy_inputs():
    g = lnp.grad(rosen)(X0)
    assert type(g) is numpy.ndarray
    numpy.testing.assert_allclose(g, so.rosen_der(X0), rtol=1e-12)
    v, g2 = lnp.value_and_grad(rosen)(X0)
    assert isinstance(v, numpy.floating) and type(g2) is numpy.ndarray
    assert v == pytest.approx(so.rosen(X0), rel=1e-12)
    h = lnp.hessian(rosen)(X0)
    assert type(h) is numpy.ndarray
    numpy.testing.assert_allclose(h, so.rosen_hess(X0), rtol=1e-12)
    p = numpy.arange(5.0)
    hp = lnp.hessian_vector_product(rosen)(X0, p)
    assert type(hp) is numpy.ndarray
    numpy.testing.assert_allclose(hp, so.rosen_hess_prod(X0, p), rtol=1e-12)
    assert type(lnp.jacobian(lnp.sin)(X0)) is numpy.ndarray
    assert isinstance(lnp.grad(lambda t: t ** 3)(2.0), numpy.floating)


METHODS = ["BFGS", "L-BFGS-B", "CG", "Newton-CG", "TNC", "SLSQP", "trust-constr",
           "trust-ncg", "trust-krylov", "trust-exact"]


@pytest.mark.parametrize("method", METHODS)
def test_minimize_rosenbrock_as_with_scipys_own_derivatives(method):
    ours, ref = {}, {}
    if method in ("Newton-CG", "trust-ncg", "trust-krylov"):
        ours["hessp"] = lnp.hessian_vector_product(rosen)
        ref["hessp"] = so.rosen_hess_prod
    if method == "trust-exact":
        ours["hess"] = lnp.hessian(rosen)
        ref["hess"] = so.rosen_hess
    opts = {"maxfun": 5000} if method == "TNC" else {"maxiter": 5000}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = so.minimize(rosen, X0, jac=lnp.grad(rosen), method=method, options=opts, **ours)
        r_ref = so.minimize(so.rosen, X0, jac=so.rosen_der, method=method, options=opts, **ref)
    assert type(r.x) is numpy.ndarray
    assert r.success == r_ref.success
    numpy.testing.assert_allclose(r.x, r_ref.x, rtol=1e-5, atol=1e-6)


def test_least_squares_with_a_lazynp_jacobian():
    t = numpy.linspace(0, 1, 8)
    y = 2.0 * numpy.exp(-1.5 * t)

    def resid(p):
        return p[0] * lnp.exp(-p[1] * t) - y
    r = so.least_squares(resid, numpy.array([1.0, 1.0]), jac=lnp.jacobian(resid))
    numpy.testing.assert_allclose(r.x, [2.0, 1.5], rtol=1e-7)
