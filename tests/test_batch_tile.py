"""Batch tiling (lazynp/passes/batch_tile.py, jit.TiledPlan): which graphs are row-local,
and tiled plans give the untiled plan's results on every call."""
import numpy
import pytest

import lazynp as np
from lazynp import symbol
from lazynp.ir.passes import batch_tile

jit_mod = __import__("lazynp.jit.plan", fromlist=["TiledPlan"])


def conv2d(x, w):
    win = np.lib.stride_tricks.sliding_window_view(x, w.shape[2:], axis=(2, 3))
    return np.einsum("nchwrs,kcrs->nkhw", win, w)


def convnet(params, x):
    w1, w2, wd = params
    h = np.maximum(conv2d(x, w1), 0.0)
    h = np.maximum(conv2d(h, w2), 0.0)
    z = h.reshape(h.shape[0], -1) @ wd
    return np.exp(z - z.max(axis=1, keepdims=True))


def numpy_convnet(params, x):
    w1, w2, wd = params

    def conv(x, w):
        win = numpy.lib.stride_tricks.sliding_window_view(x, w.shape[2:], axis=(2, 3))
        return numpy.einsum("nchwrs,kcrs->nkhw", win, w)
    h = numpy.maximum(conv(x, w1), 0.0)
    h = numpy.maximum(conv(h, w2), 0.0)
    z = h.reshape(h.shape[0], -1) @ wd
    return numpy.exp(z - z.max(axis=1, keepdims=True))


def params(rng, f="float64"):
    return (rng.standard_normal((4, 3, 3, 3)).astype(f) * 0.2,
            rng.standard_normal((6, 4, 3, 3)).astype(f) * 0.2,
            rng.standard_normal((6 * 20 * 20, 5)).astype(f) * 0.01)


def row_local(f, *args):
    return batch_tile.batch_rows(symbol.trace(f, *args)) is not None


def test_row_local_graphs_are_recognized():
    rng = numpy.random.default_rng(0)
    x = rng.standard_normal((8, 5))
    w = rng.standard_normal((5, 3))
    assert row_local(lambda x, w: np.tanh(x @ w + 1.0), x, w)
    assert row_local(lambda x: (x - x.mean(axis=1, keepdims=True)) / x.std(axis=-1)[:, None], x)
    assert row_local(lambda x: np.cumsum(x[:, 1:], axis=1) * x[:, :1], x)
    assert row_local(lambda x, y: x * y, x, rng.standard_normal((8, 5)))
    assert row_local(convnet, params(rng), rng.standard_normal((4, 3, 24, 24)))


@pytest.mark.parametrize("f", [
    lambda x, w: x - x.mean(axis=0),                  # a reduction over the batch
    lambda x, w: (x.T @ x)[:, :3],                    # axis 0 moves
    lambda x, w: np.sum(x * 2.0),                     # the output has no batch axis
    lambda x, w: x.reshape(-1)[:8] * 2.0,             # a view across rows
    lambda x, w: np.cumsum(x, axis=0),                # a scan along the batch
    lambda x, w: x[::-1] * 2.0,                       # rows reversed
    lambda x, w: x + numpy.ones((8, 5)),              # a constant with rows of its own
    lambda x, w: np.concatenate([x, x]) * 2.0,        # not a row-local op
])
def test_graphs_that_mix_rows_are_not(f):
    rng = numpy.random.default_rng(0)
    assert not row_local(f, rng.standard_normal((8, 5)), rng.standard_normal((5, 3)))


def test_einsum_labels_must_keep_the_batch_label_first():
    rng = numpy.random.default_rng(0)
    a, b = rng.standard_normal((6, 3, 4)), rng.standard_normal((4, 2))
    assert row_local(lambda a, b: np.einsum("nij,jk->nik", a, b), a, b)
    assert not row_local(lambda a, b: np.einsum("nij,jk->ink", a, b)[0] * 1.0, a, b)
    # both operands batched (row i of each): still row-local
    assert row_local(lambda a, c: np.einsum("nij,nk->nik", a, c), a, rng.standard_normal((6, 5)))


def test_choose_chunk_divides_the_batch():
    assert batch_tile.choose_chunk(32, 1000, 8000) == 8
    assert batch_tile.choose_chunk(32, 1000, 100) == 1
    assert batch_tile.choose_chunk(30, 1000, 7000) == 6
    assert batch_tile.choose_chunk(7, 10, 1 << 20) == 7


def test_tiled_plan_matches_untiled_and_numpy_on_every_call():
    rng = numpy.random.default_rng(1)
    p = params(rng)
    x0 = rng.standard_normal((64, 3, 24, 24))
    j = np.jit(convnet)
    plan = j.plan_for(p, x0)
    assert isinstance(plan, jit_mod.TiledPlan) and plan.N // plan.chunk >= 2
    r = j.memory_report(p, x0)
    untiled = jit_mod.Plan(symbol.trace(convnet, p, x0))
    assert r["naive_bytes"] == untiled.memory_report()["naive_bytes"]
    assert r["planned_bytes"] < untiled.memory_report()["planned_bytes"]
    assert r["batch_tiles"] == plan.N // plan.chunk
    outs = []
    for k in range(3):
        x = rng.standard_normal((64, 3, 24, 24)) + k
        got = j(p, x)
        outs.append((got, numpy_convnet(p, x)))
        numpy.testing.assert_allclose(numpy.asarray(got), untiled.run(list(p) + [x])[0],
                                      rtol=1e-12, atol=1e-14)
    for got, want in outs:     # earlier results are not overwritten by later calls
        numpy.testing.assert_allclose(numpy.asarray(got), want, rtol=1e-10, atol=1e-12)


def test_small_graphs_are_not_tiled():
    rng = numpy.random.default_rng(2)
    j = np.jit(lambda x, w: np.tanh(x @ w))
    plan = j.plan_for(rng.standard_normal((64, 8)), rng.standard_normal((8, 4)))
    assert not isinstance(plan, jit_mod.TiledPlan)


def test_tiling_can_be_turned_off():
    rng = numpy.random.default_rng(3)
    p, x = params(rng), rng.standard_normal((64, 3, 24, 24))
    plan = np.jit(convnet, tile=False).plan_for(p, x)
    assert not isinstance(plan, jit_mod.TiledPlan)
    numpy.testing.assert_allclose(numpy.asarray(np.jit(convnet, tile=False)(p, x)),
                                  numpy.asarray(np.jit(convnet)(p, x)), rtol=1e-12)


# --- random graphs: tiled plans equal untiled plans and NumPy -------------------------------

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

STEPS = {
    # name: (lazynp/NumPy step on (x, w, mod), row-local?)
    "tanh": lambda x, w, m: m.tanh(x),
    "affine": lambda x, w, m: x * 1.5 + 0.25,
    "center_rows": lambda x, w, m: x - x.mean(axis=1, keepdims=True),
    "scale_rows": lambda x, w, m: x / (1.0 + x.max(axis=-1, keepdims=True) ** 2),
    "matmul": lambda x, w, m: x @ w[:x.shape[1], :3],
    "cumsum_rows": lambda x, w, m: m.cumsum(x, axis=1),
    "reverse_cols": lambda x, w, m: x[:, ::-1] * 1.0,
    "first_cols": lambda x, w, m: x[:, :2] + x[:, -2:],
    "einsum": lambda x, w, m: m.einsum("nj,jk->nk", x, w[:x.shape[1], :4]),
    # these mix rows: a plan must not be sliced
    "center_cols": lambda x, w, m: x - x.mean(axis=0),
    "reverse_rows": lambda x, w, m: x[::-1] * 1.0,
    "cumsum_cols": lambda x, w, m: m.cumsum(x, axis=0),
    "gram": lambda x, w, m: (x @ x.T)[:, :2],
}


@settings(max_examples=40, deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck))
@given(n=st.integers(2, 12), d=st.integers(2, 5),
       steps=st.lists(st.sampled_from(sorted(STEPS)), min_size=1, max_size=5),
       seed=st.integers(0, 1000))
def test_random_graphs_tiled_equal_untiled(tile_everything, n, d, steps, seed):
    rng = numpy.random.default_rng(seed)
    x, w = rng.standard_normal((n, d)), rng.standard_normal((8, 8))

    def f(m):
        def run(x, w):
            for s in steps:
                x = STEPS[s](x, w, m)
            return x
        return run
    want = f(numpy)(x, w)
    tiled = np.jit(f(np))
    got = numpy.asarray(tiled(x, w))
    untiled = numpy.asarray(np.jit(f(np), tile=False)(x, w))
    numpy.testing.assert_allclose(got, untiled, rtol=1e-12, atol=1e-12)
    numpy.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10)


@pytest.fixture(scope="module")
def tile_everything():
    """Tile every row-local graph, however small, in slices of one or two rows."""
    old = jit_mod.TILE_MIN_BYTES, jit_mod.TILE_BYTES, jit_mod.MAX_TILES
    jit_mod.TILE_MIN_BYTES, jit_mod.TILE_BYTES, jit_mod.MAX_TILES = 0, 1, 64
    yield
    jit_mod.TILE_MIN_BYTES, jit_mod.TILE_BYTES, jit_mod.MAX_TILES = old


def test_a_tiled_plan_warns_once_per_operation_like_numpy(tile_everything):
    import warnings
    x = numpy.full((8, 3), 800.0)
    x[0, 0] = 1.0
    f = lambda x: np.exp(x) * 2.0

    def warned(fn):
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            out = numpy.asarray(fn())
        return out, [str(m.message) for m in w if issubclass(m.category, RuntimeWarning)]
    j = np.jit(f)
    assert isinstance(j.plan_for(x), jit_mod.TiledPlan)
    got, w_tiled = warned(lambda: j(x))
    want, w_numpy = warned(lambda: numpy.exp(x) * 2.0)
    numpy.testing.assert_allclose(got, want, rtol=1e-15)
    assert w_tiled == w_numpy == ["overflow encountered in exp"]


def test_two_operations_with_one_warning_message_both_warn(tile_everything):
    import warnings
    f = lambda x, z: x / z + (x * 2) / z
    x, z = numpy.ones((8, 3)), numpy.zeros((8, 3))

    def count(fn):
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            numpy.asarray(fn())
        return len(w)
    j = np.jit(f)
    assert isinstance(j.plan_for(x, z), jit_mod.TiledPlan)
    with numpy.errstate(divide="warn"):
        assert count(lambda: j(x, z)) == count(lambda: x / z + (x * 2) / z) == 2


def test_views_only_graphs(tile_everything):
    x = numpy.arange(12.0).reshape(4, 3)
    numpy.testing.assert_array_equal(numpy.asarray(np.jit(lambda x: x[:, 1:])(x)), x[:, 1:])
    numpy.testing.assert_array_equal(numpy.asarray(np.jit(lambda x: x)(x)), x)


@pytest.mark.parametrize("shape", [(1, 3, 4), (4, 5, 6), (4, 256, 512)])
def test_a_view_of_a_result_with_its_operands_layout(shape):
    """An elementwise result of a transposed operand keeps that layout in NumPy; a view of
    it is a byte geometry of a C-contiguous buffer."""
    def f(m, x):
        h = (x - 1).transpose(0, 2, 1) * 2.0
        return h, h[:, 1:], h[..., ::2]
    x = numpy.random.default_rng(0).standard_normal(shape)
    want = f(numpy, x)
    for tile in (True, False):
        got = np.jit(lambda x: f(np, x), tile=tile)(x)
        for g, w in zip(got, want):
            numpy.testing.assert_array_equal(numpy.asarray(g), w)
