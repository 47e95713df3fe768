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


@pytest.mark.parametrize("method", ["linear", "lower", "nearest", "midpoint", "hazen",
                                    "inverted_cdf", "median_unbiased"])
def test_nanquantile_methods(method):
    x = RNG.standard_normal((3, 8))
    x[0, 2] = x[1, 5] = x[1, 6] = numpy.nan
    q = numpy.array([0.15, 0.6])
    w = RNG.standard_normal((2, 3))
    check(lambda a: lnp.sum(lnp.nanquantile(a, q, axis=1, method=method) * w),
          lambda a: numpy.sum(numpy.nanquantile(a, q, axis=1, method=method) * w), x)


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


# --- set functions and histogram (recorded while differentiated) ----------------------------

def _distinct(n):
    return RNG.permutation(n) * 0.37 + RNG.uniform(0, 0.1, n)


@pytest.mark.parametrize("name", ["unique", "unique_values", "unique_all", "unique_counts",
                                  "unique_inverse"])
def test_unique_values_carry_the_gradient(name):
    x = _distinct(8)
    w = RNG.standard_normal(8)

    def f(mod):
        def loss(a):
            r = getattr(mod, name)(a)
            vals = r if name in ("unique", "unique_values") else r[0]
            return mod.sum(mod.sort(vals) * w)
        return loss
    check(f(lnp), f(numpy), x)
    # integer outputs as NumPy's; ties: the first occurrence gets the gradient
    t = numpy.array([2.0, 1.0, 2.0, 3.0])
    got = lnp.grad(lambda a: lnp.sum(lnp.unique(a) * numpy.array([1.0, 10.0, 100.0])))(t)
    numpy.testing.assert_array_equal(_np(got), [10.0, 1.0, 0.0, 100.0])
    res = lnp.value_and_grad(lambda a: lnp.sum(lnp.unique(a, return_counts=True)[1] * a[0]))(t)
    assert float(res[0]) == 8.0


def test_intersect1d_and_union1d():
    x, y = _distinct(6), _distinct(5) + 10.0
    w = RNG.standard_normal(11)
    check(lambda a: lnp.sum(lnp.union1d(a, y) * w), lambda a: numpy.sum(numpy.union1d(a, y) * w),
          x)
    y[2] = x[4]
    # the common values are taken from ar1 (JAX's intersect1d does the same)
    g = lnp.grad(lambda a, b: lnp.sum(lnp.intersect1d(a, b) * 3.0), argnums=(0, 1))(x, y)
    numpy.testing.assert_array_equal(_np(g[0]), numpy.eye(6)[4] * 3.0)
    numpy.testing.assert_array_equal(_np(g[1]), numpy.zeros(5))
    out = lnp.grad(lambda a: lnp.sum(lnp.intersect1d(a, y, return_indices=True)[0]))(x)
    numpy.testing.assert_array_equal(_np(out), numpy.eye(6)[4])


@pytest.mark.parametrize("density", [False, True])
@pytest.mark.parametrize("bins", [7, "edges"])
def test_histogram(density, bins):
    a = RNG.standard_normal(40)
    w = RNG.uniform(0.5, 1.5, 40)
    if bins == "edges":
        bins = numpy.array([-2.0, -0.5, 0.0, 0.3, 1.0, 2.5])
    nb = 7 if numpy.ndim(bins) == 0 else 5
    c = RNG.standard_normal(nb)

    def f(mod, weights):
        return lambda v: mod.sum(mod.histogram(v if weights else a, bins,
                                               weights=v if not weights else w,
                                               density=density)[0] * c)
    # weighted counts: linear in the weights
    check(f(lnp, False), f(numpy, False), w)
    # w.r.t. the data: counts piecewise constant, the edges of bins=int follow min and max
    e = RNG.standard_normal(nb + 1)

    def g(mod):
        return lambda v: mod.sum(mod.histogram(v, bins, weights=w, density=density)[0] * c) + \
            mod.sum(mod.histogram(v, bins)[1] * e)
    check(g(lnp), g(numpy), a, rtol=1e-5)
    val = lnp.value_and_grad(g(lnp))(a)[0]
    assert float(val) == pytest.approx(float(g(numpy)(a)), rel=1e-13)


def test_histogram_bin_edges_and_string_bins():
    a = RNG.standard_normal(30)
    e = RNG.standard_normal(6)
    check(lambda v: lnp.sum(lnp.histogram_bin_edges(v, 5) * e),
          lambda v: numpy.sum(numpy.histogram_bin_edges(v, 5) * e), a)
    # edges estimated from the data by a rule: NumPy's, which cannot be differentiated
    with pytest.raises(lnp.autograd.AutogradError, match="histogram"):
        lnp.grad(lambda v: lnp.sum(lnp.histogram(v, "auto")[1]))(a)
