"""When a tree kernel pays (issue 36): ``TREE_MIN_WORK``, and a tree whose kernel is pending.

From ``TREE_MIN_ELEMS`` elements an elementwise chain is recorded into a tree kernel; a tree
saving fewer element-passes than ``TREE_MIN_WORK`` (NumPy's temporaries it did without,
times its elements) makes the lines of its ops run at once below the size from which it
would, from its second such run on, and larger arrays on the same lines are trees again.  While a tree's kernel is not ready its ops run one by one on
NumPy in the calling thread (``tree_ops_on_numpy``), with NumPy's bits and warnings.  A
kernel that Numba keeps on disk is loaded in the caller at its first use.
"""
from __future__ import annotations

import sys
import threading
import warnings

import numpy
import pytest

import lazynp
from lazynp._base import native
from lazynp.core import policy as _policy, state
from lazynp.kernels import cache, cpu, tree

C_ONLY = pytest.mark.skipif(native.ext is None,
                            reason="what runs at once here is decided by the C recorder")


def stat(name: str) -> int:
    return lazynp.stats().get(name, 0)


def exact(got, want):
    got = numpy.asarray(got)
    assert got.dtype == want.dtype and got.shape == want.shape
    numpy.testing.assert_array_equal(got, want, strict=True)


@pytest.fixture(autouse=True)
def medium_trees():
    """Trees from 8192 elements (``LAZYNP_TREE_MIN_ELEMS=8192``; the default is 2^17)."""
    keep = _policy.TREE_MIN_ELEMS
    _policy.set_tree_min_elems(8192)
    yield
    _policy.set_tree_min_elems(keep)


@pytest.fixture
def compiled_now(monkeypatch):
    monkeypatch.setattr(cpu, "SYNC_COMPILE", True)
    assert _policy.TREE_MIN_ELEMS <= 16_384 and _policy.TREE_MIN_WORK == 1 << 17


def short_chain(x, y):
    return (x * y + 1.0).sum()       # 2 ops on 16,384 elements: one temporary spared


def heat(a, b):
    b[1:-1, 1:-1, 1:-1] = (
        0.125 * (a[2:, 1:-1, 1:-1] - 2.0 * a[1:-1, 1:-1, 1:-1] + a[:-2, 1:-1, 1:-1]) +
        0.125 * (a[1:-1, 2:, 1:-1] - 2.0 * a[1:-1, 1:-1, 1:-1] + a[1:-1, :-2, 1:-1]) +
        0.125 * (a[1:-1, 1:-1, 2:] - 2.0 * a[1:-1, 1:-1, 1:-1] + a[1:-1, 1:-1, 0:-2]) +
        a[1:-1, 1:-1, 1:-1])


@C_ONLY
def test_a_short_chain_runs_at_once_after_two_trees_and_is_a_tree_again_when_larger(
        compiled_now):
    rng = numpy.random.default_rng(0)
    x, y = rng.random(16_384), rng.random(16_384)
    lx, ly = lazynp.array(x), lazynp.array(y)
    runs, eager = [], []
    for _ in range(5):
        k0, e0 = stat("tree_kernels_run"), stat("ops_eager")
        assert float(short_chain(lx, ly)) == float(short_chain(x, y))
        runs.append(stat("tree_kernels_run") - k0)
        eager.append(stat("ops_eager") - e0)
    assert runs == [1, 1, 0, 0, 0], runs          # two trees of too little work, then
    assert eager[2:] == [eager[0] + 2] * 3, eager  # both ops of the line at once (and sum)
    lines = [b for (code, _), b in state.lone_sites.items() if code == id(short_chain.__code__)]
    # (the tree saves one temporary's pass: it pays from TREE_MIN_WORK elements)
    assert sorted(lines) == [131_072, 131_072]
    # the same lines on 8x the elements: a tree that pays
    x, y = rng.random(131_072), rng.random(131_072)
    lx, ly = lazynp.array(x), lazynp.array(y)
    for _ in range(3):
        k0 = stat("tree_kernels_run")
        assert float(short_chain(lx, ly)) == float(short_chain(x, y))
        assert stat("tree_kernels_run") - k0 == 1


@C_ONLY
def test_a_long_statement_on_a_small_grid_stays_one_tree(compiled_now):
    """NPBench's heat-3d at preset S: 15 ops on 23^3 = 12,167 elements, assigned."""
    grid = numpy.fromfunction(lambda i, j, k: (i + j + (25 - k)) * 10 / 25, (25, 25, 25))
    a, b = grid.copy(), grid.copy()
    la, lb = lazynp.array(a), lazynp.array(b)
    for step in range(6):
        k0, e0 = stat("tree_kernels_run"), stat("ops_eager")
        heat(a, b)
        heat(b, a)
        heat(la, lb)
        heat(lb, la)
        assert stat("tree_kernels_run") - k0 == 2, step
        assert stat("ops_eager") - e0 == 0, step
    exact(la, a)
    exact(lb, b)


def test_fragments_on_shared_inputs_leave_the_same_lines_long_trees_elsewhere(compiled_now):
    """The statement on inputs NumPy shares (``lazynp.asarray``): ops reading them run at
    once, and the ops between form short trees cut by them (fragments).  Those lines then
    start no tree there, and the same statement on lazynp's own arrays is one tree still."""
    grid = numpy.fromfunction(lambda i, j, k: (i + j + (25 - k)) * 10 / 25, (25, 25, 25))
    fragments = []
    for _ in range(4):
        a, b = grid.copy(), grid.copy()
        la, lb = lazynp.asarray(a.copy()), lazynp.asarray(b.copy())
        k0 = stat("tree_kernels_run")
        heat(a, b)
        heat(la, lb)
        fragments.append(stat("tree_kernels_run") - k0)
        exact(lb, b)
    assert fragments == [1, 1, 0, 0], fragments
    for _ in range(3):
        a, b = grid.copy(), grid.copy()
        la, lb = lazynp.array(a), lazynp.array(b)
        k0, e0 = stat("tree_kernels_run"), stat("ops_eager")
        heat(a, b)
        heat(la, lb)
        assert (stat("tree_kernels_run") - k0, stat("ops_eager") - e0) == (1, 0)
        exact(lb, b)


@pytest.fixture
def pending_kernels(monkeypatch, tmp_path):
    """Kernels never become ready: a new disk cache, the compile thread held, no
    foreground compile."""
    old_dir, old_bound = cache.directory(), cache.max_bytes()
    lazynp.configure(kernel_cache_dir=tmp_path, kernel_cache_max_bytes=0)
    monkeypatch.setattr(cpu, "SYNC_COMPILE", False)
    monkeypatch.setattr(cpu, "_worth_waiting", lambda *a: False)
    for module, name in ((cpu, "_ready"), (cpu, "_ready_by_tkey"), (tree, "_plans")):
        monkeypatch.setattr(module, name, {})     # (none compiled by an earlier test)
    release = threading.Event()
    monkeypatch.setattr(cpu, "before_compile", release.wait)
    yield
    release.set()
    cpu.wait_compiles()
    lazynp.configure(kernel_cache_dir=old_dir, kernel_cache_max_bytes=old_bound)


def test_a_tree_whose_kernel_is_pending_runs_its_ops_on_numpy(pending_kernels):
    rng = numpy.random.default_rng(1)
    grid = rng.random((30, 31, 32))
    a, b = grid.copy(), grid + 1.0
    la, lb = lazynp.array(a), lazynp.array(b)
    n0, f0, k0 = stat("tree_ops_on_numpy"), stat("fused_groups_numpy"), stat("tree_kernels_run")
    for _ in range(2):
        heat(a, b)
        heat(b, a)
        heat(la, lb)
        heat(lb, la)
        # a named intermediate the program keeps, read twice in one tree
        d = a[1:, :, :] - 0.5 * b[:-1, :, :]
        e = d * d + d * 3.0
        ld = la[1:, :, :] - 0.5 * lb[:-1, :, :]
        le = ld * ld + ld * 3.0
        exact(le, e)
        exact(ld, d)
    assert stat("tree_kernels_run") == k0
    assert stat("fused_groups_numpy") == f0          # (not the fusion pass's stand-in)
    assert stat("tree_ops_on_numpy") - n0 == 2 * (2 * 15 + 5)
    exact(la, a)
    exact(lb, b)


def test_a_pending_trees_warning_comes_from_numpy_at_its_line(pending_kernels, recwarn):
    # (recwarn records the warnings without a with block around the lines: they are
    # recorded, not run at the call)
    warnings.simplefilter("always")
    x = numpy.linspace(-1.0, 1.0, 20_000)
    x[7] = 0.0
    lx = lazynp.array(x)
    n0 = stat("tree_ops_on_numpy")
    want = (x * 2.0 + 1.0) / x - 3.0
    got = (lx * 2.0 + 1.0) / lx - 3.0
    line = sys._getframe().f_lineno - 1
    assert len(recwarn) == 1                    # NumPy's; lazynp's comes when it is read
    exact(got, want)
    assert stat("tree_ops_on_numpy") == n0     # (its divide raised: the ordinary flush ran)
    assert [w.category for w in recwarn] == [RuntimeWarning, RuntimeWarning]
    assert str(recwarn[0].message) == str(recwarn[1].message)
    assert (recwarn[1].filename, recwarn[1].lineno) == (__file__, line)


def test_a_kernel_on_disk_is_loaded_at_its_first_use(monkeypatch, tmp_path):
    old_dir, old_bound = cache.directory(), cache.max_bytes()
    lazynp.configure(kernel_cache_dir=tmp_path, kernel_cache_max_bytes=0)
    try:
        source = ("import numpy as np\nfrom numba import njit\n"
                  "@njit(cache=True)\ndef kernel(x):\n    return x * 3.0 + 17.0\n")
        x = numpy.arange(8.0)
        assert cpu.get_kernel(source, (x,), block=True) is not None     # compiled to disk
        assert cpu.on_disk(source)
        for name in ("_ready", "_ready_by_tkey", "_kernels"):
            monkeypatch.setattr(cpu, name, {})     # as in a new process: on disk only
        monkeypatch.setattr(cpu, "SYNC_COMPILE", False)
        monkeypatch.setattr(cpu, "_worth_waiting", lambda *a: False)
        hits = cpu.STATS["kernel_cache_hits"]
        kernel = cpu.get_kernel(source, (x,))
        assert kernel is not None
        assert cpu.STATS["kernel_cache_hits"] == hits + 1
        numpy.testing.assert_array_equal(kernel(x), x * 3.0 + 17.0)
    finally:
        lazynp.configure(kernel_cache_dir=old_dir, kernel_cache_max_bytes=old_bound)


def test_a_trees_constants_keep_the_sign_of_zero(lazy_policy, compiled_now):
    # (a kernel's constants are made once per tuple of them; 0.0 == -0.0, so a tuple with
    # a zero is made each time: the second tree's -0.0 must not be the first one's 0.0)
    x = numpy.linspace(1.0, 2.0, 64)
    lx = lazynp.array(x)
    runs = stat("tree_kernels_run")
    for c in (0.0, -0.0, 0.0, -0.0):
        got, want = (lx + 1.0) * c, (x + 1.0) * c
        exact(got, want)
        exact(numpy.signbit(numpy.asarray(got)), numpy.signbit(want))
    assert stat("tree_kernels_run") - runs == 4


def stencil4(a, b):
    b[1:-1] = a[:-2] + a[1:-1] + a[2:] + a[1:-1]     # 3 ops, assigned: 3 passes spared


@C_ONLY
def test_a_tree_of_one_byte_items_pays_from_eight_times_the_elements(compiled_now):
    # (its passes move an eighth of a float64 pass: TREE_MIN_WORK counts float64 passes)
    for dtype, want in ((numpy.float64, [1] * 5), (numpy.int8, [1, 1, 0, 0, 0])):
        a = (numpy.arange(65_536) % 7).astype(dtype)
        b = a.copy()
        la, lb = lazynp.array(a), lazynp.array(b)
        runs = []
        for _ in range(5):
            k0 = stat("tree_kernels_run")
            stencil4(a, b)
            stencil4(la, lb)
            runs.append(stat("tree_kernels_run") - k0)
            exact(lb, b)
        assert runs == want, (dtype, runs)
    lines = [b for (code, _), b in state.lone_sites.items() if code == id(stencil4.__code__)]
    assert lines and set(lines) == {-(-_policy.TREE_MIN_WORK * 8 // 3)}   # 349,526 int8s



def test_a_comparison_of_float64_work_counts_float64_passes(lazy_policy):
    # (its result is bool, but the temporaries NumPy would write are float64: the bytes of
    # an element are the largest of the tree's inputs' and result's)
    from lazynp.core import trees
    for dtype, item in ((numpy.float64, 8), (numpy.int8, 1)):
        x = lazynp.array(numpy.arange(64, dtype=dtype))
        head = ((x * x - x) > 3)._node()
        assert head.dtype == numpy.bool_ and head.tree is not None
        passes = head.tree[4] - 1
        assert trees._work_bound(head, head.tree) == \
            -(-_policy.TREE_MIN_WORK * 8 // (passes * item))
