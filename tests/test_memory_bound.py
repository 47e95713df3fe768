"""A long Python loop never builds an unbounded graph: memory stays flat, the pending graph
is flushed by its size bound, and the result equals NumPy's."""
from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import textwrap
import tracemalloc

import numpy
import pytest

import lazynp
from lazynp.core import graph

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _numpy_loop(n, size=1000):
    x = numpy.zeros(size)
    for _ in range(n):
        x = x * 1.0001 + 1
    return x


def _live_nodes():
    return sum(1 for o in gc.get_objects() if type(o) is graph.Node)


@pytest.mark.parametrize("policy", ["lazy", "auto"])
def test_100k_iteration_loop_memory_flat_and_bounded(policy):
    """100,000 iterations of ``x = x * 1.0001 + 1`` on 1000 elements, in a fresh process so
    that the peak RSS measures this loop only: the peak after 10k iterations and after 100k
    iterations (both forced) differ by a few MB at most, the graph was flushed by its bound,
    the number of live graph nodes stays bounded, and the value equals NumPy's.  Under the
    default policy the loop runs at once on NumPy (no graph at all); under ``"lazy"`` it is
    recorded and flushed by the bound."""
    code = textwrap.dedent("""
        import gc, json, resource
        import lazynp
        from lazynp import graph

        def live_nodes():
            return sum(1 for o in gc.get_objects() if type(o) is graph.Node)

        from lazynp.kernels import cpu

        # warm-up: the fused kernels of this loop are compiled once (Numba/LLVM memory is a
        # one-time cost, not growth per iteration)
        w = lazynp.zeros(1000)
        for i in range(10_000):
            w = w * 1.0001 + 1
        w.tolist()
        cpu.wait_compiles()
        del w

        x = lazynp.zeros(1000)
        b0 = lazynp.stats()["bound_flushes"]
        max_live = 0
        for i in range(100_000):
            x = x * 1.0001 + 1
            if i == 9_999:
                x.tolist()
                rss10 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            if i % 25_000 == 24_999:
                max_live = max(max_live, live_nodes())
        val = x.tolist()
        rss100 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        print(json.dumps({"rss10_kb": rss10, "rss100_kb": rss100, "max_live": max_live,
                          "bound_flushes": lazynp.stats()["bound_flushes"] - b0,
                          "value": val}))
    """)
    env = dict(os.environ, LAZYNP_POLICY=policy)
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                       timeout=300, env=env)
    assert p.returncode == 0, p.stderr
    r = json.loads(p.stdout.strip().splitlines()[-1])
    numpy.testing.assert_array_equal(numpy.array(r["value"]), _numpy_loop(100_000))
    assert (r["bound_flushes"] > 0) if policy == "lazy" else (r["bound_flushes"] == 0)
    assert r["max_live"] < 20_000, f"{r['max_live']} graph nodes alive in a loop"
    growth_mb = (r["rss100_kb"] - r["rss10_kb"]) / 1024
    assert growth_mb < 8, f"peak RSS grew by {growth_mb:.1f} MB between 10k and 100k iterations"


def _traced_peak(n):
    from lazynp.kernels import cpu
    w = lazynp.zeros(1000)   # warm-up: compile this loop's kernels before tracing
    for _ in range(3_000):
        w = w * 1.0001 + 1
    w.tolist()
    cpu.wait_compiles()
    gc.collect()
    tracemalloc.start()
    try:
        x = lazynp.zeros(1000)
        for _ in range(n):
            x = x * 1.0001 + 1
        v = numpy.array(numpy.asarray(x), copy=True)
        del x
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return peak, v


@pytest.mark.parametrize("policy", ["lazy", "auto"])
def test_tracemalloc_peak_does_not_grow_with_iterations(policy):
    """Same loop under tracemalloc (slow, so fewer iterations): the peak of a 4x longer
    loop is at most a few MB above the shorter one's."""
    with lazynp.policy(policy):
        p_short, v_short = _traced_peak(3_000)
        p_long, v_long = _traced_peak(12_000)
    numpy.testing.assert_array_equal(v_short, _numpy_loop(3_000))
    numpy.testing.assert_array_equal(v_long, _numpy_loop(12_000))
    growth = (p_long - p_short) / 2**20
    assert growth < 3, f"tracemalloc peak grew by {growth:.1f} MB (short {p_short / 2**20:.1f}" \
                       f" MB, long {p_long / 2**20:.1f} MB)"


@pytest.mark.usefixtures("lazy_policy")
def test_unforced_loop_keeps_live_nodes_bounded():
    b0 = lazynp.stats()["bound_flushes"]
    gc.collect()
    base = _live_nodes()        # nodes kept alive by earlier tests (tracebacks...)
    x = lazynp.ones(100)
    y = lazynp.zeros(100)
    for i in range(12_000):
        x = x * 0.999 + 0.001
        y += 1            # in-place writes: new versions of one Var
    live = _live_nodes() - base
    assert lazynp.stats()["bound_flushes"] > b0
    assert live < 10_000, f"{live} graph nodes alive"
    xn = numpy.ones(100)
    for i in range(12_000):
        xn = xn * 0.999 + 0.001
    numpy.testing.assert_array_equal(numpy.asarray(x), xn)
    numpy.testing.assert_array_equal(numpy.asarray(y), numpy.full(100, 12_000.0))


def test_growing_list_of_lazy_arrays():
    """Keeping every iterate alive is fine (memory is the user's): all values are right."""
    xs = [lazynp.arange(50.0)]
    ns = [numpy.arange(50.0)]
    for i in range(3_000):
        xs.append(xs[-1] * 0.5 + i)
        ns.append(ns[-1] * 0.5 + i)
    got = numpy.asarray(lazynp.stack(xs[::100]))
    numpy.testing.assert_array_equal(got, numpy.stack(ns[::100]))
    numpy.testing.assert_array_equal(numpy.asarray(xs[1234]), ns[1234])
    numpy.testing.assert_array_equal(numpy.asarray(xs[-1]), ns[-1])


def test_loop_with_views_and_reductions_bounded():
    u = lazynp.zeros(200)
    un = numpy.zeros(200)
    u[0] = un[0] = 1.0
    total = lazynp.zeros(())
    total_n = numpy.zeros(())
    for _ in range(3_000):
        u[1:-1] = 0.5 * (u[2:] + u[:-2])
        un[1:-1] = 0.5 * (un[2:] + un[:-2])
        total += u.sum()
        total_n += un.sum()
    numpy.testing.assert_array_equal(numpy.asarray(u), un)
    numpy.testing.assert_allclose(float(total), float(total_n), rtol=1e-12)


@pytest.mark.usefixtures("lazy_policy")
def test_live_nodes_do_not_grow_in_a_long_recorded_loop():
    """A computed node drops its tree-kernel inputs: they used to chain back through every
    earlier tree of ``x = x * 1.0001 + 1`` (471 nodes and their buffers alive after 60k
    steps, growing without end: issue 17 item 5)."""
    from lazynp.kernels import cpu
    x = lazynp.zeros(1000)
    for _ in range(3_000):
        x = x * 1.0001 + 1
    x.tolist()
    cpu.wait_compiles()
    counts = []
    for _ in range(3):
        for _ in range(20_000):
            x = x * 1.0001 + 1
        x.tolist()
        gc.collect()
        counts.append(_live_nodes())
    assert counts[-1] - counts[0] < 20, f"live graph nodes grow: {counts}"
    numpy.testing.assert_array_equal(numpy.asarray(x), _numpy_loop(63_000))
