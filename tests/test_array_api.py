"""lazynp as an Array API namespace, NumPy's (issue 34: data-apis/array-api-tests finds no
failure NumPy 2.4 does not also have).  Each test is a difference that
``benchmarks/array_api_tests.py`` or a comparison with NumPy's namespace found; NumPy is the
oracle."""
from __future__ import annotations

import numpy
import pytest

import lazynp as np


def test_meshgrid_returns_a_tuple_as_numpy_2():
    grids = np.meshgrid(np.arange(2), np.arange(3))
    expected = numpy.meshgrid(numpy.arange(2), numpy.arange(3))
    assert type(grids) is type(expected) is tuple
    for got, want in zip(grids, expected):
        numpy.testing.assert_array_equal(numpy.asarray(got), want)
    assert np.meshgrid() == numpy.meshgrid() == ()


@pytest.mark.parametrize("version", ["2099.12", "2020.10", "1"])
def test_array_namespace_refuses_an_unsupported_version_as_numpy(version):
    with pytest.raises(ValueError) as expected:
        numpy.ones(2).__array_namespace__(api_version=version)
    with pytest.raises(ValueError) as got:
        np.ones(2).__array_namespace__(api_version=version)
    assert str(got.value) == str(expected.value)


@pytest.mark.parametrize("version", [None, "2022.12", "2023.12", "2024.12"])
def test_array_namespace_of_a_supported_version_is_lazynp(version):
    assert np.ones(2).__array_namespace__(api_version=version) is np


def test_astype_function_honours_device():
    x = np.ones(2)
    assert np.astype(x, np.int32, device="cpu").dtype == numpy.int32
    with pytest.raises(ValueError, match="device"):
        np.astype(x, np.int32, device="not-a-device")


@pytest.mark.parametrize("dtype", ["uint8", "int16", "bool", "float32", "complex64"])
@pytest.mark.parametrize("vecdot", ["vecdot", "linalg.vecdot"])
def test_recorded_vecdot_keeps_numpy_result_dtype(lazy_policy, dtype, vecdot):
    def fn(module):
        return module.linalg.vecdot if vecdot == "linalg.vecdot" else module.vecdot
    a = numpy.asarray([[1, 200], [3, 4]]).astype(dtype)
    b = numpy.asarray([[5, 6], [7, 8]]).astype(dtype)
    for axis in (-1, 0):
        want = fn(numpy)(a, b, axis=axis)
        got = numpy.asarray(fn(np)(np.asarray(a), np.asarray(b), axis=axis))
        assert got.dtype == want.dtype
        numpy.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", ["bool", "int8", "uint8", "float32", "complex64"])
def test_recorded_power_of_two_is_numpy_square(lazy_policy, dtype):
    # NumPy's ``a ** 2`` is its ``square`` ufunc for every dtype: a bool array's is int8
    a = numpy.asarray([True, False]).astype(dtype)
    want = a ** 2
    got = numpy.asarray(np.asarray(a) ** 2)
    assert got.dtype == want.dtype
    numpy.testing.assert_array_equal(got, want)


def test_recorded_inplace_square_of_bool_refuses_as_numpy(lazy_policy):
    a = numpy.asarray([True, False])
    with pytest.raises(TypeError) as expected:
        a **= 2
    b = np.asarray([True, False])
    with pytest.raises(TypeError) as got:
        b **= 2
    assert type(got.value) is type(expected.value)


@pytest.mark.parametrize("copy", [None, False])
def test_from_dlpack_shares_a_numpy_producers_memory_as_numpy(copy):
    source = numpy.arange(3)
    want = numpy.from_dlpack(source, copy=copy)
    got = np.from_dlpack(source, copy=copy)
    source[0] = 9
    assert isinstance(got, np.ndarray)
    numpy.testing.assert_array_equal(numpy.asarray(got), want)
    assert int(got[0]) == 9


def test_from_dlpack_copy_true_does_not_share():
    source = numpy.arange(3)
    got = np.from_dlpack(source, copy=True)
    source[0] = 9
    assert int(got[0]) == 0


@pytest.mark.parametrize("name", ["add", "sin", "divmod", "isnan"])
def test_ufunc_signatures_are_numpys(name):
    import inspect
    assert inspect.signature(getattr(np, name)) == inspect.signature(getattr(numpy, name))


def test_array_namespace_api_version_is_keyword_only_as_numpy():
    import inspect
    assert inspect.signature(np.ndarray.__array_namespace__) == \
        inspect.signature(numpy.ndarray.__array_namespace__)
    with pytest.raises(TypeError):
        numpy.ones(2).__array_namespace__("2024.12")
    with pytest.raises(TypeError):
        np.ones(2).__array_namespace__("2024.12")


@pytest.mark.parametrize("name", ["concat", "concatenate", "empty_like", "matrix_transpose"])
def test_array_api_function_signatures_are_numpys(name):
    import inspect
    assert inspect.signature(getattr(np, name)) == inspect.signature(getattr(numpy, name))


@pytest.mark.parametrize("name", ["__dlpack__", "__dlpack_device__"])
def test_dlpack_method_signatures_are_numpys(name):
    import inspect
    assert inspect.signature(getattr(np.ndarray, name)) == \
        inspect.signature(getattr(numpy.ndarray, name))
