"""Fused kernels' loads in the strided nd layout: specialised on each input's stride class.

A fused group whose inputs are not all C-contiguous arrays of the group's shape reads each
input from its owner's flat buffer at an offset and per-dimension strides.  The generated
code spells out strides that are 0 (broadcast dimensions, extent 1) or 1 element (unit
stride) and reads the others at run time (kernels/fused.py ``stride_kinds``); the kernel
cache key carries these classes, so a group seen with another layout gets its own kernel.

NumPy is the oracle: elementwise results must be bit-for-bit equal; sums may differ by the
summation order (README: fused reductions), compared with rtol 1e-12.
"""
from __future__ import annotations

import numpy
import pytest

import lazynp
from lazynp.kernels import cpu as kcpu
from lazynp.kernels import fused

pytestmark = pytest.mark.usefixtures("lazy_policy", "kernels_at_any_size")



@pytest.fixture
def sources(monkeypatch):
    """The source of every fused kernel asked for, in order."""
    seen: list = []
    real = kcpu.get_kernel

    def spy(source, args, block=False):
        seen.append(source)
        return real(source, args, block)

    monkeypatch.setattr(kcpu, "get_kernel", spy)
    return seen


def _run(fn, *arrays):
    """``fn`` on lazynp copies of ``arrays`` (computed first), forced; and on NumPy."""
    lazy_in = [lazynp.evaluate(lazynp.asarray(a)) for a in arrays]
    before = lazynp.stats()["fused_groups_run"]
    got = numpy.asarray(fn(*lazy_in))
    assert lazynp.stats()["fused_groups_run"] > before, "no fused kernel ran"
    return got, fn(*arrays)


def _loads(source: str) -> list:
    return [line.strip() for line in source.splitlines() if line.strip().startswith("v")
            and " = x" in line]


# --- the stride classes ----------------------------------------------------------------------

def test_stride_kinds_classify_broadcast_unit_and_runtime_strides():
    x = numpy.zeros((6, 8))
    shape = (3, 4)
    vals = [x[:3, :4], x[:3, :1], x[:1, :4], x[::2, 1::2], numpy.zeros(4)[::-1]]
    _, table = fused.strided_inputs(vals, shape)
    kinds = fused.stride_kinds(table, shape)
    R = fused.RUNTIME_STRIDE
    assert kinds == ((R, 1), (R, 0), (0, 1), (R, R), (0, R))


def test_stride_kinds_extent_one_dimension_is_a_zero_stride():
    x = numpy.zeros((1, 5))
    _, table = fused.strided_inputs([x[:, 1:4], x[:, :3]], (1, 3))
    assert fused.stride_kinds(table, (1, 3)) == ((0, 1), (0, 1))


# --- the generated loads -----------------------------------------------------------------------

def test_row_broadcast_input_is_read_without_inner_index(sources):
    rng = numpy.random.default_rng(0)
    x, y = rng.standard_normal((2, 40, 56))
    got, want = _run(lambda x, y: ((x - x.max(axis=1, keepdims=True)) * y).sum(axis=1), x, y)
    numpy.testing.assert_allclose(got, want, rtol=1e-12)
    loads = _loads(sources[-1])
    # x and y: unit stride along the inner axis; the row maxima (a (40, 1) column): no
    # term for the inner axis, and a unit stride along the outer one
    assert "v0 = x0[base0 + np.uint64(i0) * s0_0 + np.uint64(i1)]" in loads
    assert "v1 = x1[base1 + np.uint64(i0)]" in loads, loads
    assert not any("* s0_1" in load or "* s1_1" in load or "* s2_1" in load for load in loads)


def test_column_broadcast_and_leading_reduction_values(sources):
    rng = numpy.random.default_rng(1)
    x, y = rng.standard_normal((2, 70, 130))
    v = rng.standard_normal(130)
    got, want = _run(lambda x, y, v: ((x - v) * y).sum(axis=0), x, y, v)
    numpy.testing.assert_allclose(got, want, rtol=1e-12)
    source = sources[-1]
    # the row of the broadcast vector: no term for the outer axis
    assert any(load.endswith("base1 + np.uint64(i1)]") for load in _loads(source)), source
    # the leading reduction's column block bounds are unsigned (no negative-index test
    # on the accumulator row, so its loop vectorizes)
    assert "lo = np.uint64(blk * 64)" in source


@pytest.mark.parametrize("view", ["contiguous", "step2", "reversed", "transposed"])
def test_layouts_each_get_their_own_kernel_with_numpys_values(sources, view):
    rng = numpy.random.default_rng(2)
    base = rng.standard_normal((48, 64))
    m = rng.standard_normal((24, 1))
    pick = {"contiguous": lambda a: a[:24, :32], "step2": lambda a: a[::2, ::2],
            "reversed": lambda a: a[:24, ::-1][:, :32], "transposed": lambda a: a.T[:24, :32]}

    def fn(b, m):
        x = pick[view](b)
        return (x - m) * 2.0 + x * x

    got, want = _run(fn, base, m)
    numpy.testing.assert_array_equal(got, want)
    assert sources


def test_cache_key_distinguishes_stride_classes(sources):
    """One group structure over inputs of different stride classes: a kernel for each,
    each giving NumPy's values (a kernel reused across classes would read wrong elements)."""
    rng = numpy.random.default_rng(3)
    base = rng.standard_normal((32, 64))
    col = rng.standard_normal((16, 1))
    results = []
    for pick in (lambda b: b[:16, :32], lambda b: b[:16, ::2], lambda b: b[:16, :1]):
        got, want = _run(lambda b, c: ((pick(b) - c) * pick(b)).sum(axis=1), base, col)
        numpy.testing.assert_allclose(got, want, rtol=1e-12)
        results.append(sources[-1])
    assert len(set(results)) == 3
    assert "np.uint64(i1) * s0_1" in results[1] and "np.uint64(i1) * s0_1" not in results[0]


def test_three_dimensional_broadcasts(sources):
    rng = numpy.random.default_rng(4)
    x = rng.standard_normal((6, 7, 9))
    a = rng.standard_normal((6, 1, 9))
    b = rng.standard_normal((1, 7, 1))
    got, want = _run(lambda x, a, b: ((x * a + b) * x[:, ::-1]).sum(axis=2), x, a, b)
    numpy.testing.assert_allclose(got, want, rtol=1e-12)
    got, want = _run(lambda x, a, b: ((x - a) * b).max(axis=(0, 2)), x, a, b)
    numpy.testing.assert_array_equal(got, want)
