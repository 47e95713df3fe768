"""Ordering with other libraries' streams (Numba's simulator in CI).

The simulator's engine defers every stream's work until the host waits, then runs the
streams in a random interleaving that honours each stream's order and the events waited
on (:class:`lazynp.engine.streams.SimBackend`).  :func:`lazynp.cuda.runtime.sim_stream`
adds the other libraries' streams to that model: the null stream (handle 1, CuPy's and
PyTorch's default), the per-thread one (2), any other handle.  A fake CuPy-like producer
puts its write on such a stream: it happens only when the interleaving reaches it, so an
import that does not wait on an event recorded there reads the old memory (NaN here) for
some interleavings.  Each test runs several fixed seeds (deterministic)."""
from __future__ import annotations

import types

import _cuda_sim  # noqa: F401  (sets NUMBA_ENABLE_CUDASIM before numba.cuda is imported)
import numpy as np
import pytest

import lazynp as lnp

SEEDS = range(12)


def _rt():
    lnp.zeros(1, device="cuda")             # (loads the backend)
    from lazynp.cuda import runtime
    from lazynp.devices import names
    return runtime, names.device("cuda:0")


def _seed(k: int) -> None:
    from lazynp.engine import streams
    streams.SIM_RANDOM.seed(k)


def _fake_array_class():
    from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray

    class Producer(FakeCUDAArray):
        """A CuPy-like GPU array whose values are written by work pending on the stream
        ``handle`` (its ``__cuda_array_interface__`` names that stream, as CuPy's and
        PyTorch's do)."""

        def __init__(self, values, handle=1, transpose=False):
            runtime, dev = _rt()
            mem = np.full(values.shape, np.nan)
            stream = runtime.sim_stream(dev, handle)
            runtime.engine_for(dev).backend.enqueue(stream,
                                                    lambda: np.copyto(mem, values))
            super().__init__(mem.T if transpose else mem)
            self.__dict__["_handle"] = handle

        @property
        def __cuda_array_interface__(self):
            a = self._ary
            return {"shape": a.shape, "typestr": a.dtype.str,
                    "data": (a.__array_interface__["data"][0], False),
                    "strides": None if a.flags.c_contiguous else a.strides,
                    "version": 3, "stream": self.__dict__["_handle"]}
    return Producer


@pytest.mark.parametrize("handle", [1, 2, 0x7F00])
def test_import_waits_for_the_producer_stream(handle):
    Producer = _fake_array_class()
    x = np.arange(1.0, 7.0).reshape(2, 3)
    for k in SEEDS:
        _seed(k)
        d = lnp.asarray(Producer(x, handle))
        assert d.device == "cuda:0"
        np.testing.assert_array_equal(np.asarray(lnp.exp(d) + d.sum(axis=1, keepdims=True)),
                                      np.exp(x) + x.sum(axis=1, keepdims=True))


def test_import_of_a_non_contiguous_array():
    Producer = _fake_array_class()
    x = np.arange(12.0).reshape(3, 4)
    for k in SEEDS:
        _seed(k)
        p = Producer(x, 1, transpose=True)          # (cupy_arr.T: strides in the interface)
        d = lnp.asarray(p)
        assert d.shape == (4, 3)
        np.testing.assert_array_equal(np.asarray(d * 2), x.T * 2)
    with pytest.raises(ValueError, match="copy=False"):
        lnp.asarray(Producer(x, 1, transpose=True), copy=False)


def test_interface_stream_zero_is_refused():
    Producer = _fake_array_class()
    with pytest.raises(ValueError, match="0 is disallowed"):
        lnp.asarray(Producer(np.ones(2), 0))


def test_at_once_results_and_cupy_run_ops_are_ordered():
    x = np.arange(1.0, 10.0).reshape(3, 3)
    for k in SEEDS:
        _seed(k)
        d = lnp.asarray(x, device="cuda") * 2
        s = lnp.sort(-d, axis=1)                    # (run at once)
        m = s @ d                                   # (CuPy-run on a GPU)
        got = np.asarray(lnp.std(m + 1, axis=0) + lnp.argmax(m, axis=1))
        want = np.sort(-x * 2, axis=1) @ (x * 2)
        np.testing.assert_allclose(got, np.std(want + 1, axis=0) + np.argmax(want, axis=1))


def test_handing_a_result_to_a_consumer_stream():
    runtime, dev = _rt()
    x = np.arange(4.0)
    for k in SEEDS:
        _seed(k)
        d = lnp.exp(lnp.asarray(x, device="cuda"))
        seen = []
        consumer = runtime.sim_stream(dev, 0x5A00)
        d.to_device("cuda:0", stream=0x5A00)        # (the consumer's stream waits)
        buf = runtime.realize(runtime._root(d._node()))
        eng = runtime.engine_for(dev)
        eng.backend.enqueue(consumer, lambda: seen.append(buf._ary.copy()))
        eng.host_wait(eng.backend.record(consumer))
        np.testing.assert_array_equal(seen[0], np.exp(x))


def test_dlpack_and_array_api_arguments():
    d = lnp.asarray(np.arange(3.0), device="cuda")
    assert d.__array_namespace__() is lnp
    assert d.__array_namespace__(api_version="2023.12") is lnp
    with pytest.raises(ValueError, match="Array API version"):
        d.__array_namespace__(api_version="1999.01")
    np.testing.assert_array_equal(np.from_dlpack(d + 1), np.arange(3.0) + 1)
    cap = (d + 1).__dlpack__(max_version=(1, 0))
    assert type(cap).__name__ == "PyCapsule"
    with pytest.raises(BufferError, match="DLPack device"):
        d.__dlpack__(dl_device=(2, 5))
    with pytest.raises(ValueError, match="stream is for device targets"):
        d.to_device("cpu", stream=1)
    with pytest.raises(TypeError, match="integer handle"):
        d.to_device("cuda:0", stream="s")


def test_copy_true_dlpack_does_not_share():
    d = lnp.asarray(np.arange(3.0), device="cuda")
    a = np.from_dlpack(types.SimpleNamespace(
        __dlpack__=lambda **kw: d.__dlpack__(copy=True),
        __dlpack_device__=d.__dlpack_device__))
    d[0] = 7.0
    np.asarray(d)
    assert a[0] == 0.0


class _CpuTensor:
    """A CPU tensor (torch's, JAX's): its type has ``__cuda_array_interface__``, which raises
    for this instance."""

    def __init__(self, v):
        self._v = np.asarray(v)

    @property
    def __cuda_array_interface__(self):
        raise AttributeError("Can't get __cuda_array_interface__ on non-CUDA tensor")

    def __array__(self, dtype=None, copy=None):
        return self._v if dtype is None else self._v.astype(dtype)


def test_a_cpu_tensor_is_not_taken_for_a_gpu_array():
    from lazynp.devices import names
    t = _CpuTensor([1.0, 2.0])
    assert not names.is_foreign_gpu_array(t)
    assert names.device_of(t) == "cpu"
    a = lnp.asarray(t)
    assert a.device == "cpu"
    np.testing.assert_array_equal(a, [1.0, 2.0])


def test_an_unknown_gpu_device_raises():
    from lazynp.devices import names

    class Anonymous:
        __cuda_array_interface__ = {"shape": (1,), "typestr": "<f8", "data": (0, False),
                                    "version": 3}
    with pytest.raises(ValueError, match="which CUDA device"):
        names.foreign_device(Anonymous())
    torch_like = types.SimpleNamespace(device=types.SimpleNamespace(type="cuda", index=3))
    assert names.foreign_device(torch_like) == "cuda:3"
    dl = types.SimpleNamespace(__dlpack_device__=lambda: (2, 1))
    assert names.foreign_device(dl) == "cuda:1"


def test_cuda_n_launches_in_its_own_context(monkeypatch):
    from lazynp.cuda import memory
    _rt()
    entered = []

    class Context:
        def __init__(self, i):
            self.i = i

        def __enter__(self):
            entered.append(self.i)

        def __exit__(self, *exc):
            return False
    memory._load()
    fake_cuda = types.SimpleNamespace(gpus=[Context(0), Context(1)])
    monkeypatch.setattr(memory, "device_count", lambda: 2)    # (two simulated devices)
    monkeypatch.setitem(memory._state, "count", 2)
    monkeypatch.setitem(memory._state, "cuda", fake_cuda)
    x = np.arange(4.0)
    d1 = lnp.asarray(x, device="cuda:1")
    assert d1.device == "cuda:1"
    np.testing.assert_array_equal(np.asarray(lnp.sort(d1 * 2) + 1), x * 2 + 1)
    assert entered and set(entered) == {1}
    entered.clear()
    np.testing.assert_array_equal(np.asarray(lnp.asarray(x, device="cuda:0") - 1), x - 1)
    assert entered and set(entered) == {0}
    with pytest.raises(ValueError, match="two devices"):
        d1 + lnp.asarray(x, device="cuda:0")


# --- CuPy-run ops and functions run at once, with a fake CuPy (real-GPU branches) ---------------

def test_cupy_run_ops_wait_for_their_inputs(monkeypatch):
    import _fake_cupy
    a = np.arange(1.0, 7.0).reshape(2, 3)
    b = np.arange(6.0).reshape(3, 2) - 2
    with _fake_cupy.installed(monkeypatch):
        for k in SEEDS:
            _seed(k)
            da = lnp.asarray(a, device="cuda")          # (uploads on the copy stream)
            db = lnp.asarray(b, device="cuda")
            m = da @ db                                 # (CuPy's matmul on a compute stream)
            np.testing.assert_array_equal(np.asarray(m), a @ b)
            np.testing.assert_allclose(np.asarray(lnp.std(da, axis=0)), a.std(axis=0))
            np.testing.assert_array_equal(np.asarray(lnp.argmax(db, axis=1)),
                                          b.argmax(axis=1))


def test_at_once_functions_record_an_event_for_their_result(monkeypatch):
    import _fake_cupy
    x = np.array([[3.0, -1.0, 2.0], [0.5, 4.0, -2.0]])
    with _fake_cupy.installed(monkeypatch):
        for k in SEEDS:
            _seed(k)
            d = lnp.asarray(x, device="cuda") * 2       # (a kernel on a compute stream)
            s = lnp.sort(d, axis=1)                     # (CuPy's sort, run at once)
            np.testing.assert_array_equal(np.asarray(s + 1), np.sort(x * 2, axis=1) + 1)


def test_host_threads_reading_device_values_at_once_get_numpy_values():
    # (Numba's simulator runs one kernel at a time: a second host thread's launch failed
    # its assertion or, worse, ran inside the first launch's context with wrong values)
    import threading
    a = np.random.default_rng(5).standard_normal((3, 4, 5)) / 10 + 1
    da = lnp.asarray(a, device="cuda")
    problems = []

    def reader(k):
        try:
            for axis in (None, 0, (0, 2)):
                got = np.asarray(lnp.prod(da * 2 - 1 + k, axis=axis))
                want = np.prod(a * 2 - 1 + k, axis=axis)
                if got.shape != want.shape or not np.allclose(got, want, rtol=1e-12):
                    problems.append(("values", k, axis))
        except Exception as exc:             # (reported below, with the thread's numbers)
            problems.append((repr(exc)[:120], k))

    threads = [threading.Thread(target=reader, args=(k,)) for k in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert problems == []
