"""Shared hypothesis strategies and the NumPy-oracle comparison helpers.

NumPy is the oracle: every test computes the same thing with ``numpy`` on NumPy inputs and
with ``lazynp`` on ``lazynp.asarray(inputs)``, then :func:`check` compares shapes, dtypes,
values, or, when NumPy raises, the exception class.
"""
from __future__ import annotations

import contextlib
import functools
import warnings

import numpy
import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import lazynp

# Reproducible in CI: no example database, derandomized generation, no deadline.
SETTINGS = settings(max_examples=30, deadline=None, derandomize=True, database=None,
                    suppress_health_check=list(HealthCheck), print_blob=False,
                    phases=(Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink))

DTYPES = [numpy.dtype(d) for d in (numpy.bool_, numpy.int8, numpy.int16, numpy.int32,
                                   numpy.int64, numpy.uint8, numpy.float32, numpy.float64,
                                   numpy.complex128)]
NUMERIC_DTYPES = [d for d in DTYPES if d.kind != "b"]

dtypes = st.sampled_from(DTYPES)


# Strategies are cached: building and validating a hypothesis strategy costs more than running
# one example, and tests draw arrays of a few (dtype, shape) pairs over and over.

@functools.lru_cache(maxsize=None)
def shapes(min_dims=0, max_dims=3, min_side=0, max_side=4):
    return hnp.array_shapes(min_dims=min_dims, max_dims=max_dims, min_side=min_side,
                            max_side=max_side)


@functools.lru_cache(maxsize=None)
def full_elements(dtype):
    """Every value of ``dtype``, including nan/inf/subnormals/-0.0 and integer extremes."""
    return hnp.from_dtype(numpy.dtype(dtype))


@functools.lru_cache(maxsize=None)
def small_elements(dtype, lo=-4, hi=4):
    """Small values on a 1/8 grid: sums are exact in any order, products do not overflow."""
    dtype = numpy.dtype(dtype)
    if dtype.kind == "b":
        return st.booleans()
    if dtype.kind == "u":
        return st.integers(0, max(hi, 0))
    if dtype.kind == "i":
        return st.integers(lo, hi)
    real = st.integers(lo * 8, hi * 8).map(lambda k: k / 8)
    if dtype.kind == "c":
        return st.builds(complex, real, real)
    return real


def arrays(dtype, shape, elements=None, kind="full"):
    dtype = numpy.dtype(dtype)
    if not isinstance(shape, st.SearchStrategy):
        shape = tuple(shape) if not isinstance(shape, int) else (shape,)
    if elements is None:
        return _arrays(dtype, shape, kind)
    return hnp.arrays(dtype, shape, elements=elements)


@functools.lru_cache(maxsize=None)
def _arrays(dtype, shape, kind):
    elements = full_elements(dtype) if kind == "full" else small_elements(dtype)
    return hnp.arrays(dtype, shape, elements=elements)


# Python scalars (NEP 50: weak) and NumPy scalars (strong).
py_ints = st.one_of(st.integers(-10, 10), st.integers(-2**63, 2**63 - 1),
                    st.sampled_from([127, 128, 255, 256, -129, 2**31, 2**63 - 1, -2**63]))
# Python ints NumPy cannot hold in int64 (uint64 or object arrays, or OverflowError)
huge_py_ints = st.sampled_from([2**63, 2**64 - 1, 2**64, -2**63 - 1, 2**70, -2**70])
py_floats = st.floats(allow_nan=True, allow_infinity=True, width=64)
py_complex = st.complex_numbers(allow_nan=True, allow_infinity=True)
py_scalars = st.one_of(st.booleans(), py_ints, py_floats, py_complex)


@st.composite
def numpy_scalars(draw, dtype_st=dtypes):
    dt = draw(dtype_st)
    return dt.type(draw(full_elements(dt)))


# --- running both sides ---------------------------------------------------------------------

@contextlib.contextmanager
def quiet():
    with numpy.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def force(x):
    """Materialize a (possibly nested) result: lazynp arrays become NumPy arrays."""
    if isinstance(x, lazynp.ndarray):
        return numpy.asarray(x)
    if isinstance(x, (tuple, list)):
        return type(x)(force(v) for v in x) if type(x) in (tuple, list) else \
            tuple(force(v) for v in x)
    return x


class Outcome:
    def __init__(self, value=None, exc=None, stage=None, raw=None):
        self.value, self.exc, self.stage, self.raw = value, exc, stage, raw


def run(fn, *args, **kwargs) -> Outcome:
    """Call ``fn``; record the result (forced) or the exception and when it was raised."""
    with quiet():
        try:
            raw = fn(*args, **kwargs)
        except Exception as e:  # noqa: BLE001 - compared against NumPy's class
            return Outcome(exc=e, stage="call")
        try:
            value = force(raw)
        except Exception as e:  # noqa: BLE001
            return Outcome(exc=e, stage="force", raw=raw)
    return Outcome(value=value, raw=raw)


def tolerance(dtype, kind="elementwise"):
    dtype = numpy.dtype(dtype)
    if dtype.kind not in "fc" or kind == "exact":
        return None
    single = dtype in (numpy.float32, numpy.complex64, numpy.float16)
    if kind == "elementwise":
        return 2e-6 if single else 1e-12
    return 1e-5 if single else 1e-9


def assert_same_value(expected, actual, kind="elementwise", rtol=None, atol=None, where=""):
    """Same shape, same dtype, equal values (floats within ``kind``'s tolerance)."""
    if isinstance(expected, (tuple, list)):
        assert isinstance(actual, (tuple, list)), f"{where}: expected a sequence, got {actual!r}"
        assert len(expected) == len(actual), f"{where}: {len(expected)} != {len(actual)} results"
        for i, (e, a) in enumerate(zip(expected, actual)):
            assert_same_value(e, a, kind, rtol, atol, where=f"{where}[{i}]")
        return
    if expected is None or isinstance(expected, (str, bytes)):
        assert actual == expected, where
        return
    e = numpy.asarray(expected)
    a = numpy.asarray(actual)
    assert a.shape == e.shape, f"{where}: shape {a.shape} != NumPy's {e.shape}"
    assert a.dtype == e.dtype, f"{where}: dtype {a.dtype} != NumPy's {e.dtype}"
    tol = tolerance(e.dtype, kind) if rtol is None else rtol
    if tol is None or e.size == 0:
        numpy.testing.assert_array_equal(a, e, err_msg=where, strict=True)
    else:
        numpy.testing.assert_allclose(a, e, rtol=tol, atol=tol if atol is None else atol,
                                      equal_nan=True, err_msg=where)


def check(fn_numpy, fn_lazy, *, kind="elementwise", rtol=None, atol=None,
          raise_at_call=False, lazy_type=True, compare=None):
    """Run both sides; results must agree, or both must raise the same exception class.

    ``raise_at_call``: when NumPy raises, lazynp must raise at the call, not when forced
    (shape/dtype errors are eager in lazynp).  True, an exception class (or tuple) that
    NumPy's exception is an instance of, or a predicate on NumPy's exception.
    ``kind``: "elementwise", "reduction" (looser float tolerance) or "exact" (bit-for-bit,
    NaNs equal).  ``lazy_type``: when NumPy returns an ndarray, lazynp must return a
    lazynp.ndarray.  ``compare(expected, actual)`` replaces the value comparison.
    """
    exp = run(fn_numpy)
    act = run(fn_lazy)
    if exp.exc is not None:
        if act.exc is None:
            pytest.fail(f"NumPy raised {type(exp.exc).__name__}: {exp.exc}; lazynp returned "
                        f"{act.value!r}")
        assert type(act.exc) is type(exp.exc), (
            f"NumPy raised {type(exp.exc).__module__}.{type(exp.exc).__name__}({exp.exc}); "
            f"lazynp raised {type(act.exc).__module__}.{type(act.exc).__name__}({act.exc})")
        if _must_raise_at_call(raise_at_call, exp.exc):
            assert act.stage == "call", (f"lazynp raised {type(act.exc).__name__} only when "
                                         f"forced, not at the call: {act.exc}")
        return exp, act
    if act.exc is not None:
        raise AssertionError(f"NumPy returned {exp.value!r} but lazynp raised "
                             f"{type(act.exc).__name__} at {act.stage}: {act.exc}") from act.exc
    if lazy_type:
        _check_lazy_types(exp.raw, act.raw)
    if compare is not None:
        compare(exp.value, act.value)
    else:
        assert_same_value(exp.value, act.value, kind, rtol, atol)
    return exp, act


def _must_raise_at_call(rule, exc) -> bool:
    if rule is True or rule is False or rule is None:
        return bool(rule)
    if isinstance(rule, (type, tuple)):
        return isinstance(exc, rule)
    return bool(rule(exc))


def shape_or_dtype_error(exc) -> bool:
    """Errors that depend only on shapes/dtypes/scalar types: lazynp raises them eagerly."""
    if isinstance(exc, (TypeError, OverflowError)):
        return True
    msg = str(exc)
    return isinstance(exc, ValueError) and ("broadcast" in msg or "shape" in msg)


def _check_lazy_types(expected, actual):
    if isinstance(expected, numpy.ndarray):
        assert isinstance(actual, lazynp.ndarray), (
            f"NumPy returned an ndarray, lazynp returned {type(actual).__name__}")
    elif isinstance(expected, (tuple, list)) and isinstance(actual, (tuple, list)):
        for e, a in zip(expected, actual):
            _check_lazy_types(e, a)


def lazy_or_scalar(x):
    """NumPy arrays become lazynp arrays; Python and NumPy scalars stay as they are."""
    return lazynp.asarray(x.copy()) if isinstance(x, numpy.ndarray) else x
