"""The buffer protocol and ``__array_interface__`` (issue 19 item 3): ``bytes``,
``memoryview``, ``struct``, ``hashlib``, file writes and ``numpy.frombuffer`` see the same
bytes as for NumPy's array; memory written through them is seen as NumPy would see it."""
from __future__ import annotations

import hashlib
import io
import struct
import sys

import numpy
import pytest

import lazynp as np
from lazynp._base import native
from lazynp.core import graph

HAS_BUFFER = native.ext is not None or sys.version_info >= (3, 12)
needs_buffer = pytest.mark.skipif(not HAS_BUFFER, reason="pure Python recorder on Python "
                                  "3.11: a Python class cannot export a buffer before 3.12")

CASES = [
    lambda m: m.arange(4, dtype=m.int32),
    lambda m: m.arange(6.0).reshape(2, 3),
    lambda m: m.arange(6.0).reshape(2, 3).T,                  # strided view
    lambda m: m.arange(10, dtype=m.int16)[1::3],
    lambda m: m.array([1 + 2j, 3 - 4j]),
    lambda m: m.array([True, False, True]),
    lambda m: m.arange(5, dtype=m.float16),
    lambda m: m.asarray(3.5),                                  # 0-d
    lambda m: m.zeros((0, 3)),
    lambda m: m.exp(m.linspace(0, 1, 12)).reshape(3, 4)[:, ::2] * 2,
]


@pytest.fixture(params=["auto", "lazy"])
def policy(request):
    with np.policy(request.param):
        yield request.param


@pytest.mark.parametrize("make", CASES)
def test_bytes_and_bytearray(make, policy):
    assert bytes(make(np)) == bytes(make(numpy))
    assert bytes(make(np)) == make(numpy).tobytes()


@needs_buffer
@pytest.mark.parametrize("make", CASES)
def test_memoryview_matches_numpy(make, policy):
    got, want = memoryview(make(np)), memoryview(make(numpy))
    attrs = ["format", "itemsize", "ndim", "shape", "readonly", "nbytes"]
    if policy == "auto":
        # (the lazy policy gives out a snapshot: a compact copy of a strided view)
        attrs += ["strides", "c_contiguous", "f_contiguous", "contiguous"]
    for attr in attrs:
        assert getattr(got, attr) == getattr(want, attr), attr
    assert got.tobytes() == want.tobytes()
    if want.format not in ("e", "Zd"):        # (memoryview cannot list these formats)
        assert got.tolist() == want.tolist()
    assert bytearray(make(np)) == bytearray(make(numpy))


@needs_buffer
def test_struct_hashlib_and_files(policy):
    a, r = np.arange(4, dtype=np.int32) * 3, numpy.arange(4, dtype=numpy.int32) * 3
    assert struct.unpack_from("4i", a) == struct.unpack_from("4i", r)
    assert hashlib.sha1(a).hexdigest() == hashlib.sha1(r).hexdigest()
    f = io.BytesIO()
    assert f.write(a) == 16
    assert f.getvalue() == r.tobytes()
    numpy.testing.assert_array_equal(numpy.frombuffer(a, dtype=numpy.int32), r)


@needs_buffer
def test_writes_through_a_memoryview_are_seen_as_in_numpy():
    for m in (np, numpy):
        a = m.arange(5.0)
        b = a * 2                     # computed before the write: keeps the old values
        view = memoryview(a)
        view[0] = 100.0
        c = a + 1                     # after it: sees the write
        assert numpy.asarray(b).tolist() == [0.0, 2.0, 4.0, 6.0, 8.0]
        assert numpy.asarray(a).tolist() == [100.0, 1.0, 2.0, 3.0, 4.0]
        assert numpy.asarray(c).tolist() == [101.0, 2.0, 3.0, 4.0, 5.0]


@needs_buffer
def test_read_only_views_export_read_only_buffers():
    b = np.broadcast_to(np.arange(3.0), (2, 3))
    assert memoryview(b).readonly
    with pytest.raises(TypeError):
        memoryview(b)[0, 0] = 1.0


def test_buffer_protocol_absent_only_where_python_cannot_have_it():
    if HAS_BUFFER:
        assert memoryview(np.arange(3)).tolist() == [0, 1, 2]
    else:
        with pytest.raises(TypeError):
            memoryview(np.arange(3))


@pytest.mark.parametrize("make", CASES)
def test_array_interface(make, policy):
    got, want = make(np).__array_interface__, make(numpy).__array_interface__
    assert set(got) == set(want)
    for key in ("shape", "typestr", "descr", "version"):
        assert got[key] == want[key], key
    if policy == "auto":
        assert got["strides"] == want["strides"]
    assert got["data"][1] == want["data"][1]


def test_array_interface_memory_outlives_the_call():
    with np.policy("lazy"):                  # __array__ gives a snapshot under this policy
        a = np.arange(6.0) * 3
        via_interface = numpy.array(_Interface(a), copy=False)
        del a
        import gc
        gc.collect()
        numpy.testing.assert_array_equal(via_interface, numpy.arange(6.0) * 3)


class _Interface:
    """Something that exposes only another object's ``__array_interface__``."""

    def __init__(self, arr):
        self.arr = arr
        self.__array_interface__ = arr.__array_interface__
