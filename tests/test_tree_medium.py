"""Medium elementwise work as tree kernels (lazynp.core.policy.decide, kernels/tree.py).

Between ``TREE_MIN_ELEMS`` and the size bound, elementwise ops on computed arrays, their
views and Python/NumPy float scalars are recorded into tree kernels: one cached loop run in
the calling thread when the value is read, written straight into an assigned region, or
joined by an in-place operator.  Every result must be NumPy's bit for bit, with NumPy's
warnings, and what joins no tree runs at once.
"""
from __future__ import annotations

import warnings

import numpy
import pytest
from hypothesis import given, settings, HealthCheck
from hypothesis import strategies as st

import lazynp
from lazynp._base import native
from lazynp.core import policy as _policy, graph
from lazynp.kernels import cpu, tree

N = 400 * 360          # 144,000 elements: above TREE_MIN_ELEMS, below the size bound


@pytest.fixture(autouse=True)
def compiled_now(monkeypatch):
    """Kernels compile in the calling thread: the tree path, not NumPy's stand-in, runs."""
    monkeypatch.setattr(cpu, "SYNC_COMPILE", True)
    assert _policy.TREE_MIN_ELEMS <= N < _policy.EAGER_MAX_ELEMS


def trees() -> int:
    return lazynp.stats()["tree_kernels_run"]


def exact(got, want):
    got = numpy.asarray(got)
    assert got.dtype == want.dtype and got.shape == want.shape
    numpy.testing.assert_array_equal(got, want, strict=True)


def grids(seed=0):
    rng = numpy.random.default_rng(seed)
    return rng.random((400, 360)), rng.random((400, 360))


def test_a_stencil_assigned_to_a_region_is_one_kernel_writing_it():
    a, b = grids()
    la, lb = lazynp.array(a), lazynp.array(b)
    before = trees()
    for m, x, y in ((numpy, a, b), (lazynp, la, lb)):
        for _ in range(3):
            y[1:-1, 1:-1] = 0.2 * (x[1:-1, 1:-1] + x[1:-1, :-2] + x[1:-1, 2:] + x[2:, 1:-1]
                                   + x[:-2, 1:-1])
            x[1:-1, 1:-1] = 0.2 * (y[1:-1, 1:-1] + y[1:-1, :-2] + y[1:-1, 2:] + y[2:, 1:-1]
                                   + y[:-2, 1:-1])
    assert trees() - before == 6
    exact(la, a)
    exact(lb, b)


def test_in_place_operators_on_trees_are_numpys():
    a, b = grids(1)
    la, lb = lazynp.array(a), lazynp.array(b)
    before = trees()
    for x, y in ((a, b), (la, lb)):
        x[1:, :] -= 0.5 * (y[1:, :] - y[:-1, :])
        x[:, 1:] += 0.25 * (y[:, 1:] - y[:, :-1]) * 3.0
        y[:-1, :-1] *= (x[:-1, 1:] - x[:-1, :-1]) + 2.0
    assert trees() - before == 3     # (the right sides; NumPy's in-place call after each)
    exact(la, a)
    exact(lb, b)


def test_a_region_read_shifted_by_its_own_update_is_numpys():
    """``u[1:] += 0.5 * (u[:-1] - v[1:])``: the region overlaps an input at another offset,
    so the kernel must not write it while reading (NumPy computes the right side first)."""
    rng = numpy.random.default_rng(2)
    u, v = rng.random(N), rng.random(N)
    lu, lv = lazynp.array(u), lazynp.array(v)
    for x, y in ((u, v), (lu, lv)):
        x[1:] += 0.5 * (x[:-1] - y[1:])
        x[:-1] = (x[1:] + y[:-1]) * 0.5
    exact(lu, u)


def test_a_temporary_the_program_keeps_is_not_the_region():
    a, b = grids(3)
    la, lb = lazynp.array(a), lazynp.array(b)
    t = (la[1:-1, 1:-1] + lb[1:-1, 1:-1]) * 0.5
    la[1:-1, 1:-1] = t
    la[1:-1, 1:-1] += 1.0
    want_t = (a[1:-1, 1:-1] + b[1:-1, 1:-1]) * 0.5
    exact(t, want_t)
    a[1:-1, 1:-1] = want_t
    a[1:-1, 1:-1] += 1.0
    exact(la, a)


def test_named_intermediates_are_written_by_the_same_kernel():
    """A game of life step: N, alive, birth and survive are held by the program when the
    mask is read; one kernel computes them all (none is recomputed later)."""
    rng = numpy.random.default_rng(4)
    z = (rng.random((370, 370)) < 0.3).astype(numpy.int8)
    lz = lazynp.array(z)
    out = []
    for Z in (z, lz):
        N_ = (Z[:-2, :-2] + Z[:-2, 1:-1] + Z[:-2, 2:] + Z[1:-1, :-2] + Z[1:-1, 2:]
              + Z[2:, :-2] + Z[2:, 1:-1] + Z[2:, 2:])
        alive = Z[1:-1, 1:-1] == 1
        birth = (N_ == 3) & ~alive
        survive = ((N_ == 2) | (N_ == 3)) & alive
        mask = birth | survive
        out.append((numpy.asarray(mask), N_, alive, birth, survive))
    before = trees()
    for w, g in zip(out[0][1:], out[1][1:]):
        exact(g, numpy.asarray(w))
    assert trees() == before, "an intermediate was recomputed after the mask was read"
    exact(out[1][0], out[0][0])


def test_numpy_float64_scalars_keep_numpys_dtypes():
    x32 = numpy.random.default_rng(5).random(N).astype(numpy.float32)
    lx = lazynp.array(x32)
    s = numpy.float64(0.1)
    before = trees()
    exact((lx * s + 1.0) * 2.0, (x32 * s + 1.0) * 2.0)          # float64 (a strong scalar)
    exact((lx * 0.1 + 1.0) * 2.0, (x32 * 0.1 + 1.0) * 2.0)      # float32 (a weak one)
    assert trees() - before == 2


def test_squares_are_trees_and_other_powers_run_at_once():
    x = numpy.random.default_rng(6).standard_normal(N)
    lx = lazynp.array(x)
    before = trees()
    exact(lx ** 2 + lx * 0.5, x ** 2 + x * 0.5)
    assert trees() - before == 1
    exact(lx ** 3 + lx * 0.5, x ** 3 + x * 0.5)
    exact(lx ** 2.5 - 1.0, x ** 2.5 - 1.0)


@pytest.mark.parametrize("fn", ["sin", "exp", "log", "tanh", "cos"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_libm_functions_are_numpys(fn, dtype):
    x = numpy.random.default_rng(7).random(N).astype(dtype) + 0.5
    lx = lazynp.array(x)
    f = getattr(numpy, fn)
    lf = getattr(lazynp, fn)
    exact(lf(lx * 2.0 + 0.25) * 3.0 - 1.0, f(x * 2.0 + 0.25) * 3.0 - 1.0)


def test_non_finite_values_give_numpys_warnings_at_the_line():
    a = numpy.random.default_rng(8).random(N)
    a[::7] = 0.0
    la = lazynp.array(a)
    b = numpy.zeros(N)
    lb = lazynp.array(b)
    with warnings.catch_warnings(record=True) as w_np:
        warnings.simplefilter("always")
        b[:] = (1.0 / a) * 2.0 - 1.0
    with warnings.catch_warnings(record=True) as w_lz:
        warnings.simplefilter("always")
        lb[:] = (1.0 / la) * 2.0 - 1.0
    exact(lb, b)
    assert [(x.category, str(x.message), x.lineno - w_np[0].lineno) for x in w_lz] == \
        [(x.category, str(x.message), x.lineno - w_np[0].lineno + 3) for x in w_np]


def test_in_place_with_non_finite_values_is_numpys():
    a = numpy.random.default_rng(9).random(N)
    b = a.copy()
    b[::5] = 0.0
    la, lb = lazynp.array(a), lazynp.array(b)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a -= 1.0 / b * 0.5
        la -= 1.0 / lb * 0.5
    exact(la, a)


def test_errors_raise_at_the_call_in_a_try_block():
    a = numpy.random.default_rng(10).random(N)
    a[3] = 0.0
    la = lazynp.array(a)
    with numpy.errstate(divide="raise"):
        with pytest.raises(FloatingPointError):
            (1.0 / la) * 2.0
    b = lazynp.array(numpy.ones(N))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(RuntimeWarning):
            b[:] = (1.0 / la) * 2.0
    exact(b, numpy.ones(N))          # NumPy's error leaves the target as it was


C_ONLY = pytest.mark.skipif(native.ext is None,
                            reason="what runs at once here is the C recorder's fast path")


@C_ONLY
def test_a_line_computed_alone_twice_runs_at_once_after():
    a, _ = grids(11)
    la = lazynp.array(a)
    want = a
    eager0, trees0 = lazynp.stats()["ops_eager"], trees()
    for k in range(5):
        d = la * 1.0001                 # read next as an element: a tree of this op alone
        la = d
        assert float(d[k, k]) == float((want * 1.0001)[k, k])
        want = want * 1.0001
    assert trees() - trees0 == 2                            # the first two steps
    assert lazynp.stats()["ops_eager"] - eager0 == 3        # then at once
    exact(la, want)


def test_arrays_out_of_memory_order_run_at_once():
    a, b = grids(12)
    la = lazynp.array(a).T
    before = trees()
    r = la * 2.0 + 1.0
    if native.ext is not None:   # (the pure Python recorder's results are C-ordered)
        assert trees() == before and graph.computed(r._node())
        assert numpy.asarray(r).flags.f_contiguous       # NumPy's layout kept
    exact(r, a.T * 2.0 + 1.0)


def test_nothing_is_a_tree_while_a_transform_records():
    x = numpy.random.default_rng(13).random(N)
    g = lazynp.grad(lambda v: ((v * 2.0 + 1.0) * v).sum())(lazynp.array(x))
    numpy.testing.assert_allclose(numpy.asarray(g), 4.0 * x + 1.0, rtol=1e-12)


_OPS = ["add", "sub", "mul", "div", "max", "cmp"]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(_OPS), st.integers(0, 2), st.integers(0, 2),
                          st.integers(0, 2), st.sampled_from(["assign", "inplace", "keep",
                                                               "read"])),
                min_size=1, max_size=12), st.integers(0, 3))
def test_random_programs_on_shared_buffers_equal_numpy(steps, seed):
    """Random sequences of medium elementwise expressions over shifted views of three
    buffers, assigned to regions, applied in place, kept or read, equal NumPy's."""
    rng = numpy.random.default_rng(seed)
    bufs = [rng.random((390, 360)) + 0.5 for _ in range(3)]
    lbufs = [lazynp.array(b) for b in bufs]
    regions = [(slice(1, -1), slice(1, -1)), (slice(2, None), slice(None, -2)),
               (slice(None, -2), slice(2, None))]
    for mod, B in ((numpy, bufs), (lazynp, lbufs)):
        kept = []
        for op, i, j, k, how in steps:
            x = B[i][regions[j]]
            y = B[(i + 1) % 3][regions[k]]
            if op == "add":
                e = x + y * 0.5
            elif op == "sub":
                e = (x - y) * 2.0
            elif op == "mul":
                e = x * y + 1.0
            elif op == "div":
                e = x / (y + 1.0)
            elif op == "max":
                e = mod.maximum(x, y) - 0.25
            else:
                e = (x < y) * 1.0 + x
            dest = B[k][regions[i]]
            if how == "assign":
                B[k][regions[i]] = e
            elif how == "inplace":
                dest -= e
            elif how == "keep":
                kept.append(e)
            else:
                kept.append(float(e.sum()))
        if mod is numpy:
            want = [b.copy() for b in B], kept
        else:
            got = [numpy.asarray(b) for b in B], [numpy.asarray(v) for v in kept]
    for w, g in zip(want[0], got[0]):
        exact(g, w)
    for w, g in zip(want[1], got[1]):
        exact(g, numpy.asarray(w))


def test_computed_inputs_broadcast_in_a_tree():
    """``np.minimum(d, d[:, k:k + 1] + d[k:k + 1, :])`` (Floyd-Warshall) and ``x - m``
    with a row of means: broadcast inputs are read at stride 0 in one kernel."""
    a, b = grids(14)
    a[::7, ::3] = numpy.inf                    # (no edge: infinities raise no flag)
    la, lb = lazynp.array(a), lazynp.array(b)
    before, rejected = trees(), lazynp.stats()["tree_kernels_rejected"]
    d, ld = a, la
    for k in range(4):
        d = numpy.minimum(d, d[:, k:k + 1] + d[k:k + 1, :])
        ld = lazynp.minimum(ld, ld[:, k:k + 1] + ld[k:k + 1, :])
    exact(ld, d)
    m = b.mean(axis=0)
    exact((lb - lazynp.asarray(m)) * 2.0 + lb[:, :1], (b - m) * 2.0 + b[:, :1])
    if native.ext is not None:     # (the C recorder reads views of pending arrays so)
        assert trees() - before == 5
    assert lazynp.stats()["tree_kernels_rejected"] == rejected


def test_an_outer_operation_of_two_vectors_is_one_tree():
    rng = numpy.random.default_rng(15)
    x, y = rng.random(400), rng.random(360)
    lx, ly = lazynp.array(x), lazynp.array(y)
    before = trees()
    exact((lx[:, None] - ly[None, :]) * 0.5 + 1.0, (x[:, None] - y[None, :]) * 0.5 + 1.0)
    assert trees() - before == 1


def test_nan_inputs_keep_the_kernel_and_numpys_values():
    a, b = grids(16)
    a[::5] = numpy.nan
    la, lb = lazynp.array(a), lazynp.array(b)
    rejected = lazynp.stats()["tree_kernels_rejected"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = numpy.asarray((la * 2.0 + lb) * lb)
    exact(got, (a * 2.0 + b) * b)
    assert lazynp.stats()["tree_kernels_rejected"] == rejected


def test_horners_rule_computes_each_shared_value_once_and_is_numpys(monkeypatch):
    """``dp = dp * x + p; p = p * x + a``: each new ``dp`` reads the ``p`` that the next ``p``
    reads too.  A tree kernel computes such a shared value once (the loop grows by a few
    nodes per step, not by the whole history) and the result is NumPy's bit for bit."""
    rng = numpy.random.default_rng(21)
    coeffs, x = rng.standard_normal(31), rng.uniform(-1.0, 1.0, N)
    out = []
    before = trees(), lazynp.stats()["flushes"]
    monkeypatch.setattr(tree, "_plans", {})         # (sources rendered by this test only)
    monkeypatch.setattr(tree, "_nd_sources", {})
    for m, xs, cs in ((numpy, x, coeffs), (lazynp, lazynp.array(x), lazynp.array(coeffs))):
        p = m.zeros_like(xs)
        dp = m.zeros_like(xs)
        for a in cs:                  # (NumPy float64 scalars)
            dp = dp * xs + p
            p = p * xs + a
        out.append((p, dp))
    exact(out[1][0], out[0][0])
    exact(out[1][1], out[0][1])
    ran, flushes = trees() - before[0], lazynp.stats()["flushes"] - before[1]
    # every flush a tree kernel: the p chain stays one after the dp tree reading it ran
    assert ran > 0 and flushes == ran
    made = list(tree._nd_sources.values()) + [p[0] for p in tree._plans.values()]
    assert made and max(s.count(" = ") for s in made) < 200, \
        "a shared value was inlined once per reader"


def test_a_value_read_twice_and_two_equal_looking_values_are_both_numpys():
    """Two trees of one structure: one reads the same pending value twice (``t * t``),
    the other two distinct values with other constants (``t1 * t2``, ``t2`` read elsewhere
    too); the program keeps none of them (nothing else to write).  Each gets its own
    kernel source: computing ``t2`` as a repeat of ``t1`` would give ``t1 * t1``."""
    x = numpy.random.default_rng(22).random(N)
    lx = lazynp.array(x)

    def square(t):
        return t * t

    def product(t1, t2):
        other = t2 - 0.5                         # (another reader of t2, recorded first)
        return t1 * t2, other

    before = trees()
    for first in (0, 1):
        for case in (first, 1 - first):
            if case == 0:
                exact(square(lx * 2.0 + 1.0), (x * 2.0 + 1.0) * (x * 2.0 + 1.0))
            else:
                got, other = product(lx * 2.0 + 1.0, lx * 2.0 + 3.0)
                exact(got, (x * 2.0 + 1.0) * (x * 2.0 + 3.0))
                exact(other, x * 2.0 + 3.0 - 0.5)
    assert trees() - before >= 4


def test_a_recurrence_reading_both_previous_values_is_numpys():
    """``a, b = b, a + b``: the history doubles at each step when inlined as a tree; the
    kernels compute each value once and the values are NumPy's."""
    rng = numpy.random.default_rng(23)
    a0, b0 = rng.random(N), rng.random(N)
    res = []
    for m, a, b in ((numpy, a0, b0), (lazynp, lazynp.array(a0), lazynp.array(b0))):
        for k in range(24):
            a, b = b, a + b * 0.5
        res.append((a, b))
    exact(res[1][0], res[0][0])
    exact(res[1][1], res[0][1])


def test_a_pending_tree_with_a_numpy_scalar_operand_stays_a_tree():
    """``(p * x) + np.float64(c)``: a NumPy scalar operand does not make the pending tree
    run on its own (the op joins it, as with a Python float)."""
    rng = numpy.random.default_rng(24)
    x = rng.random(N)
    lx = lazynp.array(x)
    for c in (numpy.float64(0.25), 0.25):
        before = trees()
        got = lazynp.add(lx * lx, c) * c
        exact(got, numpy.add(x * x, c) * c)
        assert trees() - before == 1


def test_a_numpy_float64_operand_of_a_computed_array_starts_a_tree():
    """``np.logical_and(r1 <= radius, radius < r2)`` with ``r1 = radius.max() * c`` (a NumPy
    float64): the first op on the computed array is recorded into the tree, as it is with
    a Python float, on either side of the operator and through the ufunc; one kernel."""
    rng = numpy.random.default_rng(31)
    radius, data = rng.random(N), rng.random(N)
    lr = lazynp.array(radius)
    r1, r2 = radius.max() * 0.25, radius.max() * 0.5
    assert type(r1) is numpy.float64
    for build, n_ops in ((lambda m, r: m.logical_and(r1 <= r, r < r2), 3),
                         (lambda m, r: m.logical_and(m.less_equal(r1, r), m.less(r, r2)), 3),
                         (lambda m, r: (r - r1) * r2 + (r1 * r) / r2, 5)):
        before, stats = trees(), lazynp.stats()
        got = build(lazynp, lr)
        after = lazynp.stats()
        assert after["ops_recorded"] - stats["ops_recorded"] == n_ops
        assert after["ops_eager"] == stats["ops_eager"]
        exact(got, build(numpy, radius))
        assert trees() - before == 1
    mask = numpy.logical_and(r1 <= radius, radius < r2)
    assert lazynp.array(data)[lazynp.logical_and(r1 <= lr, lr < r2)].mean() == \
        data[mask].mean()


def _dag_program(mod, x, y, steps):
    """The last value of a program whose steps read any two earlier values; only that one
    is held when it is read (the others are inlined into its tree, none written apart)."""
    vals = [x, y]
    for op, i, j, c in steps:
        a, b = vals[i % len(vals)], vals[j % len(vals)]
        if op == "add":
            v = a + b * c
        elif op == "mul":
            v = (a * b) * 0.5 + c
        elif op == "sub":
            v = a - b - c
        elif op == "max":
            v = mod.maximum(a, b * c)
        else:
            v = a * a + c
        vals.append(v)
    return vals[-1]


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(["add", "mul", "sub", "max", "square"]),
                          st.integers(0, 7), st.integers(0, 7),
                          st.sampled_from([0.5, 1.5, -2.0])),
                min_size=1, max_size=16), st.integers(0, 3))
def test_random_dags_of_pending_values_equal_numpy(steps, seed):
    """Random programs whose steps read any two earlier values (pending values read by
    several nodes of one tree, and twice by one node), with constants that differ from step
    to step: the value is NumPy's bit for bit (trees of one structure that repeat other
    reads, or none, each have their own kernel)."""
    rng = numpy.random.default_rng(seed)
    x0, y0 = rng.random(N) + 0.5, rng.random(N) - 0.5
    want = _dag_program(numpy, x0, y0, steps)
    got = _dag_program(lazynp, lazynp.array(x0), lazynp.array(y0), steps)
    exact(got, want)
