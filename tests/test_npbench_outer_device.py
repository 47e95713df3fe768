"""``outer`` of device arrays keeps its device path (the eager-first functions' device hook),
now that ``outer`` is a namespace function of its own (tests/test_npbench_outer.py)."""
from __future__ import annotations

import _cuda_sim  # noqa: F401  (sets NUMBA_ENABLE_CUDASIM before numba.cuda is imported)
import numpy
import pytest

import lazynp


@pytest.mark.parametrize("n", [4, 1000])      # (small and from the size bound)
def test_outer_of_device_arrays_stays_on_the_device(n):
    a = lazynp.asarray(numpy.arange(float(n)), device="cuda")
    b = lazynp.asarray(numpy.arange(3.0, 3.0 + n), device="cuda")
    got = lazynp.outer(a, b)
    assert got.device == a.device
    numpy.testing.assert_array_equal(numpy.asarray(got.to_device("cpu")),
                                     numpy.outer(numpy.arange(float(n)),
                                                 numpy.arange(3.0, 3.0 + n)))
