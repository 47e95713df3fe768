"""Rules added for issue 35 (i0, quantile methods, linalg.cond, the vecdot ufunc, wide and
complex linalg.qr), each against central finite differences on random inputs; complex
inputs in the convention ``grad = df/dx - i df/dy``."""
from __future__ import annotations

import numpy
import pytest
from finite_differences import fd_grad

import lazynp as lnp

RNG = numpy.random.default_rng(35)


def _np(a):
    return numpy.asarray(a)


def _complex_fd(f, z, eps=1e-6):
    """``d/dt f(z + t v)`` at 0 and the direction ``v`` (random complex)."""
    v = RNG.standard_normal(z.shape) + 1j * RNG.standard_normal(z.shape)
    return (f(z + eps * v) - f(z - eps * v)) / (2 * eps), v


def check(f_lazy, f_np, x, rtol=1e-6):
    g = _np(lnp.grad(f_lazy)(x))
    if numpy.iscomplexobj(x):
        fd, v = _complex_fd(f_np, x)
        got = float(numpy.real(numpy.sum(g * v)))
        assert abs(got - fd) <= rtol * max(1.0, abs(fd)) * 10, (got, fd)
    else:
        numpy.testing.assert_allclose(g, fd_grad(f_np, x), rtol=rtol, atol=1e-7)


def test_i0_first_and_second_derivative():
    x = numpy.array([-3.0, -0.2, 0.0, 0.9, 4.5, 6.0])
    w = RNG.standard_normal(x.shape)
    check(lambda a: lnp.sum(lnp.i0(a) * w), lambda a: numpy.sum(numpy.i0(a) * w), x)
    special = pytest.importorskip("scipy.special")
    h = _np(lnp.hessian(lambda a: lnp.sum(lnp.i0(a) * w))(x))
    safe = numpy.where(x == 0, 1.0, x)
    want = numpy.where(x == 0, 0.5, special.i0(x) - special.i1(x) / safe) * w
    numpy.testing.assert_allclose(h, numpy.diag(want), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("method", ["linear", "lower", "higher", "midpoint", "nearest",
                                    "inverted_cdf", "averaged_inverted_cdf",
                                    "closest_observation", "interpolated_inverted_cdf",
                                    "hazen", "weibull", "median_unbiased", "normal_unbiased"])
def test_quantile_methods(method):
    x = RNG.standard_normal((3, 7))
    q = numpy.array([0.05, 0.4, 0.77])
    w = RNG.standard_normal((3, 3))
    check(lambda a: lnp.sum(lnp.quantile(a, q, axis=1, method=method) * w),
          lambda a: numpy.sum(numpy.quantile(a, q, axis=1, method=method) * w), x)
    check(lambda a: lnp.percentile(a, 63.0, method=method),
          lambda a: numpy.percentile(a, 63.0, method=method), x)


@pytest.mark.parametrize("p", [None, 2, -2, 1, -1, numpy.inf, -numpy.inf, "fro", "nuc"])
def test_linalg_cond(p):
    a = RNG.standard_normal((2, 3, 3)) + 2 * numpy.eye(3)
    check(lambda x: lnp.sum(lnp.linalg.cond(x, p)), lambda x: numpy.sum(numpy.linalg.cond(x, p)),
          a)
    numpy.testing.assert_allclose(_np(lnp.jit(lambda x: lnp.linalg.cond(x, p))(a)),
                                  numpy.linalg.cond(a, p), rtol=1e-12)


def test_linalg_cond_complex():
    z = RNG.standard_normal((3, 3)) + 1j * RNG.standard_normal((3, 3))
    check(lambda x: lnp.linalg.cond(x), lambda x: numpy.linalg.cond(x), z)


def test_vecdot_ufunc():
    x, y = RNG.standard_normal((4, 3)), RNG.standard_normal((4, 3))
    w = RNG.standard_normal(4)
    check(lambda a: lnp.sum(lnp.vecdot(a, y) * w), lambda a: numpy.sum(numpy.vecdot(a, y) * w), x)
    z = x + 1j * y
    check(lambda a: lnp.sum(lnp.abs(lnp.vecdot(a, a[::-1]))),
          lambda a: numpy.sum(numpy.abs(numpy.vecdot(a, a[::-1]))), z)
    numpy.testing.assert_allclose(_np(lnp.vecdot(lnp.asarray(z), lnp.asarray(x), axis=0)),
                                  numpy.vecdot(z, x, axis=0), rtol=1e-14)


@pytest.mark.parametrize("shape", [(4, 4), (5, 3), (3, 5), (2, 3, 5), (2, 5, 3)])
@pytest.mark.parametrize("dtype", [float, complex])
def test_qr_wide_tall_and_complex(shape, dtype):
    a = RNG.standard_normal(shape) + (1j * RNG.standard_normal(shape) if dtype is complex
                                      else 0)
    k = min(shape[-2:])
    wq = RNG.standard_normal(shape[:-1] + (k,)) + 1j * RNG.standard_normal(shape[:-1] + (k,))
    wr = RNG.standard_normal(shape[:-2] + (k, shape[-1])) + 1j * RNG.standard_normal(
        shape[:-2] + (k, shape[-1]))

    def f(mod):
        def loss(x):
            q, r = mod.linalg.qr(x)
            return mod.real(mod.sum(wq * q) + mod.sum(wr * r))
        return loss
    check(f(lnp), f(numpy), a)
    q, r = lnp.linalg.qr(lnp.asarray(a))
    qn, rn = numpy.linalg.qr(a)
    numpy.testing.assert_array_equal(_np(q), qn)
    numpy.testing.assert_array_equal(_np(r), rn)


# --- polynomials (recorded from lazynp ops while differentiated) ----------------------------

def test_roots():
    p = RNG.standard_normal(6)
    w = RNG.standard_normal(5)
    check(lambda a: lnp.sum(lnp.abs(lnp.roots(a)) * w),
          lambda a: numpy.sum(numpy.abs(numpy.roots(a)) * w), p)
    # leading and trailing zeros: stripped on the values (zero roots appended), as NumPy's
    pz = numpy.array([0.0, 1.0, -3.0, 2.0, 0.0])
    val, g = lnp.value_and_grad(lambda a: lnp.sum(lnp.real(lnp.roots(a)) * numpy.arange(3.)))(pz)
    assert float(val) == pytest.approx(float(numpy.sum(numpy.roots(pz).real * numpy.arange(3.))))
    numpy.testing.assert_allclose(_np(g)[1:4], fd_grad(
        lambda a: numpy.sum(numpy.roots(numpy.r_[0.0, a, 0.0]).real * numpy.arange(3.)),
        pz[1:4]), rtol=1e-6)


def test_poly_of_zeros_and_of_a_matrix():
    z = RNG.standard_normal(4)
    w = RNG.standard_normal(5)
    check(lambda a: lnp.sum(lnp.poly(a) * w), lambda a: numpy.sum(numpy.poly(a) * w), z)
    m = RNG.standard_normal((3, 3))
    w4 = RNG.standard_normal(4)
    check(lambda a: lnp.sum(lnp.real(lnp.poly(a)) * w4),
          lambda a: numpy.sum(numpy.real(numpy.poly(a)) * w4), m)


def test_polydiv():
    u, v = RNG.standard_normal(6), RNG.standard_normal(3)
    wq, wr = RNG.standard_normal(4), RNG.standard_normal(2)

    def f(mod):
        return lambda a, b: mod.sum(mod.polydiv(a, b)[0] * wq) + mod.sum(mod.polydiv(a, b)[1] * wr)
    check(lambda a: f(lnp)(a, v), lambda a: f(numpy)(a, v), u)
    check(lambda b: f(lnp)(u, b), lambda b: f(numpy)(u, b), v)


@pytest.mark.parametrize("weighted", [False, True])
def test_polyfit(weighted):
    x = numpy.linspace(0.0, 1.0, 9) + RNG.uniform(0, 0.05, 9)
    y = RNG.standard_normal(9)
    w = RNG.uniform(0.5, 1.5, 9) if weighted else None
    c = RNG.standard_normal(4)
    check(lambda a: lnp.sum(lnp.polyfit(a, y, 3, w=w) * c),
          lambda a: numpy.sum(numpy.polyfit(a, y, 3, w=w) * c), x)
    check(lambda b: lnp.sum(lnp.polyfit(x, b, 3, w=w) * c),
          lambda b: numpy.sum(numpy.polyfit(x, b, 3, w=w) * c), y)
    val = lnp.value_and_grad(lambda b: lnp.sum(lnp.polyfit(x, b, 3, w=w) * c))(y)[0]
    assert float(val) == pytest.approx(float(numpy.sum(numpy.polyfit(x, y, 3, w=w) * c)),
                                       rel=1e-12)
