"""Chunked arrays on dask.distributed (issue 39): results equal NumPy's.

One LocalCluster for the module (threads in this process: fast to start), closed at the
end.  Hypothesis draws shapes, chunkings and expressions: elementwise chains with
broadcasting, Python and NumPy scalars and strided slices; every reduction with axes and
keepdims after such a chain (the fused chunk step); matmul, indexing, concatenate.
"""
from __future__ import annotations

import os

import time

import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis")
da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")

from hypothesis import given, settings, strategies as st  # noqa: E402

import lazynp as lnp  # noqa: E402
from lazynp.kernels import cpu  # noqa: E402

os.environ["LAZYNP_DASK_PROGRESS"] = "0"
_SETTINGS = settings(max_examples=20, deadline=None, derandomize=True,
                     suppress_health_check=list(hypothesis.HealthCheck))
#: dask.array's own functions (matmul, indexing, concatenate): fewer examples
_FEW = settings(_SETTINGS, max_examples=6)


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


# --- strategies ----------------------------------------------------------------------------

@st.composite
def shapes_and_chunks(draw, min_dims=1, max_dims=3):
    shape = tuple(draw(st.lists(st.integers(1, 9), min_size=min_dims, max_size=max_dims)))
    chunks = tuple(draw(st.integers(1, s)) for s in shape)
    return shape, chunks


def _data(shape, seed, dtype=np.float64):
    rng = np.random.default_rng(seed)
    v = rng.standard_normal(shape) * 3
    return v.astype(dtype)


def _chunked(v, chunks):
    return lnp.asarray(da.from_array(v, chunks=chunks))


def _check(got, want, rtol=1e-10):
    got_v = np.asarray(got)
    want_v = np.asarray(want)
    assert got_v.shape == want_v.shape
    assert got_v.dtype == want_v.dtype, (got_v.dtype, want_v.dtype)
    if want_v.dtype.kind in "fc":
        np.testing.assert_allclose(got_v, want_v, rtol=rtol, atol=1e-12, equal_nan=True)
    else:
        np.testing.assert_array_equal(got_v, want_v)


_UNARY = [lambda m, x: -x, lambda m, x: m.abs(x), lambda m, x: m.exp(x * 0.1),
          lambda m, x: m.sqrt(m.abs(x)), lambda m, x: m.tanh(x), lambda m, x: x ** 2]
_SCALARS = [2, 0.5, np.float64(1.5), np.float32(2.0), -3, True]

def _expr(program, m, x, other):
    """Apply a drawn program (a list of (kind, index)) to ``x`` with namespace ``m``."""
    for kind, i in program:
        if kind == "unary":
            x = _UNARY[i % len(_UNARY)](m, x)
        elif kind == "scalar":
            s = _SCALARS[i % len(_SCALARS)]
            x = x * s if i % 2 else s + x
        elif kind == "array":
            x = [x + other, x * other, x - other, other / (x * x + 1.0)][i % 4]
        else:
            x = m.maximum(x, other) if i % 2 else m.where(x > 0, x, other)
    return x


programs = st.lists(st.tuples(st.sampled_from(["unary", "scalar", "array", "max"]),
                              st.integers(0, 11)), min_size=1, max_size=6)


def _broadcast_shape(shape, mode):
    """A shape broadcasting against ``shape``: the same, its trailing dims, or with 1s."""
    if mode == 0:
        return shape
    if mode == 1:
        return shape[1:] or shape
    return tuple(1 if k % 2 == 0 else s for k, s in enumerate(shape))


# --- elementwise chains --------------------------------------------------------------------

@_SETTINGS
@given(sc=shapes_and_chunks(), program=programs, mode=st.integers(0, 2),
       seed=st.integers(0, 10))
def test_elementwise_chains_equal_numpy(client, sc, program, mode, seed):
    shape, chunks = sc
    a = _data(shape, seed)
    bshape = _broadcast_shape(shape, mode)
    b = _data(bshape, seed + 1)
    bchunks = tuple(min(c, s) for c, s in zip(chunks[len(chunks) - len(bshape):], bshape))
    with lnp.default_device("dask", client=client):
        x = _chunked(a, chunks)
        y = _chunked(b, bchunks)
        with np.errstate(all="ignore"):
            got = _expr(program, lnp, x, y)
            want = _expr(program, np, a, b)
        assert got.device == "dask"
        _check(got, want)


@_SETTINGS
@given(sc=shapes_and_chunks(min_dims=2, max_dims=3), step=st.integers(1, 3),
       start=st.integers(0, 2), seed=st.integers(0, 10))
def test_strided_slices_in_chains(client, sc, step, start, seed):
    shape, chunks = sc
    a = _data(shape, seed)
    key = (slice(start, None, step), slice(None, None, -1))
    with lnp.default_device("dask", client=client):
        x = _chunked(a, chunks)
        got = (x[key] * 2.0 + 1) - x[key] * x[key]
        want = (a[key] * 2.0 + 1) - a[key] * a[key]
        _check(got, want)


def test_python_and_numpy_scalars_keep_numpy_dtypes(on_dask):
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    i = np.arange(12, dtype=np.int32).reshape(3, 4)
    x = _chunked(a, (2, 3))
    k = _chunked(i, (2, 3))
    for got, want in [(x * 2, a * 2), (x * 2.5, a * 2.5), (x * np.float64(2), a * np.float64(2)),
                      (k + 1, i + 1), (k * 1.5, i * 1.5), (k // 3, i // 3), (k > 4, i > 4),
                      (x.astype(np.int64) + k, a.astype(np.int64) + i), (k ** 2, i ** 2),
                      # host arrays (NumPy's, lazynp's CPU ones) broadcast to the chunks
                      (x + np.arange(4, dtype=np.float32), a + np.arange(4, dtype=np.float32)),
                      (x * lnp.ones(4), a * np.ones(4)), (np.float64(2) - k, np.float64(2) - i)]:
        _check(got, want)


def test_repeated_equal_ops_stay_separate_keys(on_dask):
    # two ``x * y`` of different operands must not share a dask key
    a, b, c = (_data((8, 6), s) for s in range(3))
    x, y, z = (_chunked(v, (3, 4)) for v in (a, b, c))
    _check(x * y + y * z, a * b + b * c)
    _check((x * y) + (x * y), (a * b) + (a * b))


# --- reductions ----------------------------------------------------------------------------

_REDUCTIONS = ["sum", "mean", "std", "var", "min", "max", "argmin", "argmax", "any", "all",
               "prod"]


@_SETTINGS
@given(sc=shapes_and_chunks(), name=st.sampled_from(_REDUCTIONS), data=st.data(),
       keepdims=st.booleans(), seed=st.integers(0, 10))
def test_reductions_after_chains_equal_numpy(client, sc, name, data, keepdims, seed):
    shape, chunks = sc
    nd = len(shape)
    if name in ("argmin", "argmax"):
        axis = data.draw(st.one_of(st.none(), st.integers(-nd, nd - 1)))
    else:
        axis = data.draw(st.one_of(
            st.none(), st.integers(-nd, nd - 1),
            st.lists(st.integers(0, nd - 1), min_size=1, max_size=nd, unique=True).map(tuple)))
    a = _data(shape, seed)
    b = _data(shape, seed + 1)
    with lnp.default_device("dask", client=client):
        x, y = _chunked(a, chunks), _chunked(b, chunks)
        src = x * 0.5 + y if name not in ("any", "all") else (x > y) | (y > 2)
        ref = a * 0.5 + b if name not in ("any", "all") else (a > b) | (b > 2)
        got = getattr(src, name)(axis=axis, keepdims=keepdims)
        want = getattr(ref, name)(axis=axis, keepdims=keepdims)
        _check(got, want, rtol=1e-9)


def test_reduction_dtypes_follow_numpy(on_dask):
    i = np.arange(24, dtype=np.int32).reshape(4, 6)
    f = np.linspace(0, 1, 24, dtype=np.float32).reshape(4, 6)
    k, x = _chunked(i, (3, 4)), _chunked(f, (3, 4))
    for name in ["sum", "mean", "prod", "max", "var"]:
        _check(getattr(k * 2, name)(axis=0), getattr(i * 2, name)(axis=0))
    _check((x * 2).sum(axis=1), (f * 2).sum(axis=1), rtol=1e-6)
    _check((x * 2).mean(), (f * 2).mean(), rtol=1e-6)
    _check(k.sum(dtype=np.int8), i.sum(dtype=np.int8))
    _check(lnp.sum(k, axis=(0, 1), keepdims=True), np.sum(i, axis=(0, 1), keepdims=True))


def test_softmax_rows(on_dask):
    a = _data((40, 30), 3)
    x = _chunked(a, (7, 11))
    e = lnp.exp(x - x.max(axis=1, keepdims=True))
    got = e / e.sum(axis=1, keepdims=True)
    w = np.exp(a - a.max(axis=1, keepdims=True))
    _check(got, w / w.sum(axis=1, keepdims=True))


def test_fused_chunk_step_runs_the_numba_kernel(on_dask):
    a, b = _data((64, 32), 0), _data((64, 32), 1)
    x, y = _chunked(a, (16, 32)), _chunked(b, (16, 32))
    before = cpu.STATS["fused_groups_run"]
    got = (x * y + 2.0 * x - y).sum(axis=0)
    _check(got, (a * b + 2.0 * a - b).sum(axis=0))
    # (threads in this process: the workers' kernels count here; 4 chunks, one kernel each)
    assert cpu.STATS["fused_groups_run"] - before >= 4
    graph = dict((x * y + 2.0 * x - y).to_dask().__dask_graph__())
    assert sum(1 for k in graph if "lazynp" in str(k)) == 4     # one task per chunk


# --- dask.array's own functions ------------------------------------------------------------

@_FEW
@given(m=st.integers(1, 9), k=st.integers(1, 9), n=st.integers(1, 9),
       cm=st.integers(1, 4), ck=st.integers(1, 4), seed=st.integers(0, 10))
def test_matmul_dot_tensordot(client, m, k, n, cm, ck, seed):
    a, b = _data((m, k), seed), _data((k, n), seed + 1)
    with lnp.default_device("dask", client=client):
        x, y = _chunked(a, (cm, ck)), _chunked(b, (ck, 3))
        _check(x @ y, a @ b)
        _check(lnp.matmul(x * 2, y), np.matmul(a * 2, b))
        _check(lnp.dot(x, y), np.dot(a, b))
        _check(lnp.tensordot(x, y, axes=1), np.tensordot(a, b, axes=1))


@_FEW
@given(sc=shapes_and_chunks(min_dims=2, max_dims=2), data=st.data(), seed=st.integers(0, 10))
def test_indexing(client, sc, data, seed):
    shape, chunks = sc
    a = _data(shape, seed)
    i = data.draw(st.integers(-shape[0], shape[0] - 1))
    rows = data.draw(st.lists(st.integers(0, shape[0] - 1), min_size=1, max_size=5))
    with lnp.default_device("dask", client=client):
        x = _chunked(a, chunks)
        _check(x[i], a[i])
        _check(x[rows], a[rows])
        _check(x[:, ::-2], a[:, ::-2])
        _check(x[x > 0], a[a > 0])
        _check((x + 1)[..., None], (a + 1)[..., None])
        _check(x.T.reshape(-1), a.T.reshape(-1))
        _check((x * 2).reshape(shape[1], shape[0]), (a * 2).reshape(shape[1], shape[0]))


@_FEW
@given(sc=shapes_and_chunks(min_dims=1, max_dims=3), n=st.integers(1, 3),
       seed=st.integers(0, 10), data=st.data())
def test_concatenate_and_stack(client, sc, n, seed, data):
    shape, chunks = sc
    axis = data.draw(st.integers(0, len(shape) - 1))
    arrs = [_data(shape, seed + k) for k in range(n)]
    with lnp.default_device("dask", client=client):
        xs = [_chunked(v, chunks) * (k + 1) for k, v in enumerate(arrs)]
        want = [v * (k + 1) for k, v in enumerate(arrs)]
        _check(lnp.concatenate(xs, axis=axis), np.concatenate(want, axis=axis))
        _check(lnp.stack(xs, axis=axis), np.stack(want, axis=axis))


def test_sort_linalg_and_others(on_dask):
    a = _data((50, 4), 5)
    x = _chunked(a, (13, 4))
    _check(lnp.sort(x, axis=0), np.sort(a, axis=0))
    _check(lnp.argsort(x + 1), np.argsort(a + 1))
    q, r = lnp.linalg.qr(x)
    _check(abs(q @ r), abs(a))
    _check(abs(r), abs(np.linalg.qr(a)[1]))
    _check(lnp.linalg.svd(x, full_matrices=False)[1], np.linalg.svd(a, full_matrices=False)[1])
    _check(lnp.cumsum(x, axis=0), np.cumsum(a, axis=0))
    _check(lnp.where(x > 0, x, 0.0), np.where(a > 0, a, 0.0))
    _check(lnp.clip(x, -1, 1), np.clip(a, -1, 1))


def test_function_dask_lacks_raises_naming_it(on_dask):
    x = _chunked(_data((4, 4), 0), 2)
    with pytest.raises(NotImplementedError, match="det"):
        lnp.linalg.det(x)
    with pytest.raises(NotImplementedError, match="chunked"):
        x.sum(out=x)


# --- creation, devices, reads ----------------------------------------------------------------

def test_creation_functions_make_chunked_arrays(client):
    with lnp.default_device("dask", chunks=(4, 3), client=client):
        made = {"zeros": lnp.zeros((10, 7)), "ones": lnp.ones((10, 7), dtype=np.int32),
                "full": lnp.full((10, 7), 2.5), "empty": lnp.empty((10, 7)),
                "arange": lnp.arange(3, 30, 2), "linspace": lnp.linspace(0, 1, 11),
                "normal": lnp.random.default_rng(0).standard_normal((10, 7)),
                "random": lnp.random.default_rng(0).random((10, 7))}
        for name, arr in made.items():
            assert arr.device == "dask", name
            assert type(arr).__name__ == "DaskArray", name
        assert made["zeros"].chunks == ((4, 4, 2), (3, 3, 1))
        _check(made["ones"] * 2, np.ones((10, 7), np.int32) * 2)
        _check(made["full"] + made["zeros"], np.full((10, 7), 2.5))
        _check(made["arange"], np.arange(3, 30, 2))
        _check(made["linspace"], np.linspace(0, 1, 11))
        r = np.asarray(made["random"])
        assert r.shape == (10, 7) and (0 <= r).all() and (r < 1).all()
        # the same seed gives the same chunked numbers
        _check(lnp.random.default_rng(0).standard_normal((10, 7)), made["normal"])
    assert type(lnp.zeros(3)).__name__ == "ndarray"          # (outside the block: the CPU)


def test_load_reads_chunks_on_the_workers(client, tmp_path):
    a = _data((30, 5), 2)
    p = tmp_path / "a.npy"
    np.save(p, a)
    with lnp.default_device("dask", chunks=(8, 5), client=client):
        x = lnp.load(str(p))
        assert x.device == "dask"
        assert x.chunks == ((8, 8, 8, 6), (5,))
        _check(x * 2, a * 2)


def test_to_device_and_reads(on_dask):
    a = _data((6, 5), 1)
    x = _chunked(a, 2)
    cpu_arr = (x * 3).to_device("cpu")
    assert isinstance(cpu_arr, lnp.ndarray)
    np.testing.assert_array_equal(np.asarray(cpu_arr), a * 3)
    assert x.to_device("dask") is x
    assert float((x * 0 + 2).sum()) == 60.0
    assert (x[0, 0] * 2).item() == a[0, 0] * 2
    assert (x > 100).any().tolist() is False
    assert "dask" in repr(x[:1])


def test_evaluate_persists_on_the_cluster(on_dask):
    a = _data((12, 4), 0)
    x = _chunked(a, 3)
    y = x * 2 + 1
    z = y - 1                                       # (pending: reads y's node)
    lnp.evaluate(y)
    # persisted: the graph holds only the computed chunks (futures), one per chunk
    graph = dict(y.to_dask().__dask_graph__())
    assert len(graph) == y.to_dask().npartitions == 8
    assert all(type(v).__name__ == "Future" for v in graph.values())
    _check(y, a * 2 + 1)
    # the pending work reads the persisted chunks: no task recomputes y
    zg = dict(z.to_dask().__dask_graph__())
    y_keys = [k for k in zg if "lazynp-add" in str(k)]
    assert len(y_keys) == 8 and all(type(zg[k]).__name__ == "Future" for k in y_keys)
    _check(z, a * 2)


def _slow_block(blk):
    time.sleep(0.3)
    return blk


def test_evaluate_waits_until_every_chunk_is_computed(on_dask):
    # lazynp.evaluate's promise (persist, then wait): every chunk's future is finished
    a = _data((8, 4), 1)
    y = lnp.asarray(da.from_array(a, chunks=(2, 4)).map_blocks(_slow_block, dtype=a.dtype)) + 1
    lnp.evaluate(y)
    futures = distributed.futures_of(y.to_dask())
    assert len(futures) == 4 and all(f.status == "finished" for f in futures)
    _check(y, a + 1)


def test_evaluate_of_a_chunk_that_fails_raises_naming_evaluate(on_dask):
    def fail(blk):
        raise ValueError("bad chunk")
    y = lnp.asarray(da.ones((4, 4), chunks=2).map_blocks(fail, dtype=float)) * 2
    with pytest.raises(RuntimeError, match=r"^lazynp.evaluate: .*ValueError: bad chunk"):
        lnp.evaluate(y)


def test_an_in_process_cluster_leaves_this_process_buffer_pool_on(on_dask):
    # (the worker plugin switches the pool off in worker processes only: these workers
    # are threads of the user's process, whose own CPU arrays use the pool)
    from lazynp.kernels import pool
    before = pool.MAX_BYTES
    np.asarray(_chunked(_data((6, 2), 2), 3) * 2)
    assert pool.MAX_BYTES == before > 0


def test_inplace_and_setitem(on_dask):
    a = _data((8, 3), 4)
    x = _chunked(a, 3)
    x += 1
    x[2:4] = 0.0
    want = a + 1
    want[2:4] = 0.0
    _check(x, want)


def test_zarr_missing_raises_import_error(on_dask, tmp_path):
    try:
        import zarr  # noqa: F401
        pytest.skip("zarr is installed: the ImportError path is not reachable")
    except ImportError:
        pass
    x = _chunked(_data((4,), 0), 2)
    with pytest.raises(ImportError, match="zarr"):
        lnp.to_zarr(x, str(tmp_path / "x.zarr"))
    with pytest.raises(ImportError, match="zarr"):
        lnp.from_zarr(str(tmp_path / "x.zarr"))


def test_default_device_options_only_for_dask():
    with pytest.raises(TypeError, match="dask"):
        with lnp.default_device("cpu", chunks=3):
            pass


def test_fromfile_and_memmap_read_chunks_on_the_workers(client, tmp_path):
    a = _data((40,), 3)
    p = tmp_path / "a.bin"
    a.tofile(p)
    with lnp.default_device("dask", chunks=(16,), client=client):
        x = lnp.fromfile(str(p), dtype=np.float64)
        assert x.device == "dask" and x.chunks == ((16, 16, 8),)
        _check(x + 1, a + 1)
        m = np.memmap(p, dtype=np.float64, mode="r", shape=(10, 4))
        y = lnp.asarray(m)
        assert y.device == "dask" and y.chunks == ((10,), (4,))
        # (the graph holds the file's name, not its data)
        assert all(not isinstance(v, np.ndarray) for v in dict(y.to_dask().dask).values())
        _check(y * 2, a.reshape(10, 4) * 2)
    with lnp.default_device("dask", chunks=(4, 2), client=client):
        _check(lnp.asarray(np.memmap(p, dtype=np.float64, mode="r", shape=(10, 4))).sum(axis=0),
               a.reshape(10, 4).sum(axis=0))


def test_reads_keep_small_values_here_and_persist_large_ones(on_dask, monkeypatch):
    a = _data((12, 4), 5)
    x = _chunked(a, 3)
    small = (x * 2).sum(axis=0)
    np.asarray(small)
    assert small._n.host is not None                # (a second read: no cluster)
    _check(small, (a * 2).sum(axis=0))
    monkeypatch.setenv("LAZYNP_DASK_SMALL_BYTES", "64")
    big = x * 3 + 1
    _check(big, a * 3 + 1)
    assert big._n.host is None
    graph = dict(big.to_dask().__dask_graph__())
    assert all(type(v).__name__ == "Future" for v in graph.values())   # (persisted)
    _check(big - 1, a * 3)


def test_numpy_functions_on_chunked_arrays_stay_chunked(on_dask):
    a = _data((9, 4), 6)
    x = _chunked(a, 4)
    for got, want in [(np.exp(x) + 1, np.exp(a) + 1), (np.add(x, 2), np.add(a, 2)),
                      (np.sum(x * 2, axis=0), np.sum(a * 2, axis=0)),
                      (np.add.reduce(x, axis=1), np.add.reduce(a, axis=1)),
                      (np.concatenate([x, x]), np.concatenate([a, a])),
                      (np.mean(x), np.mean(a)), (np.matmul(x.T, x), np.matmul(a.T, a))]:
        assert type(got).__name__ == "DaskArray"
        _check(got, want)
    with pytest.raises((NotImplementedError, TypeError)):
        np.linalg.det(x[:4])


def test_embedded_cluster_starts_lazily_and_shuts_down(monkeypatch):
    monkeypatch.setenv("LAZYNP_DASK_PROCESSES", "0")       # (threads: quick to start)
    lnp.dask_shutdown()
    a = _data((10, 3), 7)
    x = lnp.asarray(da.from_array(a, chunks=4))         # (no client: the embedded one)
    assert x.device == "dask"
    _check((x * 2).sum(axis=0), (a * 2).sum(axis=0))
    assert lnp.dask_shutdown() is True
    assert lnp.dask_shutdown() is False


@pytest.mark.parametrize("name,fn,value", [
    ("empty", lambda m, x: (x * 2).sum(axis=0), np.zeros((0, 3))),
    ("0-d chain", lambda m, x: (x.sum() * 2 + 1) / 3, np.arange(6.0).reshape(2, 3)),
    ("complex", lambda m, x: (x * x + 1).sum(axis=1), (np.arange(6) + 1j).reshape(2, 3)),
    ("nan max", lambda m, x: (x / (x - 2)).max(axis=0), np.arange(6.0).reshape(2, 3)),
    ("int16 mean", lambda m, x: x.astype(np.int16).mean(axis=1), np.arange(6.0).reshape(2, 3)),
    ("nansum", lambda m, x: m.nansum(x / (x - 2), axis=0), np.arange(6.0).reshape(2, 3)),
])
def test_edge_values(on_dask, name, fn, value):
    with np.errstate(all="ignore"):
        _check(fn(lnp, _chunked(value, 2)), fn(np, value))


def test_writes_that_numpy_shares_with_views_raise(on_dask):
    a = _data((6, 4), 8)
    x = _chunked(a, 3)
    row = x[1]
    with pytest.raises(NotImplementedError, match="views"):
        x[1] = 0.0                                  # (NumPy's row would change)
    with pytest.raises(NotImplementedError, match="views"):
        x += 1
    with pytest.raises(NotImplementedError, match="view"):
        row[...] = 5.0                              # (NumPy's x would change)
    _check(row, a[1])
    del row
    x[1] = 0.0                                      # (no view left: allowed)
    want = a.copy()
    want[1] = 0.0
    _check(x, want)
    fancy = x[[0, 2]]                               # (a copy in NumPy too)
    x += 1
    _check(fancy, want[[0, 2]])
    _check(x, want + 1)


def test_stencil_time_loop(on_dask):
    def run(m, u, steps):
        for _ in range(steps):
            u[1:-1, 1:-1] = u[1:-1, 1:-1] + 0.1 * (u[2:, 1:-1] + u[:-2, 1:-1] + u[1:-1, 2:]
                                                   + u[1:-1, :-2] - 4 * u[1:-1, 1:-1])
        return u
    a = _data((12, 10), 9)
    x = _chunked(a, (5, 4))
    # the shifted slices' sum keeps the first operand's chunks (dask's own alignment cuts
    # each chunk at every operand's boundary: (3, 2, 3, 2) instead of (3, 5, 2))
    assert (x[2:] + x[:-2]).chunks == x[2:].chunks == ((3, 5, 2), (4, 4, 2))
    got = run(lnp, x, 3)
    _check(got, run(np, a.copy(), 3))
