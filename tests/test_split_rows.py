"""Functions of independent rows (sort, argsort, percentile, quantile, cumsum, cumprod,
``ufunc.accumulate``) and 1-D stable argsorts of large arrays run on two threads
(lazynp/_split.py): the results are NumPy's exactly (values, dtype, shape, memory order),
floating-point warnings and errors are NumPy's, and the split really happens."""
import warnings

import numpy
import pytest

import lazynp
from lazynp._base import split as _split
from lazynp.kernels import cpu

pytestmark = pytest.mark.skipif(not _split.enabled, reason="single core or LAZYNP_SPLIT=0")


@pytest.fixture
def splits(monkeypatch):
    """The number of calls run in two halves."""
    count = [0]
    real = _split._both

    def both(*args):
        r = real(*args)
        if r is not None:
            count[0] += 1
        return r
    monkeypatch.setattr(_split, "_both", both)
    return count


def _table(dtype, rows=300, cols=1100, seed=0, special=True):
    rng = numpy.random.default_rng(seed)
    x = rng.standard_normal((rows, cols)) * 100
    if numpy.dtype(dtype).kind == "f" and special:
        x[::7, ::13] = numpy.nan
        x[::5, ::11] = -0.0
        x[::9, ::17] = numpy.inf
        x[::4, ::19] = 0.0
    return x.astype(dtype)


def _same(got, expected):
    got = numpy.asarray(got)
    assert got.shape == expected.shape and got.dtype == expected.dtype
    assert got.flags.c_contiguous == expected.flags.c_contiguous
    numpy.testing.assert_array_equal(got, expected, strict=True)
    assert numpy.array_equal(numpy.signbit(got), numpy.signbit(expected)) \
        if got.dtype.kind == "f" else True


CALLS = [
    ("sort axis -1", lambda np, x: np.sort(x)),
    ("sort axis 1 stable", lambda np, x: np.sort(x, axis=1, kind="stable")),
    ("argsort", lambda np, x: np.argsort(x, axis=-1)),
    ("argsort stable", lambda np, x: np.argsort(x, kind="stable")),
    ("method argsort", lambda np, x: x.argsort(axis=1, kind="stable")),
    ("percentile list", lambda np, x: np.percentile(x, [5, 50, 95], axis=1)),
    ("percentile scalar", lambda np, x: np.percentile(x, 30, axis=-1)),
    ("percentile keepdims", lambda np, x: np.percentile(x, [10, 90], axis=1, keepdims=True)),
    ("quantile method", lambda np, x: np.quantile(x, numpy.array([0.2, 0.7]), axis=1,
                                                  method="nearest")),
    ("cumsum", lambda np, x: np.cumsum(x, axis=1)),
    ("cumprod", lambda np, x: np.cumprod(np.minimum(x, 1.0001), axis=1)),
    ("maximum.accumulate", lambda np, x: np.maximum.accumulate(x, axis=1)),
    ("sum", lambda np, x: np.sum(x, axis=1)),
    ("mean keepdims", lambda np, x: np.mean(x, axis=-1, keepdims=True)),
    ("std ddof", lambda np, x: np.std(x, axis=1, ddof=1)),
    ("var", lambda np, x: x.var(axis=1)),
    ("max", lambda np, x: np.max(x, axis=1)),
    ("argmin", lambda np, x: np.argmin(x, axis=1)),
    ("median", lambda np, x: np.median(x, axis=1)),
    ("count_nonzero", lambda np, x: np.count_nonzero(x > 0, axis=1)),
]


def _with_warnings(fn, *args):
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        r = numpy.asarray(fn(*args))      # (forced inside: a recorded call warns when run)
    return r, [(w.category, str(w.message)) for w in rec]


@pytest.mark.parametrize("dtype", ["float64", "float32", "int64", "int32"])
@pytest.mark.parametrize("name,fn", CALLS, ids=[c[0] for c in CALLS])
def test_rows_equal_numpy(name, fn, dtype, splits):
    # (no infinities: a percentile's interpolation between two of them is NumPy's warning,
    # which a split half meets and hands back to one call: tested below)
    x = _table(dtype, special=not name.startswith(("percentile", "quantile", "std")))
    if name.startswith(("cum", "maximum", "sum", "mean", "std", "var", "max", "argmin",
                        "median", "count")):
        # (the memory-bound ones split from SPLIT_MIN elements)
        x = numpy.tile(x % 7 if dtype.startswith("int") else x,
                       (_split.SPLIT_MIN // x.size + 1, 1))
    expected, np_warnings = _with_warnings(fn, numpy, x)
    got, lz_warnings = _with_warnings(fn, lazynp, lazynp.asarray(x))
    _same(got, expected)
    assert lz_warnings == np_warnings      # (inf - inf in a percentile's interpolation...)
    if not name.startswith(("method", "var")):  # (ndarray methods are NumPy's one call)
        assert splits[0] >= 1


@pytest.mark.parametrize("q", [[5, 50, 95], [3.5, 97]])
def test_percentile_with_infinities_warns_as_numpy(q):
    x = _table("float64")
    expected, np_warnings = _with_warnings(numpy.percentile, x, q, 1)
    got, lz_warnings = _with_warnings(lazynp.percentile, lazynp.asarray(x), q, 1)
    _same(got, expected)
    assert lz_warnings == np_warnings and np_warnings


def test_pending_input_and_three_dimensions(splits):
    x = _table("float64", 60, 3000).reshape(60, 30, 100)
    lz = lazynp.asarray(x) * 2.0 + 1.0           # (recorded: the split runs in the flush)
    _same(lazynp.sort(lz, axis=2), numpy.sort(x * 2.0 + 1.0, axis=2))
    _same(lazynp.percentile(lz, [25, 75], axis=1), numpy.percentile(x * 2.0 + 1.0, [25, 75],
                                                                    axis=1))
    assert splits[0] >= 2


def test_first_axis_and_small_arrays_are_one_call(splits):
    x = _table("float64")
    _same(lazynp.sort(lazynp.asarray(x), axis=0), numpy.sort(x, axis=0))
    _same(lazynp.percentile(lazynp.asarray(x), 50, axis=0), numpy.percentile(x, 50, axis=0))
    small = x[:10, :100]
    _same(lazynp.sort(lazynp.asarray(small)), numpy.sort(small))
    _same(lazynp.cumsum(lazynp.asarray(x), axis=None), numpy.cumsum(x, axis=None))
    assert splits[0] == 0


@pytest.mark.parametrize("dtype", ["int64", "float64", "float32", "uint8", "bool"])
def test_stable_argsort_1d_merges_halves(dtype, splits):
    rng = numpy.random.default_rng(3)
    x = rng.integers(0, 60, _split.SPLIT_MIN_ARGSORT + 12345).astype(dtype)
    if x.dtype.kind == "f":
        x[::7] = numpy.nan
        x[::11] = -0.0
        x[::13] = 0.0
        x[::17] = -numpy.inf
    lazynp.argsort(lazynp.asarray(x), kind="stable")
    cpu.wait_compiles()            # (the merge kernel compiles in the background)
    for call in (lambda np, a: np.argsort(a, kind="stable"),
                 lambda np, a: np.argsort(a, kind="mergesort", axis=0),
                 lambda np, a: np.argsort(a, stable=True)):
        _same(call(lazynp, lazynp.asarray(x)), call(numpy, x))
    assert splits[0] >= 3
    # an unstable argsort's order of ties is NumPy's own: one call
    before = splits[0]
    _same(lazynp.argsort(lazynp.asarray(x)), numpy.argsort(x))
    assert splits[0] == before


def test_floating_point_warnings_and_errors_are_numpys(splits):
    x = numpy.full((64, _split.SPLIT_MIN // 64 + 7), 1e10)
    with pytest.warns(RuntimeWarning, match="overflow") as rec:
        got = lazynp.cumprod(lazynp.asarray(x), axis=1)
    _same(got, numpy.cumprod(x, axis=1))
    assert len([w for w in rec if "overflow" in str(w.message)]) == 1
    with numpy.errstate(over="raise"):
        with pytest.raises(FloatingPointError):
            lazynp.cumprod(lazynp.asarray(x), axis=1)
    with numpy.errstate(over="ignore"):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            _same(lazynp.cumprod(lazynp.asarray(x), axis=1), numpy.cumprod(x, axis=1))
    assert splits[0] == 0            # (a half met the flag: NumPy's own call each time)


def test_errors_are_numpys():
    x = _table("float64")
    with pytest.raises(ValueError) as lz:
        lazynp.percentile(lazynp.asarray(x), [5, 150], axis=1)
    with pytest.raises(ValueError) as np_:
        numpy.percentile(x, [5, 150], axis=1)
    assert str(lz.value) == str(np_.value)
    with pytest.raises(numpy.exceptions.AxisError):
        lazynp.sort(lazynp.asarray(x), axis=2)
