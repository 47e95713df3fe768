"""NumPy fallback (values, counting, call sites, strict mode), the public namespace, and
``lazynp.random`` giving exactly NumPy's random streams."""
from __future__ import annotations

import os
import subprocess
import sys
import types
import warnings

import numpy
import pytest

import lazynp

THIS_FILE = os.path.basename(__file__)


def assert_same(got, expected, rtol=None):
    if isinstance(expected, tuple):
        assert len(got) == len(expected)
        for g, e in zip(got, expected):
            assert_same(g, e, rtol)
        return
    g, e = numpy.asarray(got), numpy.asarray(expected)
    assert g.shape == e.shape and g.dtype == e.dtype, (g.shape, g.dtype, e.shape, e.dtype)
    if rtol is None:
        numpy.testing.assert_array_equal(g, e)
    else:
        numpy.testing.assert_allclose(g, e, rtol=rtol, atol=1e-12)


def _fb_count(name):
    return lazynp.stats()["fallbacks"].get(name, 0)


def _fb_sites(name):
    return lazynp.stats()["fallback_sites"].get(name, {})


# --- fallbacks: values, counts, sites ---------------------------------------------------------

FALLBACKS = [
    # (stats name, accessor, call)
    ("fft.fft", lambda m: m.fft.fft, lambda f, np: f(np.arange(8.0) * 2 - 3)),
    ("fft.ifft", lambda m: m.fft.ifft, lambda f, np: f(np.arange(8.0) + 1j)),
    ("fft.rfft", lambda m: m.fft.rfft, lambda f, np: f(np.sin(np.arange(16.0)))),
    ("polyfit", lambda m: m.polyfit,
     lambda f, np: f(np.arange(6.0), np.arange(6.0) ** 2 - 1, 2)),
    ("linalg.svd", lambda m: m.linalg.svd,
     lambda f, np: f(np.arange(12.0).reshape(4, 3) + np.eye(4, 3))),
    ("linalg.qr", lambda m: m.linalg.qr,
     lambda f, np: f(np.arange(9.0).reshape(3, 3) + np.eye(3))),
    ("linalg.eig", lambda m: m.linalg.eig, lambda f, np: f(np.diag(np.arange(1.0, 4.0)))),
    ("linalg.pinv", lambda m: m.linalg.pinv, lambda f, np: f(np.arange(6.0).reshape(2, 3))),
    ("linalg.matrix_rank", lambda m: m.linalg.matrix_rank,
     lambda f, np: f(np.arange(9.0).reshape(3, 3))),
    ("gradient", lambda m: m.gradient, lambda f, np: f(np.arange(10.0) ** 2)),
    ("linalg.matrix_power", lambda m: m.linalg.matrix_power,
     lambda f, np: f(np.arange(4.0).reshape(2, 2) + 1, 3)),
    ("polyder", lambda m: m.polyder, lambda f, np: f(np.arange(4.0) + 1)),
    ("linalg.cond", lambda m: m.linalg.cond,
     lambda f, np: f(np.arange(4.0).reshape(2, 2) + np.eye(2))),
    ("linalg.tensorinv", lambda m: m.linalg.tensorinv,
     lambda f, np: f(np.eye(4).reshape(4, 2, 2) + 1.0, 1)),
]


def _fallback_cases():
    out = []
    for name, acc, call in FALLBACKS:
        fn = acc(lazynp)
        if getattr(fn, "_lazynp_fallback", False):
            out.append(pytest.param(name, acc, call, id=name))
    return out


def test_some_functions_are_fallbacks():
    """Guard: the fallback tests below exercise at least a few real fallbacks."""
    assert len(_fallback_cases()) >= 4


@pytest.mark.parametrize("name,acc,call", _fallback_cases())
def test_fallback_values_counts_and_sites(name, acc, call):
    expected = call(acc(numpy), numpy)
    before = _fb_count(name)
    sites_before = dict(_fb_sites(name))
    got = call(acc(lazynp), lazynp)
    first = call.__code__.co_firstlineno     # the user's line is the lambda's call
    assert _fb_count(name) == before + 1
    sites = _fb_sites(name)
    new = {s: n for s, n in sites.items() if n != sites_before.get(s, 0)}
    assert len(new) == 1
    (site,) = new
    assert THIS_FILE in site
    assert any(f"line {n}," in site for n in (first, first + 1)), site
    if isinstance(expected, tuple):
        assert type(got) is type(expected)      # namedtuples (SVDResult...) kept
        for g in got:
            assert isinstance(g, lazynp.ndarray)
    elif isinstance(expected, numpy.ndarray):
        assert isinstance(got, lazynp.ndarray)
    assert_same(got, expected, rtol=1e-10)


@pytest.mark.parametrize("name,acc,call", _fallback_cases())
def test_fallback_strict_mode_raises(name, acc, call):
    before = _fb_count(name)
    lazynp.set_strict(True)
    try:
        with pytest.raises(lazynp.FallbackError) as ei:
            call(acc(lazynp), lazynp)
    finally:
        lazynp.set_strict(False)
    assert name.split(".")[-1] in str(ei.value)
    assert isinstance(ei.value, Exception)
    assert _fb_count(name) == before
    # non-strict again: works
    call(acc(lazynp), lazynp)


def test_strict_context_manager_and_lazy_ops_still_work():
    with lazynp.strict():
        a = lazynp.arange(6.0).reshape(2, 3)
        b = (a * 2 + 1).sum(axis=0)
        assert b.tolist() == [8.0, 12.0, 16.0]
        with pytest.raises(lazynp.FallbackError, match="matrix_rank"):
            lazynp.linalg.matrix_rank(a)
        # NumPy's function called on a lazy array goes through the same check
        with pytest.raises(lazynp.FallbackError):
            numpy.linalg.matrix_rank(a)
    assert lazynp.linalg.matrix_rank(lazynp.eye(2)) == 2


def test_fallback_through_array_function_is_counted():
    before = _fb_count("linalg.matrix_rank")
    r = numpy.linalg.matrix_rank(lazynp.arange(6.0).reshape(2, 3))
    assert _fb_count("linalg.matrix_rank") == before + 1
    assert r == numpy.linalg.matrix_rank(numpy.arange(6.0).reshape(2, 3))


def test_fallback_does_not_mutate_inputs_and_sees_pending_writes():
    a = lazynp.arange(8.0)
    v = a[::2]
    a[0] = 10            # pending write must be visible to the fallback
    r = lazynp.fft.fft(v)
    n = numpy.arange(8.0)
    n[0] = 10
    assert_same(r, numpy.fft.fft(n[::2]))
    a += 1               # and a later write does not change the fallback's result
    assert_same(r, numpy.fft.fft(n[::2]))
    assert a.tolist() == (n + 1).tolist()


def test_fallback_result_is_independent_lazy_array():
    a = lazynp.arange(4.0)
    r = lazynp.fft.fft(a)
    r[0] = 0
    assert a.tolist() == [0.0, 1.0, 2.0, 3.0]
    assert (r * 2).dtype == numpy.complex128


def test_fallback_with_lazy_out_argument():
    a = lazynp.arange(4.0)
    out = lazynp.zeros(4, complex)
    res = lazynp.fft.fft(a, out=out)
    assert res is out
    assert_same(out, numpy.fft.fft(numpy.arange(4.0)))


def test_fallback_nested_lazy_arguments():
    a = lazynp.ones((2, 2))
    b = lazynp.zeros((2, 2))
    r = lazynp.block([[a, b], [b, a]])
    assert_same(r, numpy.block([[numpy.ones((2, 2)), numpy.zeros((2, 2))],
                                [numpy.zeros((2, 2)), numpy.ones((2, 2))]]))
    assert_same(lazynp.r_[a[0], b[0]], numpy.r_[numpy.ones(2), numpy.zeros(2)])


def test_strict_env_var_in_subprocess():
    code = ("import lazynp\n"
            "a = lazynp.arange(8.0) * 2\n"
            "assert float(a.sum()) == 56.0\n"      # lazy ops fine under strict
            "lazynp.linalg.matrix_rank(a.reshape(2, 4))\n")
    env = dict(os.environ, LAZYNP_STRICT="1")
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       timeout=120)
    assert p.returncode != 0
    assert "FallbackError" in p.stderr and "matrix_rank" in p.stderr
    env["LAZYNP_STRICT"] = "0"
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stderr


# --- the public namespace --------------------------------------------------------------------

PUBLIC = [n for n in dir(numpy) if not n.startswith("_")]
# lazynp's own classes replacing NumPy's
OWN = {"ndarray", "ufunc", "mgrid", "ogrid"}


def test_every_public_numpy_name_is_accessible():
    missing, wrong = [], []
    for n in PUBLIC:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                e = getattr(numpy, n)
            except AttributeError:
                e = AttributeError
            try:
                g = getattr(lazynp, n)
            except Exception as ex:  # noqa: BLE001
                if e is not AttributeError:
                    missing.append(f"{n}: {type(ex).__name__}: {ex}")
                continue
        if e is AttributeError:
            wrong.append(f"{n}: numpy raises AttributeError, lazynp gives {g!r}")
        elif n in OWN or isinstance(e, types.ModuleType):
            continue
        elif isinstance(e, type) or isinstance(e, (numpy.dtype, float, int, numpy.generic)):
            if not (g is e or (isinstance(e, float) and (g == e or (numpy.isnan(e) and
                                                                      numpy.isnan(g))))):
                wrong.append(f"{n}: {g!r} is not numpy's {e!r}")
        elif callable(e) and not callable(g):
            wrong.append(f"{n}: not callable ({g!r})")
    assert not missing, missing
    assert not wrong, wrong


@pytest.mark.parametrize("name", ["float_", "NINF", "Inf", "trapz", "product", "cumproduct",
                                  "alltrue", "sometrue", "msort", "asfarray", "round_",
                                  "in1d", "find_common_type", "geterrobj", "no_such_name"])
def test_removed_names_raise_like_numpy(name):
    with pytest.raises(AttributeError):
        getattr(numpy, name)
    with pytest.raises(AttributeError):
        getattr(lazynp, name)


def test_dir_contains_numpy_names():
    d = set(dir(lazynp))
    assert set(PUBLIC) - d == set()


def test_submodules_work():
    a = lazynp.arange(6.0)
    assert_same(lazynp.linalg.norm(a), numpy.linalg.norm(numpy.arange(6.0)), rtol=1e-12)
    assert_same(lazynp.fft.ifft(lazynp.fft.fft(a)).real, numpy.arange(6.0), rtol=1e-12)
    w = lazynp.lib.stride_tricks.sliding_window_view(a, 3)
    assert_same(w, numpy.lib.stride_tricks.sliding_window_view(numpy.arange(6.0), 3))
    assert_same(lazynp.lib.stride_tricks.as_strided(a, (3,), (16,)), numpy.arange(6.0)[::2])
    p = lazynp.polynomial.Polynomial([1.0, 2.0, 3.0])
    assert_same(numpy.asarray(p(a)), numpy.polynomial.Polynomial([1.0, 2.0, 3.0])(
        numpy.arange(6.0)))
    assert_same(lazynp.polynomial.polynomial.polyval(a, [1.0, 2.0]),
                numpy.polynomial.polynomial.polyval(numpy.arange(6.0), [1.0, 2.0]))
    lazynp.testing.assert_allclose(a, numpy.arange(6.0))
    m = lazynp.ma.masked_array(numpy.arange(4.0), mask=[0, 1, 0, 0])
    assert float(m.sum()) == 5.0
    assert lazynp.ma.masked is numpy.ma.masked
    assert lazynp.random.default_rng is not None
    assert lazynp.exceptions.AxisError is numpy.exceptions.AxisError
    assert lazynp.dtypes.Float64DType is numpy.dtypes.Float64DType
    assert_same(lazynp.char.upper(numpy.array(["a", "b"])), numpy.char.upper(["a", "b"]))


def test_emath_submodule():
    assert_same(lazynp.emath.sqrt(numpy.array([-1.0, 4.0])), numpy.emath.sqrt([-1.0, 4.0]))
    assert_same(lazynp.emath.log(lazynp.array([-1.0, 1.0])), numpy.emath.log([-1.0, 1.0]))


def test_submodule_fallbacks_counted_with_prefix():
    before = _fb_count("linalg.matrix_rank")
    lazynp.linalg.matrix_rank(lazynp.ones((2, 3)))
    assert _fb_count("linalg.matrix_rank") == before + 1


# --- random: NumPy's exact streams -----------------------------------------------------------

def _legacy(np):
    np.random.seed(123)
    out = [np.random.rand(3, 4), np.random.randn(2, 3), np.random.randint(0, 10, size=5),
           np.random.random_sample((2,)), np.random.choice(10, 4),
           np.random.choice(np.arange(5.0), 3, replace=False),
           np.random.permutation(8), np.random.permutation(np.arange(6) * 2),
           np.random.normal(1.0, 2.0, size=(3,)), np.random.uniform(-1, 1, 4),
           np.random.random(), np.random.rand(), np.random.randint(5),
           np.random.standard_normal(3), np.random.binomial(10, 0.5, 4),
           np.random.poisson(3.0, 4), np.random.exponential(2.0, 3), np.random.beta(1, 2, 2),
           np.random.gamma(2.0, size=2), np.random.random((2, 2))]
    a = np.arange(10)
    np.random.shuffle(a)
    out.append(a)
    state = np.random.get_state()
    x = np.random.rand(3)
    np.random.set_state(state)
    y = np.random.rand(3)
    out += [x, y]
    out.append(np.random.RandomState(7).rand(3))
    return out


def _generator(np):
    rng = np.random.default_rng(42)
    out = [rng.random(4), rng.normal(size=(2, 2)), rng.integers(0, 100, 6), rng.choice(10, 3),
           rng.choice(np.arange(10.0) * 2, 3, replace=False), rng.permutation(7),
           rng.permutation(np.arange(5) + 1), rng.standard_normal(3), rng.uniform(0, 1, 2),
           rng.random(), rng.integers(10), rng.exponential(1.0, 3), rng.normal(0, 1),
           rng.random((2, 3), dtype=np.float32), rng.integers(0, 5, size=(2, 2), dtype=np.int8)]
    b = np.arange(12).reshape(4, 3)
    rng.shuffle(b)
    out.append(b)
    c = np.arange(10)
    v = c[::2]
    rng.shuffle(v)
    out.append(c)
    d = np.arange(6.0) * 1.5
    rng.shuffle(d)
    out.append(d)
    out.append(np.random.Generator(np.random.PCG64(5)).random(3))
    out.append(np.random.default_rng(np.random.SeedSequence(3)).integers(0, 1000, 4))
    return out


@pytest.mark.parametrize("make", [_legacy, _generator], ids=["legacy", "generator"])
def test_random_streams_identical(make):
    expected = make(numpy)
    got = make(lazynp)
    assert len(got) == len(expected)
    for i, (g, e) in enumerate(zip(got, expected)):
        ga, ea = numpy.asarray(g), numpy.asarray(e)
        assert ga.shape == ea.shape and ga.dtype == ea.dtype, (i, ga, ea)
        numpy.testing.assert_array_equal(ga, ea, err_msg=f"item {i}")
        if isinstance(e, numpy.ndarray):
            assert isinstance(g, lazynp.ndarray), (i, type(g))
        elif isinstance(e, (float, int)):
            assert type(g) is type(e) or isinstance(g, lazynp.ndarray), (i, type(g))


def test_random_results_are_usable_lazy_arrays():
    lazynp.random.seed(0)
    a = lazynp.random.rand(5)
    numpy.random.seed(0)
    b = numpy.random.rand(5)
    assert_same(a * 2 + 1, b * 2 + 1)
    a[0] = -1
    b[0] = -1
    assert_same(a, b)


def test_rng_shuffle_pending_lazy_array():
    """Shuffling an array with pending writes shuffles its current values."""
    def f(np):
        rng = np.random.default_rng(9)
        a = np.arange(8) * 10
        a[0] = 99
        rng.shuffle(a)
        a[1] += 1
        return a
    assert_same(f(lazynp), f(numpy))


def test_random_seed_with_lazy_values_and_size():
    lazynp.random.seed(lazynp.arange(3).sum())
    a = lazynp.random.rand(2)
    numpy.random.seed(3)
    assert_same(a, numpy.random.rand(2))
    n = lazynp.arange(5)[3]
    assert_same(lazynp.random.default_rng(1).random(n), numpy.random.default_rng(1).random(3))
