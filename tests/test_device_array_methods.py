"""What every device array class shares (lazynp/devices/array_methods.py), checked on both
backends, the CUDA one (Numba's simulator in CI) and the dask one: the metadata that
follows from shape and dtype equals NumPy's, on views too, and calling the class raises,
saying how its arrays are made."""
from __future__ import annotations

import re

import _cuda_sim  # noqa: F401  (sets NUMBA_ENABLE_CUDASIM before numba.cuda is imported)
import numpy
import pytest

import lazynp

dask_array = pytest.importorskip("dask.array")


def _cuda(a: numpy.ndarray):
    return lazynp.asarray(a, device="cuda")


def _dask(a: numpy.ndarray):
    return lazynp.asarray(dask_array.from_array(a, chunks=2))


BACKENDS = {"cuda": _cuda, "dask": _dask}
VALUES = [numpy.arange(12.0).reshape(3, 4), numpy.arange(7, dtype=numpy.int16),
          numpy.ones((2, 0, 3), numpy.complex64), numpy.array(2.5, numpy.float32)]


def _views(x):
    """``x`` and views of it (NumPy's and the device array's alike)."""
    yield x
    if x.ndim >= 1 and x.shape[0]:
        yield x[1:]
        yield x[::-2]
    if x.ndim >= 2:
        yield x.T
        if x.shape[1] > 1:
            yield x[:, 1]


@pytest.mark.parametrize("backend", sorted(BACKENDS))
@pytest.mark.parametrize("value", VALUES, ids=lambda v: f"{v.dtype}{v.shape}")
def test_metadata_equals_numpys_on_arrays_and_views(backend, value):
    made = BACKENDS[backend](value)
    views = list(_views(made))
    assert len(views) == len(list(_views(value)))
    for got, want in zip(views, _views(value)):
        assert got.shape == want.shape
        for name in ("ndim", "size", "itemsize", "nbytes"):
            assert getattr(got, name) == getattr(want, name), name
            assert type(getattr(got, name)) is int, name
        if want.ndim:
            assert len(got) == len(want)
        else:
            with pytest.raises(TypeError, match="len"):
                len(got)


@pytest.mark.parametrize("backend, made_with", [("cuda", "device='cuda'"),
                                                ("dask", "lazynp.asarray(dask_array)")])
def test_calling_the_class_raises_saying_how_arrays_are_made(backend, made_with):
    cls = type(BACKENDS[backend](numpy.ones(3)))
    with pytest.raises(TypeError, match="lazynp: make .*" + re.escape(made_with)):
        cls(numpy.ones(3))
    assert getattr(cls, "_lazynp_device_array", False)
    assert cls.__array_priority__ > max(numpy.empty(0).__array_priority__,
                                        lazynp.ndarray.__array_priority__)
