"""``jit``, ``vmap`` and ``grad`` of functions over chunked (dask) arrays (issue 39, item 3).

``jit`` and ``vmap`` of a function of chunked arrays record on the dask device's graph and
give NumPy's values; the gradient transforms raise ``NotImplementedError`` naming the
function (the dask device builds matmul and indexing with dask.array at the call, out of a
backward pass's reach: a gradient over its nodes would be silently wrong).
"""
from __future__ import annotations

import numpy
import pytest

dask_array = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")

import lazynp


@pytest.fixture(scope="module")
def client():
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                  dashboard_address=":0") as cluster, \
            distributed.Client(cluster) as c:
        yield c


@pytest.fixture
def dask_device(client):
    with lazynp.default_device("dask", client=client):
        yield client


def _chunked(a: numpy.ndarray, chunks) -> "lazynp.ndarray":
    x = lazynp.asarray(dask_array.from_array(a, chunks=chunks))
    assert str(x.device) == "dask"
    return x


def _data(seed: int, rows: int = 30, cols: int = 3):
    rng = numpy.random.default_rng(seed)
    return rng.standard_normal((rows, cols)), rng.standard_normal(rows)


def _loss(w, x, y):
    r = x @ w - y
    return (r * r).mean()


def _softmax(x):
    e = lazynp.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _softmax_numpy(x):
    e = numpy.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def test_jit_of_chunked_arrays_equals_numpy_on_each_call(dask_device):
    f = lazynp.jit(_softmax)
    for seed, chunks in ((0, (7, 3)), (1, (10, 2))):    # new values and chunks: no stale plan
        xn, _ = _data(seed)
        out = f(_chunked(xn, chunks))
        assert str(out.device) == "dask"
        numpy.testing.assert_allclose(numpy.asarray(out), _softmax_numpy(xn), rtol=1e-12)


def test_jit_of_a_loss_with_plain_parameters_broadcast_to_the_chunks(dask_device):
    f = lazynp.jit(_loss)
    w = numpy.array([0.5, -1.0, 2.0])
    for seed in (2, 3):
        xn, yn = _data(seed)
        got = float(f(w, _chunked(xn, (8, 3)), _chunked(yn, 8)))
        assert got == pytest.approx(float(numpy.mean((xn @ w - yn) ** 2)), rel=1e-12)


def test_vmap_over_the_rows_of_a_chunked_array_equals_numpy(dask_device):
    xn, _ = _data(4, rows=12)
    got = lazynp.vmap(lambda r: (r * r).sum() - r.max())(_chunked(xn, (5, 3)))
    numpy.testing.assert_allclose(numpy.asarray(got), (xn * xn).sum(axis=1) - xn.max(axis=1),
                                  rtol=1e-12)


def test_fused_groups_of_the_same_ops_keep_their_own_values(dask_device):
    # two pending groups of one op (multiply) lowered in one flush: each its own chunks
    xn, _ = _data(5, rows=10)
    x = _chunked(xn, (4, 3))
    numpy.testing.assert_allclose(numpy.asarray(x * 2.0 + x * 3.0), 5.0 * xn, rtol=1e-12)


@pytest.mark.parametrize("name, call", [
    ("lazynp.grad", lambda w, x, y: lazynp.grad(_loss)(w, x, y)),
    ("lazynp.grad", lambda w, x, y: lazynp.value_and_grad(_loss)(w, x, y)),
    ("lazynp.grad", lambda w, x, y: lazynp.grad(_loss, argnums=1)(w, x, y)),
    ("lazynp.vjp", lambda w, x, y: lazynp.vjp(lambda x: _loss(w, x, y), x)),
])
def test_gradients_of_chunked_arrays_raise_naming_the_function(dask_device, name, call):
    xn, yn = _data(6)
    w = numpy.zeros(3)
    with pytest.raises(NotImplementedError, match=rf"^{name}: argument \d is a chunked \(dask\)"):
        call(w, _chunked(xn, (8, 3)), _chunked(yn, 8))


def test_the_gradient_of_the_gathered_data_still_equals_numpy(dask_device):
    # the way the error points to: the data gathered to the CPU, then differentiated
    xn, yn = _data(7)
    w = numpy.array([0.25, 0.5, -0.75])
    x, y = _chunked(xn, (8, 3)).to_device("cpu"), _chunked(yn, 8).to_device("cpu")
    got = numpy.asarray(lazynp.grad(_loss)(w, x, y))
    numpy.testing.assert_allclose(got, 2.0 / len(yn) * xn.T @ (xn @ w - yn), rtol=1e-10)


def test_a_vmap_result_read_after_the_block_uses_the_blocks_client(client, monkeypatch):
    # vmap stacks its per-example results: the stacked array keeps the block's client (it
    # had none, and its read started an embedded LocalCluster)
    import lazynp.dask.cluster as dask_cluster

    def no_embedded():
        raise AssertionError("an embedded LocalCluster was started")
    monkeypatch.setattr(dask_cluster, "embedded_client", no_embedded)
    xn, _ = _data(8, rows=6)
    with lazynp.default_device("dask", client=client):
        got = lazynp.vmap(lambda r: (r * r).sum())(_chunked(xn, (4, 3)))
    numpy.testing.assert_allclose(numpy.asarray(got), (xn * xn).sum(axis=1), rtol=1e-12)
