"""Autodiff never gives a silently wrong gradient (issue 15): construction functions carry
gradients, values taken out of lazynp raise on the differentiated path, and every public
function that takes a float array is either correct to finite differences or raises."""
from __future__ import annotations

import warnings

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


# --- the systematic check: every public function that takes a float array ---------------------

#: functions whose gradient raises AutogradError (no lazy implementation, or no rule yet);
#: every other public function that takes a float array must match finite differences
KNOWN_TO_RAISE = frozenset("""
    asarray_chkfinite compress corrcoef cov cumulative_prod cumulative_sum extract histogram
    histogram2d histogram_bin_edges histogramdd i0 intersect1d median nancumprod nanmedian
    nanpercentile nanprod nanquantile nanstd nanvar percentile poly polyadd polyder polydiv
    polyint polymul polysub quantile roots sort_complex union1d unique unique_all
    unique_counts unique_inverse unique_values unwrap vecdot linalg.cond linalg.lstsq
    linalg.qr""".split())

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
            "real_if_close"} <= ok, sorted(ok)
