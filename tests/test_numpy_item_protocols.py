"""Item access through C's sequence protocol, deletion, and object arrays holding lazynp
arrays, as NumPy does them (issue 34: what ``_core/tests/test_indexing.py`` checks in
``TestCApiAccess`` and ``TestIndexing.test_scalar_return_type``)."""
from __future__ import annotations

import ctypes

import numpy
import pytest

import lazynp as np
from lazynp._base import native

# C's PySequence_GetItem/SetItem/DelItem, as C code (NumPy's included) calls them: a negative
# index has the length added before the type's slot sees it
_get_item = ctypes.pythonapi.PySequence_GetItem
_get_item.restype = ctypes.py_object
_get_item.argtypes = (ctypes.py_object, ctypes.c_ssize_t)
_set_item = ctypes.pythonapi.PySequence_SetItem
_set_item.restype = ctypes.c_int
_set_item.argtypes = (ctypes.py_object, ctypes.c_ssize_t, ctypes.py_object)
_del_item = ctypes.pythonapi.PySequence_DelItem
_del_item.restype = ctypes.c_int
_del_item.argtypes = (ctypes.py_object, ctypes.c_ssize_t)

_PURE_SLOTS = pytest.mark.xfail(
    native.ext is None, strict=True,
    reason="the pure Python class has CPython's sequence slots: -11 on a length 10 array "
           "reaches __getitem__/__setitem__ as -1, indistinguishable from a[-1]")


def _outcome(call):
    """What ``call()`` gives: ``("ok", value as a NumPy array)`` or ``("raises", type)``."""
    try:
        result = call()
    except Exception as exc:  # noqa: BLE001 - the exception type is what is compared
        return "raises", type(exc)
    return "ok", numpy.asarray(result).tolist()


@pytest.mark.parametrize("shape", [(10,), (10, 10)])
@pytest.mark.parametrize("index", [pytest.param(-11, marks=_PURE_SLOTS), -10, -1, 0, 9, 10, 11])
def test_sequence_get_item_is_numpys(shape, index):
    expected = _outcome(lambda: _get_item(numpy.arange(numpy.prod(shape)).reshape(shape), index))
    got = _outcome(lambda: _get_item(np.arange(numpy.prod(shape)).reshape(shape), index))
    assert got == expected


@pytest.mark.parametrize("index", [pytest.param(-11, marks=_PURE_SLOTS), -10, -1, 0, 9, 10])
def test_sequence_set_item_is_numpys(index):
    def assign(mod):
        a = mod.arange(10)
        _set_item(a, index, 99)
        return a
    assert _outcome(lambda: assign(np)) == _outcome(lambda: assign(numpy))


def test_sequence_get_item_of_a_0d_array_raises_index_error():
    with pytest.raises(IndexError):
        _get_item(np.ones(()), 0)


@pytest.mark.parametrize("delete", [
    lambda a: a.__delitem__(0),
    lambda a: _del_item(a, 0),
], ids=["del", "PySequence_DelItem"])
def test_deleting_elements_raises_numpys_value_error(delete):
    with pytest.raises(ValueError, match="cannot delete array elements"):
        delete(numpy.ones(10))
    a = np.ones(10)
    with pytest.raises(ValueError, match="cannot delete array elements"):
        delete(a)
    assert a.shape == (10,)


def test_del_statement_raises_numpys_value_error():
    a = np.arange(4)
    with pytest.raises(ValueError, match="cannot delete array elements"):
        del a[1:3]
    assert numpy.array_equal(a, numpy.arange(4))


@pytest.mark.parametrize("shape, index", [((2,), 0), ((2,), numpy.int64(1)), ((2, 3), (1, 2)),
                                          ((), ())])
@pytest.mark.parametrize("make", [lambda: np.arange(3), lambda: np.array(0),
                                  lambda: np.arange(3) + 1], ids=["computed", "0-d", "pending"])
def test_object_array_element_stores_the_lazynp_array_itself(shape, index, make):
    value = make()
    a = np.empty(shape, dtype=object)
    a[index] = value
    assert a[index] is value
    reference = numpy.empty(shape, dtype=object)   # NumPy stores any object as it is given
    reference[index] = value
    assert reference[index] is value


def test_object_array_region_assignment_still_converts():
    # a region (not one element) is assigned elementwise, as NumPy does it
    a = np.empty((2, 3), dtype=object)
    a[0] = np.arange(3)
    expected = numpy.empty((2, 3), dtype=object)
    expected[0] = numpy.arange(3)
    assert numpy.asarray(a)[0].tolist() == expected[0].tolist()
    assert type(a[0, 1]) is type(expected[0, 1])
