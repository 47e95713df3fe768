"""``a += b`` into a large whole array that only lazynp holds is recorded as the array's next
version, an elementwise node (lazynp._numpy.ufunc._new_version): chains of in-place updates fuse
into one loop, and NumPy's in-place semantics hold (views see the writes, buffers shared
with the caller are written in place, copies taken before keep the old values)."""
import numpy
import pytest

import lazynp
from lazynp.kernels import cpu

N, K, H = 40, 8, 60          # out: 40 x 8 x 60 x 60 = 1.15M elements (recorded)


def _conv_like(np, parts, bias):
    out = np.zeros((N, K, H, H))
    for t in parts:
        out += t.transpose(0, 3, 1, 2)
    out += bias[:, None, None]
    return np.maximum(out, 0.0)


def _parts(seed=0, count=5):
    rng = numpy.random.default_rng(seed)
    return [rng.standard_normal((N, H, H, K)) for _ in range(count)], rng.standard_normal(K)


def test_chain_of_in_place_updates_fuses_and_equals_numpy():
    parts, bias = _parts()
    expected = _conv_like(numpy, parts, bias)
    lazy_parts = [lazynp.array(p) for p in parts]      # (owned by lazynp, as results are)
    lazynp.evaluate(_conv_like(lazynp, lazy_parts, lazynp.asarray(bias)))
    cpu.wait_compiles()               # (the first flush compiled the kernel in the background)
    before = _fused_work()
    got = _conv_like(lazynp, lazy_parts, lazynp.asarray(bias))
    numpy.testing.assert_array_equal(numpy.asarray(got), expected, strict=True)
    assert _fused_work() - before in (1, 2)       # (one or two loops, not six NumPy calls)


def _fused_work():
    s = lazynp.stats()
    return s.get("fused_groups_run", 0) + s.get("tree_kernels_run", 0)


def test_views_and_copies_see_numpys_values():
    def program(np):
        a = np.arange(N * K * H * H, dtype=np.float64).reshape(N, K, H, H) * 0.5
        row = a[3]                     # a view made before the writes: sees them
        before = a.copy()              # a copy: keeps the old values
        total = a.sum()                # a reduction of the old version
        a += 1.0
        a *= a
        a -= np.ones((K, H, H))        # a broadcast operand
        return [a, row, before, total, row.sum()]
    for got, expected in zip(program(lazynp), program(numpy)):
        numpy.testing.assert_array_equal(numpy.asarray(got), numpy.asarray(expected),
                                         strict=True)


def test_shared_buffers_and_casts_stay_writes():
    # a buffer the caller holds, written in place
    base = numpy.zeros((N * K * H * H,))
    shared = lazynp.asarray(base)
    shared += 2.5
    lazynp.evaluate(shared)
    assert base[0] == 2.5 and base[-1] == 2.5
    # an exported array (the caller took its NumPy value), then updated
    a = lazynp.zeros(N * K * H * H) + 1.0
    exported = numpy.asarray(a)
    a += 1.0
    numpy.testing.assert_array_equal(numpy.asarray(a), numpy.full(a.shape, 2.0))
    assert numpy.asarray(a) is exported or exported[0] in (1.0, 2.0)
    # a float32 target with a float64 operand: NumPy's cast on output
    f = lazynp.asarray(numpy.ones(N * K * H * H, numpy.float32)) * numpy.float32(3)
    f += numpy.full(f.shape, 1 / 3)
    ref = numpy.ones(f.shape, numpy.float32) * numpy.float32(3)
    ref += numpy.full(ref.shape, 1 / 3)
    numpy.testing.assert_array_equal(numpy.asarray(f), ref, strict=True)
    # where= keeps the write
    w = lazynp.zeros(N * K * H * H) + 1.0
    mask = numpy.arange(w.shape[0]) % 3 == 0
    lazynp.add(w, 1.0, out=w, where=mask)
    numpy.testing.assert_array_equal(numpy.asarray(w), numpy.where(mask, 2.0, 1.0))


def test_warnings_of_a_fused_in_place_chain_are_numpys():
    def program(np):
        a = np.full((N * K * H * H,), 1e300)
        a *= 1e10
        a += 1.0
        return a
    with pytest.warns(RuntimeWarning, match="overflow"):
        expected = program(numpy)
    with pytest.warns(RuntimeWarning, match="overflow"):
        got = numpy.asarray(program(lazynp))
    numpy.testing.assert_array_equal(got, expected, strict=True)
