"""Hand-offs of lazynp arrays to other libraries (issue 34, item 10): operators give way to
another operand as NumPy's array does (SciPy's sparse matrices), Numba compiles for a
lazynp argument, and where pandas accepts only a ``numpy.ndarray`` the documented one-line
fix (``numpy.asarray(a)``) works."""
from __future__ import annotations

import operator

import numpy
import pytest

import lazynp as np

sparse = pytest.importorskip("scipy.sparse")
pd = pytest.importorskip("pandas")
numba = pytest.importorskip("numba")


def _dense(r):
    return numpy.asarray(r.todense() if hasattr(r, "todense") else r)


# --- NumPy's deferral rules -----------------------------------------------------------------

SPARSE_OPS = {"@": operator.matmul, "*": operator.mul, "+": operator.add, "-": operator.sub,
              "<": operator.lt, ">=": operator.ge, "==": operator.eq, "!=": operator.ne,
              "/": operator.truediv, "**": operator.pow}


@pytest.mark.parametrize("shape", [(3,), (3, 3)])
@pytest.mark.parametrize("sym", list(SPARSE_OPS))
def test_operators_with_a_sparse_matrix_on_the_right_give_way_like_numpy(sym, shape):
    op = SPARSE_OPS[sym]
    S = sparse.csr_matrix(numpy.arange(9.0).reshape(3, 3))
    try:
        want = op(numpy.ones(shape), S)
    except Exception as exc:           # (NumPy's TypeError for / and **: the same here)
        with pytest.raises(type(exc)):
            op(np.ones(shape), S)
        return
    got = op(np.ones(shape), S)
    assert type(got) is type(want)
    numpy.testing.assert_array_equal(_dense(got), _dense(want))


def test_sparse_matmul_from_the_issue():
    S = sparse.csr_matrix(numpy.eye(3) * 2.0)
    r = np.ones(3) @ S
    numpy.testing.assert_array_equal(r, numpy.ones(3) @ S)


class _UfuncNone:
    """A type that opts out of NumPy's ufuncs: NumPy's operators give way to it."""
    __array_ufunc__ = None

    def __radd__(self, other):
        return ("radd", type(other))

    def __rmatmul__(self, other):
        return ("rmatmul", type(other))

    def __gt__(self, other):
        return ("gt", type(other))


class _HighPriority:
    """No ``__array_ufunc__`` and a higher ``__array_priority__`` than NumPy's array."""
    __array_priority__ = 20.0

    def __rmul__(self, other):
        return ("rmul", type(other))


class _LowPriority:
    __array_priority__ = -5.0

    def __rmul__(self, other):
        return ("rmul", type(other))


def test_array_ufunc_none_makes_operators_give_way():
    for mod in (numpy, np):
        assert mod.ones(2) + _UfuncNone() == ("radd", numpy.ndarray)
        assert mod.ones(2) @ _UfuncNone() == ("rmatmul", numpy.ndarray)
        assert (mod.ones(2) < _UfuncNone()) == ("gt", numpy.ndarray)


def test_array_priority_decides_without_array_ufunc():
    assert numpy.ones(2) * _HighPriority() == ("rmul", numpy.ndarray)
    assert np.ones(2) * _HighPriority() == ("rmul", numpy.ndarray)
    # a lower priority: NumPy's array multiplies elementwise (object results)
    want = numpy.ones(2) * _LowPriority()
    got = np.ones(2) * _LowPriority()
    assert got.dtype == want.dtype == object and got.shape == want.shape


def test_in_place_operators_follow_numpy():
    # __array_ufunc__ = None: NumPy's in-place operator does not give way (its ufunc raises)
    for mod in (numpy, np):
        a = mod.ones(2)
        with pytest.raises(TypeError, match="does not support ufuncs"):
            a += _UfuncNone()
    # a higher priority: the in-place operator gives way to the plain one, which gives way
    for mod in (numpy, np):
        a = mod.ones(2)
        a *= _HighPriority()
        assert a == ("rmul", numpy.ndarray)


# --- Numba ----------------------------------------------------------------------------------

# What Numba's numba_extensions entry point does at its first compile where lazynp is installed
# (pyproject.toml); a checkout run in place (or an install older than the entry point) has none.
# Both import orders, through the entry point itself: tests/test_import_time.py.
import lazynp_numba_extension  # noqa: E402

lazynp_numba_extension.init()


@numba.njit(cache=False)
def _total(x):
    return x.sum()


@numba.njit(cache=False)
def _scale_first_row(x):
    x[0] = 42.0
    return x * 2


def test_numba_compiles_for_a_lazynp_argument():
    a = np.arange(5.0)
    assert _total(a) == _total(numpy.arange(5.0)) == 10.0


def test_numba_reads_pending_arrays_and_views():
    big = np.arange(10**6) * 1.0                # pending
    assert _total(big) == (numpy.arange(10**6) * 1.0).sum()
    b = np.arange(6.0).reshape(2, 3)
    assert _total(b.T) == 15.0 and _total(b[:, ::2]) == 0 + 2 + 3 + 5


def test_numba_writes_through_to_the_lazynp_array_like_numpy():
    a, n = np.arange(6.0).reshape(2, 3), numpy.arange(6.0).reshape(2, 3)
    r, rn = _scale_first_row(a), _scale_first_row(n)
    assert type(r) is type(rn) is numpy.ndarray
    numpy.testing.assert_array_equal(r, rn)
    numpy.testing.assert_array_equal(numpy.asarray(a), n)


def test_numba_argument_types_match_numpys():
    from lazynp.array.numba_typing import LazyArrayType
    ty = numba.typeof(np.arange(6.0).reshape(2, 3).T)
    want = numba.typeof(numpy.arange(6.0).reshape(2, 3).T)
    assert isinstance(ty, LazyArrayType)
    assert (ty.dtype, ty.ndim, ty.layout, ty.mutable) == \
        (want.dtype, want.ndim, want.layout, want.mutable)


# --- pandas: only a numpy.ndarray passes its checks; the documented fix ----------------------

def _frame():
    return pd.DataFrame({"a": numpy.arange(5.0), "b": numpy.arange(5.0) * 2})


def test_pandas_boolean_masks_need_numpy_asarray():
    df, lazy = _frame(), np.arange(5.0)
    want = df[numpy.arange(5.0) > 1.5]
    # pandas' is_bool_indexer accepts only numpy.ndarray (README: the one-line fix)
    with pytest.raises(KeyError):
        df[lazy > 1.5]
    pd.testing.assert_frame_equal(df[numpy.asarray(lazy > 1.5)], want)
    pd.testing.assert_series_equal(df.loc[numpy.asarray(lazy > 3), "b"],
                                   df.loc[numpy.arange(5.0) > 3, "b"])


def test_pandas_groupby_keys_need_numpy_asarray():
    s = pd.Series(numpy.arange(5.0))
    keys = np.array([0, 1, 0, 1, 0])
    want = s.groupby(numpy.array([0, 1, 0, 1, 0])).sum()
    with pytest.raises(TypeError):
        s.groupby(keys).sum()
    pd.testing.assert_series_equal(s.groupby(numpy.asarray(keys)).sum(), want)


def test_lazynp_arrays_are_not_callable():
    # (pandas treats a callable key as a function: a lazynp array must never be one)
    assert not callable(np.arange(3))
