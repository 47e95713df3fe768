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


_SPIN_FILL = r'''
extern "C" __global__ void spin_fill(float* x, int n, float v, long long cycles) {
    long long t0 = clock64();
    while (clock64() - t0 < cycles) { }
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
        x[i] = v;
}
'''


def _slow_fill(cp, x, value):
    """Fill ``x`` on CuPy's current stream after ~50 ms of spinning (a late producer)."""
    k = cp.RawKernel(_SPIN_FILL, "spin_fill")
    k((64,), (256,), (x, np.int32(x.size), np.float32(value), np.int64(100_000_000)))


def test_import_waits_for_cupys_stream():
    cp = pytest.importorskip("cupy")
    n = 1 << 20
    for stream in (cp.cuda.Stream(non_blocking=True), cp.cuda.Stream.null):
        with stream:
            x = cp.zeros(n, dtype=cp.float32)
            _slow_fill(cp, x, 2.0)
            d = lnp.asarray(x)                    # (the interface names ``stream``)
        assert float(np.asarray((d * 3).sum())) == 6.0 * n
        with stream:
            y = cp.zeros((512, 256), dtype=cp.float32)
            _slow_fill(cp, y, 1.0)
            t = lnp.asarray(y.T)                  # (non-contiguous: copied on the device)
        np.testing.assert_array_equal(np.asarray(t + 1), np.full((256, 512), 2.0, np.float32))


def test_cupy_run_and_at_once_results_are_ordered():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((512, 512)).astype(np.float32)
    d = lnp.asarray(a, device="cuda")
    m = (d * 2) @ (d + 1)                        # (CuPy's matmul after two kernels)
    s = lnp.sort(m, axis=1)                      # (at once, on a compute stream)
    got = np.asarray(s[:, -1] + lnp.std(m, axis=0))
    want = np.sort((a * 2) @ (a + 1), axis=1)[:, -1] + ((a * 2) @ (a + 1)).std(axis=0)
    np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-2)


def test_dlpack_orders_the_consumer_stream():
    cp = pytest.importorskip("cupy")
    x = np.arange(1 << 20, dtype=np.float32)
    d = lnp.exp(lnp.asarray(x, device="cuda") * 1e-6)
    consumer = cp.cuda.Stream(non_blocking=True)
    with consumer:
        z = cp.from_dlpack(d)                    # (CuPy passes its current stream)
        total = float(z.sum())
    np.testing.assert_allclose(total, np.exp(x * 1e-6).sum(dtype=np.float64), rtol=1e-4)
    assert d.__array_namespace__() is lnp
