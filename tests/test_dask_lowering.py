"""The shape of the dask graph lazynp lowers to (issue 39's benchmark targets).

A reduction whose reduced axes are one chunk each needs no tree: each output block is the
reduction of one input block.  It is lowered as a blockwise step, which dask's graph
optimization fuses with the tasks that make its input and read its result: a row softmax
over row chunks is one task per chunk (dask.array's own reductions always build a tree:
6 tasks per chunk).  The values stay NumPy's.

One in-process LocalCluster for the module, closed at the end.
"""
from __future__ import annotations

import os

import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis")
da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")

import dask  # noqa: E402
from hypothesis import given, settings, strategies as st  # noqa: E402

import lazynp as lnp  # noqa: E402

os.environ["LAZYNP_DASK_PROGRESS"] = "0"
_SETTINGS = settings(max_examples=25, deadline=None, derandomize=True,
                     suppress_health_check=list(hypothesis.HealthCheck))

_REDUCTIONS = ["sum", "mean", "std", "var", "min", "max", "argmin", "argmax", "any", "all",
               "prod"]


@pytest.fixture(scope="module")
def client():
    cluster = distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=False,
                                       dashboard_address=":0")
    c = distributed.Client(cluster, set_as_default=False)
    try:
        yield c
    finally:
        c.close()
        cluster.close()


@pytest.fixture
def on_dask(client):
    with lnp.default_device("dask", client=client):
        yield client


def _data(shape, seed):
    return np.random.default_rng(seed).standard_normal(shape) * 3


def _check(got, want, rtol=1e-12):
    got_v, want_v = np.asarray(got), np.asarray(want)
    assert got_v.shape == want_v.shape
    assert got_v.dtype == want_v.dtype, (got_v.dtype, want_v.dtype)
    if want_v.dtype.kind in "fc":
        np.testing.assert_allclose(got_v, want_v, rtol=rtol, atol=1e-12, equal_nan=True)
    else:
        np.testing.assert_array_equal(got_v, want_v)


def _tasks(arr) -> int:
    """The tasks of ``arr``'s graph once dask has optimized it (as ``compute`` does)."""
    (opt,) = dask.optimize(arr)
    return len(dict(opt.__dask_graph__()))


def _softmax(xp, x):
    e = xp.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


@st.composite
def reduced_within_chunks(draw):
    """A shape, the reduced axes (None: all), and chunks that keep each reduced axis whole
    (the other axes cut at random)."""
    shape = tuple(draw(st.lists(st.integers(1, 8), min_size=1, max_size=3)))
    nd = len(shape)
    axis = draw(st.one_of(
        st.none(), st.integers(-nd, nd - 1),
        st.lists(st.integers(0, nd - 1), min_size=1, max_size=nd, unique=True).map(tuple)))
    axes = range(nd) if axis is None else \
        {a % nd for a in (axis if isinstance(axis, tuple) else (axis,))}
    chunks = tuple(s if d in axes else draw(st.integers(1, s)) for d, s in enumerate(shape))
    return shape, axis, chunks


@_SETTINGS
@given(case=reduced_within_chunks(), name=st.sampled_from(_REDUCTIONS),
       keepdims=st.booleans(), chained=st.booleans(), seed=st.integers(0, 10))
def test_reductions_within_chunks_equal_numpy(client, case, name, keepdims, chained, seed):
    shape, axis, chunks = case
    if name in ("argmin", "argmax") and isinstance(axis, tuple):
        axis = axis[0]
    a, b = _data(shape, seed), _data(shape, seed + 1)
    with lnp.default_device("dask", client=client):
        x = lnp.asarray(da.from_array(a, chunks=chunks))
        y = lnp.asarray(da.from_array(b, chunks=chunks))
        if name in ("any", "all"):
            src, ref = ((x > y) | (y > 2), (a > b) | (b > 2)) if chained else (x > 1, a > 1)
        else:
            # (chained: the reduction is the epilogue of a fused group; alone: its own)
            src, ref = (x * 0.5 + y, a * 0.5 + b) if chained else (x, a)
        got = getattr(src, name)(axis=axis, keepdims=keepdims)
        with np.errstate(all="ignore"):
            want = getattr(ref, name)(axis=axis, keepdims=keepdims)
        # (a fused chunk step sums in another order than NumPy's pairwise sum)
        _check(got, want, rtol=1e-9 if chained else 1e-12)


def test_softmax_on_row_chunks_is_one_task_per_chunk(on_dask):
    a = _data((60, 30), 4)
    dx = da.from_array(a, chunks=(10, 30))
    got = _softmax(lnp, lnp.asarray(dx))
    _check(got, _softmax(np, a))
    lowered = _softmax(lnp, lnp.asarray(dx)).to_dask()
    n_chunks = lowered.npartitions
    # (the input's own chunk tasks, then one task per chunk: dask.array's softmax, whose
    # reductions always build a tree, has several per chunk)
    assert _tasks(lowered) == 2 * n_chunks
    assert _tasks(_softmax(da, dx)) > 4 * n_chunks


def test_a_reduction_across_chunks_still_builds_a_tree(on_dask):
    a = _data((60, 30), 5)
    x = lnp.asarray(da.from_array(a, chunks=(10, 10)))
    _check(_softmax(lnp, x), _softmax(np, a))
    _check((x * 2).sum(axis=1), (a * 2).sum(axis=1), rtol=1e-9)
    graph = dict(_softmax(lnp, x).to_dask().__dask_graph__())
    assert any("aggregate" in str(k) for k in graph)


@pytest.mark.parametrize("chunks", [(5, 4), (20, 4), (5, 8)])
def test_a_group_whose_reduced_member_is_not_its_last_equals_numpy(on_dask, chunks):
    # one fused group: (x == 0) -> astype -> summed, and where(x == 0, 1, x) after it; the
    # chunk step reduced the last member (the where) instead of the astype
    def f(xp, x):
        zero = x == 0
        nz = zero.astype(np.int64).sum(axis=0, keepdims=True)
        safe = xp.where(zero, 1.0, x)
        return xp.where(nz == 0, x.sum(axis=0, keepdims=True) / safe, -1.0), nz
    a = np.round(_data((20, 8), 6))
    got, got_nz = f(lnp, lnp.asarray(da.from_array(a, chunks=chunks)))
    want, want_nz = f(np, a)
    _check(got, want)
    _check(got_nz, want_nz)


def test_mean_and_dtype_of_reductions_within_chunks(on_dask):
    f = np.linspace(0, 1, 24, dtype=np.float32).reshape(4, 6)
    i = np.arange(24, dtype=np.int32).reshape(4, 6)
    x = lnp.asarray(da.from_array(f, chunks=(2, 6)))
    k = lnp.asarray(da.from_array(i, chunks=(2, 6)))
    _check((x * 2).mean(axis=1), (f * 2).mean(axis=1), rtol=1e-6)
    _check(x.mean(axis=1, keepdims=True), f.mean(axis=1, keepdims=True), rtol=1e-6)
    _check(k.sum(axis=1), i.sum(axis=1))
    _check(k.sum(axis=1, dtype=np.int8), i.sum(axis=1, dtype=np.int8))
    _check((k * 3).mean(axis=1), (i * 3).mean(axis=1))
    _check(k.argmax(axis=1), i.argmax(axis=1))
    one = lnp.asarray(da.from_array(i, chunks=(4, 6)))
    _check(one.argmax(), i.argmax())
    _check(lnp.argmin(one, keepdims=True), np.argmin(i, keepdims=True))
    _check(one.std(axis=(0, 1), ddof=1), i.std(axis=(0, 1), ddof=1))


def test_a_full_reduction_over_scalars_partials_is_one_aggregation(on_dask):
    a, b = _data(1000, 6), _data(1000, 7)
    da_a, da_b = da.from_array(a, chunks=100), da.from_array(b, chunks=100)
    x, y = lnp.asarray(da_a), lnp.asarray(da_b)
    _check(lnp.sum(x * y + 1.0), np.sum(a * b + 1.0), rtol=1e-12)
    lowered = lnp.sum(x * y + 1.0).to_dask()
    inputs = 2 * 10
    # (10 fused chunk tasks, then one task combines their 10 scalars; dask's default tree
    # has a level of partial sums between: 14 tasks)
    assert _tasks(lowered) - inputs == 11
    assert _tasks(da.sum(da_a * da_b + 1.0)) - inputs > 11


def test_the_fan_in_of_a_tree_is_bounded_by_the_partials_bytes(on_dask, monkeypatch):
    from lazynp.dask import lower
    monkeypatch.setattr(lower, "FAN_IN_BYTES", 64 << 10)
    a = _data((40, 2000), 8)
    x = lnp.asarray(da.from_array(a, chunks=(1, 2000)))
    _check((x * 2.0).sum(axis=0), (a * 2.0).sum(axis=0), rtol=1e-9)
    # (each partial is a 16 KB row: 4 fit the 64 KiB an aggregation may hold, so the 40
    # partials take a tree of several levels)
    graph = dict(dask.optimize((x * 2.0).sum(axis=0).to_dask())[0].__dask_graph__())
    assert sum(1 for k in graph if "partial" in str(k)) >= 10


# --- chunk-local regions: one task per chunk for a run of items -----------------------------

_RED_NAMES = ["sum", "mean", "max", "min", "std", "var", "prod"]


def _program(xp, x, y, axis, r1, r2):
    """A run of chunk-local items: reductions over ``axis`` (kept), broadcast back."""
    t = x * 0.5 + y
    m = getattr(t, r1)(axis=axis, keepdims=True)
    u = xp.exp(t - m)
    s = getattr(u, r2)(axis=axis, keepdims=True)
    return u / (s + 1.0) + getattr(y, r1)(axis=axis, keepdims=True) * xp.tanh(x)


@_SETTINGS
@given(case=reduced_within_chunks(), r1=st.sampled_from(_RED_NAMES),
       r2=st.sampled_from(_RED_NAMES), seed=st.integers(0, 10))
def test_regions_equal_numpy(client, case, r1, r2, seed):
    shape, axis, chunks = case
    a, b = _data(shape, seed) * 0.1, _data(shape, seed + 1) * 0.1
    a_copy = a.copy()
    with lnp.default_device("dask", client=client):
        x = lnp.asarray(da.from_array(a, chunks=chunks))
        y = lnp.asarray(da.from_array(b, chunks=chunks))
        got = _program(lnp, x, y, axis, r1, r2)
        want = _program(np, a, b, axis, r1, r2)
        _check(got, want, rtol=1e-9)
        # (the inputs' chunks are never written, though temporaries are)
        np.testing.assert_array_equal(np.asarray(x), a_copy)


def test_softmax_region_gives_numpy_bits_and_writes_no_input(on_dask):
    a = _data((60, 30), 9)
    dx = da.from_array(a.copy(), chunks=(10, 30)).persist()
    x = lnp.asarray(dx)
    got = np.asarray(_softmax(lnp, x))
    # (every step is NumPy's own function on whole rows: the same bits)
    np.testing.assert_array_equal(got, _softmax(np, a))
    np.testing.assert_array_equal(dx.compute(), a)
    np.testing.assert_array_equal(np.asarray(_softmax(lnp, x)), got)


def test_region_values_read_later_and_by_other_items(on_dask):
    a = _data((40, 12), 10)
    x = lnp.asarray(da.from_array(a, chunks=(10, 12)))
    e = lnp.exp(x - x.max(axis=1, keepdims=True))
    p = e / e.sum(axis=1, keepdims=True)
    total = p.sum(axis=0)              # across chunks: a tree after the region
    w = np.exp(a - a.max(axis=1, keepdims=True))
    wp = w / w.sum(axis=1, keepdims=True)
    _check(total, wp.sum(axis=0), rtol=1e-12)
    _check(e, w)                       # (a value inside the region, read afterwards)
    _check(p, wp)


def test_run_region_writes_a_dead_temporary_in_place():
    from lazynp.dask import chunks
    x = _data((4, 5), 11)
    m = x.max(axis=1, keepdims=True)
    f8 = np.dtype(np.float64)
    sub = ((("subtract", (("x", 0), ("x", 1)), None, f8),), None, (0,), False)
    exp = ((("exp", (("x", 0),), None, f8),), None, (0,), False)
    steps = (("group", sub, (("x", 0), ("x", 1)), (0,), None),
             ("group", exp, (("v", 0),), (1,), None))
    seen = []
    real = chunks.run_block

    def spy(*blocks, recipe):
        out = real(*blocks, recipe=recipe)
        seen.append(out)
        return out
    chunks.run_block = spy
    try:
        got = chunks.run_region(x, m, steps=steps, outs=(1,))
    finally:
        chunks.run_block = real
    np.testing.assert_array_equal(got, np.exp(x - m))
    # (the subtraction's result, read by no later step, took the exponential)
    assert len(seen) == 1 and got is seen[0]
    # (a value the task returns is never overwritten)
    t, e = chunks.run_region(x, m, steps=steps, outs=(0, 1))
    np.testing.assert_array_equal(t, x - m)
    np.testing.assert_array_equal(e, np.exp(x - m))


# --- stencil writes: one map_overlap ------------------------------------------------------------

def _jacobi(xp, u, steps):
    u = u.copy()
    for _ in range(steps):
        u[1:-1, 1:-1] = 0.25 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:])
    return u


@_SETTINGS
@given(rows=st.integers(3, 14), cols=st.integers(3, 14), data=st.data(),
       steps=st.integers(1, 3), seed=st.integers(0, 10))
def test_stencil_time_loop_equals_numpy(client, rows, cols, data, steps, seed):
    chunks = (data.draw(st.integers(1, rows)), data.draw(st.integers(1, cols)))
    a = _data((rows, cols), seed)
    with lnp.default_device("dask", client=client):
        u = lnp.asarray(da.from_array(a, chunks=chunks))
        got = np.asarray(_jacobi(lnp, u, steps))
    # (the same kernel per element as the CPU path's, on the same operands: NumPy's bits)
    np.testing.assert_allclose(got, _jacobi(np, a, steps), rtol=1e-15, atol=0)


@_SETTINGS
@given(shape=st.tuples(st.integers(4, 12), st.integers(4, 12)), data=st.data(),
       seed=st.integers(0, 10))
def test_writes_of_shifted_slices_equal_numpy(client, shape, data, seed):
    """Any target slice, shifted sources of any offsets (within the array), chunks from 1."""
    def window(n):
        length = data.draw(st.integers(1, n - 1))
        return length, data.draw(st.integers(0, n - length)), data.draw(st.integers(0, n - length))
    (l0, t0, s0), (l1, t1, s1) = window(shape[0]), window(shape[1])
    (m0, _, q0), (m1, _, q1) = (l0, 0, data.draw(st.integers(0, shape[0] - l0))), \
        (l1, 0, data.draw(st.integers(0, shape[1] - l1)))
    chunks = (data.draw(st.integers(1, shape[0])), data.draw(st.integers(1, shape[1])))
    a = _data(shape, seed)

    def prog(xp, u):
        u = u.copy()
        u[t0:t0 + l0, t1:t1 + l1] = u[s0:s0 + l0, s1:s1 + l1] * 2.0 - \
            u[q0:q0 + m0, q1:q1 + m1] + 1.0
        return u
    with lnp.default_device("dask", client=client):
        got = np.asarray(prog(lnp, lnp.asarray(da.from_array(a, chunks=chunks))))
    np.testing.assert_array_equal(got, prog(np, a))


def test_stencil_is_one_map_overlap_per_step(on_dask):
    a = _data((40, 40), 12)
    u = lnp.asarray(da.from_array(a, chunks=(10, 10)))
    lowered = _jacobi(lnp, u, 3).to_dask()
    graph = dict(lowered.__dask_graph__())
    assert sum(1 for k in graph if "_stencil_block" in str(k)) == 3 * 16
    # (as written by hand with dask.array's map_overlap: the same number of tasks)
    by_hand = da.from_array(a, chunks=(10, 10)).copy()
    for _ in range(3):
        by_hand = by_hand.map_overlap(lambda b: b, depth=1, boundary="none")
    assert _tasks(lowered) <= _tasks(by_hand)
    np.testing.assert_allclose(np.asarray(_jacobi(lnp, u, 3)), _jacobi(np, a, 3), rtol=1e-15)


def test_writes_that_are_not_stencils_take_the_general_path(on_dask):
    a = _data((12, 12), 13)
    u = lnp.asarray(da.from_array(a, chunks=(1, 12)))
    w = lnp.asarray(da.from_array(a * 2, chunks=(4, 4)))
    ref = a.copy()
    u[2:10, 1:11] = u[:8, 1:11] + 1.0            # a shift of 2 rows, chunks of 1 row
    ref[2:10, 1:11] = ref[:8, 1:11] + 1.0
    u[0:4, 0:4] = w[4:8, 4:8] * 3                # another array's slice
    ref[0:4, 0:4] = (a * 2)[4:8, 4:8] * 3
    u[::2, 0:3] = u[::2, 3:6] - 1.0              # steps other than 1
    ref[::2, 0:3] = ref[::2, 3:6] - 1.0
    np.testing.assert_array_equal(np.asarray(u), ref)


# --- the workers' floating-point warnings, issued at the read -----------------------------

def _warned(f, x):
    import warnings
    with warnings.catch_warnings(record=True) as ws:
        warnings.simplefilter("always")
        v = np.asarray(f(x))
    return v, sorted(str(w.message) for w in ws if issubclass(w.category, RuntimeWarning))


@pytest.mark.parametrize("f", [
    lambda xp, z: 1.0 / z,                                        # one op (NumPy's loop)
    lambda xp, z: (z * 2.0 + 1.0) / (z - z),                      # a fused group
    lambda xp, z: xp.log(z).sum(axis=1),                          # a group and its partial
    lambda xp, z: xp.exp(z * 1000.0) - z,                         # overflow
    lambda xp, z: xp.sqrt(z - 1.0).max(axis=1, keepdims=True) / z,  # a chunk-local region
], ids=["op", "group", "reduction", "overflow", "region"])
def test_workers_floating_point_warnings_come_back_at_the_read_as_numpys(on_dask, f):
    a = np.array([[0.0, 1.0, 2.0, 0.0], [3.0, 0.0, 5.0, 6.0]])
    want, want_msgs = _warned(lambda x: f(np, x), a)
    got, got_msgs = _warned(lambda x: f(lnp, x), lnp.asarray(da.from_array(a, chunks=(1, 2))))
    _check(got, want)
    assert want_msgs and got_msgs == want_msgs


def test_a_warning_comes_once_and_not_under_errstate_ignore(on_dask):
    a = np.array([0.0, 1.0, 2.0, 0.0])
    z = lnp.asarray(da.from_array(a, chunks=2))
    r = 1.0 / z
    assert _warned(lambda r: r, r)[1] == ["divide by zero encountered in divide"]
    assert _warned(lambda r: r, r)[1] == []             # (read again: not recomputed)
    with np.errstate(divide="ignore"):
        assert _warned(lambda z: lnp.log(z), z)[1] == []
    assert _warned(lambda z: lnp.log(z * 3.0), z)[1] == ["divide by zero encountered in log"]


# --- automatic persisting of a graph that grows with each step -----------------------------

@pytest.mark.parametrize("limit, persisted", [("0", False), ("64", True)])
def test_a_growing_time_loop_is_persisted_by_the_graphs_size(on_dask, monkeypatch, limit,
                                                             persisted):
    from lazynp.dask import persist
    monkeypatch.setenv("LAZYNP_DASK_PERSIST_TASKS", limit)
    a = _data((24, 24), 9)
    before = persist.STATS["auto_persists"]
    u = _jacobi(lnp, lnp.asarray(da.from_array(a, chunks=(6, 12))), 10)   # 8 blocks
    layers = len(u.to_dask().dask.layers)
    _check(u, _jacobi(np, a, 10))
    assert (persist.STATS["auto_persists"] > before) == persisted
    # (persisted: the graph behind the result starts at the last persisted step)
    assert (layers * 8 <= 64) == persisted
