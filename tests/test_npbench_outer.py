"""``outer`` as NumPy defines it, a broadcast multiply, so that a large product fuses with the
work around it (issue 36: NPBench's gemver, ``A += np.outer(u1, v1) + np.outer(u2, v2)``, ran
each product as a separate pass over the matrix).  Values, dtypes and shapes are NumPy's;
the policy decisions: below the size bound ``outer`` runs at once, from it the product is
recorded and joins the fused kernel of the update.  No timing here.
"""
from __future__ import annotations

import numpy
import pytest

import lazynp
from lazynp.core import policy


def _rank2_update(np, A, u1, v1, u2, v2):
    A += np.outer(u1, v1) + np.outer(u2, v2)
    return A


@pytest.fixture
def small_bound():
    """A size bound of 2^12 elements, so that a 100 x 100 product counts as large."""
    old = policy.EAGER_MAX_ELEMS
    policy.set_eager_max_elems(1 << 12)
    yield 1 << 12
    policy.set_eager_max_elems(old)


@pytest.mark.parametrize("a,b", [
    (numpy.arange(100.0), numpy.linspace(-1.0, 1.0, 90)),
    (numpy.arange(100), numpy.arange(90, dtype=numpy.int8)),
    (numpy.arange(100, dtype=numpy.float32), numpy.arange(90, dtype=numpy.float64)),
    (numpy.arange(100) * (1 + 2j), numpy.arange(90.0)),
    (numpy.arange(120.0).reshape(10, 12), numpy.arange(60.0).reshape(3, 4, 5)),
    (numpy.arange(100) % 2 == 0, numpy.arange(90) % 3 == 0),
    (numpy.float64(2.5), numpy.arange(5000.0)),
])
def test_large_outer_is_numpys(small_bound, a, b):
    got = lazynp.outer(lazynp.array(a), lazynp.array(b))
    expected = numpy.outer(a, b)
    assert got.shape == expected.shape and got.dtype == expected.dtype
    numpy.testing.assert_array_equal(numpy.asarray(got), expected)


@pytest.mark.parametrize("a,b", [(3, 4), ([1, 2], [[3, 4]]), (numpy.arange(4.0), [1j, 2]),
                                 (numpy.arange(0.0), numpy.arange(3.0))])
def test_small_outer_is_numpys(a, b):
    got = lazynp.outer(a, b)
    expected = numpy.outer(a, b)
    assert type(got) is lazynp.ndarray
    assert got.shape == expected.shape and got.dtype == expected.dtype
    numpy.testing.assert_array_equal(numpy.asarray(got), expected)


def test_small_outer_runs_at_once():
    got = lazynp.outer(lazynp.arange(30.0), lazynp.arange(20.0))
    assert got._eager_value() is not None


def test_large_outer_is_recorded_and_fuses_with_the_update():
    n = 1000                    # (n * n is at the default size bound, n is far below it)
    assert n < policy.EAGER_MAX_ELEMS <= n * n
    rng = numpy.random.default_rng(0)
    A, u1, v1, u2, v2 = (rng.standard_normal(s) for s in ((n, n), n, n, n, n))
    expected = _rank2_update(numpy, A.copy(), u1, v1, u2, v2)
    lA = lazynp.array(A)
    got = _rank2_update(lazynp, lA, *(lazynp.array(x) for x in (u1, v1, u2, v2)))
    assert got is lA
    assert got._eager_value() is None, "the update should be pending, not run at once"
    report = lazynp.explain(got)
    kernels = [[report.symbol.nodes[i].op for i in g] for g in report.kernels]
    assert kernels == [["multiply", "multiply", "add", "add"]], kernels
    numpy.testing.assert_allclose(numpy.asarray(got), expected, rtol=1e-15, atol=0)


def test_outer_with_out_is_numpys():
    out = lazynp.zeros((3, 4))
    r = lazynp.outer(lazynp.arange(3.0), lazynp.arange(4.0), out=out)
    assert r is out
    numpy.testing.assert_array_equal(numpy.asarray(out), numpy.outer(numpy.arange(3.0),
                                                                     numpy.arange(4.0)))


def test_outer_gradient_flows():
    u, v = numpy.arange(1.0, 4.0), numpy.arange(1.0, 5.0)
    gu = lazynp.grad(lambda x: lazynp.sum(lazynp.outer(x, lazynp.array(v)) ** 2))(
        lazynp.array(u))
    numpy.testing.assert_allclose(numpy.asarray(gu), 2 * u * numpy.sum(v ** 2))


# --- ufunc.outer (floyd_warshall's ``np.minimum(path, np.add.outer(path[:, k], path[k, :]))``):
# values only; it still runs at once (tests/test_npbench_cliffs.py has its policy)

def _shortest_paths(np, path):
    for k in range(path.shape[0]):
        path[:] = np.minimum(path[:], np.add.outer(path[:, k], path[k, :]))
    return path


@pytest.mark.parametrize("n", [12, 400])
def test_ufunc_outer_in_a_shortest_path_loop_is_numpys(n):
    rng = numpy.random.default_rng(3)
    p = rng.integers(-3, 100, (n, n)).astype(numpy.int32)   # (negative entries: the order of
    p[rng.random((n, n)) < 0.3] = 999                        # the in-place writes matters)
    expected = _shortest_paths(numpy, p.copy())
    got = _shortest_paths(lazynp, lazynp.array(p))
    numpy.testing.assert_array_equal(numpy.asarray(got), expected)


@pytest.mark.parametrize("name", ["add", "multiply", "subtract", "maximum", "less", "power"])
@pytest.mark.parametrize("sa,sb", [((400,), (400,)), ((20, 20), (400,)), ((3,), (4, 5)),
                                   ((300,), (2, 400))])
def test_ufunc_outer_is_numpys(name, sa, sb):
    rng = numpy.random.default_rng(4)
    a, b = rng.random(sa) + 0.5, rng.random(sb) + 0.5
    expected = getattr(numpy, name).outer(a, b)
    got = getattr(lazynp, name).outer(lazynp.array(a), lazynp.array(b))
    assert got.shape == expected.shape and got.dtype == expected.dtype
    numpy.testing.assert_array_equal(numpy.asarray(got), expected)

