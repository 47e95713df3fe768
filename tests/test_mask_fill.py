"""``a[mask] = scalar``: a boolean mask of the array's shape with a scalar of its type is
filled in C without branches (``lazynp.array.indexing.assign``).  Every result must be NumPy's bit
for bit (the elements under the mask get the scalar, the others keep theirs), for every dtype,
layout and scalar form, and NumPy's errors and warnings must come where NumPy gives them
(those forms take NumPy's own assignment)."""
from __future__ import annotations

import warnings

import numpy
import pytest

import lazynp
from lazynp.array import indexing as _indexing

DTYPES = ["float64", "float32", "int8", "uint8", "int16", "uint16", "int32", "uint32",
          "int64", "uint64", "bool", "complex128", "float16"]
SCALARS = [0, 1, -1, 7, 200, 300, -129, 2 ** 40, 2 ** 64, 2.5, -0.0, 1e300, float("nan"),
           float("inf"), True, False, numpy.float32(1.5), numpy.float64(2.25), numpy.int8(-3),
           numpy.uint8(250), numpy.int64(12), numpy.bool_(True), 1 + 2j, numpy.float32(0.1),
           0.1]


def _block(rng, dtype, shape):
    if numpy.dtype(dtype).kind == "b":
        return rng.random(shape) < 0.5
    if numpy.dtype(dtype).kind in "iu":
        info = numpy.iinfo(dtype)
        return rng.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)
    return (rng.standard_normal(shape) * 100).astype(dtype)


VIEWS = {"c": lambda b: b, "rows": lambda b: b[1:-1, 2:], "strided": lambda b: b[::2, ::3],
         "column": lambda b: b[:, 3], "row": lambda b: b[2], "reversed": lambda b: b[::-1],
         "transposed": lambda b: b.T}


def _outcome(fn):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            fn()
        except Exception as e:          # noqa: BLE001 - the class is compared
            return type(e), [str(w.message) for w in caught]
    return None, [str(w.message) for w in caught]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("view", list(VIEWS))
def test_masked_scalar_writes_equal_numpy(dtype, view):
    rng = numpy.random.default_rng(abs(hash((dtype, view))) % 2 ** 32)
    for value in SCALARS:
        block = _block(rng, dtype, (9, 14))
        target = VIEWS[view](block)
        mask = rng.random(target.shape) < 0.4
        want_block = block.copy()
        want = _outcome(lambda: VIEWS[view](want_block).__setitem__(mask, value))
        got_block = block.copy()
        got = _outcome(lambda: _indexing.assign(VIEWS[view](got_block), mask, value))
        assert got == want, (dtype, view, value)
        assert got_block.tobytes() == want_block.tobytes(), (dtype, view, value)
        # and through lazynp arrays (computed at once, and a large one)
        lz_block = lazynp.array(block)
        lz = _outcome(lambda: VIEWS[view](lz_block).__setitem__(lazynp.array(mask), value))
        assert lz == want, (dtype, view, value)
        assert numpy.asarray(lz_block).tobytes() == want_block.tobytes(), (dtype, view, value)


def test_other_masks_and_targets_take_numpys_assignment():
    rng = numpy.random.default_rng(3)
    a = rng.standard_normal((6, 8))
    cases = [
        (a, rng.random(6) < 0.5, 1.0),                       # a mask over the rows
        (a, (rng.random((6, 8)) < 0.5).astype(numpy.uint8), 1.0),   # not a boolean mask
        (a, rng.random((6, 8)) < 0.5, numpy.array([1.0])),   # an array value
        (a, rng.random((6, 8)) < 0.5, numpy.arange(48.0)),   # wrong size: NumPy's error
        (a[None], rng.random((1, 6, 8)) < 0.5, 2.0),         # 3-D
        (numpy.broadcast_to(a[0], (6, 8)), rng.random((6, 8)) < 0.5, 1.0),   # read-only
        (numpy.zeros((0, 3)), numpy.zeros((0, 3), bool), 1.0),
    ]
    for target, mask, value in cases:
        want_t = target.copy() if target.flags.writeable else target
        want = _outcome(lambda: want_t.__setitem__(mask, value))
        got_t = target.copy() if target.flags.writeable else target
        got = _outcome(lambda: _indexing.assign(got_t, mask, value))
        assert got == want
        assert numpy.array_equal(got_t, want_t, equal_nan=True)


def test_mask_bytes_other_than_one_count_as_true():
    target = numpy.arange(10.0)
    mask = numpy.array([0, 1, 2, 255, 0, 0, 7, 0, 1, 0], numpy.uint8).view(bool)
    want = target.copy()
    want[mask] = -1.0
    _indexing.assign(target, mask, -1.0)
    assert target.tobytes() == want.tobytes()


@pytest.mark.skipif(_indexing._mask_fill is None, reason="the C extension is not used")
def test_the_c_fill_applies_where_documented():
    a = numpy.zeros((5, 7))
    m = numpy.ones((5, 7), bool)
    assert _indexing._mask_fill(a, m, 2.0) and (a == 2.0).all()
    assert not _indexing._mask_fill(a, m, 3)              # an int into float64: NumPy's
    assert not _indexing._mask_fill(a.T, m.T, 2.0)         # column-major: NumPy's
    assert not _indexing._mask_fill(a.astype(numpy.float32), m, 0.1)   # not exact in float32
    assert _indexing._mask_fill(a.astype(numpy.float32), m, 0.5)
    assert not _indexing._mask_fill(numpy.zeros(5, numpy.int8), numpy.ones(5, bool), 300)
