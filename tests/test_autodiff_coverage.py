"""Autodiff never gives a silently wrong gradient (issue 15): construction functions carry
gradients, values taken out of lazynp raise on the differentiated path, and every public
function that takes a float array is either correct to finite differences or raises."""
from __future__ import annotations

import warnings

import numpy
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

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
    with pytest.raises(AutogradError, match="tobytes"):
        lnp.grad(lambda x: lnp.sum(lnp.frombuffer(x.tobytes()) * 2.0))(X3)


def test_control_flow_on_comparisons_is_fine():
    def f(x):
        if lnp.sum(x) > 0:                 # bool() of a comparison: fine (autograd's rule)
            return lnp.sum(x * x)
        return lnp.sum(x)
    numpy.testing.assert_allclose(numpy.asarray(lnp.grad(f)(X3)), 2 * X3)
    numpy.testing.assert_allclose(numpy.asarray(lnp.grad(f)(-X3)), numpy.ones(3))


def test_fallback_on_the_path_raises():
    with pytest.raises(AutogradError, match="numpy"):
        lnp.grad(lambda x: lnp.sum(lnp.setxor1d(x, [0.7])))(X3)
    with pytest.raises(AutogradError, match="mgrid|arange"):
        lnp.grad(lambda x: lnp.sum(lnp.arange(x[0], 5.0)))(X3)


def test_grad_of_complex_output_raises_type_error():
    with pytest.raises(TypeError, match="real"):
        lnp.grad(lambda z: z * z)(1.0 + 2.0j)


# --- the systematic check: every public function that takes a float array ---------------------

#: functions whose gradient raises AutogradError (no lazy implementation, or no rule yet);
#: every other public function that takes a float array must match finite differences
KNOWN_TO_RAISE = frozenset("""histogram2d histogramdd""".split())

_NOT_ARRAY_FUNCTIONS = (
    "print", "save", "load", "from", "set", "get", "show", "info", "err", "test", "who",
    "source", "kvstore", "evaluate", "stats", "jit", "_grad", "vjp", "jvp", "jacobian",
    "hessian", "policy", "strict", "vectorize", "piecewise", "apply_", "memmap", "asmatrix",
    "bmat", "mat", "genfromtxt", "busday", "datetime", "nested_iters", "nditer", "einsum_path",
    "require", "iterable", "may_share_memory", "shares_memory", "dtype", "format", "typename",
    "issub", "base_repr", "binary_repr", "array_repr", "array_str", "array2string", "info",
    "packbits", "unpackbits", "symbol", "autograd", "linalg", "fft", "ndarray", "ufunc",
    "errstate", "finfo", "iinfo", "broadcast", "Symbol", "reset", "place", "put", "copyto",
    "fill_diagonal", "putmask", "unravel", "ravel_multi", "indices", "ix_", "meshgrid",
    "mgrid", "ogrid", "r_", "c_", "s_", "index_exp", "ndindex", "ndenumerate", "_indices",
    "eye", "identity", "tri", "arange", "zeros", "ones", "empty", "full", "trace")


def _public_functions():
    out = []
    for name in sorted(dir(lnp)):
        if name.startswith("_") or name == "grad" or \
                any(w in name for w in _NOT_ARRAY_FUNCTIONS):
            continue
        obj, npobj = getattr(lnp, name), getattr(numpy, name, None)
        if npobj is not None and callable(obj) and not isinstance(obj, type):
            out.append((name, npobj, obj, ("v", "vbig", "m")))
    for mod, npmod in ((lnp.linalg, numpy.linalg), (lnp.fft, numpy.fft)):
        short = npmod.__name__.split(".")[-1]
        for name in sorted(dir(npmod)):
            npobj = getattr(npmod, name)
            if name.startswith("_") or "freq" in name or not callable(npobj) or \
                    isinstance(npobj, type) or name == "test":
                continue
            out.append((f"{short}.{name}", npobj, getattr(mod, name),
                        ("m",) if short == "linalg" else ("v", "m")))
    return out


def _float_outputs(r):
    if isinstance(r, (tuple, list)):
        return [o for x in r for o in _float_outputs(x)]
    a = r if isinstance(r, lnp.ndarray) else numpy.asarray(r)
    return [a] if a.dtype.kind in "fc" else []


def _weighted(outs, weights, lib):
    s = 0.0
    for o, (wr, wi) in zip(outs, weights):
        o = lib.asarray(o)
        s = s + lib.sum(wr * lib.real(o))
        if o.dtype.kind == "c":
            s = s + lib.sum(wi * lib.imag(o))
    return s


def _check_function(fnp, flz, keys):
    """'ok', 'raises' (AutogradError), 'skip' (not callable on one float array); an
    AssertionError for a gradient that disagrees with finite differences."""
    rng = numpy.random.RandomState(0)
    inputs = {"v": rng.uniform(0.2, 0.9, 4), "m": rng.uniform(0.2, 0.9, (3, 3)) + numpy.eye(3),
              "vbig": rng.uniform(1.2, 2.0, 4)}
    for key in keys:
        x = inputs[key]
        for extra in ((), (rng.uniform(0.3, 0.8, x.shape),)):
            try:
                with numpy.errstate(all="ignore"), warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    outs = _float_outputs(fnp(x, *extra))
            except Exception:
                continue
            if not outs:
                return "skip"
            if not all(numpy.isfinite(numpy.asarray(o)).all() for o in outs):
                continue
            weights = [(rng.standard_normal(o.shape), rng.standard_normal(o.shape))
                       for o in outs]

            def loss(xx):
                return _weighted(_float_outputs(flz(xx, *extra)), weights, lnp)

            def loss_np(xx):
                with numpy.errstate(all="ignore"), warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    return _weighted(_float_outputs(fnp(xx, *extra)), weights, numpy)
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    g = numpy.asarray(lnp.grad(loss)(x))
            except AutogradError:
                return "raises"
            v = rng.standard_normal(x.shape)
            fd = (loss_np(x + 1e-6 * v) - loss_np(x - 1e-6 * v)) / 2e-6
            got = float(numpy.sum(g * v))
            assert abs(got - fd) <= 1e-4 * max(1.0, abs(fd)), (got, fd)
            return "ok"
    return "skip"


def test_every_public_function_is_differentiated_correctly_or_raises():
    results, wrong = {}, {}
    for name, fnp, flz, keys in _public_functions():
        try:
            results[name] = _check_function(fnp, flz, keys)
        except AssertionError as e:
            wrong[name] = str(e)
    assert not wrong, f"silently wrong gradients: {wrong}"
    raising = {n for n, r in results.items() if r == "raises"}
    assert raising <= KNOWN_TO_RAISE, f"new functions without a gradient: {raising - KNOWN_TO_RAISE}"
    ok = {n for n, r in results.items() if r == "ok"}
    assert len(ok) > 150
    assert {"fft.rfftn", "fft.irfft", "fft.hfft", "linalg.svd", "linalg.pinv", "linalg.eigvals",
            "linalg.norm", "kron", "cross", "sinc", "gradient", "linspace", "append", "block",
            "real_if_close", "i0", "vecdot", "linalg.cond", "linalg.qr"} <= ok, sorted(ok)


# --- the rules added for issue 15 (first and second order, VJP, JVP and grad replay) ---------

SET = settings(max_examples=5, deadline=None, derandomize=True, database=None,
               suppress_health_check=list(HealthCheck))
R = numpy.random.RandomState(7)


def _re_im(f):
    """``f`` with a complex result split into stacked real and imaginary parts."""
    def g(*a):
        o = f(*a)
        return lnp.stack([lnp.real(o), lnp.imag(o)]) if o.dtype.kind == "c" else o
    return g


@SET
@given(st.integers(1, 3), st.integers(2, 5), st.sampled_from([None, "ortho", "forward"]),
       st.sampled_from(["fft", "ifft", "rfft", "irfft", "hfft", "ihfft"]),
       st.sampled_from([None, 3, 6]), st.integers(0, 1))
def test_fft_1d_rules(rows, cols, norm, name, n, axis):
    x = R.standard_normal((rows, cols))
    f = getattr(lnp.fft, name)
    if name in ("irfft", "hfft"):
        check_grads(_re_im(lambda a: f(a * (1 + 0.5j), n, axis, norm)), x, order=2)
    else:
        check_grads(_re_im(lambda a: f(a, n, axis, norm)), x, order=2)


@SET
@given(st.sampled_from(["fftn", "ifftn", "rfftn", "irfftn", "fft2", "ifft2", "rfft2",
                        "irfft2"]),
       st.sampled_from([None, "ortho", "forward"]), st.booleans(), st.integers(0, 2**16))
def test_fft_nd_rules(name, norm, with_s, seed):
    x = numpy.random.RandomState(seed).standard_normal((2, 3, 4))
    f = getattr(lnp.fft, name)
    kw = {"norm": norm}
    if with_s:
        kw.update(s=(3, 5), axes=(0, 2)) if not name.endswith("2") else kw.update(s=(2, 5))
    scale = (1 + 0.3j) if name.startswith("irfft") else 1.0
    check_grads(_re_im(lambda a: f(a * scale, **kw)), x, order=2)


def test_fft_shifts_and_values():
    x = R.standard_normal((4, 5))
    check_grads(lambda a: lnp.fft.fftshift(a) + lnp.fft.ifftshift(a, axes=1) * 2.0, x,
                order=2)
    for name in ("fft", "ifft", "rfft", "irfft", "hfft", "ihfft", "fft2", "ifft2", "rfft2",
                 "irfft2", "fftn", "ifftn", "rfftn", "irfftn", "fftshift", "ifftshift"):
        got = numpy.asarray(getattr(lnp.fft, name)(lnp.asarray(x)))
        want = getattr(numpy.fft, name)(x)
        assert got.dtype == want.dtype and got.shape == want.shape
        numpy.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-13)


@SET
@given(st.integers(2, 4), st.integers(2, 4), st.integers(0, 2**16))
def test_svd_and_pinv_rules(m, n, seed):
    a = numpy.random.RandomState(seed).standard_normal((m, n))
    check_grads(lambda x: lnp.linalg.svd(x, compute_uv=False), a, order=2)
    check_grads(lambda x: tuple(lnp.linalg.svd(x, full_matrices=False)), a, order=2,
                modes=("rev",))
    check_grads(lambda x: lnp.linalg.svdvals(x), a, order=1)
    check_grads(lnp.linalg.pinv, a, order=2)


def test_svd_full_square_and_batched():
    check_grads(lambda x: tuple(lnp.linalg.svd(x)), R.standard_normal((3, 3)), order=2,
                modes=("rev",))
    check_grads(lambda x: lnp.linalg.svd(x, full_matrices=False)[2],
                R.standard_normal((2, 3, 4)), order=1)
    with pytest.raises(AutogradError, match="full_matrices"):
        lnp.grad(lambda x: lnp.sum(lnp.linalg.svd(x)[0]))(R.standard_normal((4, 3)))


def test_eig_rules():
    a = R.standard_normal((3, 3))
    sym = a + a.T + numpy.diag([0.0, 3.0, 6.0])       # real, distinct eigenvalues
    check_grads(lambda x: lnp.real(lnp.linalg.eigvals(x)), a, order=2, modes=("rev",))
    check_grads(lambda x: lnp.imag(lnp.linalg.eigvals(x)), a, order=1, modes=("rev",))
    check_grads(lambda x: tuple(lnp.linalg.eig(x)), sym + 0.2 * a, order=2, modes=("rev",))


@pytest.mark.parametrize("ordv", [None, 1, 2, 3, 0.5, -1, 0, numpy.inf, -numpy.inf])
def test_vector_norm_every_ord(ordv):
    v = R.standard_normal(5)
    check_grads(lambda x: lnp.linalg.norm(x, ordv), v, order=2)
    check_grads(lambda x: lnp.linalg.norm(x, ordv, axis=1, keepdims=True),
                R.standard_normal((2, 4, 3)), order=2)


@pytest.mark.parametrize("ordv", [None, "fro", "nuc", 1, -1, 2, -2, numpy.inf, -numpy.inf])
def test_matrix_norm_every_ord(ordv):
    check_grads(lambda x: lnp.linalg.norm(x, ordv), R.standard_normal((4, 3)), order=2)
    check_grads(lambda x: lnp.linalg.norm(x, ordv, axis=(2, 0)),
                R.standard_normal((3, 2, 4)), order=2)


@pytest.mark.parametrize("f, shapes", [
    (lambda a: lnp.einsum("ii", a), [(3, 3)]),
    (lambda a: lnp.einsum("ii->i", a), [(3, 3)]),
    (lambda a, b: lnp.einsum("ii,ij->j", a, b), [(3, 3), (3, 2)]),
    (lambda a, b: lnp.einsum("ij,jk", a, b), [(2, 3), (3, 4)]),
    (lambda a, b: lnp.einsum("...ij,jk->...ik", a, b), [(2, 2, 3), (3, 4)]),
    (lambda a: lnp.einsum("...ii->...i", a), [(2, 3, 3)]),
    (lambda a: lnp.einsum("...ii", a), [(2, 3, 3)]),
    (lambda a: lnp.einsum("iij->j", a), [(3, 3, 2)]),
    (lambda a, b: lnp.einsum(a, [0, 1], b, [1, 2], [0, 2]), [(2, 3), (3, 4)]),
    (lambda a, b: lnp.einsum(a, [0, 1], b, [1, 2]), [(2, 3), (3, 4)]),
    (lambda a: lnp.einsum(a, [Ellipsis, 0, 0], [Ellipsis, 0]), [(2, 3, 3)]),
    (lambda a, b, c: lnp.einsum("i,j,k->ijk", a, b, c), [(2,), (3,), (2,)]),
], ids=lambda v: "" if callable(v) else str(len(v)))
def test_einsum_every_form(f, shapes):
    check_grads(f, *[R.standard_normal(s) for s in shapes], order=2)


@pytest.mark.parametrize("f, shapes", [
    (lnp.inner, [(), (3,)]), (lnp.inner, [(2, 3), ()]), (lnp.outer, [(), (3,)]),
    (lambda a, b: lnp.tensordot(a, b, 0), [(), (2, 3)]),
    (lambda a, b: lnp.tensordot(a, b, 0), [(2,), ()]),
    (lnp.kron, [(2, 3), (3, 2)]), (lnp.kron, [(3,), (2, 2)]),
    (lnp.cross, [(4, 3), (3,)]), (lnp.cross, [(4, 2), (4, 2)]), (lnp.cross, [(4, 2), (4, 3)]),
    (lambda a, b: lnp.cross(a, b, axisa=0, axisb=0), [(3, 4), (3, 4)]),
    (lambda a: lnp.partition(a, 2), [(3, 5)]),
    (lambda a: lnp.partition(a, (1, 3), axis=None), [(3, 4)]),
    (lambda a: lnp.select([a > 0, a < -0.5], [a * 2, lnp.sin(a)], a ** 2), [(6,)]),
    (lnp.sinc, [(5,)]),
    (lambda a: lnp.sinc(a * 0.0), [(3,)]),
    (lambda a: lnp.gradient(a, 0.5, edge_order=2)[1], [(4, 5)]),
    (lambda a: lnp.stack(lnp.gradient(a, 2.0, 0.5)), [(4, 5)]),
    (lambda a: lnp.gradient(a, axis=0), [(4, 3)]),
    (lambda a: lnp.real_if_close(a * (1 + 0j)), [(3,)]),
    (lambda a: lnp.diag(a), [(4,)]), (lambda a: lnp.diag(a, -1), [(3,)]),
    (lambda a: lnp.diagflat(a, 1), [(2, 2)]),
    (lambda a: lnp.diff(a, n=2, prepend=1.0), [(5,)]),
    (lambda a: lnp.ediff1d(a, to_begin=[1.0], to_end=[2.0, 3.0]), [(5,)]),
    (lambda a: lnp.trapezoid(a, dx=0.3), [(3, 5)]),
    (lambda y, x: lnp.trapezoid(y, x), [(3, 4), (4,)]),
    (lnp.polyval, [(4,), (3,)]), (lambda a: lnp.vander(a, 4), [(3,)]),
    (lnp.convolve, [(5,), (3,)]), (lambda a, b: lnp.convolve(a, b, "same"), [(3,), (5,)]),
    (lambda a, b: lnp.correlate(a, b, "full"), [(3,), (5,)]),
    (lambda a, b: lnp.nextafter(a, b), [(3,), (3,)]),
    (lambda a, b: lnp.linalg.vecdot(a, b), [(2, 3), (3,)]),
    (lambda a: lnp.linalg.vector_norm(a, axis=(0, 2), ord=3), [(2, 3, 4)]),
    (lambda a: lnp.linalg.matrix_norm(a, ord="nuc"), [(2, 3, 4)]),
    (lambda a: lnp.linalg.trace(a), [(2, 3, 3)]),
    (lambda a: lnp.median(a, axis=1), [(3, 5)]), (lambda a: lnp.median(a), [(4, 3)]),
    (lambda a: lnp.median(a, axis=0, keepdims=True), [(4, 3)]),
    (lnp.cov, [(3, 5)]), (lnp.cov, [(5,)]),
    (lambda a: lnp.cov(a, rowvar=False, bias=True), [(5, 3)]),
    (lambda a: lnp.unwrap(a * 3.0), [(6,)]),
    (lambda a: lnp.cumulative_sum(a, axis=1, include_initial=True), [(2, 3)]),
    (lambda a: lnp.cumulative_prod(a), [(4,)]),
    (lambda a: lnp.quantile(a, 0.3), [(7,)]),
    (lnp.polyadd, [(4,), (2,)]), (lnp.polysub, [(2,), (4,)]), (lnp.polymul, [(4,), (2,)]),
    (lambda p: lnp.polyder(p, 2), [(4,)]), (lambda p: lnp.polyint(p, 2, k=[1.0, 2.0]), [(4,)]),
    (lambda p, k: lnp.polyint(p, 1, k=k), [(4,), ()]),
    (lambda a: lnp.linalg.qr(a)[0], [(4, 3)]), (lambda a: lnp.linalg.qr(a).R, [(2, 3, 3)]),
    (lambda a: lnp.compress([1, 0, 1], a, axis=1), [(2, 3)]),
    (lambda a: lnp.compress([True, False, True, True], a), [(2, 3)]),
    (lambda a: lnp.extract(a > 0, a), [(2, 3)]),
    (lambda a: lnp.asarray_chkfinite(a) * 2.0, [(3,)]),
    (lambda a: lnp.real(lnp.sort_complex(a * (1 + 1j))), [(5,)]),
    (lambda a, b: lnp.linalg.lstsq(a, b)[0], [(5, 3), (5,)]),
    (lambda a, b: lnp.linalg.lstsq(a, b)[1], [(5, 3), (5, 2)]),
    (lambda a, b: lnp.linalg.lstsq(a, b)[0], [(3, 5), (3,)]),
    (lnp.corrcoef, [(3, 6)]), (lambda a: lnp.corrcoef(a, rowvar=False), [(6, 2)]),
    (lambda a: lnp.quantile(a, [0.1, 0.5, 0.95], axis=1), [(3, 6)]),
    (lambda a: lnp.quantile(a, 0.7, axis=0, keepdims=True), [(5, 2)]),
    (lambda a: lnp.percentile(a, [[10, 90], [50, 60]]), [(3, 4)]),
], ids=lambda v: "" if callable(v) else str(v))
def test_more_rules(f, shapes):
    xs = [R.standard_normal(s) if s else numpy.array(R.standard_normal()) for s in shapes]
    check_grads(f, *xs, order=2)


def test_argnum_alias():
    assert float(lnp.grad(lambda x, y: x * y * y, argnum=1)(2.0, 3.0)) == 12.0
    assert float(lnp.hessian(lambda x, y: x * y * y, argnum=1)(2.0, 3.0)) == 4.0
    assert float(lnp.value_and_grad(lambda x, y: x * y, argnum=0)(2.0, 3.0)[1]) == 3.0
    with pytest.raises(TypeError):
        lnp.grad(lambda x, y: x * y, argnums=(0,), argnum=1)


@pytest.mark.parametrize("f", [
    lambda x: lnp.sum(lnp.abs(lnp.fft.rfft(x)) ** 2),
    lambda x: lnp.linalg.norm(lnp.reshape(x, (2, 3)), "nuc"),
    lambda x: lnp.sum(lnp.linalg.pinv(lnp.reshape(x, (3, 2)))),
    lambda x: lnp.sum(lnp.kron(x[:2], x) * lnp.sinc(x[0])),
    lambda x: lnp.sum(lnp.linspace(x[0], x[1], 4) * lnp.append(x[3:], x[:1])),
    lambda x: lnp.sum(lnp.einsum("ii->i", lnp.outer(x, x)[:3, :3]) * lnp.linalg.norm(x, 3)),
    lambda x: lnp.sum(lnp.linalg.svd(lnp.reshape(x, (3, 2)), full_matrices=False)[0] ** 2 *
                      lnp.linalg.qr(lnp.reshape(x, (3, 2))).R[0, 1]),
    lambda x: lnp.median(x) + lnp.quantile(x, 0.3) + lnp.sum(lnp.cov(lnp.reshape(x, (2, 3)))),
    lambda x: lnp.sum(lnp.abs(lnp.fft.irfft(x * (1 + 1j))) ** 2) +
    lnp.sum(lnp.partition(x, 2)[:2] * lnp.gradient(x)[:2]),
], ids=lambda f: "")
def test_jit_of_grad_and_replay(f):
    x = R.standard_normal(6)
    want = numpy.asarray(lnp.grad(f)(x))
    jg = lnp.jit(lnp.grad(f))
    for _ in range(2):
        numpy.testing.assert_allclose(numpy.asarray(jg(lnp.asarray(x))), want, rtol=1e-10)
    gf = lnp.grad(f)
    for _ in range(4):                    # grad replay: the plan compiled on the third call
        numpy.testing.assert_allclose(numpy.asarray(gf(x)), want, rtol=1e-10)


@pytest.mark.parametrize("f", [
    lambda a: lnp.nanprod(a, axis=1), lambda a: lnp.nanvar(a, axis=1, ddof=1),
    lambda a: lnp.nanstd(a), lambda a: lnp.nancumprod(a, axis=1),
    lambda a: lnp.nansum(a, axis=0), lambda a: lnp.nanmean(a),
    lambda a: lnp.nanmedian(a, axis=1), lambda a: lnp.nanmedian(a),
    lambda a: lnp.nanmedian(a, axis=0, keepdims=True),
    lambda a: lnp.nanquantile(a, [0.2, 0.7], axis=1), lambda a: lnp.nanpercentile(a, 35),
    lambda a: lnp.nanquantile(a, 0.4, axis=1, keepdims=True),
], ids=lambda f: "")
def test_nan_reductions(f):
    x = R.standard_normal((3, 5))
    x[0, 1] = x[2, 3] = numpy.nan
    w = R.standard_normal(numpy.shape(numpy.asarray(f(lnp.asarray(x)))))
    g = numpy.asarray(lnp.grad(lambda a: lnp.sum(f(a) * w))(x))
    v = numpy.where(numpy.isnan(x), 0.0, R.standard_normal(x.shape))   # NaNs stay NaN

    def loss(y):
        return float(numpy.sum(numpy.asarray(f(lnp.asarray(y))) * w))
    fd = (loss(x + 1e-6 * v) - loss(x - 1e-6 * v)) / 2e-6
    assert numpy.nansum(g * v) == pytest.approx(fd, rel=1e-5, abs=1e-6)
    assert numpy.all(g[numpy.isnan(x)] == 0)


def test_record_mode_allows_reading_values_but_not_using_them():
    x = lnp.ones(3)
    x.attach_grad()
    with lnp.autograd.record():
        y = lnp.sum(x * x)
        assert float(numpy.asarray(y)) == 3.0           # logging a value: fine
    y.backward()
    numpy.testing.assert_array_equal(numpy.asarray(x.grad), [2.0, 2.0, 2.0])
    x2 = lnp.ones(3)
    x2.attach_grad()
    with lnp.autograd.record():
        z = lnp.asarray(numpy.asarray(x2 * 2.0)) * 3.0   # NumPy data back on the path
    with pytest.raises(AutogradError, match="asarray"):
        z.backward()


# --- issue 35 (build 4): the same public functions with integer inputs, through float(), and
# with complex inputs (the one convention: grad = df/dx - i df/dy) ---------------------------

def _callable_on(fnp, x):
    try:
        with numpy.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return bool(_float_outputs(fnp(x)))
    except Exception:
        return False


#: functions of a float array whose float output does not depend on the array's values
CONSTANT_OUTPUT = frozenset({"imag"})     # (of a real array: zeros)


def test_every_public_function_rejects_integer_inputs_and_float_of_traced_values():
    ints = numpy.arange(1, 10).reshape(3, 3)
    floats = ints + 0.5
    checked, constant = 0, []
    for name, fnp, flz, _keys in _public_functions():
        if not _callable_on(fnp, floats):
            continue
        checked += 1
        with pytest.raises(TypeError, match="Can't differentiate"):
            lnp.grad(lambda x: _weighted(_float_outputs(flz(x)), [(1.0, 1.0)] * 99, lnp))(ints)
        try:
            lnp.grad(lambda x: float(lnp.sum(lnp.real(lnp.asarray(_float_outputs(flz(x))[0]))))
                     * lnp.sum(x))(floats)
        except lnp.autograd.TracedValueError as e:
            assert "stop_gradient" in str(e)
        except (AutogradError, TypeError, ValueError):
            pass                    # (no gradient: raises before reaching float())
        else:
            constant.append(name)   # (the output does not depend on x: float() is fine)
    assert checked > 150
    assert set(constant) <= CONSTANT_OUTPUT, sorted(set(constant) - CONSTANT_OUTPUT)


def _check_complex_function(fnp, flz, keys):
    """As :func:`_check_function` with a complex input: the gradient of a real loss must be
    ``dL/dx - i dL/dy`` (checked along a random complex direction)."""
    rng = numpy.random.RandomState(1)
    shapes = {"v": (4,), "vbig": (4,), "m": (3, 3)}
    for key in keys:
        x = rng.uniform(0.2, 0.9, shapes[key]) + 1j * rng.uniform(0.2, 0.9, shapes[key])
        if key == "m":
            x = x + 2 * numpy.eye(3)
        try:
            with numpy.errstate(all="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                outs = _float_outputs(fnp(x))
        except Exception:
            continue
        if not outs or not all(numpy.isfinite(numpy.asarray(o)).all() for o in outs):
            continue
        weights = [(rng.standard_normal(o.shape), rng.standard_normal(o.shape)) for o in outs]

        def loss_np(xx):
            with numpy.errstate(all="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                return _weighted(_float_outputs(fnp(xx)), weights, numpy)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                g = numpy.asarray(lnp.grad(
                    lambda xx: _weighted(_float_outputs(flz(xx)), weights, lnp))(x))
        except (AutogradError, TypeError):
            return "raises"
        v = rng.standard_normal(x.shape) + 1j * rng.standard_normal(x.shape)
        fd = (loss_np(x + 1e-6 * v) - loss_np(x - 1e-6 * v)) / 2e-6
        got = float(numpy.real(numpy.sum(g * v)))
        assert abs(got - fd) <= 1e-4 * max(1.0, abs(fd)), (got, fd)
        return "ok"
    return "skip"


#: functions whose complex result's order changes under a small perturbation (a hash
#: order): finite differences of a weighted sum of them mean nothing
UNORDERED_COMPLEX = frozenset({"unique_values"})


def test_every_public_function_follows_the_complex_convention():
    results, wrong = {}, {}
    for name, fnp, flz, keys in _public_functions():
        if name in UNORDERED_COMPLEX:
            continue
        try:
            results[name] = _check_complex_function(fnp, flz, keys)
        except AssertionError as e:
            wrong[name] = str(e)
    assert not wrong, f"gradients of complex inputs off the convention: {wrong}"
    ok = {n for n, r in results.items() if r == "ok"}
    assert len(ok) > 100, len(ok)
    assert {"var", "std", "abs", "sign", "cov", "linalg.slogdet", "fft.fft"} <= ok, sorted(ok)
    # (random weights on the real and imaginary parts of eigen/singular vectors depend on
    # their arbitrary phases: these raise PhaseDependentGradient)
    raising = {n for n, r in results.items() if r == "raises"}
    assert {"linalg.svd", "linalg.eigh", "linalg.eig"} <= raising
