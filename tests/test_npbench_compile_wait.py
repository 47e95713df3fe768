"""When a pending kernel is worth waiting for (issue 36: a starved background compile left
fused groups running op by op).

The rule (lazynp.kernels.cpu, above ``ready_seconds``): while a kernel is pending its group
runs op by op; once the op-by-op work run for it has cost as much as getting the kernel
ready (a compile, or a load from Numba's disk cache), the caller gets it ready itself.
These tests hold the compile thread still, so only the rule can make the kernel ready, and
check the decision and the kernel's values.  No timing here: costs are set, not measured.
"""
from __future__ import annotations

import threading

import numpy
import pytest

import lazynp
from lazynp.kernels import cpu

SRC = ("import numpy as np\nfrom numba import njit\n"
       "@njit(cache=True)\ndef kernel(x):\n    return x * 3.0 - {}\n")


@pytest.fixture
def unmeasured(monkeypatch):
    """The process has measured no compile and no load yet: the guesses hold."""
    for k in ("kernel_compiles", "kernel_cache_hits"):
        monkeypatch.setitem(cpu.STATS, k, 0)
    monkeypatch.setattr(cpu, "SYNC_COMPILE", False)


@pytest.fixture
def compile_thread_held(monkeypatch):
    """The background compile thread stops before each compile until the test ends."""
    release = threading.Event()
    monkeypatch.setattr(cpu, "before_compile", release.wait)
    yield
    release.set()
    cpu.wait_compiles()      # (queued compiles finish in this test's kernel folder)


def test_the_caller_compiles_once_op_by_op_work_has_cost_a_compile(
        kernel_dir, unmeasured, compile_thread_held, monkeypatch):
    x = numpy.arange(1000.0)                     # 8000 bytes a call
    per_call = x.nbytes * cpu.OP_BY_OP_SECONDS_PER_BYTE
    monkeypatch.setattr(cpu, "COMPILE_SECONDS_GUESS", 3.5 * per_call)
    source = SRC.format(17)
    assert not cpu.on_disk(source)
    before = cpu.STATS["kernel_foreground_compiles"]
    for _ in range(3):                           # 1, 2, 3 calls' work: less than a compile
        assert cpu.get_kernel(source, (x,)) is None
    kernel = cpu.get_kernel(source, (x,))        # 4 calls' work: more
    assert kernel is not None
    numpy.testing.assert_array_equal(kernel(x), x * 3.0 - 17)
    assert cpu.STATS["kernel_foreground_compiles"] == before + 1
    assert cpu.get_kernel(source, (x,)) is kernel
    assert cpu.on_disk(source)


def test_small_work_keeps_running_op_by_op_while_the_compile_is_pending(
        kernel_dir, unmeasured, compile_thread_held, monkeypatch):
    x = numpy.arange(10.0)
    monkeypatch.setattr(cpu, "COMPILE_SECONDS_GUESS", 1.0)
    source = SRC.format(18)
    for _ in range(50):
        assert cpu.get_kernel(source, (x,)) is None


def test_a_kernel_on_disk_costs_a_load_not_a_compile(kernel_dir, unmeasured, monkeypatch):
    monkeypatch.setattr(cpu, "COMPILE_SECONDS_GUESS", 2.0)
    monkeypatch.setattr(cpu, "LOAD_SECONDS_GUESS", 0.01)
    kept, new = SRC.format(19), SRC.format(20)
    assert cpu.get_kernel(kept, (numpy.ones(3),), block=True) is not None
    assert cpu.on_disk(kept) and not cpu.on_disk(new)
    monkeypatch.setitem(cpu.STATS, "kernel_compiles", 0)
    monkeypatch.setitem(cpu.STATS, "kernel_cache_hits", 0)
    assert cpu.ready_seconds(kept) == 0.01
    assert cpu.ready_seconds(new) == 2.0
    # measured figures replace the guesses
    monkeypatch.setitem(cpu.STATS, "kernel_cache_hits", 4)
    monkeypatch.setitem(cpu.STATS, "kernel_load_seconds", 0.2)
    monkeypatch.setitem(cpu.STATS, "kernel_compiles", 2)
    monkeypatch.setitem(cpu.STATS, "kernel_fresh_compile_seconds", 3.0)
    assert cpu.ready_seconds(kept) == pytest.approx(0.05)
    assert cpu.ready_seconds(new) == pytest.approx(1.5)


def test_a_fused_loop_gives_numpys_values_while_its_compile_is_held(
        kernel_dir, unmeasured, compile_thread_held, monkeypatch):
    # a fused elementwise group big enough to be recorded, in a loop: op by op at first,
    # then its kernel, compiled by the caller; the values are NumPy's throughout
    monkeypatch.setattr(cpu, "COMPILE_SECONDS_GUESS", 1e-4)
    a = numpy.linspace(0.0, 1.0, 300_000)
    before = cpu.STATS["kernel_foreground_compiles"]
    want = a.copy()
    got = lazynp.array(a)
    for _ in range(4):
        want = numpy.sqrt(want * 0.5 + 1.0) - 0.25
        got = lazynp.sqrt(got * 0.5 + 1.0) - 0.25
        numpy.testing.assert_allclose(numpy.asarray(got), want, rtol=1e-15, atol=0)
    assert cpu.STATS["kernel_foreground_compiles"] > before
