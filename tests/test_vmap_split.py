"""vmap's per-example weight gradient (a stack of outer products, ``einsum("...ik,...kj->
...ij")`` with ``k`` of length 1) is written on two threads, which take chunks of the batch
in turn (lazynp/_base/split.py ``einsum_into``): the values are NumPy's one call bit for
bit, other einsums stay one call, and floating-point warnings are NumPy's."""
import warnings

import numpy
import pytest

import lazynp
from lazynp._base import split as _split

pytestmark = pytest.mark.skipif(not _split.enabled, reason="single core or LAZYNP_SPLIT=0")


@pytest.fixture
def splits(monkeypatch):
    """The number of einsum calls run in two halves.  The pause after a threaded BLAS
    product (split.BLAS_SPIN_SECONDS: the gradients' products come right before) is off
    here: these tests are about the split itself (tests/test_split.py tests the pause)."""
    monkeypatch.setattr(_split, "BLAS_SPIN_SECONDS", 0.0)
    monkeypatch.setattr(_split, "_blas_until", 0.0)
    count = [0]
    real = _split._both

    def both(fn, *args):
        r = real(fn, *args)
        if r is not None and fn.__name__ == "take_chunks":
            count[0] += 1
        return r
    monkeypatch.setattr(_split, "_both", both)
    return count


def _operands(B=9, m=400, n=300, seed=0):
    rng = numpy.random.default_rng(seed)
    a = rng.standard_normal((B, m, 1))
    b = rng.standard_normal((B, 1, n))
    a[::2, ::7] = -0.0
    b[1::3, :, ::5] = 0.0
    return a, b


def _same(got, expected):
    assert got.shape == expected.shape and got.dtype == expected.dtype
    numpy.testing.assert_array_equal(got, expected, strict=True)
    assert numpy.array_equal(numpy.signbit(got), numpy.signbit(expected))


def test_outer_products_split_bit_for_bit(splits):
    a, b = _operands()
    out = numpy.empty((9, 400, 300))
    _split.einsum_into(("...ik,...kj->...ij", a, b), {}, out)
    assert splits[0] == 1
    _same(out, numpy.einsum("...ik,...kj->...ij", a, b))


@pytest.mark.parametrize("subs, shapes", [
    ("...ik,...kj->...ij", [(9, 400, 3), (9, 3, 300)]),      # a sum over k: one call
    ("...i,...j->...ij", [(400,), (9, 300)]),               # a's ellipsis is not the batch
    ("...ik,...kj->...ij", [(1, 400, 1), (9, 1, 300)]),     # a broadcast along the batch
    ("bik,bkj->bij", [(9, 400, 1), (9, 1, 300)]),           # no ellipsis: not told apart
    ("...ik,...kj->...i", [(9, 400, 1), (9, 1, 300)]),      # a sum over j
])
def test_other_einsums_one_call(splits, subs, shapes):
    rng = numpy.random.default_rng(1)
    ops = [rng.standard_normal(s) for s in shapes]
    expected = numpy.einsum(subs, *ops)
    out = numpy.empty_like(expected)
    _split.einsum_into((subs,) + tuple(ops), {}, out)
    assert splits[0] == 0
    _same(out, expected)


def test_small_output_one_call(splits):
    a, b = _operands(B=4, m=10, n=10)
    out = numpy.empty((4, 10, 10))
    _split.einsum_into(("...ik,...kj->...ij", a, b), {}, out)
    assert splits[0] == 0
    _same(out, numpy.einsum("...ik,...kj->...ij", a, b))


def _warnings_of(fn):
    with warnings.catch_warnings(record=True) as w, numpy.errstate(all="warn"):
        warnings.simplefilter("always")
        fn()
    return [(x.category, str(x.message)) for x in w]


def test_overflow_as_numpy(splits):
    """Inf and NaN products: NumPy's values and NumPy's warnings (whatever they are)."""
    a, b = _operands()
    a[5, 3, 0] = 1e300
    b[5, 0, 7] = 1e300
    a[7, 2, 0] = numpy.inf
    b[7, 0, 9] = 0.0
    out = numpy.empty((9, 400, 300))
    expected = []
    theirs = _warnings_of(lambda: expected.append(numpy.einsum("...ik,...kj->...ij", a, b)))
    mine = _warnings_of(lambda: _split.einsum_into(("...ik,...kj->...ij", a, b), {}, out))
    assert mine == theirs
    _same(out, expected[0])


def _example_loss(np):
    def loss(params, x, y):
        W1, b1, W2, b2 = params
        h = np.tanh(x @ W1 + b1)
        logits = h @ W2 + b2
        return np.sum((logits - y) ** 2)
    return loss


def test_vmap_grad_weight_gradient_split_equals_loop(splits):
    """The per-example gradient of a 400x300 layer over 9 examples (1.08M elements, above
    the split bound): split, and the loop's values bit for bit."""
    rng = numpy.random.default_rng(2)
    B, D, H, C = 9, 400, 300, 3
    params = [lazynp.asarray(rng.standard_normal(s) * 0.05) for s in ((D, H), (H,), (H, C), (C,))]
    X = lazynp.asarray(rng.standard_normal((B, D)))
    Y = lazynp.asarray(rng.standard_normal((B, C)))
    g = lazynp.grad(_example_loss(lazynp))
    got = lazynp.vmap(g, in_axes=(None, 0, 0))(params, X, Y)
    got = [numpy.asarray(x) for x in got]
    assert splits[0] >= 1
    loop = [g(params, X[i], Y[i]) for i in range(B)]
    for k in range(4):
        _same(got[k], numpy.stack([numpy.asarray(one[k]) for one in loop]))


def _ready_writer(args, out):
    """The one-pass kernel's row writer, once its background compile is done."""
    from lazynp.array import outer_products
    from lazynp.kernels import cpu
    w = outer_products.row_writer(args, {}, out)
    if w is None:
        cpu.wait_compiles()
        w = outer_products.row_writer(args, {}, out)
    return w


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_one_pass_kernel_is_einsums_bits(dtype):
    """``a * b + 0.0`` in one pass: einsum's ``0.0 + a * b`` (signed zeros, NaN, inf)."""
    a, b = _operands(B=5, m=40, n=30)
    a[1, 4, 0], b[1, 0, 3] = numpy.inf, 0.0        # inf * 0: NaN
    a[2, 5, 0], b[2, 0, 6] = numpy.nan, -1.0
    a[3, 6, 0], b[3, 0, 7] = -numpy.inf, -2.0
    a, b = a.astype(dtype), b.astype(dtype)
    out = numpy.full((5, 40, 30), 7.0, dtype)
    w = _ready_writer(("...ik,...kj->...ij", a, b), out)
    assert w is not None
    w(0, 5)
    _same(out, numpy.einsum("...ik,...kj->...ij", a, b))
    assert numpy.signbit(out).any() and not numpy.signbit(out[out == 0]).any()


@pytest.mark.parametrize("why", ["sum over k", "other dtype", "not C-ordered", "overlap"])
def test_one_pass_kernel_declines(why):
    from lazynp.array import outer_products
    a, b = _operands(B=3, m=8, n=6)
    out = numpy.empty((3, 8, 6))
    args = ("...ik,...kj->...ij", a, b)
    if why == "sum over k":
        args = ("...ik,...kj->...ij", numpy.ones((3, 8, 2)), numpy.ones((3, 2, 6)))
    elif why == "other dtype":
        out = out.astype(numpy.float32)
    elif why == "not C-ordered":
        out = numpy.empty((3, 6, 8)).transpose(0, 2, 1)
    else:
        big = numpy.empty(3 * 8 * 6 + 24)
        args = ("...ik,...kj->...ij", big[:24].reshape(3, 8, 1), b)
        out = big[:144].reshape(3, 8, 6)
    assert outer_products.row_writer(args, {}, out) is None


def test_vmap_grad_one_pass_kernel_equals_loop(splits):
    """Once the kernel is compiled, vmap's per-example weight gradient goes through it (on
    two threads), with the loop's values bit for bit."""
    from lazynp.array import outer_products
    from lazynp.kernels import cpu
    rng = numpy.random.default_rng(3)
    B, D, H, C = 9, 400, 300, 3
    params = [lazynp.asarray(rng.standard_normal(s) * 0.05) for s in ((D, H), (H,), (H, C), (C,))]
    X = lazynp.asarray(rng.standard_normal((B, D)))
    Y = lazynp.asarray(rng.standard_normal((B, C)))
    g = lazynp.grad(_example_loss(lazynp))
    per_example = lazynp.vmap(g, in_axes=(None, 0, 0))
    [numpy.asarray(x) for x in per_example(params, X, Y)]
    cpu.wait_compiles()
    written = []
    real = outer_products.row_writer

    def counted(*args):
        w = real(*args)
        written.append(w is not None)
        return w
    outer_products.row_writer = counted
    try:
        got = [numpy.asarray(x) for x in per_example(params, X, Y)]
    finally:
        outer_products.row_writer = real
    assert True in written and splits[0] >= 1
    loop = [g(params, X[i], Y[i]) for i in range(B)]
    for k in range(4):
        _same(got[k], numpy.stack([numpy.asarray(one[k]) for one in loop]))
