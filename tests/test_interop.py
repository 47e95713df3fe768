"""Lazy arrays handed to pandas, SciPy, matplotlib and scikit-learn, compared with NumPy arrays.

pandas, SciPy and matplotlib are in the ``test`` extra; scikit-learn tests run where it is
installed.

What each library accepts and through which protocol is summed up in docs/drop-in.md
("Using lazynp arrays with other libraries"); these tests keep that text true: each call is
made once with NumPy arrays and once with lazynp arrays holding the same values.
"""
from __future__ import annotations

import io
import os
import subprocess
import sys
import textwrap

import matplotlib
import numpy
import pandas as pd
import pytest
import scipy.fft
import scipy.interpolate
import scipy.linalg
import scipy.optimize
import scipy.signal
import scipy.sparse
import scipy.spatial.distance
import scipy.special
import scipy.stats

import lazynp

matplotlib.use("Agg")


def _data(np):
    x = np.arange(6.0)
    k = np.array([0, 1, 0, 1, 2, 2])
    X = np.arange(12.0).reshape(6, 2) ** 1.5
    return x, k, X


def both(fn):
    """``fn`` on NumPy data and on lazynp data: (NumPy's result, the lazynp one)."""
    return fn(*_data(numpy)), fn(*_data(lazynp))


def assert_arrays_equal(expected, got):
    got = numpy.asarray(got)
    expected = numpy.asarray(expected)
    assert got.dtype == expected.dtype and got.shape == expected.shape
    numpy.testing.assert_array_equal(got, expected)


# --- pandas: __array__ ---------------------------------------------------------------------

@pytest.mark.parametrize("build", [
    lambda x, k, X: pd.Series(x),
    lambda x, k, X: pd.DataFrame(X, columns=["p", "q"]),
    lambda x, k, X: pd.DataFrame({"x": x, "k": k}),
    lambda x, k, X: pd.DataFrame({"x": numpy.arange(6.0)}).assign(k=k),
    lambda x, k, X: pd.Series(numpy.arange(6.0)) + x,
    lambda x, k, X: pd.Series([0, 2, 5]).isin(k),
    lambda x, k, X: pd.Index(k),
])
def test_pandas_constructors_and_arithmetic_take_lazy_arrays(build):
    expected, got = both(build)
    assert type(got) is type(expected)
    assert got.equals(expected)


def test_pandas_functions_taking_array_likes():
    for fn in (lambda x, k, X: pd.cut(x, 3, labels=False),
               lambda x, k, X: pd.Categorical(k).codes):
        expected, got = both(fn)
        assert_arrays_equal(expected, got)


def test_pandas_calls_that_need_numpy_asarray():
    """Group keys, boolean masks and ``pd.unique`` need a ``numpy.ndarray`` (pandas checks
    the type): ``numpy.asarray(lazy)`` gives it without a copy."""
    def run(x, k, X):
        k = numpy.asarray(k)
        s = pd.Series(numpy.asarray(x))
        return (s.groupby(k).sum(), s[numpy.asarray(k > 0)],
                pd.DataFrame({"x": s}).groupby(k).mean(), pd.unique(k))
    expected, got = both(run)
    for e, g in zip(expected[:3], got[:3]):
        assert g.equals(e)
    assert_arrays_equal(expected[3], got[3])


def test_series_from_a_lazy_array_sees_later_writes_like_numpy():
    def run(np):
        a = np.arange(4.0)
        s = pd.Series(a, copy=False)
        a[0] = 10.0
        return s.tolist()
    assert run(lazynp) == run(numpy)


# --- SciPy: __array__, __array_ufunc__ (scipy.special), __array_namespace__ ------------------

@pytest.mark.parametrize("fn", [
    lambda x, k, X: scipy.linalg.inv(X[:2] + numpy.eye(2)),
    lambda x, k, X: scipy.stats.zscore(x),
    lambda x, k, X: scipy.special.erf(x / 6),
    lambda x, k, X: scipy.signal.convolve(x, k),
    lambda x, k, X: scipy.interpolate.interp1d(x, k)(2.5),
    lambda x, k, X: scipy.sparse.csr_matrix(X).toarray(),
    lambda x, k, X: scipy.spatial.distance.cdist(X, X),
    lambda x, k, X: scipy.fft.fft(x),
    lambda x, k, X: scipy.optimize.minimize(
        lambda v: ((v - x[:2]) ** 2).sum(), numpy.zeros(2)).x.round(4),
])
def test_scipy_takes_lazy_arrays(fn):
    expected, got = both(fn)
    assert_arrays_equal(expected, got)


# --- matplotlib: __array__ -------------------------------------------------------------------

def test_matplotlib_plots_lazy_arrays():
    import matplotlib.pyplot as plt

    def run(x, k, X):
        fig, ax = plt.subplots()
        line, = ax.plot(x, x ** 2)
        ax.scatter(x, k)
        counts, _, _ = ax.hist(x, bins=3)
        ax.imshow(X)
        ax.bar(x, k)
        ax.fill_between(x, x, k)
        ax.errorbar(x, k, yerr=k * 0.1)
        buf = io.BytesIO()
        fig.savefig(buf, format="png")
        plt.close(fig)
        return numpy.asarray(line.get_ydata()), counts, buf.getvalue()[:8]

    expected, got = both(run)
    assert_arrays_equal(expected[0], got[0])
    assert_arrays_equal(expected[1], got[1])
    assert got[2] == expected[2] == b"\x89PNG\r\n\x1a\n"


# --- scikit-learn: __array__, and the array API (__array_namespace__) ------------------------

def test_sklearn_estimators_take_lazy_arrays():
    pytest.importorskip("sklearn")
    from sklearn.decomposition import PCA
    from sklearn.linear_model import LinearRegression
    from sklearn.model_selection import train_test_split
    from sklearn.preprocessing import StandardScaler

    def run(x, k, X):
        return (LinearRegression().fit(X, x).predict(X),
                StandardScaler().fit_transform(X),
                train_test_split(X, k, random_state=0)[1],
                numpy.abs(PCA(1, svd_solver="full").fit_transform(X)))

    expected, got = both(run)
    # estimators convert with numpy.asarray; train_test_split indexes the array itself
    assert [type(g) for g in got] == [numpy.ndarray, numpy.ndarray, lazynp.ndarray,
                                      numpy.ndarray]
    for e, g in zip(expected, got):
        numpy.testing.assert_allclose(numpy.asarray(g), e, rtol=1e-12, atol=1e-12)


def test_sklearn_array_api_dispatch_keeps_lazy_arrays():
    """With ``array_api_dispatch`` (and ``SCIPY_ARRAY_API=1``, which must be set before
    SciPy is imported: a child process) scikit-learn computes with lazynp itself."""
    pytest.importorskip("sklearn")
    code = textwrap.dedent("""
        import numpy, sklearn, lazynp
        from sklearn.decomposition import PCA
        from sklearn.preprocessing import MinMaxScaler
        X = numpy.random.default_rng(0).normal(size=(40, 3))
        with sklearn.config_context(array_api_dispatch=True):
            for est in (PCA(2, svd_solver="full"), MinMaxScaler()):
                got = est.fit_transform(lazynp.asarray(X.copy()))
                assert type(got) is lazynp.ndarray, type(got)
                ref = type(est)(**est.get_params()).fit_transform(X)
                numpy.testing.assert_allclose(numpy.asarray(got), ref, atol=1e-12)
        print("ok")
    """)
    env = dict(os.environ, SCIPY_ARRAY_API="1")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, timeout=120, cwd=root)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "ok"
