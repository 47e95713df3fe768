"""A pending kernel's op-by-op work is what its op-by-op runs cost (issue 36).

The ski-rental rule of lazynp.kernels.cpu (see test_npbench_compile_wait.py) weighed the
op-by-op work run while a kernel was pending by an estimate from the arguments' bytes (10 GB/s,
too low on purpose), so a second process, whose kernels are in Numba's disk cache, loaded them
only after about ten calls.  The executor now times each op-by-op run of a fused group and
charges it to the kernel (``cpu.charge_op_by_op``).  Costs are set here, never measured: the
compile thread is held, the op-by-op clock is a fake one.
"""
from __future__ import annotations

import itertools
import threading

import numpy
import pytest

import lazynp
from lazynp.core import executor, trees
from lazynp.kernels import cache, cpu

SRC = ("import numpy as np\nfrom numba import njit\n"
       "@njit(cache=True)\ndef kernel(x):\n    return x * 5.0 + {}\n")


@pytest.fixture
def kernel_dir(tmp_path):
    old_dir, old_bound = cache.directory(), cache.max_bytes()
    lazynp.configure(kernel_cache_dir=tmp_path, kernel_cache_max_bytes=0)
    yield tmp_path
    lazynp.configure(kernel_cache_dir=old_dir, kernel_cache_max_bytes=old_bound)


@pytest.fixture
def held(monkeypatch):
    """No compile or load measured yet, and the background compile thread held still; the
    bytes estimate counts nothing, so only measured op-by-op time can make a kernel ready."""
    for k in ("kernel_compiles", "kernel_cache_hits"):
        monkeypatch.setitem(cpu.STATS, k, 0)
    monkeypatch.setattr(cpu, "SYNC_COMPILE", False)
    monkeypatch.setattr(cpu, "OP_BY_OP_SECONDS_PER_BYTE", 0.0)
    release = threading.Event()
    monkeypatch.setattr(cpu, "before_compile", release.wait)
    yield
    release.set()
    cpu.wait_compiles()


def test_measured_op_by_op_time_makes_the_caller_compile(kernel_dir, held, monkeypatch):
    monkeypatch.setattr(cpu, "COMPILE_SECONDS_GUESS", 1.0)
    x = numpy.arange(10.0)
    source = SRC.format(31)
    before = cpu.STATS["kernel_foreground_compiles"]
    assert cpu.get_kernel(source, (x,)) is None
    cpu.charge_op_by_op(0.6)                     # 0.6 s of op-by-op work: less than a compile
    assert cpu.get_kernel(source, (x,)) is None
    cpu.charge_op_by_op(0.6)                     # 1.2 s: more
    kernel = cpu.get_kernel(source, (x,))
    assert kernel is not None
    assert cpu.STATS["kernel_foreground_compiles"] == before + 1
    numpy.testing.assert_array_equal(kernel(x), x * 5.0 + 31)


def test_a_charge_counts_only_for_the_kernel_found_pending(kernel_dir, held, monkeypatch):
    monkeypatch.setattr(cpu, "COMPILE_SECONDS_GUESS", 1.0)
    x = numpy.arange(10.0)
    source = SRC.format(32)
    assert cpu.get_kernel(source, (x,)) is None
    cpu.charge_op_by_op(0.5)
    cpu.charge_op_by_op(5.0)                     # charged once only: nothing was found since
    cpu.forget_declined()
    assert cpu.get_kernel(source, (x,)) is None  # 0.5 s so far
    cpu.forget_declined()
    cpu.charge_op_by_op(5.0)                     # forgotten: not charged
    assert cpu.get_kernel(source, (x,)) is None
    cpu.charge_op_by_op(0.5)
    assert cpu.get_kernel(source, (x,)) is not None


def test_a_fused_loop_compiles_once_its_op_by_op_runs_cost_a_compile(
        kernel_dir, held, monkeypatch):
    # every op-by-op run of the group costs 1 s of the fake clock; a compile costs 2.5 s:
    # the group runs op by op three times (0, 1, 2 s charged before the calls), then the
    # caller compiles its kernel; the values are NumPy's throughout
    monkeypatch.setattr(cpu, "COMPILE_SECONDS_GUESS", 2.5)
    ticks = itertools.count()
    clock = lambda: float(next(ticks))      # noqa: E731
    monkeypatch.setattr(executor, "_thread_time", clock)
    # (a medium group is a tree kernel's: while it is pending, its ops run one by one in
    # core/trees.py, which charges them the same way)
    monkeypatch.setattr(trees, "_thread_time", clock)
    a = numpy.linspace(0.0, 1.0, 600_000)       # (above the size bound: a fused group)
    want = a.copy()
    got = lazynp.array(a)

    def step(x, np):       # (ops no other test fuses: its kernel is compiled in no other)
        return np.sqrt(np.abs(x - 0.75)) * 0.5 + x * 0.125

    # (the first call reads the array made from NumPy's, a kernel signature of its own)
    want, got = step(want, numpy), step(got, lazynp)
    numpy.testing.assert_allclose(numpy.asarray(got), want, rtol=1e-15, atol=0)
    before = cpu.STATS["kernel_foreground_compiles"]
    by_op = []
    for _ in range(5):
        n0 = cpu.STATS["fused_groups_numpy"]
        t0 = lazynp.stats()["tree_ops_on_numpy"]
        want, got = step(want, numpy), step(got, lazynp)
        numpy.testing.assert_allclose(numpy.asarray(got), want, rtol=1e-15, atol=0)
        by_op.append(cpu.STATS["fused_groups_numpy"] - n0 +
                     (lazynp.stats()["tree_ops_on_numpy"] > t0))
    assert by_op == [1, 1, 1, 0, 0], by_op
    assert cpu.STATS["kernel_foreground_compiles"] == before + 1
