"""Programs of the shapes where lazynp was slower than NumPy on NPBench (issue 36).

Small programs written for these tests (not NPBench's code), each of the same shape as a
kernel that was slow: their values must be NumPy's, and the fast paths taken must be the
designed ones (views share the buffer, writes go through).  No timing here.
"""
from __future__ import annotations

import numpy
import pytest

import lazynp
from lazynp.kernels import cpu


def _toeplitz_solve(np, r):
    """A Levinson-style recursion on a growing prefix: reversed views, dots, in-place adds."""
    y = np.empty_like(r)
    alpha = -r[0]
    beta = 1.0
    y[0] = -r[0]
    for k in range(1, r.shape[0]):
        beta *= 1.0 - alpha * alpha
        alpha = -(r[k] + np.dot(np.flip(r[:k]), y[:k])) / beta
        y[:k] += alpha * np.flip(y[:k])
        y[k] = alpha
    return y


@pytest.mark.parametrize("n", [7, 60])
def test_reversed_prefix_recursion_matches_numpy(n):
    r = numpy.linspace(2.0, 1.0, n) / n
    expected = _toeplitz_solve(numpy, r.copy())
    got = _toeplitz_solve(lazynp, lazynp.array(r))
    numpy.testing.assert_array_equal(numpy.asarray(got), expected)


@pytest.mark.parametrize("shape,axis", [
    ((5,), None), ((5,), 0), ((5,), -1), ((3, 4), None), ((3, 4), 0), ((3, 4), 1),
    ((3, 4), (0, 1)), ((2, 3, 4), (0, 2)), ((2, 3, 4), -2), ((0, 3), None), ((3, 0), 1),
])
def test_flip_is_numpys_view(shape, axis):
    a = numpy.arange(int(numpy.prod(shape)), dtype=float).reshape(shape)
    la = lazynp.array(a)
    got = lazynp.flip(la, axis)
    expected = numpy.flip(a, axis)
    assert got.shape == expected.shape
    if got.size:          # (an empty result's strides are lazynp's own, as before)
        assert got.strides == expected.strides
    numpy.testing.assert_array_equal(numpy.asarray(got), expected)
    if got.size:                                   # a view: writes reach the original
        got[(0,) * got.ndim] = -1.0
        expected[(0,) * expected.ndim] = -1.0
        numpy.testing.assert_array_equal(numpy.asarray(la), a)


def test_flip_of_a_strided_prefix_view_writes_through():
    a = numpy.arange(10.0)
    la = lazynp.array(a)
    v = lazynp.flip(la[1:8:2])
    v += 100.0
    w = numpy.flip(a[1:8:2])
    w += 100.0
    numpy.testing.assert_array_equal(numpy.asarray(la), a)


@pytest.mark.parametrize("axis", [2, -3, (0, 0)])
def test_flip_bad_axis_raises_as_numpy(axis):
    a = numpy.zeros((2, 3))
    with pytest.raises(Exception) as np_err:
        numpy.flip(a, axis)
    with pytest.raises(type(np_err.value)):
        lazynp.flip(lazynp.array(a), axis)


def test_flip_of_zero_dim_and_flipud_fliplr_match_numpy():
    numpy.testing.assert_array_equal(numpy.asarray(lazynp.flip(lazynp.array(3.0))),
                                     numpy.flip(numpy.array(3.0)))
    a = numpy.arange(12.0).reshape(3, 4)
    for name in ("flipud", "fliplr"):
        got = getattr(lazynp, name)(lazynp.array(a))
        expected = getattr(numpy, name)(a)
        assert got.strides == expected.strides
        numpy.testing.assert_array_equal(numpy.asarray(got), expected)
    for name, bad in (("flipud", numpy.array(1.0)), ("fliplr", numpy.arange(3.0))):
        with pytest.raises(ValueError):
            getattr(numpy, name)(bad)
        with pytest.raises(ValueError):
            getattr(lazynp, name)(lazynp.array(bad))


def test_flip_of_a_pending_array_matches_numpy():
    a = numpy.arange(600_000.0)
    la = lazynp.array(a)
    with lazynp.policy("lazy"):
        p = la * 2.0 + 1.0
        got = lazynp.flip(p)[::1000]
    numpy.testing.assert_array_equal(numpy.asarray(got), numpy.flip(a * 2.0 + 1.0)[::1000])


def test_flip_of_a_lazynp_array_takes_the_indexing_path(monkeypatch):
    """The reversed view is made by lazynp's indexing (one C call), not by NumPy's Python
    ``flip`` on the shadow followed by the view machinery (~1.7 us more per call)."""
    la = lazynp.array(numpy.arange(12.0).reshape(3, 4))

    def no_numpy_flip(*args, **kwargs):
        raise AssertionError("numpy.flip called")
    monkeypatch.setattr(numpy, "flip", no_numpy_flip)
    for axis in (None, 0, 1, (0, 1)):
        lazynp.flip(la, axis)
    lazynp.flipud(la)
    lazynp.fliplr(la)


# --- ufunc methods and NumPy-scalar operands run at once through the C eager call ---------

def _shortest_paths(np, path):
    """All-pairs shortest paths by whole-matrix relaxation (an outer sum per step)."""
    for k in range(path.shape[0]):
        path[:] = np.minimum(path[:], np.add.outer(path[:, k], path[k, :]))
    return path


@pytest.mark.parametrize("n", [5, 40])
def test_outer_relaxation_matches_numpy(n):
    p = (numpy.arange(n * n, dtype=numpy.int32).reshape(n, n) * 7919) % 97
    expected = _shortest_paths(numpy, p.copy())
    got = _shortest_paths(lazynp, lazynp.array(p))
    assert numpy.asarray(got).dtype == expected.dtype
    numpy.testing.assert_array_equal(numpy.asarray(got), expected)


@pytest.mark.parametrize("method,args", [
    ("outer", (numpy.arange(4.0), numpy.arange(3.0))),
    ("reduce", (numpy.arange(12.0).reshape(3, 4),)),
    ("accumulate", (numpy.arange(12).reshape(3, 4),)),
])
def test_small_ufunc_methods_run_at_once_with_numpys_results(method, args):
    lazy_args = tuple(lazynp.array(a) for a in args)
    expected = getattr(numpy.add, method)(*args)
    lazynp.reset_stats()
    got = getattr(lazynp.add, method)(*lazy_args)
    stats = lazynp.stats()
    assert stats["ops_eager"] == 1 and stats["ops_recorded"] == 0
    assert type(got) is lazynp.ndarray
    assert numpy.asarray(got).dtype == expected.dtype
    numpy.testing.assert_array_equal(numpy.asarray(got), expected)


def test_ufunc_methods_and_numpy_scalar_operands_take_the_c_eager_call(monkeypatch):
    """With the C extension, small ufunc methods (``np.add.outer``...) and a NumPy scalar
    times a lazy array go through the C eager call, not the Python ``try_call`` (2 us more
    per call); without it, the Python version is the eager call."""
    from lazynp._base import native
    from lazynp._numpy import eager
    if native.ext is None:
        assert eager.eager_call is eager.try_call
        return
    a = lazynp.array(numpy.arange(6.0))
    original = eager.try_call

    def python_path(*args, **kwargs):
        raise AssertionError("the Python try_call was taken")
    monkeypatch.setattr(eager, "try_call", python_path)
    native.ext.configure_eager(not_eager=eager.NOT_EAGER, try_call=python_path,
                               try_method=eager.try_method, wrap=eager.wrap)
    try:
        outer = lazynp.add.outer(a, a)
        total = lazynp.add.reduce(a)
        running = lazynp.add.accumulate(a)
        scaled = numpy.float64(2.5) * a
    finally:
        native.ext.configure_eager(not_eager=eager.NOT_EAGER, try_call=original,
                                   try_method=eager.try_method, wrap=eager.wrap)
    x = numpy.arange(6.0)
    numpy.testing.assert_array_equal(numpy.asarray(outer), numpy.add.outer(x, x))
    assert total == numpy.add.reduce(x) and type(total) is type(numpy.add.reduce(x))
    numpy.testing.assert_array_equal(numpy.asarray(running), numpy.add.accumulate(x))
    numpy.testing.assert_array_equal(numpy.asarray(scaled), numpy.float64(2.5) * x)


# --- one op assigned into the array it reads (a copy-on-write each step) ------------------

def _relax_lines(np, path, steps):
    """``path[:] = minimum(path, outer)`` steps on a medium grid (tree kernel sizes)."""
    for k in steps:
        path[:] = np.minimum(path[:], np.add.outer(path[:, k], path[k, :]))
    return path


_MEDIUM = 380          # 380 * 380 = 144,400 elements: from TREE_MIN_ELEMS (131,072)


def _medium_grid():
    n = _MEDIUM
    return ((numpy.arange(n * n, dtype=numpy.int64).reshape(n, n) * 7919) % 1009).astype(
        numpy.int32)


def test_one_op_assigned_into_what_it_reads_runs_at_once_after_two_steps():
    """Each step's tree kernel wrote into a copy of ``path`` (its old version is the op's
    input): the copy costs what writing in place saves, so the line counts as a lone op
    and runs at once (NumPy's minimum, then the write in place) from the third step."""
    p = _medium_grid()
    expected = _relax_lines(numpy, p.copy(), range(8))
    lp = lazynp.array(p)
    _relax_lines(lazynp, lp, range(1))
    cpu.wait_compiles()               # (before its kernel is compiled a tree is flushed)
    _relax_lines(lazynp, lp, range(1, 3))
    lazynp.reset_stats()
    _relax_lines(lazynp, lp, range(3, 8))
    stats = lazynp.stats()
    numpy.testing.assert_array_equal(numpy.asarray(lp), expected)
    assert stats["tree_kernels_run"] == 0 and stats["copy_on_write"] == 0
    assert stats["ops_eager"] >= 5


def test_one_op_assigned_into_another_array_keeps_its_tree_kernel():
    """``B[1:-1] = A[:-2] + A[2:]``: no copy is needed, the kernel writes B's region
    itself (no temporary), every step."""
    a0 = numpy.linspace(0.0, 1.0, 300_000)
    A, B = numpy.array(a0), numpy.array(a0)
    LA, LB = lazynp.array(a0), lazynp.array(a0)
    for _ in range(3):
        B[1:-1] = A[:-2] + A[2:]
        A[1:-1] = B[:-2] - B[2:]
        LB[1:-1] = LA[:-2] + LA[2:]
        LA[1:-1] = LB[:-2] - LB[2:]
        cpu.wait_compiles()
    lazynp.reset_stats()
    for _ in range(4):
        B[1:-1] = A[:-2] + A[2:]
        A[1:-1] = B[:-2] - B[2:]
        LB[1:-1] = LA[:-2] + LA[2:]
        LA[1:-1] = LB[:-2] - LB[2:]
    stats = lazynp.stats()
    numpy.testing.assert_array_equal(numpy.asarray(LA), A)
    numpy.testing.assert_array_equal(numpy.asarray(LB), B)
    assert stats["copy_on_write"] == 0
    from lazynp._base import native
    if native.ext is not None:       # (the C recorder writes trees into regions)
        assert stats["tree_kernels_run"] == 8
