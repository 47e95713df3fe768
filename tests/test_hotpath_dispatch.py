"""The per-call paths of small at-once work (issue 36's small-vector loops: durbin, trmm,
cholesky): ``dot`` through NumPy's implementation without its ``__array_function__``
dispatch, ``flip`` of a lazynp array, ``ndim``, and the recorded operators' deferral check.

Every result is compared with NumPy's (values, dtype, type, the view's memory and strides,
exceptions and their messages).  Where a path is an optimisation, a profile hook in a fresh
interpreter checks the Python calls it makes: deterministic, not timed.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings

import numpy
import pytest

import lazynp
from lazynp._base import native

PURE = native.ext is None
C_ONLY = pytest.mark.skipif(PURE, reason="the C extension's paths (LAZYNP_PURE_PYTHON=1)")


def calls_in_fresh_process(setup: str, expression: str) -> list:
    """The names of the Python functions ``lambda: expression`` calls (after ``setup`` and
    one untimed call), in a new interpreter: no device hook or policy left by other tests."""
    code = (f"import json, sys, numpy, lazynp\n{setup}\nf = lambda: {expression}\nf()\n"
            "names = []\n"
            "def hook(frame, event, arg):\n"
            "    if event == 'call':\n"
            "        names.append(frame.f_code.co_name)\n"
            "sys.setprofile(hook)\nf()\nsys.setprofile(None)\nprint(json.dumps(names))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def same(got, want):
    """``got`` (lazynp) is NumPy's ``want``: type, dtype, shape and values."""
    if isinstance(want, numpy.ndarray):
        assert isinstance(got, lazynp.ndarray), type(got)
        got = numpy.asarray(got)
        assert got.dtype == want.dtype and got.shape == want.shape
        numpy.testing.assert_array_equal(got, want)
    else:
        assert type(got) is type(want), (type(got), type(want))
        assert got == want or (got != got and want != want)


# --- dot --------------------------------------------------------------------------------------

VECTORS = [
    numpy.arange(1.0, 8.0),
    numpy.arange(7, dtype=numpy.int64),
    numpy.arange(7, dtype=numpy.float32) / 3,
    numpy.arange(7) * (1 + 2j),
    numpy.array([True, False, True, True, False, False, True]),
]


@pytest.mark.parametrize("x", VECTORS, ids=lambda v: str(v.dtype))
@pytest.mark.parametrize("y", VECTORS, ids=lambda v: str(v.dtype))
def test_dot_of_vectors_and_views_is_numpys(x, y):
    lx, ly = lazynp.array(x), lazynp.array(y)
    same(lazynp.dot(lx, ly), numpy.dot(x, y))
    same(lazynp.dot(lazynp.flip(lx[:5]), ly[2:]), numpy.dot(numpy.flip(x[:5]), y[2:]))
    same(lazynp.dot(lx[::3], ly[1::2]), numpy.dot(x[::3], y[1::2]))


@pytest.mark.parametrize("other", [2.5, 3, True, 1 - 2j, numpy.float32(1.5), numpy.int8(-3),
                                   numpy.float64(0.25)], ids=repr)
def test_dot_with_a_scalar_is_numpys(other):
    x = numpy.arange(4.0)
    same(lazynp.dot(lazynp.array(x), other), numpy.dot(x, other))
    same(lazynp.dot(other, lazynp.array(x)), numpy.dot(other, x))


def test_dot_of_matrices_and_out_is_numpys():
    a = numpy.arange(12.0).reshape(3, 4)
    b = numpy.arange(8.0).reshape(4, 2)
    same(lazynp.dot(lazynp.array(a), lazynp.array(b)), numpy.dot(a, b))
    same(lazynp.dot(lazynp.array(a), lazynp.array(b[:, 0])), numpy.dot(a, b[:, 0]))
    out = numpy.zeros((3, 2))
    r = lazynp.dot(lazynp.array(a), lazynp.array(b), out)
    numpy.testing.assert_array_equal(out, numpy.dot(a, b))
    numpy.testing.assert_array_equal(numpy.asarray(r), out)


@pytest.mark.parametrize("args", [
    (numpy.ones(3),),                                     # a missing argument
    (numpy.ones(3), numpy.ones(2)),                       # shapes not aligned
    (numpy.ones((2, 3)), numpy.ones((2, 3))),
    (numpy.ones(3), numpy.ones(3), numpy.ones(3), 4),     # one argument too many
], ids=["missing", "vectors", "matrices", "extra"])
def test_dot_errors_are_numpys(args):
    with pytest.raises(Exception) as want:
        numpy.dot(*args)
    lazy = [lazynp.array(a) if isinstance(a, numpy.ndarray) else a for a in args]
    with pytest.raises(type(want.value)) as got:
        lazynp.dot(*lazy)
    assert str(got.value) == str(want.value)


class _Overriding(numpy.float64):
    """A NumPy scalar subclass that takes over NumPy functions (``__array_function__``)."""

    def __array_function__(self, func, types, args, kwargs):
        return ("taken over", func.__name__)


class _Duck:
    def __array_function__(self, func, types, args, kwargs):
        return ("duck", func.__name__)


@pytest.mark.parametrize("other", [_Overriding(2.0), _Duck()], ids=["scalar-subclass", "duck"])
def test_dot_still_dispatches_to_an_override(other):
    x = numpy.arange(3.0)
    want = numpy.dot(x, other)
    assert want[0] in ("taken over", "duck")
    assert lazynp.dot(lazynp.array(x), other) == want


@C_ONLY
def test_dot_of_plain_arrays_calls_no_python():
    """NumPy's dispatcher runs a Python function (its argument extractor) and looks for
    overrides on every call; lazynp's arguments are plain NumPy values by then."""
    assert calls_in_fresh_process(
        "x = lazynp.array(numpy.arange(5.0)); y = lazynp.array(numpy.arange(5.0) + 1)",
        "lazynp.dot(x, y)") == ["<lambda>"]


# --- calls with keywords ---------------------------------------------------------------------

@pytest.mark.parametrize("call", [
    lambda np, a: np.sum(a, axis=1),
    lambda np, a: np.sum(a, axis=(0, 1), dtype=numpy.float32),
    lambda np, a: np.mean(a, axis=0, keepdims=True),
    lambda np, a: np.std(a, axis=-1, ddof=1),
    lambda np, a: np.argmax(a, axis=0),
    lambda np, a: np.cumsum(a, axis=1, dtype=numpy.int64),
    lambda np, a: np.clip(a, 2, 5),
    lambda np, a: np.round(a / 7, decimals=2),
    lambda np, a: np.tensordot(a, a, axes=((0, 1), (0, 1))),
], ids=["sum", "sum-dtype", "mean-keepdims", "std-ddof", "argmax", "cumsum", "clip", "round",
        "tensordot"])
def test_calls_with_keywords_are_numpys(call):
    a = numpy.arange(12.0).reshape(3, 4)
    same(call(lazynp, lazynp.array(a)), call(numpy, a))


@pytest.mark.parametrize("call", [
    lambda np, a: np.sum(a, axis=1, foo=2),
    lambda np, a: np.sum(a, axis=2),
    lambda np, a: np.mean(a, axis=(0, 0)),
    lambda np, a: np.argmax(a, axis=1.5),
], ids=["unknown-keyword", "axis-out-of-range", "repeated-axis", "float-axis"])
def test_keyword_errors_are_numpys(call):
    a = numpy.arange(12.0).reshape(3, 4)
    with pytest.raises(Exception) as want:
        call(numpy, a)
    with pytest.raises(type(want.value)) as got:
        call(lazynp, lazynp.array(a))
    assert str(got.value) == str(want.value)


def test_keyword_calls_still_dispatch_to_an_override():
    want = numpy.mean(_Overriding(2.0), axis=None)
    assert want == ("taken over", "mean")
    assert lazynp.mean(_Overriding(2.0), axis=None) == want


@C_ONLY
@pytest.mark.parametrize("name", ["argmax", "cumsum"])
def test_calls_with_an_axis_skip_numpys_dispatcher(name):
    names = calls_in_fresh_process("a = lazynp.array(numpy.arange(12.0).reshape(3, 4))",
                                   f"lazynp.{name}(a, axis=1)")
    assert names and not [n for n in names if n.endswith("_dispatcher")], names


# --- flip -------------------------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(), (7,), (3, 4), (2, 3, 4)], ids=str)
@pytest.mark.parametrize("axis", [None, 0, -1, (0, -1)], ids=str)
def test_flip_is_numpys_view(shape, axis):
    base = numpy.arange(int(numpy.prod(shape)), dtype=float).reshape(shape)
    lz = lazynp.array(base)
    try:
        want = numpy.flip(base, axis)
    except Exception as e:  # noqa: BLE001 - the same error is the test
        with pytest.raises(type(e), match=str(e).replace("(", r"\(").replace(")", r"\)")):
            lazynp.flip(lz, axis)
        return
    got = lazynp.flip(lz, axis)
    same(got, numpy.asarray(want))
    assert got.strides == want.strides
    if base.ndim:
        assert numpy.shares_memory(numpy.asarray(got), numpy.asarray(lz))
        got[(0,) * base.ndim] = -1.0          # a view: the write shows in the base
        want[(0,) * base.ndim] = -1.0
        numpy.testing.assert_array_equal(numpy.asarray(lz), base)


def test_flip_of_numpy_data_and_subclasses_is_numpys():
    same(lazynp.flip(numpy.arange(4.0)), numpy.flip(numpy.arange(4.0)))
    same(lazynp.flip([1, 2, 3]), numpy.flip([1, 2, 3]))
    m = numpy.ma.masked_array([1.0, 2.0, 3.0], mask=[0, 1, 0])
    got = lazynp.flip(m)
    assert type(got) is numpy.ma.MaskedArray
    numpy.testing.assert_array_equal(got.mask, numpy.flip(m).mask)


@C_ONLY
def test_flip_of_a_lazynp_array_calls_only_flip():
    assert calls_in_fresh_process("x = lazynp.array(numpy.arange(6.0))[1:]",
                                  "lazynp.flip(x)") == ["<lambda>", "flip"]


# --- views by slices, element writes of attached arrays ----------------------------------------

@pytest.mark.parametrize("index", [
    slice(None, None, 0), (slice(1, None, 0), 0), slice(1, 5, 2), slice(None, None, -3),
    slice(None, None, 2 ** 70), slice(-(2 ** 70), 2 ** 70, -1), (slice(1, 3), 2),
], ids=repr)
def test_slice_views_and_zero_steps_are_numpys(index):
    base = numpy.arange(24.0).reshape(6, 4)
    lz = lazynp.array(base)
    try:
        want = base[index]
    except Exception as e:  # noqa: BLE001 - the same error is the test
        with pytest.raises(type(e)) as got:
            lz[index]
        assert str(got.value) == str(e)
        return
    got = lz[index]
    same(got, want)
    assert got.strides == want.strides


@pytest.mark.parametrize("policy", ["auto", "lazy"])
def test_element_writes_of_an_array_with_views_are_numpys(policy):
    """Element writes of an array a view was taken from (its value attached to the
    graph, as in a cholesky loop: ``A[i, j] -= np.dot(A[i, :j], A[j, :j])``)."""
    base = numpy.arange(1.0, 17.0).reshape(4, 4)
    want = base.copy()
    with lazynp.policy(policy):
        a = lazynp.array(base)
        for i in range(1, 4):
            for j in range(i):
                a[i, j] -= lazynp.dot(a[i, :j], a[j, :j])
                want[i, j] -= numpy.dot(want[i, :j], want[j, :j])
                a[i, j] /= a[j, j]
                want[i, j] /= want[j, j]
            a[i] = numpy.float64(0.5) * a[i]
            want[i] = numpy.float64(0.5) * want[i]
        v = a[1:, 2]
        a[3, 2] = 7
        want[3, 2] = 7
        same(a, want)
        same(v, want[1:, 2])


# --- ndim -------------------------------------------------------------------------------------

def test_ndim_of_detached_views_and_pending_arrays():
    for shape in [(), (3,), (2, 3), (1, 2, 1, 2)]:
        a = lazynp.array(numpy.ones(shape))
        assert a.ndim == len(shape)
        assert (a * 2).ndim == len(shape)              # (maybe pending)
        if shape:
            assert a[..., None].ndim == len(shape) + 1
            assert a[0].ndim == len(shape) - 1 or shape == (3,)
    with lazynp.policy("lazy"):
        p = lazynp.array(numpy.ones((2, 5))) + 1
        assert p.ndim == 2 and p.T.ndim == 2 and p[None].ndim == 3


# --- recorded operators: the deferral check and warnings filters ------------------------------

class _FloatSub(float):
    pass


class _Deferring:
    __array_ufunc__ = None

    def __radd__(self, other):
        return "deferred"


@pytest.mark.parametrize("policy", ["auto", "lazy"])
def test_operators_take_plain_operands_and_still_defer(policy):
    x = numpy.arange(4.0)
    with lazynp.policy(policy):
        a = lazynp.array(x)
        same(a + 1.5, x + 1.5)
        same(a * 2, x * 2)
        same(a - lazynp.array(x), x - x)
        same(a + x, x + x)
        same(a * numpy.float32(2), x * numpy.float32(2))
        same(a + _FloatSub(0.5), x + _FloatSub(0.5))
        assert (a + _Deferring()) == "deferred" == (x + _Deferring())
        b = lazynp.array(x)
        b += 1.0
        b *= _FloatSub(2.0)
        same(b, (x + 1.0) * 2.0)


def test_recorded_ops_see_warnings_filters_set_after_the_first_op():
    """The recorder reads ``warnings.filters`` at each recorded op: filters replaced or
    changed later (``catch_warnings``, ``simplefilter``) apply to the ops recorded after."""
    x = lazynp.array(numpy.array([1.0, 0.0]))
    with lazynp.policy("lazy"):
        (x / 1.0).sum()
        with warnings.catch_warnings():
            warnings.simplefilter("error", RuntimeWarning)
            with pytest.raises(RuntimeWarning):
                numpy.asarray(x / 0.0)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            numpy.asarray(x / 0.0)
        assert any(issubclass(w.category, RuntimeWarning) for w in caught)


if __name__ == "__main__":
    sys.exit(pytest.main([os.path.abspath(__file__), "-q"]))


def test_an_error_of_the_undispatched_call_is_not_a_second_call():
    # NumPy's gh-13631 case: each element's __bool__ changes its answer, so nonzero's two
    # passes disagree and NumPy raises RuntimeError; calling again (through the dispatcher)
    # would see settled elements and return quietly
    class FalseThenTrue:
        _val = False

        def __bool__(self):
            try:
                return self._val
            finally:
                self._val = True

    for lib in (numpy, lazynp):
        a = numpy.array([True, FalseThenTrue()])
        with pytest.raises(RuntimeError):
            lib.nonzero(a)
