"""Structured arrays, record arrays, ndarray subclasses and ``view(cls)``, compared with NumPy.

Every test runs the same code on ``numpy`` and on ``lazynp`` and compares results: types
(NumPy's scalar types, ``numpy.void``, the subclass), dtypes, values, and that views share
memory with their base exactly where NumPy's do.
"""
from __future__ import annotations

import sys
import tomllib
from pathlib import Path

import numpy
import numpy.lib.recfunctions
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import lazynp
from strategies import SETTINGS

POLICIES = ["auto", "lazy"]

SIMPLE = [("a", "i4"), ("b", "f8")]
NESTED = [("mat", "f4", (2, 2)), ("n", [("x", "i2"), ("y", "U3")]), ("flag", "?")]


@pytest.fixture(params=POLICIES)
def policy(request):
    with lazynp.policy(request.param):
        yield request.param


def _plain(r):
    """A result as something comparable across the two libraries (a lazy 0-d result that
    stands for a NumPy scalar under recording, docs/numpy-differences.md, as it)."""
    if isinstance(r, lazynp.ndarray):
        return numpy.asarray(r)[()] if r._scalar else numpy.asarray(r)
    return r


def assert_same(expected, got):
    """Same type (a lazy array standing for a NumPy array), dtype, shape and values."""
    got = _plain(got)
    if type(expected) is numpy.ndarray:
        assert type(got) is numpy.ndarray
    else:
        assert type(got) is type(expected), (type(got), type(expected))
    if hasattr(expected, "dtype"):
        assert got.dtype == expected.dtype
        assert numpy.shape(got) == numpy.shape(expected)
        assert numpy.asarray(got).tobytes() == numpy.asarray(expected).tobytes() or \
            numpy.asarray(got).tolist() == numpy.asarray(expected).tolist()
    else:
        assert got == expected


def both(fn):
    """``fn(numpy)`` and ``fn(lazynp)``, results compared; returns the lazynp result."""
    expected, got = fn(numpy), fn(lazynp)
    assert_same(expected, got)
    return got


def _simple(np):
    return np.array([(1, 0.5), (-2, 1.5), (3, -2.5)], dtype=SIMPLE)


def _nested(np):
    x = np.zeros(3, dtype=NESTED)
    x["mat"] = np.arange(12, dtype=np.float32).reshape(3, 2, 2)
    x["n"]["x"] = [7, 8, 9]
    x["n"]["y"] = ["ab", "c", "def"]
    x["flag"] = [True, False, True]
    return x


# --- field reads ---------------------------------------------------------------------------

@pytest.mark.parametrize("read", [
    lambda d: d["a"],
    lambda d: d["b"],
    lambda d: d[["a", "b"]],
    lambda d: d[["b", "a"]],
    lambda d: d[["b"]],
    lambda d: d[0],
    lambda d: d[0]["a"],
    lambda d: d[-1][1],
    lambda d: d["a"] < 1,
    lambda d: d[1:]["b"],
    lambda d: d["b"][::2],
    lambda d: d.reshape(3, 1)["a"],
    lambda d: d[d["a"] > 0]["b"],
    lambda d: d.dtype.names,
    lambda d: d.tolist(),
    lambda d: d["a"].sum(),
    lambda d: d[["b"]].copy(),                  # keeps the multi-field view's offsets
    lambda d: d[["a", "b"]][1:],
    lambda d: d[[0, 2]],
    lambda d: numpy.lib.recfunctions.structured_to_unstructured(d[["b"]]),
    lambda d: numpy.lib.recfunctions.repack_fields(d[["b"]]),
])
def test_field_reads_equal_numpy(policy, read):
    both(lambda np: read(_simple(np)))


@pytest.mark.parametrize("read", [
    lambda x: x["mat"],
    lambda x: x["mat"][0],
    lambda x: x["mat"][1, 0],
    lambda x: x["n"],
    lambda x: x["n"]["y"],
    lambda x: x["n"]["x"] * 2,
    lambda x: x[0]["n"],
    lambda x: x[2]["n"]["y"],
    lambda x: x["flag"],
    lambda x: x[["flag", "n"]],
])
def test_nested_and_subarray_fields_equal_numpy(policy, read):
    both(lambda np: read(_nested(np)))


def test_scalar_types_of_elements(policy):
    d = _simple(lazynp)
    assert type(d[0]) is numpy.void
    assert type(d[0]["a"]) is numpy.int32
    assert type(d[1]["b"]) is numpy.float64
    assert [type(r) for r in d] == [numpy.void] * 3
    zero_d = lazynp.zeros((), dtype=SIMPLE)["a"]
    assert type(zero_d) is lazynp.ndarray and zero_d.ndim == 0   # NumPy: a 0-d array


def test_bad_field_names_raise_numpys_errors():
    for key, exc in [("zz", ValueError), (["a", "zz"], KeyError)]:
        with pytest.raises(exc) as ref:
            _simple(numpy)[key]
        with pytest.raises(exc) as got:
            _simple(lazynp)[key]
        assert str(got.value) == str(ref.value)
    with pytest.raises(IndexError):
        lazynp.arange(3)["a"]


_FIELD_TYPES = ["i1", "i4", "u2", "f4", "f8", "c16", "?", "U2", ("f8", (2,)), ("i2", (2, 1))]


@st.composite
def _structured(draw):
    """A structured dtype (possibly nested), an array of it, a field key and a value."""
    n = draw(st.integers(1, 4))
    kinds = draw(st.lists(st.sampled_from(range(len(_FIELD_TYPES))), min_size=n, max_size=n))
    fields = [(f"f{i}",) + ((t,) if isinstance(t := _FIELD_TYPES[k], str) else t)
              for i, k in enumerate(kinds)]
    if draw(st.booleans()):
        fields.append(("sub", [("p", "i4"), ("q", "f8")]))
    dtype = numpy.dtype(fields)
    shape = draw(hnp.array_shapes(min_dims=1, max_dims=2, min_side=1, max_side=4))
    base = numpy.frombuffer(draw(st.binary(min_size=dtype.itemsize * int(numpy.prod(shape)),
                                           max_size=dtype.itemsize * int(numpy.prod(shape)))),
                            dtype=numpy.uint8)
    data = base.view(dtype).reshape(shape)
    names = list(dtype.names)
    key = draw(st.sampled_from(names) | st.lists(st.sampled_from(names), min_size=1,
                                                 max_size=len(names), unique=True))
    return data, key


@settings(SETTINGS, max_examples=25)
@given(case=_structured(), policy=st.sampled_from(POLICIES))
def test_random_structured_field_views_equal_numpy(case, policy):
    data, key = case
    with lazynp.policy(policy):
        def run(np):
            d = np.array(data.copy())
            view = d[key]
            first = view[0].copy() if view.ndim else view.copy()
            d[...] = d[::-1].copy()              # the view sees writes to the base
            zeros = np.zeros(view.shape, view.dtype)
            view[...] = zeros                    # and the base sees writes to the view
            return first, d, d[key]
        expected, got = run(numpy), run(lazynp)
        for e, g in zip(expected, got):
            e, g = numpy.asarray(e), numpy.asarray(_plain(g))
            assert g.dtype == e.dtype and g.shape == e.shape
            # the fields' bytes (NaN-safe; a copy's padding bytes are unspecified)
            assert _field_bytes(g) == _field_bytes(e)


def _field_bytes(a: numpy.ndarray) -> bytes:
    if a.dtype.names is None:
        return a.tobytes()
    return numpy.lib.recfunctions.repack_fields(a.reshape(-1)).tobytes()


# --- views and writes ------------------------------------------------------------------------

def _writes(np, void_write=True):
    d = _simple(np)
    f = d["b"]                      # a view: writes through it reach d
    f[1] = 5.0
    d["a"] = [10, 20, 30]
    g = d[["a", "b"]]
    d[2] = (7, 8.5)                 # seen by the earlier views f and g
    seen = (f.copy(), g.copy())
    if void_write:
        d[0]["a"] = 9               # through the numpy.void view
    d["b"][d["a"] > 15] = -1.0
    d[1:]["a"] += 4
    d[["a", "b"]] = d[["a", "b"]][::-1].copy()
    return d, seen


def test_writes_through_field_views_equal_numpy(policy):
    # (under set_policy("lazy") a numpy.void is a snapshot, as numpy.asarray is: README)
    void_write = policy == "auto"
    expected, got = _writes(numpy, void_write), _writes(lazynp, void_write)
    assert_same(expected[0], got[0])
    assert_same(expected[1][0], got[1][0])
    assert_same(expected[1][1], got[1][1])


def test_nested_writes_equal_numpy(policy):
    def run(np):
        x = _nested(np)
        x["n"]["y"] = ["p", "q", "r"]
        x["mat"][1] = 2
        x[["flag"]] = False
        if policy == "auto":
            x[0]["mat"][0, 1] = -1      # through numpy.void views
            x[2]["n"]["x"] = 100
        return x
    both(run)


def test_elements_are_snapshots_when_everything_is_recorded():
    with lazynp.policy("lazy"):
        d = _simple(lazynp)
        first = d[0]
        assert type(first) is numpy.void
        first["a"] = 99
        assert d["a"][0] == 1


def test_field_view_shares_memory_with_the_base():
    d = _simple(lazynp)
    f = d["a"]
    assert numpy.shares_memory(numpy.asarray(f), numpy.asarray(d))
    assert f.base is not None


def test_record_assignment_into_a_recorded_array():
    n = 200_000                       # large: the writes are recorded, not run at once
    def run(np):
        d = np.zeros(n, dtype=SIMPLE)
        d[1] = (7, 8.5)
        d[2:4] = [(1, 1.0), (2, 2.0)]
        d[5] = 3
        d["b"][10:12] = d["a"][1:3] * 2.0
        return d
    both(run)


def test_void_write_is_not_seen_by_work_recorded_before_it():
    n = 200_000
    def run(np):
        d = np.zeros(n, dtype=SIMPLE)
        twice = d["b"] * 2 + 1          # recorded (pending) under lazynp
        first = d[0]
        first["b"] = 5.0                 # NumPy: twice was computed before this write
        return twice[:3], d["b"][:3]
    (e1, e2), (g1, g2) = run(numpy), run(lazynp)
    assert_same(e1, g1)
    assert_same(e2, g2)


def test_buffer_protocol_of_structured_arrays_like_numpy():
    """A buffer whose PEP 3118 format NumPy would misread is refused (NumPy, which tries the
    buffer first, then reads the array through __array__, dtype intact)."""
    for key in (None, ["b"], ["b", "a"]):
        def run(np):
            d = _simple(np)
            v = d if key is None else d[key]
            try:
                fmt = memoryview(v).format
            except (BufferError, ValueError) as exc:
                fmt = type(exc).__name__
            except TypeError:           # the pure Python core before Python 3.12: no buffer
                assert np is lazynp and lazynp._base.native.ext is None and \
                    sys.version_info < (3, 12)
                fmt = None
            return fmt, numpy.asarray(v)
        (efmt, eval_), (gfmt, gval) = run(numpy), run(lazynp)
        assert gfmt == efmt or gfmt is None
        assert gval.dtype == eval_.dtype and gval.tolist() == eval_.tolist()
    one_byte = numpy.dtype([("f0", "i1"), ("f1", "i1")])
    v = lazynp.zeros(2, one_byte)[["f0"]]
    assert numpy.asarray(v).dtype == numpy.zeros(2, one_byte)[["f0"]].dtype


def test_structured_equality_equal_numpy(policy):
    both(lambda np: _simple(np) == _simple(np))
    both(lambda np: _simple(np) != _simple(np)[::-1])


# --- sorting by fields -----------------------------------------------------------------------

@pytest.mark.parametrize("order", ["a", "b", ["b", "a"], ["a"]])
def test_sort_by_order_equal_numpy(policy, order):
    def data(np):
        return np.array([(2, 1.0), (1, 2.0), (1, 0.5), (2, -1.0)], dtype=SIMPLE)
    both(lambda np: np.sort(data(np), order=order))
    both(lambda np: np.argsort(data(np), order=order))

    def method(np):
        d = data(np)
        d.sort(order=order)
        return d
    both(method)


# --- record arrays ---------------------------------------------------------------------------

def test_rec_array_and_recarray_are_numpys():
    lazynp.reset_stats()
    r = lazynp.rec.array([(1, 2.0), (3, 4.0)], dtype=SIMPLE)
    assert lazynp.stats()["fallbacks"] == {"rec.array": 1}
    ref = numpy.rec.array([(1, 2.0), (3, 4.0)], dtype=SIMPLE)
    assert type(r) is numpy.recarray and type(r[0]) is numpy.record
    assert r.a.tolist() == ref.a.tolist() and r.b.dtype == ref.b.dtype
    assert lazynp.recarray is numpy.recarray
    assert lazynp.recarray((2,), dtype=SIMPLE).dtype == numpy.recarray((2,), dtype=SIMPLE).dtype
    fa = lazynp.rec.fromarrays([lazynp.arange(3), lazynp.ones(3)], names="x,y")
    assert type(fa) is numpy.recarray and fa.x.tolist() == [0, 1, 2]


def test_view_as_recarray_shares_the_lazy_buffer():
    lazynp.reset_stats()
    d = _simple(lazynp)
    r = d.view(lazynp.recarray)
    ref = _simple(numpy).view(numpy.recarray)
    assert type(r) is numpy.recarray and r.dtype == ref.dtype
    assert r.b.tolist() == ref.b.tolist()
    assert lazynp.stats()["fallbacks"].get("ndarray.view") == 1
    r.a[0] = 42                         # NumPy's view: the lazy array sees the write
    assert d["a"][0] == 42
    d["b"][1] = -7.0                    # and the other way round
    assert r.b[1] == -7.0


# --- subclasses and view(cls) ----------------------------------------------------------------

def _subclass_results(np):
    class InfoArray(np.ndarray):
        def __new__(subtype, shape, dtype=float, buffer=None, offset=0, strides=None,
                    order=None, info=None):
            obj = super().__new__(subtype, shape, dtype, buffer, offset, strides, order)
            obj.info = info
            return obj

        def __array_finalize__(self, obj):
            if obj is None:
                return
            self.info = getattr(obj, "info", None)

    class Realistic(np.ndarray):
        def __new__(cls, input_array, info=None):
            obj = np.asarray(input_array).view(cls)
            obj.info = info
            return obj

        def __array_finalize__(self, obj):
            if obj is None:
                return
            self.info = getattr(obj, "info", None)

    class Plain(np.ndarray):
        pass

    out = []
    a = InfoArray((3,), buffer=numpy.arange(3.0), info="x")
    out += [a, a[1:], a * 2]
    r = Realistic(np.arange(4), info="y")
    out += [r, r[1:], r + 1, r.sum(), r.reshape(2, 2).T]
    p = np.arange(3).view(Plain)
    out += [p, p + 1, p[0], np.arange(3.0).view(np.int64, Plain), np.arange(3).view(type=Plain)]
    return out


def test_user_subclasses_behave_as_numpy_subclasses(policy):
    expected, got = _subclass_results(numpy), _subclass_results(lazynp)
    assert len(expected) == len(got)
    for e, g in zip(expected, got):
        assert type(g).__name__ == type(e).__name__
        assert isinstance(g, numpy.ndarray) == isinstance(e, numpy.ndarray)
        assert getattr(g, "info", "-") == getattr(e, "info", "-")
        assert numpy.asarray(g).tolist() == numpy.asarray(e).tolist()
        assert numpy.asarray(g).dtype == numpy.asarray(e).dtype


def test_a_class_deriving_from_lazynp_ndarray_is_a_numpy_subclass():
    class M(lazynp.ndarray):
        def double(self):
            return self * 2

    assert M.__mro__[1] is numpy.ndarray and issubclass(M, numpy.ndarray)
    m = lazynp.arange(3).view(M)
    assert type(m.double()) is M and m.double().tolist() == [0, 2, 4]
    assert type(numpy.add(m, 1)) is M
    assert isinstance(lazynp.arange(3), lazynp.ndarray)      # lazy arrays are unchanged
    assert type(lazynp.arange(3)) is lazynp.ndarray


def test_view_cls_shares_memory_with_the_lazy_array():
    a = lazynp.arange(4.0)
    v = a.view(numpy.ndarray)
    assert type(v) is numpy.ndarray
    v[0] = 10.0
    assert a[0] == 10.0
    a[1] = 20.0
    assert v[1] == 20.0
    m = a.view(numpy.matrix)
    assert type(m) is numpy.matrix and m.shape == (1, 4)


def test_view_cls_is_a_snapshot_when_everything_is_recorded():
    with lazynp.policy("lazy"):
        a = lazynp.arange(4.0)
        v = a.view(numpy.ndarray)
        assert type(v) is numpy.ndarray and v.tolist() == [0.0, 1.0, 2.0, 3.0]
        v[0] = 10.0
        assert a[0] == 0.0


def test_view_with_a_type_that_is_not_a_subclass_raises_like_numpy():
    with pytest.raises(ValueError) as ref:
        numpy.arange(3).view(type=int)
    with pytest.raises(ValueError) as got:
        lazynp.arange(3).view(type=int)
    assert str(got.value) == str(ref.value)


def test_view_as_lazynp_ndarray_stays_lazy():
    a = lazynp.arange(3)
    v = a.view(lazynp.ndarray)
    assert type(v) is lazynp.ndarray
    v[0] = 5
    assert a[0] == 5


# --- version ---------------------------------------------------------------------------------

def test_version_is_lazynps():
    pyproject = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())
    assert lazynp.__version__ == pyproject["project"]["version"]
    assert lazynp.__version__ != numpy.__version__
