"""Details NumPy's own code and tests read (issue 34, items 4, 5, 7, 8, 11, 12): functions
that do not bind as methods, NumPy's ufuncs on the array class, ``isinstance`` of NumPy's
ufuncs, flags/base/``__array_wrap__``, the Array API's device members, signatures, and
NumPy's messages."""
from __future__ import annotations

import inspect
import io
import pickle

import numpy
import pytest

import lazynp as np


def binds(fn) -> bool:
    """Does ``fn``, set as a class attribute, bind to the instance?"""
    get = getattr(type(fn), "__get__", None)
    if isinstance(fn, type) or get is None:
        return False
    instance = object()
    bound = get(fn, instance, object)
    return bound is not fn and getattr(bound, "__self__", None) is instance


# --- item 4: functions that do not bind as methods, as NumPy's builtins -----------------------

def test_namespace_functions_stored_on_a_class_do_not_bind():
    class T:
        array = np.array
        asarray = np.asarray
        frombuffer = np.frombuffer
        rand = np.random.rand

    t = T()
    numpy.testing.assert_array_equal(numpy.asarray(t.array([1, 2])), [1, 2])
    numpy.testing.assert_array_equal(numpy.asarray(t.asarray([3])), [3])
    assert t.frombuffer(b"\x01\x02", dtype=numpy.uint8).shape == (2,)
    assert t.rand(2).shape == (2,)


@pytest.mark.parametrize("module", ["", "linalg", "fft", "random"])
def test_python_functions_bind_only_where_numpys_do(module):
    lz = getattr(np, module) if module else np
    nm = getattr(numpy, module) if module else numpy
    wrong = []
    for name in dir(nm):
        if name.startswith("_") or name in ("test", "printoptions"):
            continue
        f, g = getattr(nm, name), getattr(lz, name, None)
        if not callable(f) or isinstance(f, type) or g is None:
            continue
        if not binds(f) and binds(g):
            wrong.append(name)
    assert wrong == []


@pytest.mark.parametrize("name", ["array", "asarray", "frombuffer", "fromiter"])
def test_non_binding_functions_keep_name_doc_signature_and_pickle(name):
    f = getattr(np, name)
    assert f.__name__ == name and f.__doc__
    assert inspect.signature(f) is not None
    assert pickle.loads(pickle.dumps(f)) is f


def test_non_binding_random_functions_pickle_by_name():
    assert pickle.loads(pickle.dumps(np.random.rand)) is np.random.rand


# --- item 5: NumPy's ufuncs on the class itself ----------------------------------------------

@pytest.mark.parametrize("call", [lambda: numpy.isnat(np.ndarray),
                                  lambda: numpy.add(np.ndarray, 1),
                                  lambda: np.isnat(np.ndarray)])
def test_numpy_ufuncs_on_the_array_class_raise_type_error(call):
    with pytest.raises(TypeError):
        call()


def test_numpy_ufuncs_on_instances_still_dispatch():
    r = numpy.add(numpy.ones(2), np.ones(2))
    assert isinstance(r, np.ndarray)
    numpy.testing.assert_array_equal(numpy.asarray(r), [2.0, 2.0])


# --- item 7: NumPy's ufunc objects are lazynp.ufunc instances ---------------------------------

def test_numpys_ufuncs_are_lazynp_ufuncs():
    assert isinstance(numpy.add, np.ufunc) and isinstance(np.add, np.ufunc)
    assert issubclass(numpy.ufunc, np.ufunc)
    assert not isinstance(numpy.sum, np.ufunc) and not issubclass(int, np.ufunc)


def test_core_umath_lists_the_ufuncs_numpys_tests_collect():
    found = [uf for uf in np._core.umath.__dict__.values() if isinstance(uf, np.ufunc)]
    want = [uf for uf in numpy._core.umath.__dict__.values() if isinstance(uf, numpy.ufunc)]
    assert len(found) == len(want) > 50
    objects = [uf for uf in found if "O->O" in uf.types]
    objects.remove(np.bitwise_count)        # (what NumPy's test_ufunc.py does at import)
    assert np._core.umath.add is np.add


# --- item 8: flags, base, __array_wrap__, astype errors ---------------------------------------

def _layouts(mod):
    a = mod.arange(12.0).reshape(3, 4)
    return {"a": a, "a.T": a.T, "a[:, ::2]": a[:, ::2], "a[1]": a[1], "copy": a.copy(),
            "a + 1": a + 1, "zeros": mod.zeros((2, 2)), "empty0": mod.empty((0, 3)),
            "large": mod.arange(10**6) * 1.0, "view": a.view(), "a[None]": a[None],
            "asarray(numpy)": mod.asarray(numpy.ones(3))}


def test_flags_and_base_are_numpys():
    want, got = _layouts(numpy), _layouts(np)
    for k in want:
        f, g = want[k].flags, got[k].flags
        for flag in ("c_contiguous", "f_contiguous", "owndata", "writeable", "aligned",
                     "writebackifcopy"):
            assert getattr(g, flag) == getattr(f, flag), (k, flag)
            assert g[flag.upper()] == f[flag.upper()], (k, flag)
        assert g.num == f.num, k
        assert repr(g) == repr(f), k
        assert (got[k].base is None) == (want[k].base is None), k


def test_flags_writeable_can_be_cleared():
    a = np.ones(3)
    a.flags.writeable = False
    assert not a.flags["WRITEABLE"]
    with pytest.raises(ValueError, match="read-only"):
        a[0] = 2.0
    with pytest.raises(AttributeError):
        a.flags.owndata = False


def test_array_wrap_like_numpys():
    a = np.ones(3)
    r = a.__array_wrap__(numpy.arange(3.0))
    assert isinstance(r, np.ndarray)
    numpy.testing.assert_array_equal(numpy.asarray(r), [0.0, 1.0, 2.0])
    s = a.__array_wrap__(numpy.array(2.5), None, True)
    assert type(s) is type(numpy.ones(3).__array_wrap__(numpy.array(2.5), None, True))


@pytest.mark.parametrize("args, kwargs", [(("foo",), {}), (("i4",), {"casting": "safe"}),
                                          (("f4",), {"order": "X"}),
                                          (("f4",), {"foo": 1})])
def test_astype_errors_are_numpys(args, kwargs):
    with pytest.raises(Exception) as want:
        numpy.arange(3.0).astype(*args, **kwargs)
    with pytest.raises(want.type) as got:
        np.arange(3.0).astype(*args, **kwargs)
    assert str(got.value) == str(want.value)


# --- item 11: the Array API's device members; signatures --------------------------------------

def test_device_is_a_device_object_equal_to_numpys():
    a = np.ones(3)
    assert a.device == numpy.ones(3).device == "cpu"
    from lazynp.devices import Device
    assert isinstance(a.device, Device) and str(a.device) == "cpu"


def test_numpy_takes_a_lazynp_device():
    a = np.ones(3)
    assert numpy.zeros(2, device=a.device).shape == (2,)
    assert numpy.ones(2).to_device(a.device).shape == (2,)
    assert pickle.loads(pickle.dumps(a.device)) == a.device


def test_to_device_on_the_cpu():
    a = np.ones(3)
    assert a.to_device("cpu") is a
    assert inspect.signature(a.to_device) == inspect.signature(numpy.ones(3).to_device)
    with pytest.raises(ValueError, match="stream"):
        a.to_device("cpu", stream=1)
    with pytest.raises(ValueError):
        a.to_device("tpu")


@pytest.mark.parametrize("name", ["arange", "linspace", "searchsorted", "take",
                                  "take_along_axis", "frombuffer", "unravel_index"])
def test_signatures_are_numpys(name):
    assert inspect.signature(getattr(np, name)) == inspect.signature(getattr(numpy, name))


def test_dlpack_signature_is_numpys():
    assert inspect.signature(np.ones(3).__dlpack__) == \
        inspect.signature(numpy.ones(3).__dlpack__)


# --- item 12: messages; load ---------------------------------------------------------------

@pytest.mark.parametrize("call", [
    lambda m: m.exp(m.ones(2), foo=1),
    lambda m: m.add(m.ones(2), 1, foo=1),
    lambda m: m.exp(m.ones(2), m.ones(2), m.ones(2)),
    lambda m: m.add.reduce(m.ones(3), foo=1),
    lambda m: m.add.accumulate(m.ones(3), foo=1),
    lambda m: m.exp.reduce(m.ones(3)),
    lambda m: int(m.ones(2)),
    lambda m: float(m.ones(1)),
    lambda m: complex(m.ones((1, 1))),
])
def test_error_messages_are_numpys(call):
    with pytest.raises(Exception) as want:
        call(numpy)
    with pytest.raises(want.type) as got:
        call(np)
    assert str(got.value) == str(want.value)


def test_load_gives_lazynp_arrays_for_npz_members_as_for_npy():
    buf = io.BytesIO()
    numpy.savez(buf, x=numpy.arange(3), y=numpy.ones(2))
    buf.seek(0)
    with np.load(buf) as z:
        assert z.files == ["x", "y"]
        assert isinstance(z["x"], np.ndarray) and isinstance(z.f.y, np.ndarray)
        numpy.testing.assert_array_equal(numpy.asarray(z["x"]), numpy.arange(3))
    buf = io.BytesIO()
    numpy.save(buf, numpy.arange(3))
    buf.seek(0)
    assert isinstance(np.load(buf), np.ndarray)


@pytest.mark.parametrize("kwargs", [{"order": "X"}, {"foo": 1}, {"casting": "safe"}])
def test_astype_errors_of_large_recorded_arrays_are_numpys(kwargs):
    with pytest.raises(Exception) as want:
        (numpy.arange(2**20) * 1.0).astype("i4", **kwargs)
    with pytest.raises(want.type) as got:
        (np.arange(2**20) * 1.0).astype("i4", **kwargs)
    assert str(got.value) == str(want.value)


@pytest.mark.parametrize("value", [3, [1.7, 2], numpy.arange(4.0), [[5]]])
def test_flat_assignment_like_numpys(value):
    want, got = numpy.zeros((2, 3), int), np.zeros((2, 3), int)
    want.flat = value
    got.flat = value
    numpy.testing.assert_array_equal(numpy.asarray(got), want)
    t, tn = np.zeros((3, 2)).T, numpy.zeros((3, 2)).T
    t.flat, tn.flat = np.arange(6.0), numpy.arange(6.0)
    numpy.testing.assert_array_equal(numpy.asarray(t), tn)


# --- NumPy's test_ufunc.py: the ufunc interface ----------------------------------------------

@pytest.mark.parametrize("name", ["add", "frexp", "divmod", "sin"])
def test_ufunc_signature_is_numpys(name):
    assert inspect.signature(getattr(np, name)) == inspect.signature(getattr(numpy, name))


def test_ufunc_resolve_dtypes_is_numpys():
    dts = (numpy.dtype("f4"), numpy.dtype("i8"), None)
    assert np.add.resolve_dtypes(dts) == numpy.add.resolve_dtypes(dts)
    assert np.add.resolve_dtypes(dts, casting="unsafe") == numpy.add.resolve_dtypes(dts)
    inspect.signature(np.ufunc.resolve_dtypes)         # (a Python method: inspectable)


def test_ufunc_sig_keyword_is_signature():
    a = np.arange(3) * 0.5
    assert np.add(a, 0.5, sig="ii->i", casting="unsafe").tolist() == [0, 0, 1]
    with pytest.raises(TypeError, match="cannot specify both 'sig' and 'signature'"):
        np.add(a, 0.5, sig="ii->i", signature="ii->i")


def test_matmul_is_a_gufunc():
    assert isinstance(np.matmul, np.ufunc)
    assert np.matmul.signature == numpy.matmul.signature
    assert inspect.signature(np.matmul) == inspect.signature(numpy.matmul)
    with pytest.raises(TypeError):
        np.matmul.at(np.ones((2, 2, 2)), [0], np.ones((1, 2, 2)))


@pytest.mark.parametrize("one", [1, np.array(1)])
def test_ufunc_out_ellipsis_gives_arrays(one):
    assert type(np.add(one, 2, out=...)) is np.ndarray
    assert type(np.add.reduce(one, out=...)) is np.ndarray
    assert all(type(r) is np.ndarray for r in np.divmod(one, 2, out=...))
    with pytest.raises(TypeError, match="only allowed as a keyword"):
        np.add(1, 2, ...)
    with pytest.raises(TypeError, match="not per-operand"):
        np.negative(1, out=(...,))


def test_conj_of_object_array_conjugates():
    v = np.array([1.0, 2j], dtype=object)
    assert v.conj().tolist() == [1.0, -2j]
    assert v.conjugate().tolist() == [1.0, -2j]
    with pytest.raises(TypeError, match="cannot conjugate non-numeric dtype"):
        np.array(["a"]).conj()


def test_apply_along_axis_gives_func1d_lazynp_arrays():
    seen = []

    def outer_of_halves(x):
        seen.append(type(x))
        return (x[::-1] * x[1:, None]).view(np.ndarray)

    a = np.arange(18).reshape(6, 3)
    res = np.apply_along_axis(outer_of_halves, 0, a)
    expected = numpy.apply_along_axis(lambda x: x[::-1] * x[1:, None], 0,
                                      numpy.arange(18).reshape(6, 3))
    assert set(seen) == {np.ndarray}
    assert type(res) is np.ndarray
    numpy.testing.assert_array_equal(numpy.asarray(res), expected)


# --- NumPy's test_indexing.py -----------------------------------------------------------------

@pytest.mark.parametrize("index", [numpy.s_[0.0:, 0.0], numpy.s_[0.0:], numpy.s_[1:2:0.5],
                                   numpy.s_[0.0:, 0.0, :]])
def test_float_slice_bounds_raise_numpys_error(index):
    expected = pytest.raises(Exception)
    with expected:
        numpy.zeros((3, 3, 3))[index]
    with pytest.raises(expected.excinfo.type, match=str(expected.excinfo.value)[:20]):
        np.zeros((3, 3, 3))[index]


def test_view_base_is_the_array_it_was_made_from():
    import sys
    a = np.array([1, 2, 3])
    assert a.base is None
    assert a[()].base is a
    assert a[...].base is a
    assert a[1:][::2].base is a          # (NumPy: the owner of the memory)
    assert a[[0, 1]].base is not a
    count = sys.getrefcount(a)
    view = a[1:]
    assert sys.getrefcount(a) == count + 1      # the view keeps its base alive, as NumPy
    del view
    assert sys.getrefcount(a) == count


class _LazynpArrayLike:
    """A class written for lazynp: its ``__array__`` returns a lazynp array."""

    def __array__(self, dtype=None, copy=None):
        return np.array([0, 1])


def test_array_like_whose_array_method_returns_a_lazynp_array():
    assert np.asarray(_LazynpArrayLike()).tolist() == [0, 1]
    assert np.add(_LazynpArrayLike(), 1).tolist() == [1, 2]
    assert np.arange(4.0).reshape(2, 2)[1, _LazynpArrayLike()].tolist() == [2.0, 3.0]


def test_apply_along_axis_keeps_a_numpy_subclass_for_func1d():
    class Tagged(numpy.ndarray):
        tag = 1

    a = numpy.zeros((6, 3)).view(Tagged)
    res = np.apply_along_axis(lambda x: x.tag if isinstance(x, Tagged) else -1, 0, a)
    assert numpy.asarray(res).tolist() == [1, 1, 1]


@pytest.mark.parametrize("name, args", [("expand_dims", (1,)), ("ravel", ()), ("transpose", ()),
                                        ("reshape", ((5, 2),)), ("flipud", ()),
                                        ("swapaxes", (0, 1)), ("squeeze", ())])
def test_view_functions_keep_a_masked_arrays_mask(name, args):
    data = numpy.arange(10).reshape(2, 5)
    masked = numpy.ma.array(data, mask=data % 3 == 0)
    res = getattr(np, name)(masked, *args)
    expected = getattr(numpy, name)(masked, *args)
    assert type(res) is numpy.ma.MaskedArray
    assert res.mask.tolist() == expected.mask.tolist()
    assert res.filled(-1).tolist() == expected.filled(-1).tolist()
