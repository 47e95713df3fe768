"""autograd's helpers: hessian_vector_product, make_hvp, make_jvp, make_vjp, grad(argnum=),
against finite differences (and against autograd when it is installed)."""
from __future__ import annotations

import numpy
import pytest

import lazynp as lnp
from finite_differences import fd_grad

X = numpy.array([0.3, -1.2, 2.0])
V = numpy.array([1.0, 0.5, -2.0])


def f(x, c):
    return lnp.sum(lnp.sin(x) * x ** 2) * c + lnp.prod(x[:2])




def fd_hvp(x, v, c=2.0, eps=1e-5):
    g = lambda t: numpy.asarray(lnp.grad(f)(t, c))
    return (g(x + eps * v) - g(x - eps * v)) / (2 * eps)


def test_hessian_vector_product():
    hv = lnp.hessian_vector_product(f)(X, 2.0, V)
    assert type(hv) is numpy.ndarray
    numpy.testing.assert_allclose(hv, fd_hvp(X, V), rtol=1e-6, atol=1e-8)
    numpy.testing.assert_allclose(hv, lnp.hessian(f)(X, 2.0) @ V, rtol=1e-12)
    # a matrix argument: the product contracts over all of its dimensions
    M = numpy.arange(6.0).reshape(2, 3) / 5
    T = numpy.ones((2, 3))
    g = lambda m: lnp.sum(lnp.exp(m) * m)
    ht = lnp.hessian_vector_product(g)(M, T)
    numpy.testing.assert_allclose(ht, (2 * numpy.exp(M) + M * numpy.exp(M)) * T, rtol=1e-12)


def test_make_hvp_gives_the_gradient_and_products():
    hvp, g = lnp.make_hvp(f)(X, 2.0)
    numpy.testing.assert_allclose(g, fd_grad(lambda t: f(t, 2.0), X), rtol=1e-6)
    for v in (V, numpy.array([0.0, 1.0, 0.0])):
        numpy.testing.assert_allclose(hvp(v), fd_hvp(X, v), rtol=1e-6, atol=1e-8)


def test_make_vjp_and_make_jvp():
    vjp_fn, ans = lnp.make_vjp(lnp.sin)(X)
    numpy.testing.assert_allclose(ans, numpy.sin(X))
    numpy.testing.assert_allclose(vjp_fn(V), V * numpy.cos(X))
    jvp_fn = lnp.make_jvp(lnp.sin)(X)
    out, t = jvp_fn(V)
    numpy.testing.assert_allclose(out, numpy.sin(X))
    numpy.testing.assert_allclose(t, V * numpy.cos(X))
    # argnum and a tuple of argnums
    vjp_c, _ = lnp.make_vjp(f, argnum=1)(X, 2.0)
    numpy.testing.assert_allclose(vjp_c(1.0), fd_grad(lambda c: f(X, float(c)), 2.0),
                                  rtol=1e-6)
    vjp_both, _ = lnp.make_vjp(f, argnum=(0, 1))(X, 2.0)
    gx, gc = vjp_both(1.0)
    numpy.testing.assert_allclose(gx, fd_grad(lambda t: f(t, 2.0), X), rtol=1e-6)
    numpy.testing.assert_allclose(gc, fd_grad(lambda c: f(X, float(c)), 2.0), rtol=1e-6)


def test_grad_argnum_alias():
    numpy.testing.assert_allclose(lnp.grad(f, argnum=1)(X, 2.0),
                                  fd_grad(lambda c: f(X, float(c)), 2.0), rtol=1e-6)
    with pytest.raises(TypeError):
        lnp.grad(f, 1, argnum=0)


def test_lazy_in_lazy_out():
    """With lazynp arrays in, the results stay lazynp arrays."""
    hv = lnp.hessian_vector_product(f)(lnp.asarray(X), 2.0, lnp.asarray(V))
    assert isinstance(hv, lnp.ndarray)
    assert isinstance(lnp.grad(f)(lnp.asarray(X), 2.0), lnp.ndarray)


def test_against_autograd():
    ag = pytest.importorskip("autograd")
    anp = pytest.importorskip("autograd.numpy")
    fa = lambda x, c: anp.sum(anp.sin(x) * x ** 2) * c + anp.prod(x[:2])
    numpy.testing.assert_allclose(lnp.hessian_vector_product(f)(X, 2.0, V),
                                  ag.hessian_vector_product(fa)(X, 2.0, V), rtol=1e-12)
    h1, g1 = lnp.make_hvp(f)(X, 2.0)
    h2, g2 = ag.make_hvp(fa)(X, 2.0)
    numpy.testing.assert_allclose(g1, g2, rtol=1e-12)
    numpy.testing.assert_allclose(h1(V), h2(V), rtol=1e-12)
    for a, b in zip(lnp.make_jvp(f)(X, 2.0)(V), ag.make_jvp(fa)(X, 2.0)(V)):
        numpy.testing.assert_allclose(a, b, rtol=1e-12)
    v1, a1 = lnp.make_vjp(lnp.tanh)(X)
    v2, a2 = ag.make_vjp(anp.tanh)(X)
    numpy.testing.assert_allclose(a1, a2)
    numpy.testing.assert_allclose(v1(V), v2(V), rtol=1e-12)
    s, sa = (lambda x: lnp.sin(x) * x), (lambda x: anp.sin(x) * x)
    assert type(lnp.grad(s)(1.5)) is type(ag.grad(sa)(1.5))
    assert type(lnp.grad(s)(numpy.array(1.5))) is type(ag.grad(sa)(numpy.array(1.5)))


def test_grad_of_a_jitted_function_is_not_silently_zero():
    """A jit plan reads its inputs' values: inside grad the function's ops are recorded
    instead, so the gradient flows (it was silently zero)."""
    jf = lnp.jit(lambda x, c: lnp.sum(lnp.sin(x) * x ** 2) * c)
    numpy.testing.assert_allclose(lnp.grad(jf)(X, 2.0), fd_grad(lambda t: jf(t, 2.0), X),
                                  rtol=1e-6)
    numpy.testing.assert_allclose(lnp.grad(jf, argnums=1)(X, 2.0),
                                  fd_grad(lambda c: jf(X, float(c)), 2.0), rtol=1e-6)
    w = lnp.asarray(X)
    w.attach_grad()
    with lnp.autograd.record():
        y = jf(w, 2.0)
    y.backward()
    numpy.testing.assert_allclose(numpy.asarray(w.grad), fd_grad(lambda t: jf(t, 2.0), X),
                                  rtol=1e-6)
    numpy.testing.assert_allclose(numpy.asarray(jf(X, 2.0)), numpy.asarray(f(X, 2.0)) -
                                  numpy.prod(X[:2]), rtol=1e-12)
