"""The C recorder (``lazynp._speedups``) against the pure Python one it replaces.

``core/nodes.py``, ``core/recorder.py`` and ``_ufunc.py`` hold the reference implementations
of Node, Var, ``record``, the binary dunders and the one-input ufunc call;
``_speedups.pyx`` does the same in C.
These tests check that the two record identical graphs (uses, tree-kernel structures, error
sites), and run part of the suite with ``LAZYNP_PURE_PYTHON=1`` so the fallback stays tested.
"""
from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
import sysconfig

import numpy
import pytest

import lazynp
from lazynp._base import native
from lazynp.core import executor, graph, recorder
from lazynp.kernels.tree import TREE_GENERATION

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_extension_is_built_where_a_compiler_exists():
    """``pip install`` builds the C recorder when it can; lazynp then uses it."""
    cc = (sysconfig.get_config_var("CC") or "cc").split()[0]
    if os.environ.get("LAZYNP_PURE_PYTHON") not in (None, "", "0"):
        assert native.ext is None
    elif shutil.which(cc):
        assert native.ext is not None, "lazynp._base._speedups was not built (see setup.py)"
        assert graph.Node is native.ext.Node and graph.record is native.ext.record


def _programs(np, a, b, c):
    """Expressions covering the recorder's cases: chains, repeated and shared inputs, Python
    int and float constants, large ints, broadcasting, views, a reduction, a write."""
    out = []
    x = a * 1.5 + b
    x = np.sin(x) - x * 2
    out.append(x * x + 3)
    out.append((a + a) * (b - 300) + 7)
    out.append(np.exp(a[1:] - a[:-1]))
    out.append(a + c)                           # (4,) + (3, 4): broadcast
    s = np.sum(a * b)
    out.append(s * 2.0)
    y = b * 1.0
    y[1] = 5.0
    out.append(y / 4)
    out.append(-a ** 2 + (2 ** a))
    out.append(np.maximum(a * 2, 0.5) + np.subtract(1, b) * np.arctan2(a, b))
    return out


def _recorded(record):
    """Record the programs with ``record`` as graph.record and recorder.record (the one
    ``record_write`` calls), and as the C dunders' recorder; the result nodes."""
    saved = graph.record
    graph.record = recorder.record = record
    native.ext.set_recorder(None if record is native.ext.record else record)
    try:
        rng = numpy.random.default_rng(5)
        a, b = (lazynp.evaluate(lazynp.asarray(rng.random(4))) for _ in range(2))
        c = lazynp.evaluate(lazynp.asarray(rng.random((3, 4))))
        return [r._node() for r in _programs(lazynp, a, b, c)], (a, b, c)
    finally:
        graph.record = recorder.record = saved
        native.ext.set_recorder(None)


def _describe(node, seen: dict) -> tuple:
    """A node's recorded graph, with nodes numbered by first visit (not by identity)."""
    if id(node) in seen:
        return ("ref", seen[id(node)])
    seen[id(node)] = len(seen)
    args = tuple(_describe(x, seen) if type(x) is graph.Node else ("const", type(x).__name__, x)
                 for x in node.args)
    tree = node.tree
    if tree is not None:      # (its generation left out)
        sid, inputs, floats, ints, size = tree[:TREE_GENERATION]
        tree = (sid, tuple(seen.get(id(i), "in") for i in inputs), floats, ints, size)
    site = node.site
    line = None if site is None else lazynp._base.site.line_of(*site)
    return (node.op.name, node.shape, str(node.dtype), node.use_count, tree, line, args,
            node.errstate is None)


@pytest.mark.usefixtures("lazy_policy")
def test_c_and_python_recorders_record_the_same_graph():
    if native.ext is None:      # the pure Python recorder is the one in use
        assert graph.record is graph.py_record
        return
    c_nodes, _ = _recorded(native.ext.record)
    py_nodes, _ = _recorded(graph.py_record)
    for k, (cn, pn) in enumerate(zip(c_nodes, py_nodes)):
        assert _describe(cn, {}) == _describe(pn, {}), f"program {k}"
    assert any(n.tree is not None for n in c_nodes), "no tree structure was recorded"


def test_dunders_and_ufunc_calls_match_numpy_and_keep_error_sites():
    rng = numpy.random.default_rng(6)
    A = rng.random(5)
    a = lazynp.asarray(A)
    got = [numpy.asarray(v) for v in (a * 2, 2 * a, a - 1, 1 - a, a / 3, 3 / a, a ** 2,
                                      a * True, a + 1j, lazynp.sqrt(a, out=lazynp.empty(5)))]
    want = [A * 2, 2 * A, A - 1, 1 - A, A / 3, 3 / A, A ** 2, A * True, A + 1j, numpy.sqrt(A)]
    for g, w in zip(got, want):
        numpy.testing.assert_array_equal(g, w, strict=True)
    # transcendental functions in a kernel: libm, within an ulp or two of NumPy (README)
    for g, w in ((2 ** a, 2 ** A), (lazynp.exp(a), numpy.exp(A)), (lazynp.tanh(a), numpy.tanh(A))):
        assert numpy.asarray(g).dtype == w.dtype
        numpy.testing.assert_allclose(numpy.asarray(g), w, rtol=4e-16, atol=0)
    numpy.testing.assert_array_equal(numpy.asarray(lazynp.subtract(2, a)), 2 - A, strict=True)
    numpy.testing.assert_array_equal(numpy.asarray(lazynp.less(0.5, a)), 0.5 < A, strict=True)
    numpy.testing.assert_array_equal(numpy.asarray(lazynp.add(a, [1, 2, 3, 4, 5])),
                                     A + [1, 2, 3, 4, 5], strict=True)
    for bad in (lambda: lazynp.arange(3) ** -1, lambda: lazynp.power(lazynp.arange(3), -1)):
        with pytest.raises(ValueError, match="Integers to negative integer powers"):
            bad()
    with pytest.raises(ValueError, match="could not be broadcast"):
        a + lazynp.ones(3)
    two = lazynp.sum(lazynp.asarray([1, 1]))           # NumPy's int (run at once)
    assert type(two) is numpy.int64 and [1, 2] * two == [1, 2, 1, 2]
    with lazynp.policy("lazy"):
        two = lazynp.sum(lazynp.asarray([1, 1]))       # a lazy 0-d integer
        assert isinstance(two, lazynp.ndarray)
        assert [1, 2] * two == [1, 2, 1, 2]            # repeats a list, like a NumPy int
        node = (a * 2)._node()
        assert lazynp._base.site.line_of(*node.site) is not None


def test_pure_python_recorder_runs_the_core_tests():
    """The fallback recorder (no C compiler, or LAZYNP_PURE_PYTHON=1) on part of the suite."""
    env = dict(os.environ, LAZYNP_PURE_PYTHON="1")
    tests = ["tests/test_tree_kernels.py", "tests/test_views_mutation.py",
             "tests/test_errors.py", "tests/test_speedups.py", "tests/programs"]
    res = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider",
                          "-k", "not pure_python_recorder", *tests],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-2000:]


@pytest.mark.usefixtures("lazy_policy")
def test_c_and_python_flush_planning_agree(monkeypatch):
    """executor._collect and executor._FlushPlan's counts in C give the Python versions'
    order, in-flush uses, buffer readers, external inputs and what must outlive the flush."""
    if native.ext is None:
        return
    x = lazynp.asarray(numpy.arange(12.0).reshape(3, 4))
    y = lazynp.exp(x) * 2.0
    v = y[1:, ::2]
    v += 1.0                       # a write through a view
    z = (y.T @ x).sum(axis=0)
    keep = y - 1.0                 # stays live: must outlive the flush
    targets = [z._node(), keep._node()]

    def plan(collect, counts):
        monkeypatch.setattr(executor, "_plan_counts", counts)
        executor._epoch += 1
        order = collect(targets, executor._epoch)
        for n in order:
            n.needed = False
        p = executor._FlushPlan(order, targets, executor._epoch)
        return ([id(n) for n in order], [(n.uses, n.readers_left, bool(n.needed)) for n in order],
                [id(r) for r in p.external], p.has_writes)

    gen0 = graph.counts.generation
    want = plan(executor.py_collect, None)
    gen1 = graph.counts.generation
    got = plan(native.ext.collect, native.ext.plan_counts)
    assert got == want and len(want[0]) >= 8
    assert graph.counts.generation - gen1 == gen1 - gen0
    assert any(needed for _, _, needed in want[1]) and not all(n for _, _, n in want[1])
    xn = numpy.arange(12.0).reshape(3, 4)
    yn = numpy.exp(xn) * 2.0
    yn[1:, ::2] += 1.0
    numpy.testing.assert_allclose(numpy.asarray(z), (yn.T @ xn).sum(axis=0))  # still runs
    numpy.testing.assert_allclose(numpy.asarray(keep), yn - 1.0)


@pytest.mark.skipif(native.ext is None, reason="the C extension is not built (pure Python run)")
def test_eager_first_functions_take_the_vectorcall_protocol():
    """``lazynp.dot(x, y)`` reaches the C eager call through Python's vectorcall protocol
    (no argument tuple and keyword dict per call); calls with keywords, ``*args`` and
    ``**kwargs``, partials and errors stay NumPy's."""
    have_vectorcall = 1 << 11          # Py_TPFLAGS_HAVE_VECTORCALL
    assert type(lazynp.dot) is native.ext.EagerFirst
    assert type(lazynp.dot).__flags__ & have_vectorcall
    x, y = numpy.arange(4.0), numpy.arange(4.0, 8.0)
    a, b = lazynp.array(x), lazynp.array(y)
    expected = numpy.dot(x, y)
    assert lazynp.dot(a, b) == expected
    assert lazynp.dot(a, b=b) == expected
    assert lazynp.dot(*[a, b]) == expected
    assert lazynp.dot(**{"a": a, "b": b}) == expected
    assert functools.partial(lazynp.dot, a)(b) == expected
    numpy.testing.assert_array_equal(lazynp.concatenate([a, b], axis=0),
                                     numpy.concatenate([x, y], axis=0))
    with pytest.raises(ValueError):
        lazynp.dot(a, lazynp.array(numpy.arange(3.0)))
    with pytest.raises(TypeError):
        lazynp.dot(a, b, c=1)


@pytest.mark.parametrize("index", [
    (slice(2, None), 1), (1, slice(None, 3)), (numpy.int64(1), slice(1, None, 2)),
    (None, slice(None), numpy.int32(-1)), (Ellipsis, 2), (slice(numpy.int64(1), None), 0),
    (1, 2), (numpy.int64(2), -1), 3, numpy.int16(1), (True,), ([0, 1], 1), (1.0, 1),
    (slice(1.0, None), 1), (1, 2, 3)])
def test_basic_indexing_of_a_computed_array_is_numpys(index):
    """Views (written through both ways), elements and errors of ``a[index]`` for the index
    kinds the C getitem/setitem sort (ints, NumPy ints, slices, None, Ellipsis, others)."""
    base = numpy.arange(20.0).reshape(4, 5)
    a = lazynp.array(base) + 0
    want = base.copy()
    try:
        expected = want[index]
    except Exception as exc:
        with pytest.raises(type(exc)):
            a[index]
        return
    got = a[index]
    if isinstance(expected, numpy.ndarray):
        numpy.testing.assert_array_equal(got, expected)
        assert type(got) is lazynp.ndarray and got.shape == expected.shape
        if expected.base is not None:                # a view: writes go through both ways
            got[...] = -1.0
            expected[...] = -1.0
            numpy.testing.assert_array_equal(a, want)
            a[index] = 7.0
            want[index] = 7.0
            numpy.testing.assert_array_equal(got, expected)
    else:
        assert got == expected and type(got) is type(expected)
        a[index] = 9.0
        want[index] = 9.0
    numpy.testing.assert_array_equal(a, want)
