"""Reductions, scans and ufunc methods against NumPy.

Float inputs sit on a 1/8 grid (sums are exact in any order), with a share of nan/inf;
results are compared within reduction tolerance (reordering is allowed, NumPy's dtypes and
exception classes are not negotiable).  Shape/dtype/axis errors are raised at the call.
"""
from __future__ import annotations

import math

import numpy
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import lazynp
from strategies import SETTINGS, check, dtypes, shapes, small_elements

# name: (axis kind, accepts dtype=, accepts keepdims=, accepts where=/initial=, ddof)
SPEC = {
    "sum": ("multi", True, True, "where+initial", False),
    "prod": ("multi", True, True, "where+initial", False),
    "mean": ("multi", True, True, "where", False),
    "std": ("multi", True, True, "where", True),
    "var": ("multi", True, True, "where", True),
    "min": ("multi", False, True, "where+initial", False),
    "max": ("multi", False, True, "where+initial", False),
    "argmin": ("single", False, True, "", False),
    "argmax": ("single", False, True, "", False),
    "all": ("multi", False, True, "where", False),
    "any": ("multi", False, True, "where", False),
    "nansum": ("multi", True, True, "where+initial", False),
    "nanmean": ("multi", True, True, "where", False),
    "nanmax": ("multi", False, True, "where+initial", False),
    "nanmin": ("multi", False, True, "where+initial", False),
    "ptp": ("multi", False, True, "", False),
    "median": ("multi", False, True, "", False),
    "count_nonzero": ("multi", False, True, "", False),
    "cumsum": ("scan", True, False, "", False),
    "cumprod": ("scan", True, False, "", False),
}
METHODS = ["sum", "prod", "mean", "std", "var", "min", "max", "argmin", "argmax", "all", "any",
           "cumsum", "cumprod"]

SPECIAL = [math.nan, math.inf, -math.inf]


def red_elements(dtype):
    """Small 1/8-grid values; floats also get nan/inf now and then."""
    dtype = numpy.dtype(dtype)
    small = small_elements(dtype)
    if dtype.kind == "f":
        return st.one_of(small, small, small, st.sampled_from(SPECIAL))
    if dtype.kind == "c":
        part = st.one_of(st.integers(-32, 32).map(lambda k: k / 8), st.sampled_from(SPECIAL))
        return st.one_of(small, small, small, st.builds(complex, part, part))
    return small


def red_arrays(dtype, shape):
    return hnp.arrays(dtype, shape, elements=red_elements(dtype))


@st.composite
def axes(draw, ndim, kind="multi"):
    """None, an int (sometimes out of range), or a tuple of axes (sometimes repeated)."""
    choices = ["none", "int"] + (["tuple"] if kind == "multi" else [])
    c = draw(st.sampled_from(choices))
    if c == "none":
        return None
    if c == "int":
        return draw(st.integers(-ndim - 1, ndim))
    if draw(st.integers(0, 9)) == 0 and ndim:
        ax = draw(st.integers(0, ndim - 1))
        return (ax, ax - ndim)  # the same axis twice -> ValueError
    return draw(hnp.valid_tuple_axes(ndim))


@st.composite
def reduction_case(draw, name):
    axis_kind, has_dtype, has_keepdims, extras, has_ddof = SPEC[name]
    dt = draw(dtypes)
    a = draw(red_arrays(dt, shapes(max_dims=3)))
    kw = {}
    ax = draw(axes(a.ndim, "single" if axis_kind != "multi" else "multi"))
    if ax is not None or draw(st.booleans()):
        kw["axis"] = ax
    if has_dtype and draw(st.integers(0, 2)) == 0:
        kw["dtype"] = draw(dtypes)
    if has_keepdims and draw(st.booleans()):
        kw["keepdims"] = True
    if has_ddof and draw(st.booleans()):
        kw["ddof"] = draw(st.integers(0, 2))
    if "initial" in extras and draw(st.integers(0, 3)) == 0:
        kw["initial"] = draw(small_elements(dt if dt.kind != "c" else numpy.float64))
    if "where" in extras and draw(st.integers(0, 3)) == 0:
        if draw(st.integers(0, 4)):  # a mask that broadcasts to the input
            wshape = tuple(draw(st.sampled_from([1, s])) for s in a.shape)
            wshape = wshape[draw(st.integers(0, len(wshape))):]
        else:  # sometimes one that does not
            wshape = draw(hnp.broadcastable_shapes(a.shape, min_side=0))
        kw["where"] = draw(hnp.arrays(numpy.bool_, wshape))
    return a, kw


def lazy_kw(kw):
    out = dict(kw)
    if "where" in out:
        out["where"] = lazynp.asarray(out["where"])
    return out


@pytest.mark.parametrize("name", list(SPEC))
@settings(SETTINGS, max_examples=40)
@given(data=st.data())
def test_reduction_functions(name, data):
    a, kw = data.draw(reduction_case(name), label="case")
    check(lambda: getattr(numpy, name)(a, **kw),
          lambda: getattr(lazynp, name)(lazynp.asarray(a), **lazy_kw(kw)),
          kind="reduction", raise_at_call=True)


@pytest.mark.parametrize("name", METHODS)
@settings(SETTINGS, max_examples=25)
@given(data=st.data())
def test_reduction_methods(name, data):
    a, kw = data.draw(reduction_case(name), label="case")
    check(lambda: getattr(a, name)(**kw),
          lambda: getattr(lazynp.asarray(a), name)(**lazy_kw(kw)),
          kind="reduction", raise_at_call=True)


@pytest.mark.parametrize("name", ["sum", "mean", "max", "argmax", "cumsum", "std", "median"])
@settings(SETTINGS, max_examples=20)
@given(data=st.data())
def test_reductions_of_views_and_expressions(name, data):
    """Reductions of lazy inputs that are themselves views and elementwise results."""
    dt = data.draw(st.sampled_from([numpy.dtype(numpy.int32), numpy.dtype(numpy.float64),
                                    numpy.dtype(numpy.float32)]))
    a = data.draw(red_arrays(dt, shapes(min_dims=2, max_dims=3, min_side=1)))
    ax = data.draw(st.none() | st.integers(-a.ndim, a.ndim - 1))
    check(lambda: getattr(numpy, name)((a.T[::-1] * 2 + 1), axis=ax),
          lambda: getattr(lazynp, name)((lazynp.asarray(a).T[::-1] * 2 + 1), axis=ax),
          kind="reduction", raise_at_call=True)


@settings(SETTINGS, max_examples=40)
@given(dt=dtypes, shape=shapes(max_dims=3).filter(lambda s: 0 in s),
       name=st.sampled_from(["max", "min", "argmax", "argmin", "ptp", "sum", "prod", "mean",
                             "median", "all", "any", "nanmax", "std"]),
       axis_pick=st.integers(0, 5))
def test_reductions_of_empty_arrays(dt, shape, name, axis_pick):
    """Empty inputs: NumPy raises ValueError for max/argmax/ptp of nothing, gives 0/1/nan
    for the others."""
    a = numpy.zeros(shape, dt)
    ax = None if axis_pick == 0 else (axis_pick - 1) % len(shape)
    check(lambda: getattr(numpy, name)(a, axis=ax),
          lambda: getattr(lazynp, name)(lazynp.asarray(a), axis=ax),
          kind="reduction", raise_at_call=True)


@pytest.mark.parametrize("name", ["nansum", "nanmean", "nanmax", "nanmin", "nanprod", "nanstd",
                                  "nanvar", "nanargmax", "nanmedian", "nancumsum"])
@settings(SETTINGS, max_examples=30)
@given(data=st.data())
def test_nan_reductions_with_many_nans(name, data):
    dt = data.draw(st.sampled_from([numpy.float32, numpy.float64]))
    a = data.draw(hnp.arrays(dt, shapes(max_dims=2), elements=st.one_of(
        small_elements(dt), st.just(math.nan))))
    ax = data.draw(st.none() | st.integers(-a.ndim, a.ndim - 1) if a.ndim else st.none())
    check(lambda: getattr(numpy, name)(a, axis=ax),
          lambda: getattr(lazynp, name)(lazynp.asarray(a), axis=ax),
          kind="reduction", raise_at_call=(TypeError,))


# --- ufunc methods ----------------------------------------------------------------------------

REDUCE_UFUNCS = ["add", "multiply", "maximum", "minimum", "subtract", "logical_and",
                 "logical_or", "bitwise_xor", "fmax"]


@pytest.mark.parametrize("name", REDUCE_UFUNCS)
@settings(SETTINGS, max_examples=40)
@given(data=st.data())
def test_ufunc_reduce(name, data):
    dt = data.draw(dtypes)
    a = data.draw(red_arrays(dt, shapes(max_dims=3)))
    kw = {}
    if data.draw(st.booleans()):
        kw["axis"] = data.draw(axes(a.ndim, "multi"))
    if data.draw(st.integers(0, 3)) == 0:
        kw["dtype"] = data.draw(dtypes)
    if data.draw(st.booleans()):
        kw["keepdims"] = True
    if data.draw(st.integers(0, 3)) == 0:
        kw["initial"] = data.draw(st.integers(-3, 3))
    check(lambda: getattr(numpy, name).reduce(a, **kw),
          lambda: getattr(lazynp, name).reduce(lazynp.asarray(a), **kw),
          kind="reduction", raise_at_call=True)


@pytest.mark.parametrize("name", ["add", "multiply", "maximum", "subtract", "logical_or"])
@settings(SETTINGS, max_examples=40)
@given(data=st.data())
def test_ufunc_accumulate(name, data):
    dt = data.draw(dtypes)
    a = data.draw(red_arrays(dt, shapes(max_dims=3)))
    kw = {}
    if data.draw(st.booleans()):
        kw["axis"] = data.draw(st.integers(-a.ndim - 1, a.ndim))
    if data.draw(st.integers(0, 3)) == 0:
        kw["dtype"] = data.draw(dtypes)
    check(lambda: getattr(numpy, name).accumulate(a, **kw),
          lambda: getattr(lazynp, name).accumulate(lazynp.asarray(a), **kw),
          kind="reduction", raise_at_call=True)


@pytest.mark.parametrize("name", ["add", "multiply", "subtract", "maximum", "greater",
                                  "power", "arctan2"])
@settings(SETTINGS, max_examples=30)
@given(data=st.data())
def test_ufunc_outer(name, data):
    a = data.draw(red_arrays(data.draw(dtypes), shapes(max_dims=2)), label="a")
    b = data.draw(red_arrays(data.draw(dtypes), shapes(max_dims=2)), label="b")
    b_side = data.draw(st.sampled_from(["lazy", "numpy", "list"]), label="b form")
    bl = {"lazy": lazynp.asarray, "numpy": lambda x: x.copy(), "list": lambda x: x.tolist()}[b_side]
    check(lambda: getattr(numpy, name).outer(a, b if b_side != "list" else b.tolist()),
          lambda: getattr(lazynp, name).outer(lazynp.asarray(a), bl(b)),
          raise_at_call=(TypeError,))


@settings(SETTINGS, max_examples=30)
@given(data=st.data())
def test_reduction_out_argument(data):
    dt = data.draw(st.sampled_from([numpy.dtype(numpy.float64), numpy.dtype(numpy.int64)]))
    a = data.draw(red_arrays(dt, shapes(min_dims=1, max_dims=3, min_side=1)))
    ax = data.draw(st.integers(0, a.ndim - 1))
    name = data.draw(st.sampled_from(["sum", "max", "mean", "prod", "cumsum", "var", "std",
                                      "nansum", "nanmean", "nanvar", "nanstd"]))
    out_dt = data.draw(st.sampled_from([numpy.float64, numpy.int64, numpy.float32,
                                        numpy.int8]))
    ref_shape = getattr(numpy, name)(a, axis=ax).shape

    def run_side(mod, x):
        o = mod.zeros(ref_shape, out_dt)
        r = getattr(mod, name)(x, axis=ax, out=o)
        assert r is o, "out= must be returned"
        return o

    check(lambda: run_side(numpy, a), lambda: run_side(lazynp, lazynp.asarray(a)),
          kind="reduction")


@pytest.mark.parametrize("name", ["sum", "mean", "var", "std", "nanmean", "nanstd", "prod"])
@pytest.mark.parametrize("data,out_dt", [
    ([0.0, numpy.nan], numpy.int64), ([numpy.inf, 1.0], numpy.int64),
    ([6e18, 6e18], numpy.int64), ([2 ** 62, 2 ** 62], numpy.int64),
    ([3e38, 3e38], numpy.float32), ([3e38, -3e38], numpy.float32),
    ([100, 100, 100], numpy.int8), ([0.5, 0.5, 2.5], numpy.int64),
])
def test_reductions_compute_in_the_dtype_of_out(name, data, out_dt):
    """NumPy accumulates a sum into ``out`` and divides a mean there (overflow, casts,
    TypeError for nan-functions of floats into integers): lazynp gives the same bits."""
    a = numpy.array(data)

    def run_side(mod, x):
        o = mod.zeros((), out_dt)
        getattr(mod, name)(x, axis=0, out=o)
        return o
    with numpy.errstate(all="ignore"):
        check(lambda: run_side(numpy, a), lambda: run_side(lazynp, lazynp.asarray(a)),
              kind="exact", raise_at_call=True)


@pytest.mark.parametrize("name", ["var", "std", "nanvar", "nanstd"])
@pytest.mark.parametrize("ddof", [0, 1])
def test_var_and_std_take_a_mean(name, ddof):
    a = numpy.array([[1.0, 2.0, 3.0], [4.0, 6.0, numpy.nan if name.startswith("nan") else 8.0]])
    m = numpy.array([[0.0], [1.5]])
    check(lambda: getattr(numpy, name)(a, axis=1, keepdims=True, mean=m, ddof=ddof),
          lambda: getattr(lazynp, name)(lazynp.asarray(a), axis=1, keepdims=True,
                                        mean=lazynp.asarray(m), ddof=ddof))
    o1, o2 = numpy.zeros((2, 1), numpy.float32), lazynp.zeros((2, 1), numpy.float32)
    getattr(numpy, name)(a, axis=1, keepdims=True, mean=m, out=o1)
    getattr(lazynp, name)(lazynp.asarray(a), axis=1, keepdims=True, mean=m, out=o2)
    numpy.testing.assert_array_equal(numpy.asarray(o2), o1)


def test_reduction_scalar_results_behave_like_numpy_scalars():
    x = numpy.arange(12.0).reshape(3, 4)
    lx = lazynp.asarray(x)
    s = lx.sum()
    assert float(s) == 66.0 and repr(s) == repr(x.sum())
    assert int(lazynp.argmax(lx)) == 11
    assert bool(lazynp.all(lx >= 0)) is True
    assert lazynp.sum(lx, axis=(0, 1), keepdims=True).shape == (1, 1)
    assert [int(i) for i in lazynp.argmax(lx, axis=0)] == [2, 2, 2, 2]
    assert str(lazynp.mean(lx)) == str(x.mean())


@pytest.mark.parametrize("call", ["mean(axis=0)", "mean()", "var(axis=1)", "std()",
                                  "sum(axis=0)", "nanmean"])
def test_warnings_of_empty_reductions_are_numpys_once(call):
    """A reduction's record-time probe is silent: NumPy's warnings ("Mean of empty slice",
    "invalid value encountered in divide", "Degrees of freedom <= 0") come once, when it runs,
    also the second time the same reduction is recorded (cached shape/dtype rules)."""
    import warnings

    def run(m):
        a = m.zeros((0, 3))
        if call == "nanmean":
            return m.nanmean(a, axis=0)
        return eval(f"a.{call}")

    def caught(m):
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            res = numpy.asarray(run(m))
        return res, [(x.category, str(x.message)) for x in w]

    want, want_w = caught(numpy)
    for _ in range(2):
        got, got_w = caught(lazynp)
        assert got_w == want_w
        numpy.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("name", ["cumsum", "cumprod", "nancumsum", "nancumprod"])
@pytest.mark.parametrize("data,out_dt", [
    ([100, 100, 100], numpy.int8), ([1e308, 1e308], numpy.float32),
    ([0.5, 1.5, 2.5], numpy.int64), ([1 + 2j, 3 - 1j], numpy.float64),
])
def test_scans_accumulate_in_the_dtype_of_out(name, data, out_dt):
    import warnings
    a = numpy.array(data)

    def run_side(mod, x):
        o = mod.zeros(a.shape, out_dt)
        with warnings.catch_warnings(record=True) as w, numpy.errstate(all="ignore"):
            warnings.simplefilter("always")
            getattr(mod, name)(x, axis=0, out=o)
            v = numpy.asarray(o)
        return v, sorted(str(m.message) for m in w)
    want = run_side(numpy, a)
    got = run_side(lazynp, lazynp.asarray(a))
    numpy.testing.assert_array_equal(got[0], want[0])
    assert got[1] == want[1]


@pytest.mark.parametrize("name", ["median", "nanmedian", "sum", "mean", "max", "ptp",
                                  "count_nonzero"])
@pytest.mark.parametrize("bound", [None, 1])
def test_zero_d_keepdims_result_type_is_numpys(name, bound):
    """median of a 0-d array with keepdims=True is a 0-d array in NumPy, a sum is a scalar;
    reductions recorded by the policy (bound 1: every sized op is recorded) give the same
    types."""
    want = getattr(numpy, name)(numpy.array(2.0), keepdims=True)
    saved = lazynp.core.policy.EAGER_MAX_ELEMS
    if bound is not None:
        lazynp.core.policy.set_eager_max_elems(bound)
    try:
        got = getattr(lazynp, name)(lazynp.array(2.0), keepdims=True)
    finally:
        lazynp.core.policy.set_eager_max_elems(saved)
    if isinstance(want, numpy.ndarray):
        assert isinstance(got, lazynp.ndarray) and got.shape == want.shape
        numpy.testing.assert_array_equal(numpy.asarray(got), want)
    elif bound is None:
        assert type(got) is type(want) and got == want
    else:       # (recorded: a pending scalar may stay a lazy 0-d array until read)
        assert type(got) is type(want) or isinstance(got, lazynp.ndarray) and got.shape == ()
        assert got == want and type(got[()]) is type(want)
