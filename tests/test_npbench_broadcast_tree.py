"""The tree-kernel decision of a medium broadcast op (issue 36: conv2d's and resnet's
``x[:, i:i + K, j:j + K, :, None] * w[None]`` paid ``numpy.broadcast_shapes``, about 5 us, at
every call, for the C recorder's question "does this op join a tree kernel?"; the C recorder
now broadcasts the two shapes itself).  The decision follows the result's size as
lazynp.core.policy.decide says, the values and errors are NumPy's.  No timing here.
"""
from __future__ import annotations

import numpy
import pytest

import lazynp
from lazynp.core import policy, state

PAIRS = [
    ((256, 1), (1, 1024)), ((1024,), (256, 1)), ((4, 64, 1, 16), (64, 32, 1)),
    ((2, 256, 512), (512,)), ((512,), (2, 256, 512)), ((8, 5, 5, 3, 1), (1, 5, 5, 3, 8)),
    ((1, 1, 300_000), (1,)), ((300, 1, 1000), (1, 1)), ((3, 1), (1, 5)), ((), (200_000,)),
]


@pytest.fixture
def no_line_feedback():
    """Each case starts with no line marked lone: the cases share one line, whose trees of
    one op read at once make it run at once from the second on (core/trees.py), once its
    kernel is ready (loaded from the disk cache at its first use)."""
    saved = [(d, dict(d)) for d in (state.lone_sites, state.lone_counts)]
    for d, _ in saved:
        d.clear()
    yield
    for d, items in saved:
        d.clear()
        d.update(items)


@pytest.mark.parametrize("sa,sb", PAIRS)
def test_broadcast_op_decision_and_values(sa, sb, no_line_feedback):
    rng = numpy.random.default_rng(1)
    a, b = rng.random(sa), rng.random(sb)
    expected = a * b
    got = lazynp.array(a) * lazynp.array(b)
    assert got.shape == expected.shape and got.dtype == expected.dtype
    n = expected.size
    tree_from = min(policy.TREE_MIN_ELEMS, policy.EAGER_MAX_ELEMS)
    if n < tree_from:
        assert got._eager_value() is not None, "small work runs at once"
    elif n < policy.EAGER_MAX_ELEMS and a.ndim and b.ndim:
        assert got._eager_value() is None, "medium work joins a tree kernel"
    numpy.testing.assert_array_equal(numpy.asarray(got), expected)


@pytest.mark.parametrize("sa,sb", [((600, 300), (7, 300)), ((2, 300, 400), (3, 1, 400)),
                                   ((400, 500), (400,))])
def test_broadcast_mismatch_raises_numpys_error(sa, sb):
    a, b = numpy.ones(sa), numpy.ones(sb)
    with pytest.raises(ValueError) as want:
        a * b
    with pytest.raises(ValueError) as got:
        lazynp.array(a) * lazynp.array(b)
    assert str(got.value) == str(want.value)
