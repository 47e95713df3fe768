"""Flush plans (lazynp/cuda/flush_plan.py): a flush of a structure seen before replays the
kept fusion and kernel layout; anything that changes the kernels gives a fresh plan, and
every result equals NumPy's."""
from __future__ import annotations

import _cuda_sim  # noqa: F401  (sets NUMBA_ENABLE_CUDASIM before numba.cuda is imported)
import numpy as np
import pytest

import lazynp as lnp
from lazynp.cuda import flush_plan

RNG = np.random.default_rng(7)


@pytest.fixture(autouse=True)
def _no_plans():
    flush_plan.clear()
    yield
    flush_plan.clear()


def dev(x):
    return lnp.asarray(x, device="cuda")


def run(make):
    """``make()``'s device result(s) evaluated: (host values, new plans, replays)."""
    plans = flush_plan.STATS["device_flush_plans"]
    replays = flush_plan.STATS["device_flush_replays"]
    out = make()
    outs = out if isinstance(out, tuple) else (out,)
    lnp.evaluate(*outs)
    new = (flush_plan.STATS["device_flush_plans"] - plans,
           flush_plan.STATS["device_flush_replays"] - replays)
    return tuple(np.asarray(o) for o in outs), new


def same(got: tuple, want):
    want = want if isinstance(want, tuple) else (want,)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        w = np.asarray(w)
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, g.dtype, w.shape, w.dtype)
        if g.dtype.kind == "f":         # (a reduction's summation order: not NumPy's)
            np.testing.assert_allclose(g, w, rtol=1e-12 if g.dtype.itemsize == 8 else 1e-6)
        else:
            np.testing.assert_array_equal(g, w)


def test_a_repeated_structure_replays_with_the_new_values():
    a, b, c = (RNG.standard_normal(64) for _ in range(3))
    da, db, dc = dev(a), dev(b), dev(c)
    got, new = run(lambda: da * db + dc * 2.5)
    same(got, a * b + c * 2.5)
    assert new == (1, 0)
    for k in range(3):        # (other constants, other arrays of the same kind: one plan)
        x, y = RNG.standard_normal(64), RNG.standard_normal(64)
        got, new = run(lambda: dev(x) * dev(y) + dc * (3.5 + k))
        same(got, x * y + c * (3.5 + k))
        assert new == (0, 1)


def _f64(*shape):
    return RNG.standard_normal(shape)


A, B = _f64(4, 6), _f64(4, 6)
A32, B32 = A.astype(np.float32), B.astype(np.float32)
I8 = RNG.integers(-100, 100, (4, 6)).astype(np.int8)

#: (name, the first flush, a flush that must not reuse its plan): functions of a namespace
#: (lnp on device arrays, np on host arrays) and a converter (dev or the identity)
CHANGES = {
    "dtype": (lambda m, d: d(A) * d(B) + 1.5, lambda m, d: d(A32) * d(B32) + 1.5),
    "shape": (lambda m, d: d(A) * d(B) + 1.5, lambda m, d: d(A[:3]) * d(B[:3]) + 1.5),
    "broadcast": (lambda m, d: d(A) * d(B) + 1.5, lambda m, d: d(A) * d(B[0]) + 1.5),
    "broadcast-axis": (lambda m, d: d(A) * d(B[:, :1]) + 1.5,
                       lambda m, d: d(A) * d(B[:1, :]) + 1.5),
    "scalar-type": (lambda m, d: d(A32) * 2.0, lambda m, d: d(A32) * np.float64(2.0)),
    "scalar-bool": (lambda m, d: d(I8) + 1, lambda m, d: d(I8) + True),
    "int-range": (lambda m, d: d(I8) < 100, lambda m, d: d(I8) < 1000),
    "int-range-sign": (lambda m, d: d(I8) > 127, lambda m, d: d(I8) > -129),
    "square": (lambda m, d: d(A) ** 3, lambda m, d: d(A) ** 2),
    "square-float": (lambda m, d: d(A) ** 3.0, lambda m, d: d(A) ** 2.0),
    "numpy-scalar-dtype": (lambda m, d: d(I8) < np.int8(100),
                           lambda m, d: d(I8) < np.int16(300)),
    "view-offset": (lambda m, d: d(A)[1:] + d(B)[:-1], lambda m, d: d(A)[:-1] + d(B)[1:]),
    "view-transpose": (lambda m, d: d(A[:, :4]) + d(B[:, :4]),
                       lambda m, d: d(A[:, :4]).T + d(B[:, :4])),
    "reduction-axis": (lambda m, d: (d(A) * d(B)).sum(axis=0),
                       lambda m, d: (d(A) * d(B)).sum(axis=1)),
    "reduction-keepdims": (lambda m, d: (d(A) * d(B)).max(axis=1),
                           lambda m, d: (d(A) * d(B)).max(axis=1, keepdims=True)),
    "astype": (lambda m, d: d(A).astype(np.float32) + 1,
               lambda m, d: d(A).astype(np.int32) + 1),
}


@pytest.mark.parametrize("name", sorted(CHANGES))
def test_a_change_that_changes_the_kernels_gives_a_fresh_plan(name):
    first, changed = CHANGES[name]
    want_first, want_changed = first(np, np.asarray), changed(np, np.asarray)
    got, new = run(lambda: first(lnp, dev))
    same(got, want_first)
    assert new[0] >= 1
    got, new = run(lambda: first(lnp, dev))           # (the same structure: replayed)
    same(got, want_first)
    assert new == (0, 1)
    got, new = run(lambda: changed(lnp, dev))
    same(got, want_changed)
    assert new[1] == 0 and new[0] >= 1, name
    got, new = run(lambda: changed(lnp, dev))
    same(got, want_changed)
    assert new == (0, 1)


def test_which_inputs_are_already_computed_is_part_of_the_structure():
    a, b, c = _f64(32), _f64(32), _f64(32)
    da, db, dc = dev(a), dev(b), dev(c)
    got, new = run(lambda: da * db + dc)
    same(got, a * b + c)
    t = da * db
    lnp.evaluate(t)                       # (t computed: the next flush reads it)
    got, new = run(lambda: t + dc)
    same(got, a * b + c)
    assert new == (1, 0)


def test_an_intermediate_kept_alive_is_stored_by_the_replay():
    a, b = _f64(16), _f64(16)
    da, db = dev(a), dev(b)
    for k in range(3):
        t = da * db
        u = t + k
        got, new = run(lambda: u)
        same(got, a * b + k)
        same((np.asarray(t),), a * b)     # (t still referenced: its value was stored)
        assert new == ((1, 0) if k == 0 else (0, 1))
    u = da * db + 5                        # (no intermediate alive: another plan)
    got, new = run(lambda: u)
    same(got, a * b + 5)
    assert new == (1, 0)


def test_writes_replay_with_their_new_values_and_regions():
    base = _f64(5, 4)

    def write(row, value):
        x = dev(base)
        x[row] = value
        return x * 2

    got, new = run(lambda: write(1, 7.0))
    want = base.copy()
    want[1] = 7.0
    same(got, want * 2)
    got, new = run(lambda: write(1, -3.0))        # (same region, another value: replayed)
    want = base.copy()
    want[1] = -3.0
    same(got, want * 2)
    assert new == (0, 1)
    got, new = run(lambda: write(3, -3.0))        # (another region: a fresh plan)
    want = base.copy()
    want[3] = -3.0
    same(got, want * 2)
    assert new == (1, 0)


def test_int_kind_tells_the_dtype_ranges_apart():
    # (two ints of one kind fit exactly the same integer dtypes)
    bounds = [np.iinfo(t) for t in (np.int8, np.uint8, np.int16, np.uint16, np.int32,
                                     np.uint32, np.int64, np.uint64)]
    probes = [0, 1, -1, 2, 126, 127, 128, 129, 255, 256, -127, -128, -129, 32767, 32768,
              65535, 65536, -32768, -32769, 2**31 - 1, 2**31, 2**32 - 1, 2**32, -2**31,
              -2**31 - 1, 2**63 - 1, 2**63, 2**64 - 1, 2**64, -2**63, -2**63 - 1, 10**30]
    by_kind: dict = {}
    for v in probes:
        fits = tuple(b.min <= v <= b.max for b in bounds)
        assert by_kind.setdefault(flush_plan.int_kind(v), fits) == fits, v


def test_unplannable_arguments_run_every_time():
    a = _f64(8)
    da = dev(a)
    key = flush_plan.structure
    r = da + 1
    n = r._node()
    assert key([n], type(n), None) is not None
    args = n.args
    n.args = (args[0], [1])                   # (a list argument: no structure)
    try:
        assert key([n], type(n), None) is None
    finally:
        n.args = args
    same((np.asarray(r),), a + 1)


def test_a_replay_looks_its_kernels_up_at_each_launch(monkeypatch):
    # (a plan keeps kernel sources, not kernels: what compile_source gives now is launched)
    from lazynp.cuda import codegen

    class Failing:
        def __getitem__(self, config):
            def launch(*args):
                raise FloatingPointError("kernel failed")
            return launch

    a = _f64(4)
    da = dev(a)
    got, new = run(lambda: da * 7 + 3)
    same(got, a * 7 + 3)
    monkeypatch.setattr(codegen, "compile_source", lambda source: Failing())
    with pytest.raises(FloatingPointError, match="kernel failed"):
        run(lambda: da * 7 + 3)
    monkeypatch.undo()
    got, new = run(lambda: da * 7 + 3)
    same(got, a * 7 + 3)
    assert new == (0, 1)


def test_buffers_of_dead_intermediates_are_reused_on_replay():
    from lazynp.cuda import runtime
    a, b = _f64(8, 8), _f64(8, 8)
    da, db = dev(a), dev(b)
    for k in range(3):
        before = runtime.STATS["device_buffer_reuse"]
        # (the matmul runs on its own; its result, read by nothing else, is overwritten
        # by the kernel's output: decided anew at each replay)
        got, new = run(lambda: (da @ db) * 2 + k)
        same(got, (a @ b) * 2 + k)
        assert new == ((1, 0) if k == 0 else (0, 1))
        assert runtime.STATS["device_buffer_reuse"] - before == 1
    t = da @ db                               # (kept alive: its buffer is not taken)
    before = runtime.STATS["device_buffer_reuse"]
    got, new = run(lambda: t * 2 + 5)
    same(got, (a @ b) * 2 + 5)
    same((np.asarray(t),), a @ b)
    assert runtime.STATS["device_buffer_reuse"] == before and new == (1, 0)
