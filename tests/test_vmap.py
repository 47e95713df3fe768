"""``lazynp.vmap``: JAX's axes semantics and errors, ``vmap(f)`` equal to the loop
``stack([f(x) for x in xs])`` over a broad set of public functions, composition with
``grad``/``jit``/``jacobian``/``hessian``, and the per-example fallbacks counted in
``stats()``."""
from __future__ import annotations

import _cuda_sim  # noqa: F401  (Numba's CUDA simulator for the device-array test)
import numpy
import pytest

import lazynp as np

RNG = numpy.random.default_rng(0)
C = RNG.standard_normal((4, 5))
SPD = numpy.eye(4) * 4


def _set(x):
    y = x.copy()
    y[0, 1] = 5.0
    y[1:, :2] += x[:3, :2]
    y[:, [0, 2]] = x[:, 3:5] * 2
    return y


def _set_leading_ones(x):
    y = np.zeros((2, 5))
    y[0] = x[None, 0, :]               # NumPy drops the value's leading size-1 axes
    y[1, :2] = x[None, None, 1, :2]
    return y


def _add_at(x):
    y = np.zeros((4, 5))
    np.add.at(y, (0, [1, 1]), x[0, :2])
    return y + x


def _out(x):
    y = np.empty((4, 5))
    np.multiply(x, 2, out=y)
    np.add(y[1:], x[:3], out=y[1:])
    return y


#: name: (function of one example, the example's shape); every one has a batching rule
CASES = {
    # elementwise, broadcasting against unbatched constants
    "sin": (lambda x: np.sin(x) * 2 + C, (4, 5)),
    "broadcast_row": (lambda x: x + C, (5,)),
    "power_abs": (lambda x: np.power(np.abs(x), 1.5) - x ** 2, (4, 5)),
    "maximum_minimum": (lambda x: np.maximum(x, 0) + np.minimum(x, C), (4, 5)),
    "where_clip": (lambda x: np.where(x > 0, x, C) + np.clip(x, -0.5, 0.5), (4, 5)),
    "astype_dtype_kw": (lambda x: x.astype(np.float32) * 2 + np.add(x, 1, dtype=np.float32),
                        (4, 5)),
    "two_outputs": (lambda x: np.divmod(x, 0.7)[1] + np.modf(x)[0], (4, 5)),
    "scalar_example": (lambda x: x * 2.0 + 1, ()),
    "logsumexp": (lambda x: np.log(np.sum(np.exp(x - x.max(-1, keepdims=True)), -1)),
                  (4, 5)),
    # reductions and scans with every kind of axis
    "sum_all": (lambda x: np.sum(x), (4, 5)),
    "sum_axis0": (lambda x: np.sum(x, axis=0), (4, 5)),
    "sum_negative_keepdims": (lambda x: np.sum(x, axis=-1, keepdims=True), (4, 5)),
    "sum_tuple": (lambda x: x.sum(axis=(0, 1)), (4, 5)),
    "sum_all_keepdims": (lambda x: np.sum(x, keepdims=True), (4, 5)),
    "mean_var_std": (lambda x: np.mean(x, 1) + np.var(x, axis=1, ddof=1) + np.std(x, 0).sum(),
                     (4, 5)),
    "max_argmax": (lambda x: np.max(x, 0) + np.argmax(x, axis=1)[:, None].sum(), (4, 5)),
    "argmax_flat": (lambda x: np.argmax(x), (4, 5)),
    "argmin_keepdims": (lambda x: np.argmin(x, keepdims=True), (4, 5)),
    "cumsum_flat": (lambda x: np.cumsum(x), (4, 5)),
    "cumprod_axis": (lambda x: np.cumprod(x, axis=1), (4, 5)),
    "prod_all_any": (lambda x: np.prod(x, 0) + np.all(x > 0, 1).sum() + np.any(x > 1),
                     (4, 5)),
    "median_ptp": (lambda x: np.median(x, axis=0) + np.ptp(x, axis=0), (4, 5)),
    "ufunc_reduce_accumulate": (lambda x: np.add.reduce(x, axis=1)[:, None] +
                                np.add.accumulate(x, axis=0) + np.maximum.reduce(x, axis=None),
                                (4, 5)),
    # products
    "vector_matrix": (lambda x: x @ C, (4,)),
    "matrix_vector": (lambda x: C @ x, (5,)),
    "matrix_matrix": (lambda x: x.T @ C, (4, 3)),
    "matmul_both_batched": (lambda x: x @ x.T, (4, 5)),
    "vector_vector": (lambda x: x @ x, (5,)),
    "stacked_matmul": (lambda x: np.matmul(x, C), (2, 3, 4)),
    "dot": (lambda x: np.dot(x, C) + np.dot(x[:, 0], x)[:, None], (4, 4)),
    "einsum": (lambda x: np.einsum("ij,jk->ik", x, C), (3, 4)),
    "einsum_implicit": (lambda x: np.einsum("ij,ij", x, x), (3, 4)),
    "einsum_ellipsis": (lambda x: np.einsum("...j,jk->...k", x, C), (2, 3, 4)),
    "einsum_trace": (lambda x: np.einsum("ii", x), (4, 4)),
    "tensordot": (lambda x: np.tensordot(x, C, axes=([1], [0])) + np.tensordot(x, x, axes=2),
                  (3, 4)),
    "inner_outer": (lambda x: np.inner(x, C).sum() + np.outer(x[0], x[1]), (3, 5)),
    # shapes, views, indexing
    "reshape": (lambda x: np.reshape(x, (5, 4)) * 1, (4, 5)),
    "reshape_transposed": (lambda x: np.reshape(x.T, (2, 10)), (4, 5)),
    "ravel_transposed": (lambda x: x.T.ravel(), (4, 5)),
    "transpose": (lambda x: np.transpose(x) + C.T, (4, 5)),
    "swapaxes_moveaxis": (lambda x: np.swapaxes(x, 0, 2) + np.moveaxis(x, 0, -1), (2, 2, 2)),
    "expand_squeeze": (lambda x: np.expand_dims(x, 0) + np.squeeze(x[:1]), (4, 5)),
    "slices": (lambda x: x[1:3, ::2] + x[-1, :3][None], (4, 5)),
    "integer_index": (lambda x: x[2], (4, 5)),
    "newaxis_ellipsis": (lambda x: x[None, ..., 1:2], (4, 5)),
    "fancy_rows": (lambda x: x[[0, 2, 2]], (4, 5)),
    "fancy_columns": (lambda x: x[:, [4, 0]], (4, 5)),
    "fancy_not_adjacent": (lambda x: x[[0, 1], :, [2, 3]], (3, 4, 5)),
    "fancy_with_integer": (lambda x: x[1, :, [0, 2]], (3, 4, 5)),
    "constant_mask": (lambda x: x[numpy.array([True, False, True, True])], (4, 5)),
    "take": (lambda x: np.take(x, [1, 3], axis=1) + np.take(x, [1, 7])[:, None].sum(),
             (4, 5)),
    "take_along_axis": (lambda x: np.take_along_axis(x, numpy.array([[0], [1], [2], [3]]),
                                                     axis=1), (4, 5)),
    "diagonal_trace": (lambda x: np.diag(x).sum() + np.trace(x), (4, 5)),
    "flip_roll": (lambda x: np.flip(x, 1) + np.roll(x, 2, axis=1), (4, 5)),
    "split": (lambda x: np.split(x, 2, axis=0)[1], (4, 5)),
    # joining
    "concatenate_axis0": (lambda x: np.concatenate([x, C]), (4, 5)),
    "concatenate_axis1": (lambda x: np.concatenate([x, x * 2], axis=1), (4, 5)),
    "concatenate_flat": (lambda x: np.concatenate([x, C], axis=None), (4, 5)),
    "stack_hstack": (lambda x: np.stack([x, C], axis=-1).sum(-1) + np.hstack([x, C])[:, :5],
                     (4, 5)),
    # along an axis, on the last two axes, linear algebra
    "sort_argsort": (lambda x: np.sort(x, axis=0) + np.argsort(x), (4, 5)),
    "sort_flat": (lambda x: np.sort(x, axis=None), (4, 5)),
    "diff": (lambda x: np.diff(x, axis=0), (4, 5)),
    "triu_tril": (lambda x: np.triu(x, 1) - np.tril(x), (4, 5)),
    "inv_det": (lambda x: np.linalg.inv(x + SPD) * np.linalg.det(x), (4, 4)),
    "solve": (lambda x: np.linalg.solve(x + SPD, x[0]).sum() +
              np.linalg.solve(x + SPD, C[:, :2]), (4, 4)),
    "svd_slogdet_eigh": (lambda x: np.linalg.svd(x)[1].sum() + np.linalg.slogdet(x)[1] +
                         np.linalg.eigh(x + x.T)[0], (4, 4)),
    "norms": (lambda x: np.linalg.norm(x) + np.linalg.norm(x, ord=1) +
              np.linalg.norm(x, axis=0, keepdims=True) + np.linalg.norm(x, 2, axis=(1, 0)),
              (3, 4)),
    "pad_tile": (lambda x: np.pad(x, ((1, 2), (0, 1)), constant_values=3)[:3, :4] +
                 np.tile(x, (2, 1, 3))[1, :6, :4], (3, 4)),
    "lazy_index_gather": (lambda x: x[np.argsort(x[:, 0])], (4, 5)),
    # writes
    "setitem": (_set, (4, 5)),
    "setitem_leading_ones": (_set_leading_ones, (4, 5)),
    "ufunc_at": (_add_at, (4, 5)),
    "ufunc_out": (_out, (4, 5)),
}


def _loop(f, xs):
    return numpy.stack([numpy.asarray(f(np.asarray(x))) for x in xs])


@pytest.mark.parametrize("name", sorted(CASES))
def test_vmap_equals_the_loop(name):
    f, shape = CASES[name]
    xs = RNG.standard_normal((3,) + shape)
    want = _loop(f, xs)
    np.reset_stats()
    got = np.vmap(f)(np.asarray(xs))
    stats = np.stats()
    got = numpy.asarray(got)
    assert got.shape == want.shape and got.dtype == want.dtype
    numpy.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    # one batched op per traced op: no per-example loop
    assert stats["vmap_op_loops"] == 0, stats["vmap_looped_ops"]
    assert stats["vmap_function_loops"] == 0


@pytest.mark.parametrize("dtype", [numpy.int64, numpy.float32, numpy.complex128, bool])
def test_dtypes_are_the_loops(dtype):
    xs = (RNG.standard_normal((3, 4)) * 4).astype(dtype)

    def f(x):
        return x * 2 + np.sum(x, axis=0)
    want = _loop(f, xs)
    got = numpy.asarray(np.vmap(f)(xs))
    assert got.dtype == want.dtype
    numpy.testing.assert_array_equal(got, want)


def test_batch_sizes_one_and_zero():
    w = np.asarray(C)
    for n in (1, 0):
        xs = RNG.standard_normal((n, 4))
        got = numpy.asarray(np.vmap(lambda x: np.tanh(x @ w))(xs))
        assert got.shape == (n, 5)
        numpy.testing.assert_allclose(got, numpy.tanh(xs @ C), rtol=1e-12)
    got = numpy.asarray(np.vmap(lambda x: np.kron(x, x))(numpy.zeros((0, 2))))
    assert got.shape == (0, 4)


# --- axes: JAX's semantics -----------------------------------------------------------------

X = RNG.standard_normal((3, 4))


def test_in_axes_int_none_negative_and_tuple():
    y = RNG.standard_normal(4)
    numpy.testing.assert_allclose(np.vmap(lambda a: np.sum(a), in_axes=1)(X), X.sum(0))
    numpy.testing.assert_allclose(np.vmap(lambda a: np.sum(a), in_axes=-1)(X), X.sum(0))
    numpy.testing.assert_allclose(np.vmap(lambda a, b: a * b, in_axes=(0, None))(X, y), X * y)
    numpy.testing.assert_allclose(np.vmap(lambda a, b: a * b, in_axes=[1, 0])(X, y),
                                  X.T * y[:, None])
    # keyword arguments are mapped over axis 0
    numpy.testing.assert_allclose(np.vmap(lambda a, b=None: a - b)(X, b=X[::-1]),
                                  X - X[::-1])


def test_in_axes_nested_prefix_of_the_arguments():
    a, b = RNG.standard_normal((3, 2)), RNG.standard_normal((2, 3))
    w, s = RNG.standard_normal(2), RNG.standard_normal(3)

    def f(pair, d):
        return pair[0] * pair[1] + d["w"] * d["s"]
    got = np.vmap(f, in_axes=((0, 1), {"w": None, "s": 0}))((a, b), {"w": w, "s": s})
    numpy.testing.assert_allclose(numpy.asarray(got), a * b.T + w[None, :] * s[:, None])
    # a tuple entry covering a whole subtree, and a list argument
    xs = [RNG.standard_normal((3, 2)), RNG.standard_normal((3, 2))]
    got = np.vmap(lambda p: p[0] @ p[1], in_axes=(0,))(xs)
    numpy.testing.assert_allclose(got, numpy.einsum("bi,bi->b", xs[0], xs[1]))
    d = {"a": RNG.standard_normal((3, 2)), "b": RNG.standard_normal(2)}
    got = np.vmap(lambda d: d["a"] + d["b"], in_axes=({"a": 0, "b": None},))(d)
    numpy.testing.assert_allclose(got, d["a"] + d["b"])


def test_out_axes():
    numpy.testing.assert_allclose(np.vmap(lambda a: a * 2, out_axes=1)(X), (X * 2).T)
    got = np.vmap(lambda a: np.outer(a, a), out_axes=-1)(X)
    numpy.testing.assert_allclose(got, numpy.stack([numpy.outer(a, a) for a in X], -1))
    # an output that does not depend on the batch: broadcast, or as it is with None
    w = np.asarray(C)
    y, z = np.vmap(lambda a: (a * 2, w), out_axes=(0, None))(X)
    numpy.testing.assert_allclose(z, C)
    y, z = np.vmap(lambda a: (a * 2, w))(X)
    numpy.testing.assert_allclose(z, numpy.broadcast_to(C, (3, 4, 5)))
    # a pytree of outputs with a prefix of out_axes
    out = np.vmap(lambda a: {"s": np.sum(a), "t": (a, a + 1)}, out_axes={"s": 0, "t": 1})(X)
    numpy.testing.assert_allclose(out["s"], X.sum(1))
    numpy.testing.assert_allclose(out["t"][1], (X + 1).T)


@pytest.mark.parametrize("call, error, match", [
    (lambda: np.vmap(lambda a, b: a + b)(numpy.ones(2), numpy.ones(3)), ValueError,
     r"vmap got inconsistent sizes for array axes to be mapped:\n  \* one axis had size 2: "
     r"axis 0 of argument a of type float64\[2\];\n  \* one axis had size 3: axis 0 of "
     r"argument b of type float64\[3\]$"),
    (lambda: np.vmap(lambda x1, x2, a3: x1)(numpy.ones(2), a3=numpy.ones(1), x2=numpy.ones(2)),
     ValueError, r"most axes \(2 of them\) had size 2, e.g. axis 0 of argument x1 of type "
     r"float64\[2\];\n  \* one axis had size 1: axis 0 of kwargs\['a3'\]"),
    (lambda: np.vmap(lambda a: a, in_axes=2)(numpy.ones(2)), ValueError,
     r"vmap was requested to map its argument along axis 2, which implies that its rank "
     r"should be at least 3, but is only 1 \(its shape is \(2,\)\)"),
    (lambda: np.vmap(lambda a: a, in_axes=-3)(numpy.ones((2, 2))), ValueError,
     r"rank should be at least 3, but is only 2"),
    (lambda: np.vmap(lambda a: a)(1.5), ValueError, r"rank should be at least 1, but is only 0"),
    (lambda: np.vmap(lambda a: a, in_axes=None)(numpy.ones(2)), ValueError,
     "vmap must have at least one non-None value in in_axes"),
    (lambda: np.vmap(lambda: 1)(), ValueError,
     r"vmap wrapped function must be passed at least one argument containing an array, got "
     r"empty \*args=\(\) and \*\*kwargs=\{\}"),
    (lambda: np.vmap(lambda a, b: a, in_axes=(0,))(numpy.ones(2), numpy.ones(2)), ValueError,
     r"but got len\(in_axes\)=1, len\(args\)=2"),
    (lambda: np.vmap(lambda p: p, in_axes=((0, 0),))((numpy.ones(2),)), ValueError,
     r"vmap in_axes specification must be a tree prefix of the corresponding value"),
    (lambda: np.vmap(lambda d: d, in_axes=({"a": 0},))({"b": numpy.ones(2)}), ValueError,
     r"tree prefix"),
    (lambda: np.vmap(lambda a: a, out_axes=None)(numpy.ones(2)), ValueError,
     "vmap has mapped output but out_axes is None"),
    (lambda: np.vmap(lambda a: (a, a), out_axes=(0, 0, 0))(numpy.ones(2)), ValueError,
     "vmap out_axes specification must be a tree prefix"),
    (lambda: np.vmap(lambda a: a, in_axes=1.0), TypeError,
     "vmap in_axes must be an int, None, or a tuple of entries"),
    (lambda: np.vmap(lambda a: a, in_axes=(0, "a")), TypeError,
     r"vmap in_axes must be an int, None, or \(nested\) container with those types as leaves"),
    (lambda: np.vmap(lambda a: a, out_axes=[0.5]), TypeError, "vmap out_axes must be"),
    (lambda: np.vmap(3), TypeError, "Expected a callable value"),
])
def test_errors_are_jaxs(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_errors_inside_the_function_are_the_loops():
    with pytest.raises(ValueError, match="matmul"):
        np.vmap(lambda a: a @ numpy.ones(3))(X)


# --- composition -------------------------------------------------------------------------------

def _mlp_loss(params, x, y):
    W1, b1, W2, b2 = params
    h = np.tanh(x @ W1 + b1)
    logits = h @ W2 + b2
    m = np.max(logits, axis=-1, keepdims=True)
    lse = np.log(np.sum(np.exp(logits - m), axis=-1, keepdims=True)) + m
    return -np.sum(y * (logits - lse))


def _mlp(rng, D=12, H=7, K=3, B=5):
    params = [np.asarray(rng.standard_normal((D, H)) * 0.3), np.asarray(rng.standard_normal(H)),
              np.asarray(rng.standard_normal((H, K)) * 0.3), np.asarray(rng.standard_normal(K))]
    xs = rng.standard_normal((B, D))
    ys = numpy.eye(K)[rng.integers(0, K, B)]
    return params, xs, ys


def test_per_example_gradients_equal_the_loop_with_no_op_looped():
    params, xs, ys = _mlp(numpy.random.default_rng(1))
    g = np.grad(_mlp_loss)
    want = [numpy.stack([numpy.asarray(g(params, np.asarray(x), np.asarray(y))[k])
                         for x, y in zip(xs, ys)]) for k in range(4)]
    np.reset_stats()
    got = np.vmap(g, in_axes=(None, 0, 0))(params, xs, ys)
    stats = np.stats()
    assert stats["vmap_op_loops"] == 0 and stats["vmap_function_loops"] == 0
    for a, b in zip(got, want):
        numpy.testing.assert_allclose(numpy.asarray(a), b, rtol=1e-12, atol=1e-14)



def test_per_example_weight_gradient_is_the_loops_bit_for_bit():
    # an example's weight gradient is the product over one term ``x[:, None] @ g[None, :]``
    # (NumPy's matmul: 0 + x*g, so -1 * 0 gives +0.0); the batched one must give the same
    # signed zeros, not the broadcast multiply's -0.0
    c = np.asarray(numpy.array([0.0, 2.0]))
    f = lambda w, x: np.sum((x @ w) * c)
    w = np.ones((3, 2))
    xs = -numpy.arange(1.0, 13.0).reshape(4, 3)
    got = numpy.asarray(np.vmap(np.grad(f), in_axes=(None, 0))(w, xs))
    want = numpy.stack([numpy.asarray(np.grad(f)(w, np.asarray(x))) for x in xs])
    numpy.testing.assert_array_equal(got, want)
    numpy.testing.assert_array_equal(numpy.signbit(got), numpy.signbit(want))


def test_large_per_example_weight_gradient_reuses_pooled_buffers():
    # the (B, D, H) per-example gradient is written into a pooled buffer: the second call
    # reuses the first's (no fresh page faults for the largest array of the pass)
    rng = numpy.random.default_rng(2)
    f = lambda w, x: np.sum(np.tanh(x @ w))
    w, xs = np.asarray(rng.standard_normal((64, 32))), np.asarray(rng.standard_normal((64, 64)))
    pe = np.vmap(np.grad(f), in_axes=(None, 0))
    want = numpy.asarray(pe(w, xs)).copy()
    hits = np.stats()["pool_hits"]
    again = numpy.asarray(pe(w, xs))
    assert np.stats()["pool_hits"] > hits
    numpy.testing.assert_array_equal(again, want)

#: name: a scalar function of one (4, 5) example; vmap(grad(f)) must batch every op
GRAD_CASES = {
    "sort": lambda x: np.sum(np.sort(x, axis=1)[:, :2] ** 2),
    "max": lambda x: np.sum(np.max(x, axis=0) ** 2) + np.max(x),
    "cumsum": lambda x: np.sum(np.cumsum(x, axis=1) ** 2) + np.sum(np.cumsum(x)),
    "concatenate_stack": lambda x: np.sum(np.concatenate([x, np.sin(x)], axis=1) ** 2) +
    np.sum(np.stack([x, x ** 2]) ** 2),
    "indexing": lambda x: np.sum(np.take(x, [0, 0, 3], axis=1) ** 2) +
    np.sum(x[[0, 2, 2], 1:] ** 2) + x[1, 2] ** 2 + np.sum(x[:, [1, 1]] ** 3),
    "constant_mask": lambda x: np.sum(x[numpy.array([True, False, True, True])] ** 2),
    "lazy_index": lambda x: np.sum(x[0][np.argsort(x[1])] * numpy.arange(5)),
    "var_std_norm": lambda x: np.sum(np.var(x, axis=0)) + np.std(x) + np.linalg.norm(x),
    "where_clip_maximum": lambda x: np.sum(np.where(x > 0, x ** 2, -x)) +
    np.sum(np.clip(x, -0.3, 0.3) ** 2) + np.sum(np.maximum(x, 0.1) ** 2),
    "linalg": lambda x: np.sum(np.linalg.inv(x[:, :4] + 4 * numpy.eye(4))) +
    np.linalg.det(x[:, :4] + 4 * numpy.eye(4)) +
    np.sum(np.linalg.solve(x[:, :4] + 4 * numpy.eye(4), x[:, 4])) +
    np.sum(np.linalg.svd(x)[1]) + np.sum(np.linalg.eigh(x[:, :4] @ x[:, :4].T)[0]),
    "products": lambda x: np.sum(np.einsum("ij,kj->ik", x, x) ** 2) + np.sum((x @ x.T) ** 2) +
    np.dot(x[0], x[1]) + np.sum(np.outer(x[0], x[1]) ** 2) +
    np.sum(np.tensordot(x, x, axes=([1], [1]))),
    "shapes": lambda x: np.sum(np.reshape(x.T, (2, 10)) ** 3) + np.sum(np.pad(x, 1) ** 2) +
    np.sum(np.tile(x, 2) ** 2) + np.sum(np.roll(x, 1, axis=0) * x) + np.sum(np.flip(x) * x) +
    np.sum(np.diff(x, axis=1) ** 2) + np.sum(np.triu(x) ** 2),
    "reductions": lambda x: np.sum(np.prod(x, axis=1)) + np.mean(x ** 2) +
    np.sum(np.log(np.sum(np.exp(x), axis=1))) + np.median(x) + np.sum(np.ptp(x, axis=1)) +
    np.sum(x ** 2, where=numpy.array([True, False, True, True, True])),
    "writes": lambda x: np.sum(_set(x) ** 2),
    "take_along_axis": lambda x: np.sum(np.take_along_axis(
        x, numpy.array([[0], [1], [2], [3]]), axis=1) ** 2),
}


@pytest.mark.parametrize("name", sorted(GRAD_CASES))
def test_vmap_of_grad_equals_the_loop(name):
    f = GRAD_CASES[name]
    xs = RNG.standard_normal((3, 4, 5))
    want = numpy.stack([numpy.asarray(np.grad(f)(np.asarray(x))) for x in xs])
    np.reset_stats()
    got = numpy.asarray(np.vmap(np.grad(f))(xs))
    stats = np.stats()
    numpy.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
    assert stats["vmap_op_loops"] == 0, stats["vmap_looped_ops"]
    assert stats["vmap_function_loops"] == 0


def test_grad_of_vmap_and_value_and_grad_inside():
    params, xs, ys = _mlp(numpy.random.default_rng(2))
    total = np.grad(lambda p: np.sum(np.vmap(_mlp_loss, in_axes=(None, 0, 0))(p, xs, ys)))
    want = np.grad(lambda p: sum(_mlp_loss(p, np.asarray(x), np.asarray(y))
                                 for x, y in zip(xs, ys)))(params)
    for a, b in zip(total(params), want):
        numpy.testing.assert_allclose(numpy.asarray(a), numpy.asarray(b), rtol=1e-11)
    vals, grads = np.vmap(np.value_and_grad(_mlp_loss), in_axes=(None, 0, 0))(params, xs, ys)
    numpy.testing.assert_allclose(
        numpy.asarray(vals),
        [float(_mlp_loss(params, np.asarray(x), np.asarray(y))) for x, y in zip(xs, ys)],
        rtol=1e-12)


def test_jit_composes_both_ways():
    w = RNG.standard_normal((4, 3))

    def f(w, x):
        return np.sum(np.tanh(x @ w) ** 2)
    want = numpy.stack([numpy.asarray(np.grad(f)(np.asarray(w), np.asarray(x))) for x in X])
    jv = np.jit(np.vmap(np.grad(f), in_axes=(None, 0)))
    for _ in range(2):          # the compiled plan, then its second call
        numpy.testing.assert_allclose(numpy.asarray(jv(w, X)), want, rtol=1e-12)
    np.reset_stats()
    got = np.vmap(np.jit(np.grad(f)), in_axes=(None, 0))(np.asarray(w), X)
    assert np.stats()["vmap_function_loops"] == 0
    numpy.testing.assert_allclose(numpy.asarray(got), want, rtol=1e-12)


def test_jacobian_hessian_and_nested_vmap():
    w = np.asarray(C)

    def g(x):
        return np.tanh(x @ w)
    J = numpy.stack([numpy.asarray(np.jacobian(g)(np.asarray(x))) for x in X])
    numpy.testing.assert_allclose(numpy.asarray(np.vmap(np.jacobian(g))(X)), J, rtol=1e-12)
    full = numpy.zeros((3, 5, 3, 4))
    for i in range(3):
        full[i, :, i, :] = J[i]
    numpy.testing.assert_allclose(numpy.asarray(np.jacobian(np.vmap(g))(np.asarray(X))), full,
                                  rtol=1e-12, atol=1e-15)

    def h(x):
        return np.sum(np.sin(x) ** 3)
    H = numpy.stack([numpy.asarray(np.hessian(h)(np.asarray(x))) for x in X])
    numpy.testing.assert_allclose(numpy.asarray(np.vmap(np.hessian(h))(X)), H, rtol=1e-12)
    X3 = RNG.standard_normal((2, 3, 4))
    got = np.vmap(np.vmap(lambda x: np.sum(x * x) + x[0]))(X3)
    numpy.testing.assert_allclose(numpy.asarray(got), (X3 ** 2).sum(-1) + X3[..., 0])
    got = np.vmap(np.vmap(lambda x: x @ w), in_axes=1)(X3)
    numpy.testing.assert_allclose(numpy.asarray(got), numpy.swapaxes(X3, 0, 1) @ C)


# --- the per-example fallbacks, counted ----------------------------------------------------------

def test_an_op_without_a_rule_runs_per_example_counted():
    xs = RNG.standard_normal((3, 2))
    np.reset_stats()
    got = np.vmap(lambda x: np.kron(x, C[:2, :2]) * 2)(np.asarray(xs))
    stats = np.stats()
    assert stats["vmap_op_loops"] == 1 and stats["vmap_looped_ops"] == {"kron": 1}
    assert stats["vmap_function_loops"] == 0
    numpy.testing.assert_allclose(numpy.asarray(got),
                                  numpy.stack([numpy.kron(x, C[:2, :2]) * 2 for x in xs]))
    np.reset_stats()
    assert np.stats()["vmap_op_loops"] == 0 and np.stats()["vmap_looped_ops"] == {}


def test_python_control_flow_runs_the_function_per_example_counted():
    def f(x):
        if float(x[0]) > 0:
            return x * 2
        return x * 3
    np.reset_stats()
    got = np.vmap(f)(X)
    assert np.stats()["vmap_function_loops"] == 1
    numpy.testing.assert_allclose(numpy.asarray(got),
                                  numpy.stack([x * 2 if x[0] > 0 else x * 3 for x in X]))


def test_writes_into_an_unmapped_argument_are_the_loops():
    def f(x, acc):
        acc[0] = acc[0] + x[0]
        return x * 2 + acc
    acc = np.zeros(4)
    np.reset_stats()
    got = numpy.asarray(np.vmap(f, in_axes=(0, None))(X, acc))
    assert np.stats()["vmap_function_loops"] == 1
    acc2 = np.zeros(4)
    want = numpy.stack([numpy.asarray(f(np.asarray(x), acc2)) for x in X])
    numpy.testing.assert_allclose(got, want)
    numpy.testing.assert_allclose(numpy.asarray(acc), numpy.asarray(acc2))


def test_identity_and_unbatched_outputs():
    numpy.testing.assert_array_equal(numpy.asarray(np.vmap(lambda a: a)(X)), X)
    numpy.testing.assert_array_equal(numpy.asarray(np.vmap(lambda a: a, in_axes=1)(X)), X.T)
    numpy.testing.assert_array_equal(np.vmap(lambda a, b: b, in_axes=(0, None))(X, C[0]),
                                     numpy.broadcast_to(C[0], (3, 5)))
    numpy.testing.assert_array_equal(np.vmap(lambda a: 2.0)(X), numpy.full(3, 2.0))
    y, none = np.vmap(lambda a: (a + 1, None))(X)
    assert none is None
    numpy.testing.assert_array_equal(numpy.asarray(y), X + 1)


def test_device_arrays():
    d = np.asarray(X, device="cuda")
    got = np.vmap(lambda x: np.sum(np.sin(x) * 2) + x)(d)
    assert got.device == d.device
    numpy.testing.assert_allclose(np.asarray(got, device="cpu"),
                                  numpy.sin(X).sum(1, keepdims=True) * 2 + X, rtol=1e-12)
    g = np.vmap(np.grad(lambda w, x: np.sum(np.tanh(x * w))), in_axes=(None, 0))(
        np.asarray(numpy.ones(4), device="cuda"), d)
    numpy.testing.assert_allclose(np.asarray(g, device="cpu"), X * (1 - numpy.tanh(X) ** 2),
                                  rtol=1e-12)
