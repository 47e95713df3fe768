"""``out=`` on every public function that takes it, against NumPy.

The functions are enumerated from NumPy's signatures of lazynp's namespace (and of
``lazynp.linalg``/``lazynp.fft``): each one that takes ``out`` must have an entry in
:data:`CALLS` (a new one fails :func:`test_every_function_with_out_has_a_case`).  For each:

* a NumPy array as ``out``: it is filled with NumPy's values and returned itself;
* a lazynp array as ``out``: it is filled and returned itself (``ret is out``);
* an ``out`` of another dtype: NumPy's values cast, or NumPy's exception class;
* an ``out`` of the wrong shape or number of dimensions: NumPy's exception class.
"""
from __future__ import annotations

import inspect

import numpy
import pytest

import lazynp

RNG = numpy.random.default_rng(0)
F = RNG.uniform(0.1, 0.9, (3, 4))           # (in the domain of every float ufunc)
G = RNG.uniform(0.1, 0.9, (3, 4))
I = RNG.integers(1, 7, (3, 4))
J = RNG.integers(1, 4, (3, 4))
V = RNG.uniform(0.1, 0.9, 4)
W = RNG.uniform(0.1, 0.9, 5)
DATES = numpy.array(["2026-12-04", "2026-12-05", "2026-12-07"], dtype="datetime64[D]")
NAT = numpy.array(["2026-12-04", "NaT"], dtype="datetime64[s]")

_INT_UFUNCS = {"bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_count", "bitwise_invert",
               "bitwise_not", "invert", "bitwise_left_shift", "bitwise_right_shift",
               "left_shift", "right_shift", "gcd", "lcm"}


def _ufunc_args(name: str, uf) -> tuple:
    if name == "isnat":
        return (NAT,)
    if name == "ldexp":
        return (F, J)
    if name in _INT_UFUNCS:
        return (I, J)[:uf.nin]
    return (F, G)[:uf.nin]


#: name -> (positional arguments, keywords) of a call whose result is an array
CALLS = {
    "all": ((F > 0.5,), {"axis": 0}),
    "any": ((F > 0.5,), {"axis": 0}),
    "amax": ((F,), {"axis": 0}),
    "amin": ((F,), {"axis": 0}),
    "max": ((F,), {"axis": 0}),
    "min": ((F,), {"axis": 0}),
    "argmax": ((F,), {"axis": 0}),
    "argmin": ((F,), {"axis": 0}),
    "nanargmax": ((F,), {"axis": 0}),
    "nanargmin": ((F,), {"axis": 0}),
    "sum": ((F,), {"axis": 0}),
    "prod": ((F,), {"axis": 0}),
    "mean": ((F,), {"axis": 0}),
    "std": ((F,), {"axis": 0}),
    "var": ((F,), {"axis": 0}),
    "nanmax": ((F,), {"axis": 0}),
    "nanmin": ((F,), {"axis": 0}),
    "nansum": ((F,), {"axis": 0}),
    "nanprod": ((F,), {"axis": 0}),
    "nanmean": ((F,), {"axis": 0}),
    "nanstd": ((F,), {"axis": 0}),
    "nanvar": ((F,), {"axis": 0}),
    "ptp": ((F,), {"axis": 0}),
    "median": ((F,), {"axis": 0}),
    "nanmedian": ((F,), {"axis": 0}),
    "percentile": ((F, 40), {"axis": 0}),
    "nanpercentile": ((F, 40), {"axis": 0}),
    "quantile": ((F, 0.4), {"axis": 0}),
    "nanquantile": ((F, 0.4), {"axis": 0}),
    "cumsum": ((F,), {"axis": 0}),
    "cumprod": ((F,), {"axis": 0}),
    "nancumsum": ((F,), {"axis": 0}),
    "nancumprod": ((F,), {"axis": 0}),
    "cumulative_sum": ((F,), {"axis": 0}),
    "cumulative_prod": ((F,), {"axis": 0}),
    "around": ((F, 2), {}),
    "round": ((F, 2), {}),
    "fix": ((F * 10,), {}),
    "clip": ((F, 0.3, 0.6), {}),
    "take": ((V, [3, 0, 2]), {}),
    "choose": (([0, 1, 0, 1], [V, V * 2]), {}),
    "compress": (([True, False, True], F), {"axis": 0}),
    "concatenate": (([F, G],), {}),
    "concat": (([F, G],), {}),
    "stack": (([F, G],), {}),
    "dot": ((F, G.T), {}),
    "matmul": ((F, G.T), {}),
    "matvec": ((F, V), {}),
    "vecmat": ((V, F.T), {}),
    "vecdot": ((F, G), {}),
    "outer": ((V, W), {}),
    "einsum": (("ij->j", F), {}),
    "trace": ((F.reshape(3, 2, 2),), {}),
    "linalg.multi_dot": (([F, G.T, F],), {}),
    "isneginf": ((F,), {}),
    "isposinf": ((F,), {}),
    "busday_count": ((DATES, DATES + 5), {}),
    "busday_offset": ((DATES, 2), {"roll": "forward"}),
    "is_busday": ((DATES,), {}),
    "linalg.cross": ((F[:, :3], G[:, :3]), {}),
    "linalg.matmul": ((F, G.T), {}),
    "linalg.vecdot": ((F, G), {}),
    "fft.fft": ((F,), {}),
    "fft.ifft": ((F,), {}),
    "fft.rfft": ((F,), {}),
    "fft.irfft": ((F,), {}),
    "fft.hfft": ((F,), {}),
    "fft.ihfft": ((F,), {}),
    "fft.fftn": ((F,), {}),
    "fft.ifftn": ((F,), {}),
    "fft.rfftn": ((F,), {}),
    "fft.irfftn": ((F,), {}),
    "fft.fft2": ((F,), {}),
    "fft.ifft2": ((F,), {}),
    "fft.rfft2": ((F,), {}),
    "fft.irfft2": ((F,), {}),
}


def _resolve(module, dotted: str):
    for part in dotted.split("."):
        module = getattr(module, part)
    return module


def _takes_out(fn) -> bool:
    try:
        return "out" in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


def names_with_out() -> list:
    """The public names of lazynp (and its linalg/fft) whose NumPy function takes ``out``."""
    found = []
    for prefix, lazy_mod, np_mod in (("", lazynp, numpy), ("linalg.", lazynp.linalg,
                                                          numpy.linalg),
                                     ("fft.", lazynp.fft, numpy.fft)):
        for name in dir(np_mod):
            np_fn = getattr(np_mod, name, None)
            if name.startswith("_") or isinstance(np_fn, type) or not callable(np_fn):
                continue
            if _takes_out(np_fn) and hasattr(lazy_mod, name):
                found.append(prefix + name)
    return sorted(found)


def _call(name: str):
    np_fn = _resolve(numpy, name)
    if name in CALLS:
        args, kw = CALLS[name]
    else:
        args, kw = _ufunc_args(name, np_fn), {}
    return np_fn, _resolve(lazynp, name), args, kw


def _nout(np_fn) -> int:
    return np_fn.nout if isinstance(np_fn, numpy.ufunc) else 1


def _outs(expected, make):
    """``out`` for results shaped like ``expected`` (a tuple for several outputs)."""
    if isinstance(expected, tuple):
        return tuple(make(e) for e in expected)
    return make(expected)


def _check_same(got, want, name):
    if isinstance(want, tuple):
        assert isinstance(got, tuple) and len(got) == len(want), name
        for g, w in zip(got, want):
            _check_same(g, w, name)
        return
    g, want = numpy.asarray(got), numpy.asarray(want)
    assert g.dtype == want.dtype and g.shape == want.shape, (name, g.dtype, g.shape)
    if want.dtype.kind in "fc":
        numpy.testing.assert_allclose(g, want, rtol=1e-12, atol=1e-12, err_msg=name)
    else:
        numpy.testing.assert_array_equal(g, want, err_msg=name)


def _identical(ret, out) -> bool:
    if isinstance(out, tuple):
        return isinstance(ret, tuple) and all(r is o for r, o in zip(ret, out))
    return ret is out


ALL = names_with_out()


def test_every_function_with_out_has_a_case():
    missing = [n for n in ALL if n not in CALLS and not isinstance(_resolve(numpy, n),
                                                                     numpy.ufunc)]
    assert not missing, f"add a call to CALLS for {missing}"
    assert {"take", "choose", "percentile", "quantile", "nanpercentile", "nanquantile",
            "concatenate", "stack"} <= set(ALL)


def _expected(np_fn, args, kw):
    with numpy.errstate(all="ignore"):
        return np_fn(*args, **kw)


def _initial(e, make):
    dt = numpy.asarray(e).dtype
    return make(numpy.shape(e), 7, dt) if dt.kind != "M" else make(numpy.shape(e), 7).astype(dt)


@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("lazy_out", [False, True], ids=["numpy-out", "lazynp-out"])
def test_out_is_filled_and_returned(name, lazy_out):
    """``out`` holds NumPy's values after the call and is what the call returns (as in
    NumPy: its ``fft.hfft``/``ifft2``/``irfft2`` leave ``out`` alone and return another
    array)."""
    np_fn, lazy_fn, args, kw = _call(name)
    np_out = _outs(_expected(np_fn, args, kw), lambda e: _initial(e, numpy.full))
    with numpy.errstate(all="ignore"):
        want = np_fn(*args, **kw, out=np_out)
    make = lazynp.full if lazy_out else numpy.full
    out = _outs(np_out, lambda e: _initial(e, make))
    if lazy_out:
        args = tuple(lazynp.asarray(a) if isinstance(a, numpy.ndarray) else a for a in args)
    with numpy.errstate(all="ignore"):
        ret = lazy_fn(*args, **kw, out=out)
    assert _identical(ret, out) == _identical(want, np_out), \
        f"{name}: returns out itself: {_identical(ret, out)}, NumPy: {_identical(want, np_out)}"
    _check_same(out, np_out, name)
    _check_same(ret, want, name)


def _outcome(fn, args, kw, out):
    """``("ok", out's value)`` or ``("raises", exception class)``."""
    try:
        with numpy.errstate(all="ignore"):
            fn(*args, **kw, out=out)
    except Exception as e:      # noqa: BLE001 (the class is what is compared)
        return "raises", type(e)
    return "ok", _outs(out, lambda o: numpy.array(o, copy=True))


def _other_dtype(e):
    dt = numpy.asarray(e).dtype
    if dt.kind in "fc":
        return numpy.int16
    if dt.kind == "b":
        return numpy.float32
    return numpy.complex64 if dt.kind in "iu" else numpy.float64


@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("lazy_out", [False, True], ids=["numpy-out", "lazynp-out"])
def test_out_of_another_dtype(name, lazy_out):
    np_fn, lazy_fn, args, kw = _call(name)
    want = _expected(np_fn, args, kw)
    make = lazynp.zeros if lazy_out else numpy.zeros
    expect = _outcome(np_fn, args, kw,
                      _outs(want, lambda e: numpy.zeros(numpy.shape(e), _other_dtype(e))))
    got = _outcome(lazy_fn, args, kw,
                   _outs(want, lambda e: make(numpy.shape(e), _other_dtype(e))))
    assert got[0] == expect[0], (name, got, expect)
    if expect[0] == "raises":
        assert issubclass(got[1], expect[1]) or issubclass(expect[1], got[1]), (name, got,
                                                                                expect)
    else:
        _check_same(got[1], expect[1], name)


@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("shape_change", ["extra-dim", "wrong-length"])
@pytest.mark.parametrize("lazy_out", [False, True], ids=["numpy-out", "lazynp-out"])
def test_out_of_the_wrong_shape(name, shape_change, lazy_out):
    np_fn, lazy_fn, args, kw = _call(name)
    want = _expected(np_fn, args, kw)

    def bad_shape(e):
        s = numpy.shape(e)
        if shape_change == "extra-dim":
            return (2,) + s
        return s[:-1] + (s[-1] + 3,) if s else (3,)
    make = lazynp.zeros if lazy_out else numpy.zeros
    expect = _outcome(np_fn, args, kw,
                      _outs(want, lambda e: numpy.zeros(bad_shape(e), numpy.asarray(e).dtype)))
    got = _outcome(lazy_fn, args, kw,
                   _outs(want, lambda e: make(bad_shape(e), numpy.asarray(e).dtype)))
    assert got[0] == expect[0], (name, got, expect)
    if expect[0] == "raises":
        assert issubclass(got[1], expect[1]), (name, got, expect)
    else:
        _check_same(got[1], expect[1], name)


@pytest.mark.parametrize("lazy_array", [False, True])
def test_method_out(lazy_array):
    """``ndarray.take``/``choose`` (the methods) fill and return ``out``."""
    a = lazynp.asarray(V)
    idx = numpy.array([0, 1, 0, 1])
    for out in (numpy.zeros(3), lazynp.zeros(3)):
        assert a.take([3, 0, 2], out=out) is out
        numpy.testing.assert_array_equal(numpy.asarray(out), V.take([3, 0, 2]))
    choices = [V, V * 2]
    for out in (numpy.zeros(4), lazynp.zeros(4)):
        src = lazynp.asarray(idx) if lazy_array else idx
        ret = lazynp.choose(src, choices, out=out)
        assert ret is out
        numpy.testing.assert_array_equal(numpy.asarray(out), idx.choose(choices))
        out2 = numpy.zeros(4) if isinstance(out, numpy.ndarray) else lazynp.zeros(4)
        assert lazynp.asarray(idx).choose(choices, out=out2) is out2
        numpy.testing.assert_array_equal(numpy.asarray(out2), idx.choose(choices))


# --- NumPy's checks before any work --------------------------------------------------------

class _HugeSequence:
    """A sequence of 2**31 references to one small array that must never be read."""
    reads = 0

    def __len__(self):
        return 2**31

    def __getitem__(self, i):
        _HugeSequence.reads += 1
        if _HugeSequence.reads > 10:
            raise AssertionError("concatenate() started reading 2**31 arrays")
        return numpy.ones(1)


def test_concatenate_of_more_arrays_than_a_c_int_raises_up_front():
    max_int = numpy.iinfo(numpy.intc).max
    with pytest.raises(ValueError, match=rf"concatenate\(\) only supports up to {max_int} "
                                         rf"arrays but got {max_int + 1}\."):
        lazynp.concatenate(_HugeSequence())
    assert _HugeSequence.reads == 0


@pytest.mark.parametrize("fn", ["concatenate", "stack"])
@pytest.mark.parametrize("lazy_out", [False, True], ids=["numpy-out", "lazynp-out"])
def test_join_with_out_and_dtype_is_a_type_error(fn, lazy_out):
    arrays = [numpy.ones(2), numpy.ones(2)]
    shape = numpy.shape(getattr(numpy, fn)(arrays))
    with pytest.raises(TypeError) as expected:
        getattr(numpy, fn)(arrays, out=numpy.zeros(shape), dtype=float)
    out = (lazynp.zeros if lazy_out else numpy.zeros)(shape)
    with pytest.raises(TypeError) as got:
        getattr(lazynp, fn)([lazynp.asarray(a) for a in arrays], out=out, dtype=float)
    assert str(got.value) == str(expected.value)
    numpy.testing.assert_array_equal(numpy.asarray(out), numpy.zeros(shape))


@pytest.mark.parametrize("fn", ["concatenate", "stack"])
def test_join_into_an_out_of_another_ndim_is_a_value_error(fn):
    arrays = [numpy.ones(2), numpy.ones(2)]
    out = lazynp.zeros((1, 1, 4))
    with pytest.raises(ValueError):
        getattr(numpy, fn)(arrays, out=numpy.zeros((1, 1, 4)))
    with pytest.raises(ValueError):
        getattr(lazynp, fn)(arrays, out=out)
    assert not numpy.asarray(out).any()


# --- NumPy's functions and methods given a lazynp array as out ----------------------------

NUMPY_CALLS_INTO_LAZY_OUT = {
    "ufunc": lambda o: numpy.add(F[0], 1, out=o),
    "ufunc.reduce": lambda o: numpy.add.reduce(F, axis=0, out=o),
    "ufunc.accumulate": lambda o: numpy.add.accumulate(F[0], out=o),
    "numpy.sum": lambda o: numpy.sum(F, axis=0, out=o),
    "numpy.mean": lambda o: numpy.mean(F, axis=0, out=o),
    "numpy.take": lambda o: numpy.take(F[0], [3, 2, 1, 0], out=o),
    "numpy.choose": lambda o: numpy.choose([0, 1, 0, 1], [F[0], F[1]], out=o),
    "numpy.percentile": lambda o: numpy.percentile(F, 40, axis=0, out=o),
    "numpy.clip": lambda o: numpy.clip(F[0], 0.3, 0.6, out=o),
    "numpy.cumsum": lambda o: numpy.cumsum(F[0], out=o),
    "numpy.matmul": lambda o: numpy.matmul(V, F.T @ F, out=o),
    "numpy.dot": lambda o: numpy.dot(V, F.T @ F, out=o),
    "numpy.concatenate": lambda o: numpy.concatenate([F[0, :2], F[1, :2]], out=o),
    "numpy.isposinf": lambda o: numpy.isposinf(F[0], out=o),
    "ndarray.sum": lambda o: F.sum(axis=0, out=o),
    "ndarray.clip": lambda o: F[0].clip(0.3, 0.6, out=o),
}


@pytest.mark.parametrize("name", sorted(NUMPY_CALLS_INTO_LAZY_OUT))
def test_numpy_call_into_a_lazynp_out(name):
    call = NUMPY_CALLS_INTO_LAZY_OUT[name]
    np_out = numpy.zeros(4, bool if "isposinf" in name else float)
    want = call(np_out)
    out = lazynp.zeros(4, np_out.dtype)
    ret = call(out)
    assert (ret is out) == (want is np_out), name
    numpy.testing.assert_allclose(numpy.asarray(out), np_out, rtol=1e-12)


@pytest.mark.parametrize("method", ["mean", "var", "std"])
def test_numpy_mean_method_into_a_lazynp_out_raises_naming_it(method):
    """NumPy's ``ndarray.mean`` divides the sum in ``out`` only for a NumPy ``out``: with a
    lazynp one it would leave the sum there, silently."""
    with pytest.raises(TypeError, match=r"numpy\.ndarray\.(mean|var)\(\)"):
        getattr(F, method)(axis=0, out=lazynp.zeros(4))


# --- ufuncs with several outputs ---------------------------------------------------------------

@pytest.mark.parametrize("make", [numpy.empty, lazynp.empty], ids=["numpy-out", "lazynp-out"])
def test_several_outputs_with_some_out_given(make):
    """``frexp(x, o1)``, ``out=(None, o2)``: the outputs not given are new arrays (they came
    back as None); a single array by keyword is NumPy's TypeError; too many positional
    arguments are NumPy's TypeError."""
    d = lazynp.asarray(numpy.array([5.7, 0.25]))
    want = numpy.frexp(numpy.asarray(d))
    o1, o2 = make(2), make(2, dtype=numpy.int32)
    r1, r2 = lazynp.frexp(d, o1)
    assert r1 is o1 and isinstance(r2, (numpy.ndarray, lazynp.ndarray))
    numpy.testing.assert_array_equal(numpy.asarray(r2), want[1])
    r1, r2 = lazynp.frexp(d, out=(None, o2))
    assert r2 is o2 and r1 is not None
    numpy.testing.assert_array_equal(numpy.asarray(r1), want[0])
    with pytest.raises(TypeError, match="'out' must be a tuple of arrays"):
        lazynp.frexp(d, out=o1)
    with pytest.raises(TypeError, match=r"hypot\(\) takes from 2 to 3 positional arguments "
                                        r"but 4 were given"):
        lazynp.hypot(1, 2, 3, 4)
