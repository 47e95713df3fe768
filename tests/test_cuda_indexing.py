"""Boolean and fancy indexing of device arrays run on the device (CuPy's indexing on a
GPU), with no copy of the array or the index to the host.

The real-GPU branch runs here with the fake CuPy of ``tests/_fake_cupy.py`` over the
simulator (CuPy's stream semantics: work issued on the current stream; a boolean index
blocks the host until that stream has computed the mask).  Each case runs several stream
interleavings.
"""
from __future__ import annotations

import _cuda_sim  # noqa: F401  (sets NUMBA_ENABLE_CUDASIM before numba.cuda is imported)
import numpy as np
import pytest

import lazynp as lnp

SEEDS = range(6)
X = np.arange(20.0).reshape(4, 5) - 7.0


def _cases(d, x):
    """(device result, NumPy result) pairs; ``d`` holds ``x`` (pending work)."""
    idx = np.array([3, 0, -1, 2])
    return [
        (d[d > 0], x[x > 0]),                                   # a pending device mask
        (d[lnp.asarray(idx, device="cuda")], x[idx]),          # a device integer index
        (d[idx], x[idx]),                                        # a host one (uploaded)
        (d[[0, 2]], x[[0, 2]]),
        (d[:, np.array([4, 0])], x[:, np.array([4, 0])]),
        (d[1:, [True, False, True, False, True]], x[1:, [True, False, True, False, True]]),
        (d[..., lnp.asarray(np.array([1, 1]), device="cuda")], x[..., np.array([1, 1])]),
        (d[np.array([0, 3]), np.array([1, 4])], x[np.array([0, 3]), np.array([1, 4])]),
    ]


def test_fancy_and_boolean_indexing_stay_on_the_device(monkeypatch):
    import _fake_cupy
    from lazynp.cuda import runtime
    downloads = []
    real_download = runtime.download
    monkeypatch.setattr(runtime, "download", lambda a: downloads.append(a) or real_download(a))
    with _fake_cupy.installed(monkeypatch):
        for k in SEEDS:
            from lazynp.engine import streams
            streams.SIM_RANDOM.seed(k)
            d = lnp.asarray(X, device="cuda") * 2 + 1        # (kernels on a compute stream)
            before = runtime.STATS["device_host_fallbacks"]
            del downloads[:]
            results = [(r + 0, w) for r, w in _cases(d, X * 2 + 1)]    # (device work on them)
            assert runtime.STATS["device_host_fallbacks"] == before
            # (the only reads: a device integer index's bounds check, one boolean each)
            assert [n.shape for n in downloads] == [(), ()], downloads
            for got, want in results:
                assert got.device == "cuda:0"
                np.testing.assert_array_equal(np.asarray(got), want)


def test_an_out_of_bounds_index_raises_as_in_numpy(monkeypatch):
    import _fake_cupy
    with _fake_cupy.installed(monkeypatch):
        d = lnp.asarray(X, device="cuda")
        with pytest.raises(IndexError):
            d[np.array([0, 4])]
        with pytest.raises(IndexError):
            d[lnp.asarray(np.array([-5, 1]), device="cuda")]
        with pytest.raises(IndexError):
            d[:, [5]]
        with pytest.raises(ValueError, match="two devices"):
            d[lnp.asarray(np.array([0, 1]))]


def test_indexing_under_the_simulator_keeps_numpy_values():
    d = lnp.asarray(X, device="cuda")
    for got, want in _cases(d, X):
        np.testing.assert_array_equal(np.asarray(got), want)
