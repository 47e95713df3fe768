"""Sums over a short last axis (2 to 7 elements) computed in C (``lazynp._numpy.shortcuts``).

NumPy calls its add loop once per output element there, so lazynp adds the elements itself,
in NumPy's order (``((0 + a0) + a1) + ...``, each addition correctly rounded).  The results
must be NumPy's bit for bit: values (signed zeros, NaN, infinities, values whose sum depends on
the order of the additions), dtype, shape, scalar type, and NumPy's warnings where a float
flag is raised.
"""
from __future__ import annotations

import warnings

import numpy
import pytest

import lazynp
from lazynp._numpy import shortcuts as _shortcuts

needs_c = pytest.mark.skipif(_shortcuts._short_sum is None,
                             reason="the C extension is not used (LAZYNP_PURE_PYTHON or not built)")


def _order_sensitive(rng, shape, dtype):
    """Values of wildly different magnitudes, with zeros of both signs: their sum depends
    on the order of the additions."""
    a = rng.standard_normal(shape) * 10.0 ** rng.integers(-25, 25, shape)
    mask = rng.random(shape)
    a[mask < 0.1] = 0.0
    a[mask > 0.93] = -0.0
    return a.astype(dtype)


def _same_bits(got, want):
    assert type(got) is type(want)
    g, w = numpy.asarray(got), numpy.asarray(want)
    assert g.dtype == w.dtype and g.shape == w.shape
    assert g.tobytes() == w.tobytes()


@pytest.mark.parametrize("dtype", [numpy.float64, numpy.float32])
@pytest.mark.parametrize("n", range(1, 10))
@pytest.mark.parametrize("lead", [(), (1,), (300,), (7, 5), (2, 0), (0,)])
def test_short_last_axis_sums_are_numpys_bits(dtype, n, lead):
    rng = numpy.random.default_rng(n * 31 + len(lead))
    for _ in range(4):
        a = _order_sensitive(rng, lead + (n,), dtype)
        want = numpy.add.reduce(a, axis=-1)
        _same_bits(_shortcuts.sum(a, axis=-1), want)
        _same_bits(_shortcuts.sum(a, axis=a.ndim - 1), want)
        if a.ndim == 1:
            _same_bits(_shortcuts.sum(a), numpy.sum(a))
        _same_bits(_shortcuts.mean(a, axis=-1), numpy.mean(a, axis=-1)) if a.size else None


@needs_c
def test_the_c_path_is_taken_where_it_applies_and_only_there():
    a = numpy.random.default_rng(0).standard_normal((600, 4, 2))
    r = _shortcuts._short_sum(a)
    assert r is not None and r.shape == (600, 4)
    assert _shortcuts._short_sum(a.astype(numpy.float16)) is None
    assert _shortcuts._short_sum(a.astype(numpy.int64)) is None
    assert _shortcuts._short_sum(a[:, :, ::-1]) is None          # not C-ordered
    assert _shortcuts._short_sum(numpy.zeros((3, 8))) is None     # pairwise from 8 on
    assert _shortcuts._short_sum(numpy.zeros((3, 1))) is None
    assert type(_shortcuts._short_sum(numpy.array([1.0, 2.0]))) is numpy.float64


@pytest.mark.parametrize("values, category", [
    ("max", RuntimeWarning),                       # overflow
    ([[numpy.inf, -numpy.inf]], RuntimeWarning),   # invalid
    ([[numpy.nan, 1.0], [-0.0, -0.0]], None),      # a NaN operand raises no flag
    ([[numpy.inf, 1.0, 2.0]], None),
])
@pytest.mark.parametrize("dtype", [numpy.float64, numpy.float32])
def test_float_flags_give_numpys_warnings(values, category, dtype):
    if values == "max":
        values = [[numpy.finfo(dtype).max] * 2]
    a = numpy.array(values, dtype=dtype)
    with warnings.catch_warnings(record=True) as want_w:
        warnings.simplefilter("always")
        want = a.sum(axis=-1)
    with warnings.catch_warnings(record=True) as got_w:
        warnings.simplefilter("always")
        got = _shortcuts.sum(a, axis=-1)
    _same_bits(got, want)
    assert [(w.category, str(w.message)) for w in got_w] == \
        [(w.category, str(w.message)) for w in want_w]
    if category is not None:
        assert want_w and want_w[0].category is category
    with numpy.errstate(all="raise"):
        if category is None:
            _same_bits(_shortcuts.sum(a, axis=-1), want)
        else:
            with pytest.raises(FloatingPointError):
                _shortcuts.sum(a, axis=-1)


@pytest.mark.parametrize("kwargs", [{"axis": -1}, {"axis": 1}, {"axis": 0}, {"axis": None},
                                    {"axis": -1, "keepdims": True}, {"axis": 1.0},
                                    {"axis": -1, "dtype": numpy.float32}, {"axis": (1,)},
                                    {"axis": True}, {"axis": numpy.int64(-1)}])
def test_lazy_sum_method_and_function_over_a_short_axis_equal_numpy(kwargs):
    n = _order_sensitive(numpy.random.default_rng(5), (50, 3), numpy.float64)
    a = lazynp.array(n)
    for fn_np, fn_lz in ((lambda x: x.sum(**kwargs), lambda x: x.sum(**kwargs)),
                         (lambda x: numpy.sum(x, **kwargs), lambda x: lazynp.sum(x, **kwargs)),
                         (lambda x: x.mean(**kwargs), lambda x: x.mean(**kwargs))):
        try:
            want = fn_np(n)
        except Exception as e:          # noqa: BLE001 - the class is compared
            with pytest.raises(type(e)):
                fn_lz(a)
            continue
        got = fn_lz(a)
        _same_bits(numpy.asarray(got) if isinstance(got, lazynp.ndarray) else got, want)


def test_kmeans_distances_match_numpy():
    rng = numpy.random.default_rng(7)
    X, C = rng.standard_normal((600, 2)), rng.standard_normal((4, 2))
    want = ((X[:, None, :] - C[None, :, :]) ** 2).sum(axis=-1)
    Xl, Cl = lazynp.array(X), lazynp.array(C)
    got = ((Xl[:, None, :] - Cl[None, :, :]) ** 2).sum(axis=-1)
    _same_bits(numpy.asarray(got), want)
