"""Functions whose NumPy result is a scalar give NumPy's scalar at every size (issue 34,
item 9): a reduction of a large pending array is computed at the call, not left a lazy 0-d
array; ``axis=``/``keepdims=True`` results stay arrays; transforms keep tracing."""
from __future__ import annotations

import json

import numpy
import pytest

import lazynp as np
from lazynp.core import policy as _policy

#: above the size bound: the work is recorded, so the result was a pending 0-d array
N = -(-2 * _policy.EAGER_MAX_ELEMS // 512) * 512   # twice the bound, rounded up to whole rows of 512


def _pair(build):
    """``build(module)`` with NumPy and with lazynp on the same (large, pending) data."""
    return build(numpy), build(np)


CASES = {
    "a.mean()": lambda m: (m.arange(N) * 1.0).mean(),
    "np.sum(a)": lambda m: m.sum(m.arange(N) * 1.0),
    "a.sum() int": lambda m: (m.arange(N) * 2).sum(),
    "a.max()": lambda m: (m.arange(N) * 1.0).max(),
    "np.min(a)": lambda m: m.min(m.arange(N) - 3),
    "a.prod() f4": lambda m: (m.ones(N, m.float32) * 1.0).prod(),
    "a.std()": lambda m: (m.arange(N) * 1.0).std(),
    "np.var(a)": lambda m: m.var(m.arange(N) * 1.0),
    "a.argmax()": lambda m: (m.arange(N) * 1.0).argmax(),
    "np.argmin(a)": lambda m: m.argmin(m.arange(N) * 1.0),
    "np.ptp(a)": lambda m: m.ptp(m.arange(N) * 1.0),
    "np.nansum(a)": lambda m: m.nansum(m.arange(N) * 1.0),
    "np.nanmean(a)": lambda m: m.nanmean(m.arange(N) * 1.0),
    "np.average(a)": lambda m: m.average(m.arange(N) * 1.0),
    "np.median(a)": lambda m: m.median(m.arange(N) * 1.0),
    "np.count_nonzero(a)": lambda m: m.count_nonzero(m.arange(N) % 3),
    "np.all(b)": lambda m: m.all(m.arange(N) >= 0),
    "np.any(b)": lambda m: m.any(m.arange(N) > N),
    "b.sum()": lambda m: (m.arange(N) > 5).sum(),
    "np.dot(v, v)": lambda m: m.dot(m.arange(N) * 1.0, m.arange(N) * 1.0),
    "v @ v": lambda m: (m.arange(N) * 1.0) @ (m.arange(N) * 1.0),
    "np.vdot(v, v)": lambda m: m.vdot(m.arange(N) * 1.0, m.arange(N) * 1.0),
    "np.linalg.norm(v)": lambda m: m.linalg.norm(m.arange(N) * 1.0),
    "np.trace(M)": lambda m: m.trace((m.arange(N) * 1.0).reshape(N // 512, 512)),
    "a[i]": lambda m: (m.arange(N) * 1.0)[5],
    "M[i, j]": lambda m: (m.arange(N) * 1.0).reshape(-1, 512)[3, 4],
    "np.add.reduce(a)": lambda m: m.add.reduce(m.arange(N) * 1.0),
    "complex sum": lambda m: (m.arange(N) * 1j).sum(),
    "np.nanmedian(a)": lambda m: m.nanmedian(m.arange(N) * 1.0),
    "np.percentile(a, 30)": lambda m: m.percentile(m.arange(N) * 1.0, 30),
    "np.einsum('i->', a)": lambda m: m.einsum("i->", m.arange(N) * 1.0),
    "a.max(where=)": lambda m: (m.arange(N) * 1.0).max(where=m.arange(N) > 3, initial=0),
    "a.sum(dtype=f4)": lambda m: (m.arange(N) * 1.0).sum(dtype=m.float32),
    "a.flat[i]": lambda m: (m.arange(N) * 1.0).flat[5],
}


def test_tuples_of_scalars_are_numpys_scalars():
    want = numpy.average(numpy.arange(N) * 1.0, returned=True)
    got = np.average(np.arange(N) * 1.0, returned=True)
    assert [type(x) for x in got] == [type(x) for x in want]
    assert list(got) == list(want)


@pytest.mark.parametrize("name", list(CASES))
def test_scalar_results_are_numpys_scalar_type(name):
    want, got = _pair(CASES[name])
    assert type(got) is type(want), (name, type(got), type(want))
    assert got == want or (want != want and got != got)


def test_a_large_mean_is_a_float_json_and_hashable():
    m = (np.arange(10**6) * 1.0).mean()
    assert isinstance(m, float) and np.isscalar(m) and numpy.isscalar(m)
    assert json.loads(json.dumps({"m": m})) == {"m": 499999.5}
    assert {m: 1}[499999.5] == 1


def test_axis_and_keepdims_results_stay_arrays():
    a = np.arange(N) * 1.0
    assert isinstance(a.sum(keepdims=True), np.ndarray)
    assert a.sum(keepdims=True).shape == (1,)
    assert isinstance(a.sum(axis=0, keepdims=True), np.ndarray)
    b = a.reshape(2, -1)
    assert isinstance(b.mean(axis=1), np.ndarray)
    assert b.mean(axis=1).shape == (2,)


def test_a_pending_scalar_is_computed_in_one_flush_with_its_inputs():
    a = np.arange(N) * 1.0                      # pending
    before = np.stats()["flushes"]
    m = (a * 2.0 + 1.0).sum()
    assert np.stats()["flushes"] == before + 1
    assert type(m) is numpy.float64
    assert m == (numpy.arange(N) * 2.0 + 1.0).sum()


def test_x_minus_its_mean_matches_numpy():
    x = np.arange(N) * 0.5
    xn = numpy.arange(N) * 0.5
    numpy.testing.assert_array_equal(numpy.asarray(x - x.mean()), xn - xn.mean())


def test_the_lazy_policy_still_records_reductions():
    with np.policy("lazy"):
        m = (np.arange(10) * 1.0).sum()
        assert isinstance(m, np.ndarray) and m.shape == ()
    assert float(m) == 45.0


def test_reductions_of_traced_values_stay_traced_under_grad():
    seen = []

    def f(x):
        s = (x * x).sum()
        seen.append(type(s))
        return s

    g = np.grad(f)(np.arange(N) * 1.0)
    assert seen == [np.ndarray]
    numpy.testing.assert_array_equal(numpy.asarray(g), 2.0 * numpy.arange(N))


def test_jit_of_a_reduction_returns_numpys_scalar():
    f = np.jit(lambda x: (x * 2.0).mean())
    r = f(np.arange(N) * 1.0)
    assert float(r) == (numpy.arange(N) * 2.0).mean()


def test_an_error_of_a_pending_input_is_raised_at_the_reduction():
    a = np.arange(N) * 1.0
    with pytest.raises(ValueError):
        (a + np.ones(3)).sum()



@pytest.mark.parametrize("name,args", [
    ("tanh", (numpy.float64(0.5),)), ("log", (numpy.float64(-1.0),)),
    ("sqrt", (numpy.float64(2.0),)), ("add", (numpy.float64(1.5), 2)),
    ("maximum", (numpy.float64(numpy.nan), 0.0)), ("divide", (1.0, numpy.float64(0.0))),
    ("power", (numpy.float64(2.0), numpy.float64(1e6))), ("less", (3, numpy.float64(2.5))),
    ("floor_divide", (numpy.float64(7.0), True)), ("arctan2", (0j, numpy.float64(1.0))),
])
def test_ufuncs_on_numpy_scalars_are_numpys_calls(name, args):
    """``np.tanh(a[i, i])`` in a loop takes NumPy's own call (C fast path): NumPy's scalar
    type, value, warnings and errors."""
    import warnings

    def outcome(m):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                r = getattr(m, name)(*args)
            except Exception as e:
                r = (type(e), str(e))
        return r, [(w.category, str(w.message)) for w in caught]

    (want, want_w), (got, got_w) = outcome(numpy), outcome(np)
    assert type(got) is type(want) and got_w == want_w
    if type(want) is tuple:
        assert got == want
    else:
        numpy.testing.assert_array_equal(got, want, strict=True)
    with numpy.errstate(all="raise"):
        if want_w:
            with pytest.raises(FloatingPointError):
                getattr(np, name)(*args)
