"""Real-GPU checks (``LAZYNP_TEST_REAL_GPU=1 pytest -m gpu``): the generated kernels compile
and run on the hardware, and arrays are shared with CuPy and PyTorch without copies.  CI has
no GPU: these are skipped there; every code path also runs on the simulator
(tests/test_cuda_kernels.py, tests/test_cuda_devices.py)."""
from __future__ import annotations

import _cuda_sim
import numpy as np
import pytest

import lazynp as lnp

pytestmark = [_cuda_sim.gpu, _cuda_sim.real_gpu_only]


def test_kernels_on_the_hardware_equal_numpy():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((300, 257)).astype(np.float32)
    b = rng.standard_normal(257).astype(np.float32)
    da, db = lnp.asarray(a, device="cuda"), lnp.asarray(b, device="cuda")
    np.testing.assert_allclose(np.asarray(lnp.exp(da * db) - da.T.T * 0.5),
                               np.exp(a * b) - a * 0.5, rtol=1e-5, atol=1e-6)
    for axis in (None, 0, 1):
        np.testing.assert_allclose(np.asarray((da * db + 1).sum(axis=axis)),
                                   (a * b + 1).sum(axis=axis), rtol=1e-4, atol=1e-3)
        np.testing.assert_array_equal(np.asarray(da.max(axis=axis)), a.max(axis=axis))
    e = lnp.exp(da - da.max(axis=1, keepdims=True))
    p = e / e.sum(axis=1, keepdims=True)
    ea = np.exp(a - a.max(axis=1, keepdims=True))
    np.testing.assert_allclose(np.asarray(p), ea / ea.sum(axis=1, keepdims=True), rtol=1e-5)


def test_zero_copy_with_cupy_and_torch():
    cp = pytest.importorskip("cupy")
    x = cp.arange(10, dtype=cp.float32)
    d = lnp.asarray(x, device="cuda")
    d[0] = 100.0
    lnp.evaluate(d)
    assert float(x[0]) == 100.0                       # the same memory
    y = cp.asarray(d * 2)
    assert isinstance(y, cp.ndarray) and float(y[0]) == 200.0
    torch = pytest.importorskip("torch")
    t = torch.as_tensor(d, device="cuda")
    assert float(t[1]) == 1.0
