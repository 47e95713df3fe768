"""``jit``, ``vmap`` and ``grad`` of functions over chunked (dask) arrays (issue 39, item 3).

``jit`` and ``vmap`` of a function of chunked arrays record on the dask device's graph and
give NumPy's values.  ``grad``/``value_and_grad``/``vjp`` of a loss over chunked data with
plain parameters (least squares, logistic regression, a small MLP) equal NumPy's and the
CPU path's gradients; ``jacobian``/``jvp`` and ops with no rule on the differentiated path
raise ``NotImplementedError`` naming them.
"""
from __future__ import annotations

import re

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


def _cpu_grad(fun, argnums, *args):
    """The CPU path's gradient (lazynp's tape over host arrays): the oracle beside NumPy."""
    g = lazynp.grad(fun, argnums=argnums)(*[lazynp.asarray(a, device="cpu") for a in args])
    return tuple(numpy.asarray(v) for v in g) if isinstance(g, tuple) else numpy.asarray(g)


@pytest.mark.parametrize("seed, chunks", [(10, (8, 3)), (11, (5, 2)), (12, (30, 3))])
def test_grad_of_a_least_squares_loss_over_chunked_data_equals_numpy(dask_device, seed,
                                                                      chunks):
    xn, yn = _data(seed)
    w = numpy.array([0.25, 0.5, -0.75])
    got = lazynp.grad(_loss)(w, _chunked(xn, chunks), _chunked(yn, chunks[0]))
    want = 2.0 / len(yn) * xn.T @ (xn @ w - yn)
    assert str(getattr(got, "device", "cpu")) == "cpu"          # (a parameter: gathered)
    numpy.testing.assert_allclose(numpy.asarray(got), want, rtol=1e-10)
    with lazynp.default_device("cpu"):
        numpy.testing.assert_allclose(numpy.asarray(got), _cpu_grad(_loss, 0, w, xn, yn),
                                      rtol=1e-10)


def test_value_and_grad_over_chunked_data_gives_numpys_value_and_gradient(dask_device):
    xn, yn = _data(13)
    w = numpy.array([1.0, -2.0, 0.5])
    v, g = lazynp.value_and_grad(_loss)(w, _chunked(xn, (7, 3)), _chunked(yn, 7))
    assert float(v) == pytest.approx(float(numpy.mean((xn @ w - yn) ** 2)), rel=1e-12)
    numpy.testing.assert_allclose(numpy.asarray(g), 2.0 / len(yn) * xn.T @ (xn @ w - yn),
                                  rtol=1e-10)


def test_grad_leaves_the_loss_value_uncomputed(dask_device):
    # grad drops the value: computing it with the gradients cost a pass over the chunks
    xn, yn = _data(14)
    w = numpy.array([0.5, -1.0, 2.0])
    losses = []

    def loss(w, x, y):
        out = _loss(w, x, y)
        losses.append(out)
        return out

    g = lazynp.grad(loss)(w, _chunked(xn, (10, 3)), _chunked(yn, 10))
    numpy.testing.assert_allclose(numpy.asarray(g), 2.0 / len(yn) * xn.T @ (xn @ w - yn),
                                  rtol=1e-10)
    assert losses[0]._n.host is None
    assert float(losses[0]) == pytest.approx(float(numpy.mean((xn @ w - yn) ** 2)), rel=1e-12)


def _logistic(w, b, x, y):
    z = x @ w + b
    return lazynp.mean(lazynp.log1p(lazynp.exp(-y * z)))


def test_grad_of_logistic_regression_over_two_parameters_equals_numpy(dask_device):
    xn, _ = _data(14, rows=40)
    yn = numpy.where(numpy.random.default_rng(14).random(40) > 0.5, 1.0, -1.0)
    w, b = numpy.array([0.3, -0.2, 0.1]), numpy.array(0.05)
    gw, gb = lazynp.grad(_logistic, argnums=(0, 1))(w, b, _chunked(xn, (9, 3)),
                                                     _chunked(yn, 9))
    s = -yn / (1.0 + numpy.exp(yn * (xn @ w + b))) / len(yn)      # d loss / d z
    numpy.testing.assert_allclose(numpy.asarray(gw), xn.T @ s, rtol=1e-10)
    numpy.testing.assert_allclose(numpy.asarray(gb), s.sum(), rtol=1e-10)
    assert numpy.asarray(gb).shape == ()


def _mlp(w1, b1, w2, x, y):
    h = lazynp.tanh(x @ w1 + b1)
    r = h @ w2 - y
    return (r * r).sum() / x.shape[0]


def test_grad_of_a_small_mlps_layers_equals_the_cpu_path(dask_device):
    rng = numpy.random.default_rng(15)
    xn, yn = _data(15, rows=25)
    w1, b1, w2 = rng.standard_normal((3, 4)), rng.standard_normal(4), rng.standard_normal(4)
    got = lazynp.grad(_mlp, argnums=(0, 1, 2))(w1, b1, w2, _chunked(xn, (6, 3)),
                                               _chunked(yn, 6))
    with lazynp.default_device("cpu"):
        want = _cpu_grad(_mlp, (0, 1, 2), w1, b1, w2, xn, yn)
    h = numpy.tanh(xn @ w1 + b1)
    numpy.testing.assert_allclose(numpy.asarray(got[2]), 2.0 / 25 * h.T @ (h @ w2 - yn),
                                  rtol=1e-10)
    for g, wv in zip(got, want):
        numpy.testing.assert_allclose(numpy.asarray(g), wv, rtol=1e-10)


def test_grad_with_respect_to_chunked_data_stays_chunked_and_equals_numpy(dask_device):
    xn, yn = _data(16)
    w = numpy.array([0.5, -1.0, 2.0])
    gx = lazynp.grad(_loss, argnums=1)(w, _chunked(xn, (8, 3)), _chunked(yn, 8))
    assert str(gx.device) == "dask"
    numpy.testing.assert_allclose(numpy.asarray(gx),
                                  2.0 / len(yn) * numpy.outer(xn @ w - yn, w), atol=1e-14)


def test_grad_of_sums_of_a_chunked_argument_has_its_shape_and_chunks(dask_device):
    # (a sum's cotangent is kept small until an op needs its shape: here, the end)
    xn, _ = _data(21, rows=10)
    x = _chunked(xn, (4, 2))
    gx = lazynp.grad(lambda x: (x * 2.0).sum() + x.mean() + x.T.sum(axis=1).max())(x)
    assert gx.shape == xn.shape and gx.chunks == x.chunks
    want = numpy.full(xn.shape, 2.0 + 1.0 / xn.size)
    want[:, numpy.argmax(xn.sum(axis=0))] += 1.0
    numpy.testing.assert_allclose(numpy.asarray(gx), want, rtol=1e-12)


def _views_and_reductions(w, x):
    # transposes, a reshape, a basic slice, where, max, std and lazynp.dot on the path
    t = lazynp.dot(x, w).reshape(-1, 1).T[:, 1:]
    m = lazynp.where(t > 0, t, 0.1 * t)
    return m.max() + (x.T * w[:, None]).std() + lazynp.sum(m[0, ::2])


def test_grad_through_views_where_max_and_std_equals_the_cpu_path(dask_device):
    xn, _ = _data(17, rows=20)
    w = numpy.array([0.7, -0.4, 1.3])
    got = lazynp.grad(_views_and_reductions)(w, _chunked(xn, (6, 2)))
    with lazynp.default_device("cpu"):
        want = _cpu_grad(_views_and_reductions, 0, w, xn)
    numpy.testing.assert_allclose(numpy.asarray(got), want, rtol=1e-10)


def test_vjp_of_chunked_rows_equals_numpy(dask_device):
    xn, _ = _data(18, rows=12)
    w = numpy.array([0.1, 0.2, 0.3])
    out, vjp_fn = lazynp.vjp(lambda w, x: lazynp.tanh(x @ w), w, _chunked(xn, (5, 3)))
    c = numpy.linspace(-1.0, 1.0, 12)
    gw, gx = vjp_fn(c)
    s = c * (1.0 - numpy.tanh(xn @ w) ** 2)
    numpy.testing.assert_allclose(numpy.asarray(out), numpy.tanh(xn @ w), rtol=1e-12)
    numpy.testing.assert_allclose(numpy.asarray(gw), xn.T @ s, rtol=1e-10)
    numpy.testing.assert_allclose(numpy.asarray(gx), numpy.outer(s, w), rtol=1e-10)


def _logistic_wx(w, x, y):
    return lazynp.mean(lazynp.log1p(lazynp.exp(-y * (x @ w)))) + (w ** 4).sum()


def _max_std_path(w, x, y):
    h = lazynp.tanh(x * w[None, :])
    return (h.max(axis=1) ** 2).sum() + h.std() + (y * (x @ w)).mean()


@pytest.mark.parametrize("f", [_loss, _logistic_wx, _max_std_path])
def test_hessian_and_hvp_over_chunked_data_equal_the_cpu_path(dask_device, f):
    # (jacobian of grad: the inner backward pass is recorded, then differentiated; a
    # jvp of grad is a Hessian-vector product)
    xn, _ = _data(6, rows=14)
    yn = numpy.where(numpy.random.default_rng(6).random(14) > 0.5, 1.0, -1.0)
    w, v = numpy.array([0.3, -0.6, 0.9]), numpy.array([1.0, 0.5, -2.0])
    x, y = _chunked(xn, (5, 3)), _chunked(yn, 5)
    h = lazynp.hessian(f)(w, x, y)
    _, hv = lazynp.jvp(lambda w: lazynp.grad(f)(w, x, y), (w,), (v,))
    want = numpy.asarray(_on_cpu(lambda *a: lazynp.hessian(f)(*a), w, xn, yn))
    numpy.testing.assert_allclose(numpy.asarray(h), want, rtol=1e-10, atol=1e-14)
    numpy.testing.assert_allclose(numpy.asarray(hv), want @ v, rtol=1e-10, atol=1e-14)


def test_a_forward_transform_inside_another_over_chunked_data_raises_naming_it(dask_device):
    xn, yn = _data(6)
    with pytest.raises(NotImplementedError, match=r"^lazynp.jvp inside another transform "
                                                  r"over chunked \(dask\) arrays"):
        lazynp.grad(lambda w, x: lazynp.jvp(lambda w: (x @ w).sum(), (w,), (w,))[1])(
            numpy.ones(3), _chunked(xn, (8, 3)))


def test_a_jacobian_too_large_to_form_raises_naming_jvp_and_vjp(dask_device, monkeypatch):
    import lazynp.autograd.dask_forward as dask_forward
    monkeypatch.setattr(dask_forward, "MAX_PASSES", 5)
    xn, _ = _data(6, rows=12)
    with pytest.raises(NotImplementedError, match=r"^lazynp.jacobian on chunked \(dask\) "
                                                  r"arrays: .* takes 12 passes.*lazynp.jvp"):
        lazynp.jacobian(lambda x: (x * x).sum(axis=1))(_chunked(xn, (5, 3)))


@pytest.mark.parametrize("name, f", [
    ("lazynp.cumprod", lambda w, x: lazynp.cumprod(x @ w).sum()),
    ("getitem (advanced) by a chunked index array",
     lambda w, x: (x @ w)[(x[:, 0] > 0)].sum()),
    ("lazynp.diff", lambda w, x: (lazynp.diff(x @ w) ** 2).sum()),
])
def test_grad_through_an_op_with_no_rule_raises_naming_it(dask_device, name, f):
    xn, _ = _data(19)
    with pytest.raises(NotImplementedError, match=f"no gradient rule for {re.escape(repr(name))}"):
        lazynp.grad(f)(numpy.ones(3), _chunked(xn, (8, 3)))


@pytest.mark.parametrize("take", [
    lambda v: float(v.sum()), lambda v: numpy.asarray(v), lambda v: v.to_device("cpu"),
    lambda v: v.tolist(), lambda v: v.to_dask()])
def test_a_differentiated_value_taken_out_of_the_recording_raises(dask_device, take):
    # (as on the CPU path: the value would be a constant, its gradient silently missing)
    xn, _ = _data(22)
    x = _chunked(xn, (8, 3))

    def f(w, x):
        r = x @ w
        take(r)
        return (r * r).sum()
    with pytest.raises(lazynp.autograd.TracedValueError, match="would carry no gradient"):
        lazynp.grad(f)(numpy.ones(3), x)


def test_reads_of_the_data_and_bool_of_a_comparison_stay_allowed(dask_device):
    xn, yn = _data(23)
    x, y = _chunked(xn, (8, 3)), _chunked(yn, 8)

    def f(w, x, y):
        scale = 1.0 / float(abs(y).max())          # (data only: a constant)
        loss = _loss(w, x, y) * scale
        return loss if bool(loss > 0) else -loss
    w = numpy.array([0.5, 0.5, -0.5])
    got = lazynp.grad(f)(w, x, y)
    want = 2.0 / len(yn) * xn.T @ (xn @ w - yn) / numpy.abs(yn).max()
    numpy.testing.assert_allclose(numpy.asarray(got), want, rtol=1e-10)


def test_an_op_with_no_rule_off_the_differentiated_path_does_not_raise(dask_device):
    # the sorted data is a constant: its op needs no rule
    xn, yn = _data(20)
    x = _chunked(xn, (8, 3))
    w = numpy.array([0.5, 0.5, 0.5])
    got = lazynp.grad(lambda w, x: (lazynp.sort(x, axis=0) @ w).sum())(w, x)
    numpy.testing.assert_allclose(numpy.asarray(got), numpy.sort(xn, axis=0).sum(axis=0),
                                  rtol=1e-12)


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


# --- forward mode, Jacobians, and the rules of prod, cumsum, sort, indexing, writes -----------

def _rules_path(w, x):
    # every rule on one path: matmul, elementwise, where, max, std, views, cumsum, sort,
    # prod, indexing by a host array with a repeated index, a write
    r = lazynp.tanh(x @ w)
    v = lazynp.where(r > 0, r, 0.5 * r) * lazynp.exp(x[:, 0])
    c = lazynp.cumsum(v)
    s = lazynp.sort(v * 3.0)
    t = x * 1.0
    t[1] = w * 2.0
    return (c.max() + v.std() + (s[:4] * numpy.arange(4.0)).sum() + v[:3].prod()
            + (v[numpy.array([0, 5, 5, 2])] ** 2).sum() + (t * t).mean() + x.T.reshape(-1)[::4].sum())


def _on_cpu(transform, *args):
    with lazynp.default_device("cpu"):
        return transform(*[lazynp.asarray(a, device="cpu") for a in args])


@pytest.mark.parametrize("seed, chunks", [(30, (5, 3)), (31, (4, 2)), (32, (12, 3))])
def test_grad_and_jvp_through_every_rule_equal_the_cpu_path(dask_device, seed, chunks):
    rng = numpy.random.default_rng(seed)
    xn, _ = _data(seed, rows=12)
    w, tw, tx = rng.standard_normal(3), rng.standard_normal(3), rng.standard_normal((12, 3))
    gw, gx = lazynp.grad(_rules_path, argnums=(0, 1))(w, _chunked(xn, chunks))
    want_w, want_x = _on_cpu(lambda w, x: lazynp.grad(_rules_path, argnums=(0, 1))(w, x), w, xn)
    numpy.testing.assert_allclose(numpy.asarray(gw), numpy.asarray(want_w), rtol=1e-10)
    numpy.testing.assert_allclose(numpy.asarray(gx), numpy.asarray(want_x), rtol=1e-10,
                                  atol=1e-13)
    out, tan = lazynp.jvp(_rules_path, (w, _chunked(xn, chunks)), (tw, _chunked(tx, chunks)))
    assert str(tan.device) == "dask"
    want_out, want_tan = _on_cpu(lambda *a: lazynp.jvp(_rules_path, a[:2], a[2:]), w, xn, tw, tx)
    assert float(out) == pytest.approx(float(want_out), rel=1e-12)
    # (the directional derivative is the gradient contracted with the tangents)
    assert float(tan) == pytest.approx(float(want_tan), rel=1e-10)
    assert float(tan) == pytest.approx(float(numpy.sum(numpy.asarray(want_w) * tw)
                                             + numpy.sum(numpy.asarray(want_x) * tx)), rel=1e-9)


@pytest.mark.parametrize("x_row", [[2.0, 3.0, 4.0], [2.0, 0.0, 4.0], [0.0, 3.0, 0.0]])
def test_the_gradient_of_prod_with_zeros_equals_the_product_of_the_others(dask_device, x_row):
    xn = numpy.array([x_row, [1.5, -2.0, 0.5]])
    g = lazynp.grad(lambda x: x.prod(axis=1).sum())(_chunked(xn, (1, 2)))
    want = numpy.array([[numpy.prod(numpy.delete(r, i)) for i in range(3)] for r in xn])
    numpy.testing.assert_array_equal(numpy.asarray(g), want)
    _, t = lazynp.jvp(lambda x: x.prod(), (_chunked(xn, (1, 2)),), (numpy.ones_like(xn),))
    flat = xn.ravel()
    assert float(t) == pytest.approx(sum(numpy.prod(numpy.delete(flat, i))
                                         for i in range(flat.size)), abs=1e-12)


def test_a_write_with_a_repeated_index_on_the_path_raises_naming_it(dask_device):
    xn, _ = _data(33, rows=6)

    def f(w, x):
        t = x * 1.0
        t[numpy.array([1, 1])] = w
        return t.sum()
    with pytest.raises(NotImplementedError, match="no gradient rule for 'setitem with a "
                                                  "repeated index'"):
        lazynp.grad(f)(numpy.ones(3), _chunked(xn, (4, 3)))


@pytest.mark.parametrize("argnums", [0, 1, (0, 1)])
def test_jacobian_over_chunked_arrays_equals_the_cpu_path(dask_device, argnums):
    # output of 5 elements: reverse passes for w (3 elements) and x (15) together;
    # w alone (3 < 5): forward passes
    xn, _ = _data(34, rows=5)
    w = numpy.array([0.3, -0.7, 1.1])

    def f(w, x):
        return lazynp.sin(x @ w) * x[:, 1] + lazynp.cumsum(x[:, 2])
    got = lazynp.jacobian(f, argnums=argnums)(w, _chunked(xn, (2, 3)))
    want = _on_cpu(lambda w, x: lazynp.jacobian(f, argnums=argnums)(w, x), w, xn)
    got, want = (got, want) if isinstance(argnums, tuple) else ((got,), (want,))
    for g, wv in zip(got, want):
        assert g.shape == numpy.asarray(wv).shape
        numpy.testing.assert_allclose(numpy.asarray(g), numpy.asarray(wv), rtol=1e-12,
                                      atol=1e-15)


def test_elementwise_grad_of_chunked_arrays_stays_chunked_and_equals_numpy(dask_device):
    xn, _ = _data(35, rows=9)
    g = lazynp.elementwise_grad(lambda x: lazynp.sin(x) * x)(_chunked(xn, (4, 2)))
    assert str(g.device) == "dask"
    numpy.testing.assert_allclose(numpy.asarray(g), numpy.cos(xn) * xn + numpy.sin(xn),
                                  rtol=1e-12)


def test_transforms_of_cpu_arguments_inside_a_dask_block_stay_on_the_cpu(dask_device):
    # (their seeds, tangents and basis vectors were made chunked by the block: AttributeError)
    w = numpy.array([0.5, -1.0, 2.0])
    f = lazynp.sin
    _, t = lazynp.jvp(f, (w,), (numpy.ones(3),))
    numpy.testing.assert_allclose(numpy.asarray(t), numpy.cos(w), rtol=1e-15)
    numpy.testing.assert_allclose(numpy.asarray(lazynp.jacobian(f)(w)), numpy.diag(numpy.cos(w)),
                                  rtol=1e-15)
    numpy.testing.assert_allclose(numpy.asarray(lazynp.vjp(f, w)[1](numpy.ones(3))[0]),
                                  numpy.cos(w), rtol=1e-15)
    numpy.testing.assert_allclose(numpy.asarray(lazynp.elementwise_grad(f)(w)), numpy.cos(w),
                                  rtol=1e-15)
    numpy.testing.assert_allclose(numpy.asarray(lazynp.hessian(lambda w: (w ** 3).sum())(w)),
                                  numpy.diag(6.0 * w), rtol=1e-15)


@pytest.mark.parametrize("in_block", [False, True])
def test_transforms_of_a_function_reading_chunked_data_from_a_closure_equal_numpy(
        client, in_block):
    # (as in JAX: loss = lambda w: mse(w, X, y) with X chunked; the CPU tape cannot follow
    # the chunked data, so the transform takes the chunked path)
    xn, _ = _data(36, rows=10)
    w = numpy.array([0.5, 1.0, -1.0])
    with lazynp.default_device("dask", client=client):
        x = _chunked(xn, (4, 3))
    d = 1.0 - numpy.tanh(xn @ w) ** 2
    f = lambda w: lazynp.tanh(x @ w)       # noqa: E731
    with lazynp.default_device("dask", client=client) if in_block else lazynp.default_device("cpu"):
        got = [lazynp.grad(lambda w: f(w).sum())(w), lazynp.jvp(f, (w,), (w,))[1],
               lazynp.jacobian(f)(w), lazynp.vjp(f, w)[1](numpy.ones(10))[0],
               lazynp.elementwise_grad(f)(w)]
        got.append(lazynp.hessian(lambda w: f(w).sum())(w))
    wants = [xn.T @ d, d * (xn @ w), d[:, None] * xn, xn.T @ d, xn.T @ d,
             -2.0 * (xn.T * (numpy.tanh(xn @ w) * d)) @ xn]
    for g, want in zip(got, wants):
        numpy.testing.assert_allclose(numpy.asarray(g), want, rtol=1e-12, atol=1e-15)


def _joined(w, x):
    return ((lazynp.concatenate([x @ w, lazynp.sin(x[:, 0])]) ** 2).sum()
            + lazynp.stack([x @ w, x[:, 1]], axis=1).max(axis=1).sum())


def test_grad_and_jvp_through_stack_and_concatenate_and_grad_of_vmap_equal_the_cpu_path(
        dask_device):
    xn, _ = _data(37, rows=10)
    w, tx = numpy.array([0.5, 1.0, -1.0]), numpy.ones((10, 3))
    x = _chunked(xn, (4, 3))
    gw, gx = lazynp.grad(_joined, argnums=(0, 1))(w, x)
    _, t = lazynp.jvp(_joined, (w, x), (w, tx))
    want_w, want_x = _on_cpu(lambda w, x: lazynp.grad(_joined, argnums=(0, 1))(w, x), w, xn)
    _, want_t = _on_cpu(lambda *a: lazynp.jvp(_joined, a[:2], a[2:]), w, xn, w, tx)
    numpy.testing.assert_allclose(numpy.asarray(gw), numpy.asarray(want_w), rtol=1e-12)
    numpy.testing.assert_allclose(numpy.asarray(gx), numpy.asarray(want_x), rtol=1e-12)
    assert float(t) == pytest.approx(float(want_t), rel=1e-12)
    # (vmap over the rows stacks its results: a gradient goes back through the stack)
    g = lazynp.grad(lambda w: lazynp.vmap(lambda r: lazynp.tanh(r @ w))(x).sum())(w)
    numpy.testing.assert_allclose(numpy.asarray(g), xn.T @ (1 - numpy.tanh(xn @ w) ** 2),
                                  rtol=1e-12)
