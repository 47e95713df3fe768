"""A sum of a product of two broadcast arrays runs as a contraction (kernels/contraction.py).

The rule: ``sum(a * b, axes)`` where every summed axis is spanned by both operands and no
kept axis by both is a tensor contraction; it runs through ``tensordot`` when the product
has at least ``MIN_INTENSITY`` elements per element read or written.

Values: NumPy is the oracle within the rounding bound of any summation order (README, "What
differs from NumPy": fused reductions sum in another order): for ``n`` terms,
``|got - exact| <= n * eps * sum(|terms|)``, checked here against both NumPy's result and
the exact sum (in float128 where the platform has it, else ``math.fsum`` of float64 terms).
"""
from __future__ import annotations

import warnings

import numpy
import pytest

import lazynp
from lazynp.kernels import contraction

pytestmark = pytest.mark.usefixtures("lazy_policy", "kernels_at_any_size")



def _contractions() -> int:
    return lazynp.stats()["contractions_run"]


def _within_summation_bound(got, a, b, axes, dtype) -> None:
    """``got`` is ``sum(a * b, axes)`` within ``n * eps * sum(|a * b|)`` of the exact sum."""
    wide = numpy.longdouble
    terms = a.astype(wide) * b.astype(wide)
    exact = terms.sum(axis=axes).reshape(got.shape)
    bound_terms = numpy.abs(terms).sum(axis=axes).reshape(got.shape)
    n = terms.size // max(exact.size, 1)
    eps = numpy.finfo(dtype).eps
    err = numpy.abs(got.astype(wide) - exact)
    assert (err <= n * eps * bound_terms + numpy.finfo(dtype).tiny).all(), \
        float((err / numpy.maximum(bound_terms, 1e-300)).max())


# --- the rule ---------------------------------------------------------------------------------

def test_plan_of_a_convolution_step():
    # x[:, i:i+K, j:j+K, :, None] * w[None] over (N, K, K, Cin, Cout), summed over 1, 2, 3
    shape = (8, 5, 5, 3, 8)
    p = contraction.plan(shape, (8, 5, 5, 3, 1), (1, 5, 5, 3, 8), (1, 2, 3))
    assert p == ((1, 2, 3), (0, 1, 2), (0,), (4,), (0, 1))


def test_plan_refuses_batch_axes_one_sided_sums_and_little_work():
    # a kept axis both span (a batched product): not a tensordot
    assert contraction.plan((4, 6, 5), (4, 6, 1), (4, 6, 5), (1,)) is None
    # a summed axis only one operand spans
    assert contraction.plan((6, 5), (6, 5), (1, 5), (0,)) is None
    # same shapes, summed: every element used once (a batched dot), not a contraction
    assert contraction.plan((100, 50), (100, 50), (100, 50), (1,)) is None
    # an outer product summed over a length-2 axis: 2 multiply-adds per element moved
    # at most, below the bound
    assert contraction.plan((1000, 1, 1000), (1000, 1, 1), (1, 1, 1000), (1,)) is None


def test_plan_orders_the_result_like_the_sum():
    # b's free axis comes before a's in the product: the result is transposed back
    p = contraction.plan((7, 40, 9), (1, 40, 9), (7, 40, 1), (1,))
    assert p is not None and p[4] == (1, 0)


# --- values ------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [numpy.float64, numpy.float32])
def test_convolution_steps_match_numpy_within_the_summation_bound(dtype):
    rng = numpy.random.default_rng(0)
    N, H, Cin, Cout, K = 8, 12, 3, 8, 5
    x = rng.standard_normal((N, H, H, Cin)).astype(dtype)
    w = rng.standard_normal((K, K, Cin, Cout)).astype(dtype)
    lx, lw = lazynp.asarray(x), lazynp.asarray(w)
    before = _contractions()
    for i, j in [(0, 0), (3, 4), (7, 7)]:
        got = numpy.asarray(lazynp.sum(lx[:, i:i + K, j:j + K, :, None] * lw[None],
                                       axis=(1, 2, 3)))
        a, b = x[:, i:i + K, j:j + K, :, None], w[None]
        want = numpy.sum(a * b, axis=(1, 2, 3))
        assert got.dtype == want.dtype and got.shape == want.shape
        _within_summation_bound(got, a, b, (1, 2, 3), dtype)
        _within_summation_bound(want, a, b, (1, 2, 3), dtype)
    assert _contractions() == before + 3


@pytest.mark.parametrize("keepdims", [False, True])
def test_transposed_result_and_keepdims(keepdims):
    rng = numpy.random.default_rng(1)
    a = rng.standard_normal((40, 9))
    b = rng.standard_normal((7, 40))
    before = _contractions()
    got = numpy.asarray((lazynp.asarray(a)[None] * lazynp.asarray(b)[:, :, None]).sum(
        axis=1, keepdims=keepdims))
    want = (a[None] * b[:, :, None]).sum(axis=1, keepdims=keepdims)
    assert got.shape == want.shape
    _within_summation_bound(got, a[None], b[:, :, None], 1, numpy.float64)
    assert _contractions() == before + 1


def test_matrix_product_written_as_broadcast_sum():
    rng = numpy.random.default_rng(2)
    a = rng.standard_normal((30, 20))
    b = rng.standard_normal((20, 25))
    before = _contractions()
    got = numpy.asarray((lazynp.asarray(a)[:, :, None] * lazynp.asarray(b)).sum(axis=1))
    numpy.testing.assert_allclose(got, a @ b, rtol=1e-12, atol=1e-12)
    _within_summation_bound(got, a[:, :, None], b, 1, numpy.float64)
    assert _contractions() == before + 1


def test_overflow_runs_on_numpy_with_its_warning():
    a = numpy.full((20, 30), 1e200)
    b = numpy.full((30, 10), 1e200)
    before = lazynp.stats()["contractions_rejected"]
    with pytest.warns(RuntimeWarning, match="overflow"):
        got = numpy.asarray((lazynp.asarray(a)[:, :, None] * lazynp.asarray(b)).sum(axis=1))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = (a[:, :, None] * b).sum(axis=1)
    numpy.testing.assert_array_equal(got, want)
    assert lazynp.stats()["contractions_rejected"] == before + 1


def test_nan_inputs_give_numpys_nans():
    rng = numpy.random.default_rng(3)
    a = rng.standard_normal((20, 30))
    a[3, 4] = numpy.nan
    b = rng.standard_normal((30, 10))
    got = numpy.asarray((lazynp.asarray(a)[:, :, None] * lazynp.asarray(b)).sum(axis=1))
    want = (a[:, :, None] * b).sum(axis=1)
    assert numpy.array_equal(numpy.isnan(got), numpy.isnan(want))
    numpy.testing.assert_allclose(got[~numpy.isnan(want)], want[~numpy.isnan(want)],
                                  rtol=1e-12)


def test_product_read_elsewhere_is_not_contracted():
    rng = numpy.random.default_rng(4)
    a = rng.standard_normal((20, 30))
    b = rng.standard_normal((30, 10))
    before = _contractions()
    p = lazynp.asarray(a)[:, :, None] * lazynp.asarray(b)
    s = p.sum(axis=1)
    got_p, got_s = numpy.asarray(p), numpy.asarray(s)
    numpy.testing.assert_array_equal(got_p, a[:, :, None] * b)
    numpy.testing.assert_allclose(got_s, (a[:, :, None] * b).sum(axis=1), rtol=1e-12)
    assert _contractions() == before


def test_integers_stay_exact_and_uncontracted():
    rng = numpy.random.default_rng(5)
    a = rng.integers(-1000, 1000, (20, 30))
    b = rng.integers(-1000, 1000, (30, 10))
    before = _contractions()
    got = numpy.asarray((lazynp.asarray(a)[:, :, None] * lazynp.asarray(b)).sum(axis=1))
    numpy.testing.assert_array_equal(got, (a[:, :, None] * b).sum(axis=1))
    assert _contractions() == before
