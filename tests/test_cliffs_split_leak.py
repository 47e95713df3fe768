"""The split helper thread (lazynp/_base/split.py) keeps no array of a finished split: its
loop's names held the last job's operands and output until the next split (clipping at L
kept two 2 GB arrays alive after its call)."""
import gc
import weakref

import numpy
import pytest

from lazynp._base import split as _split

pytestmark = pytest.mark.skipif(not _split.enabled, reason="single core or LAZYNP_SPLIT=0")


def test_the_helper_keeps_no_array_of_a_finished_split():
    a = numpy.random.default_rng(5).standard_normal(3 << 20)
    r = _split.call(numpy.multiply, (a, 2.0))
    assert r is not None, "the call was not split"
    numpy.testing.assert_array_equal(r, a * 2.0, strict=True)
    alive = [weakref.ref(a), weakref.ref(r)]
    del a, r
    gc.collect()
    assert [w() is None for w in alive] == [True, True]
