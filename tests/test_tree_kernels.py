"""The small-flush fast path (kernels/tree.py): an elementwise expression on small arrays,
structured while it is recorded, runs as one cached kernel.  NumPy is the oracle."""
import warnings

import numpy
import pytest

import lazynp
from lazynp.kernels import cpu

# these tests study the graph machinery: every operation is recorded
pytestmark = pytest.mark.usefixtures("lazy_policy")


def run_twice(f, *arrays):
    """Run ``f`` on lazy copies of ``arrays`` until its tree kernel is compiled, then once
    more; returns (result of the last run, tree kernels run by it)."""
    lz = [lazynp.asarray(a) for a in arrays]
    numpy.asarray(f(lazynp, *lz))
    cpu.wait_compiles()
    before = lazynp.stats()["tree_kernels_run"]
    got = numpy.asarray(f(lazynp, *lz))
    return got, lazynp.stats()["tree_kernels_run"] - before


def chain(np, a, b):
    x = a
    for i in range(6):
        x = np.sin(x * 1.5 + b) if i % 2 else np.exp(x - 0.25) * b
    return x


def test_chain_runs_as_one_tree_kernel_and_matches_numpy():
    rng = numpy.random.default_rng(0)
    a, b = rng.random(50), rng.random(50)
    got, runs = run_twice(chain, a, b)
    assert runs == 1
    numpy.testing.assert_allclose(got, chain(numpy, a, b), rtol=1e-14)


def test_repeated_inputs_and_shared_subexpressions():
    rng = numpy.random.default_rng(1)
    a, b = rng.random((4, 5)), rng.random((4, 5))

    def f(np, a, b):
        t = a * 2.0 - b
        return t * t + a * b - (b / (a + 1.0))

    got, runs = run_twice(f, a, b)
    assert runs == 1
    assert got.shape == (4, 5)
    numpy.testing.assert_array_equal(got, f(numpy, a, b))


def test_integer_and_bool_results_are_exact():
    a = numpy.arange(-20, 20, dtype=numpy.int16)

    def f(np, a):
        return ((a * 3 + 7) * a - 5) > 11

    def g(np, a):
        return (a * 3 + 100) * a - 5          # wraps around in int16 like NumPy

    for fn in (f, g):
        got, runs = run_twice(fn, a)
        assert runs == 1
        ref = fn(numpy, a)
        assert got.dtype == ref.dtype
        numpy.testing.assert_array_equal(got, ref)


def test_warnings_come_from_numpy_when_a_value_is_not_finite():
    a = numpy.linspace(0.0, 800.0, 20)

    def f(np, a):
        return np.exp(a * 1.0) + 1.0

    la = lazynp.asarray(a)
    numpy.asarray(f(lazynp, la))
    cpu.wait_compiles()
    rejected = lazynp.stats()["tree_kernels_rejected"]
    with pytest.warns(RuntimeWarning, match="overflow"):
        got = numpy.asarray(f(lazynp, la))
    assert lazynp.stats()["tree_kernels_rejected"] == rejected + 1
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        numpy.testing.assert_array_equal(got, f(numpy, a))


def test_live_intermediate_keeps_its_value():
    a = numpy.linspace(-1.0, 1.0, 30)

    def f(np, a):
        y = a * 2.0 + 1.0
        z = np.sin(y) * 3.0
        return y, z

    la = lazynp.asarray(a)
    for _ in range(2):
        y, z = f(lazynp, la)
        numpy.testing.assert_array_equal(numpy.asarray(z), numpy.sin(a * 2.0 + 1.0) * 3.0)
        numpy.testing.assert_array_equal(numpy.asarray(y), a * 2.0 + 1.0)
        cpu.wait_compiles()


def test_forced_part_of_a_tree_then_its_input_written_in_place():
    """A tree recorded over a pending value that a later flush computes is stale: the value
    it read must be the one before the input was overwritten."""
    a = numpy.linspace(0.0, 1.0, 16)

    def steps(np, la):
        y = la * 2.0 + 1.0
        z = y * 3.0 - 0.5
        first = numpy.asarray(y)          # computes y; z still pending and reads it
        la += 100.0                        # a write to the input of y
        return first, numpy.asarray(z), numpy.asarray(la)

    for _ in range(3):                     # before and after the kernels are compiled
        la = lazynp.asarray(a)
        first, z, after = steps(lazynp, la)
        numpy.testing.assert_array_equal(first, a * 2.0 + 1.0)
        numpy.testing.assert_array_equal(z, (a * 2.0 + 1.0) * 3.0 - 0.5)
        numpy.testing.assert_array_equal(after, a + 100.0)
        cpu.wait_compiles()


def test_errstate_and_strict_error_modes_are_left_to_numpy():
    a = numpy.array([1.0, 0.0, -1.0])
    la = lazynp.asarray(a)
    for _ in range(2):
        with numpy.errstate(divide="raise"):
            with pytest.raises(FloatingPointError):
                numpy.asarray(1.0 / (la * 1.0))
        cpu.wait_compiles()


_BINARY = [lambda np, x, y: x + y, lambda np, x, y: x - y, lambda np, x, y: x * y,
           lambda np, x, y: np.maximum(x, y), lambda np, x, y: np.minimum(x, y)]
_UNARY = [lambda np, x: -x, lambda np, x: np.absolute(x), lambda np, x: x * 3,
          lambda np, x: x - 2.5, lambda np, x: 0.5 * x, lambda np, x: np.square(x)]
_FLOAT_UNARY = [lambda np, x: np.sin(x), lambda np, x: np.exp(x * 0.01),
                lambda np, x: np.tanh(x), lambda np, x: x / 7.0]


@pytest.mark.parametrize("seed", range(12))
def test_random_expressions_match_numpy(seed):
    """Random expressions over same-shape arrays (float64, float32, int64, int8), mixing
    array and Python-scalar operands, repeated inputs and reused intermediates."""
    rng = numpy.random.default_rng(seed)
    dtype = [numpy.float64, numpy.float32, numpy.int64, numpy.int8][seed % 4]
    shape = [(7,), (3, 5), (40,), ()][seed // 4 % 4]
    leaves = [(rng.standard_normal(shape) * 4).astype(dtype) for _ in range(3)]
    ops = []
    for _ in range(int(rng.integers(3, 25))):
        pool = _BINARY + _UNARY + (_FLOAT_UNARY if numpy.dtype(dtype).kind == "f" else [])
        ops.append((int(rng.integers(len(pool))), int(rng.integers(1 << 30)), pool))

    def program(np, *xs):
        vals = list(xs)
        for k, pick, pool in ops:
            f = pool[k]
            args = [vals[-1]] + ([vals[pick % len(vals)]] if f in _BINARY else [])
            vals.append(f(np, *args))
        return vals[-1]

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = program(numpy, *leaves)
        got, _ = run_twice(program, *leaves)
    assert got.dtype == numpy.asarray(ref).dtype and got.shape == numpy.shape(ref)
    if numpy.dtype(dtype).kind == "f":
        # transcendentals may differ by an ulp (README), and a chain of ops amplifies that
        numpy.testing.assert_allclose(got, ref, rtol=1e-4 if dtype == numpy.float32 else 1e-10,
                                      atol=1e-12)
    else:
        numpy.testing.assert_array_equal(got, ref)


def test_random_expressions_do_take_the_tree_path():
    rng = numpy.random.default_rng(0)
    a, b = rng.random(30), rng.random(30)
    got, runs = run_twice(lambda np, a, b: np.maximum(a * b - 0.5, -(b * b)) + a, a, b)
    assert runs == 1
    numpy.testing.assert_array_equal(got, numpy.maximum(a * b - 0.5, -(b * b)) + a)


def test_long_chain_runs_as_successive_tree_kernels(monkeypatch):
    """A loop's chain grown past one tree kernel (MAX_TREE nodes) is computed tree by tree
    while it is recorded, so no node piles up; intermediates the user holds keep their
    values (their trees then take the ordinary flush)."""
    from lazynp.core import graph
    from lazynp.kernels import tree

    # (only the tree kernels may lower the pending count: no bound flush, which nodes other
    # tests left pending could trigger)
    monkeypatch.setattr(graph.counts, "max_pending", 1 << 40)

    def loop(np, a, n, hold_every=0):
        x = a
        held = []
        for i in range(n):
            x = x * 0.999 + 0.001
            if hold_every and i % hold_every == 0:
                held.append(x)
        return x, held

    n = 3 * tree.MAX_TREE
    rng = numpy.random.default_rng(9)
    a = rng.random(64)
    loop(lazynp, lazynp.asarray(a), n)          # compiles the tree kernels
    cpu.wait_compiles()
    before = lazynp.stats()["tree_kernels_run"]
    pending = graph.counts.pending_count     # (nodes earlier tests left pending count too)
    x, _ = loop(lazynp, lazynp.asarray(a), n)
    assert lazynp.stats()["tree_kernels_run"] - before >= 2, "the chain was not cut into trees"
    assert graph.counts.pending_count - pending <= 2 * tree.MAX_TREE
    want_x, want_held = loop(numpy, a, n, 97)
    numpy.testing.assert_allclose(numpy.asarray(x), want_x, rtol=1e-13)
    x, held = loop(lazynp, lazynp.asarray(a), n, 97)
    numpy.testing.assert_allclose(numpy.asarray(x), want_x, rtol=1e-13)
    assert len(held) == len(want_held)
    for h, w in zip(held, want_held):
        numpy.testing.assert_allclose(numpy.asarray(h), w, rtol=1e-13)
