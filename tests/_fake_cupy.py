"""A fake CuPy over Numba's CUDA simulator, with CuPy's stream semantics (tests only).

On a GPU, a CuPy call made on the host *issues* work on CuPy's current stream and returns
at once; the work runs later, in that stream's order.  This module models that on the
simulated engine (:class:`lazynp.engine.streams.SimBackend`: each stream a queue, run when
the host waits, streams interleaved at random):

* :class:`FakeArray` (a simulated device buffer) implements NumPy's ufuncs and functions
  the way CuPy does for ``numpy.matmul(cupy_arr, ...)``: the result buffer is allocated now,
  its values are computed by work put on the current stream;
* ``with stream.cupy:`` makes a lazynp stream CuPy's current stream; outside such a block
  the current stream is the null stream (one more simulated stream);
* work issued while that same stream's queue is running (inside lazynp's stream work)
  runs inline: it is already in stream order.

:func:`installed` switches lazynp's device backend to "NumPy's functions run on the
device's buffers" (the real-GPU branches of ``_fallback_work`` and ``call_at_once``) with
this fake as CuPy, on a fresh engine for ``cuda:0``.  Kernels still run on the simulator,
as stream work.
"""
from __future__ import annotations

import contextlib
import types

import numpy as np
from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray

from lazynp.engine import streams

_state = {"current": None, "executing": None, "null": None, "backend": None}


def _issue(fn) -> None:
    s = _state["current"] or _state["null"]
    if _state["executing"] is s:
        fn()
    else:
        s.queue.append(("run", lambda: _run_as(s, fn)))


def _run_as(stream, fn) -> None:
    old = _state["executing"]
    _state["executing"] = stream
    try:
        fn()
    finally:
        _state["executing"] = old


def _host(x):
    return x._ary if isinstance(x, FakeCUDAArray) else \
        type(x)(_host(v) for v in x) if isinstance(x, (list, tuple)) else x


def _probe(x):
    return np.ones_like(x._ary) if isinstance(x, FakeCUDAArray) else \
        type(x)(_probe(v) for v in x) if isinstance(x, (list, tuple)) else x


def _deferred(func, args, kwargs):
    """``func``'s result buffer now (shape and dtype from a probe on ones), its values by
    work on the current stream."""
    shape_of = np.asarray(func(*_probe(args), **_probe(kwargs)))
    fill = np.nan if shape_of.dtype.kind in "fc" else -1      # (unwritten: visible)
    out = FakeArray(np.full(shape_of.shape, fill, shape_of.dtype))

    def work():
        out._ary[...] = func(*_host(args), **_host(kwargs))
    _issue(work)
    return out


class FakeArray(FakeCUDAArray):
    """A simulated device buffer whose NumPy operations are issued on the current stream."""

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        if method != "__call__" or "out" in kwargs:
            return NotImplemented
        return _deferred(ufunc, inputs, kwargs)

    def __array_function__(self, func, types_, args, kwargs):
        return _deferred(func, args, kwargs)

    def astype(self, dtype, copy=True):
        if np.dtype(dtype) == self._ary.dtype and not copy:
            return self
        return _deferred(lambda a: a.astype(dtype), (self,), {})

    def reshape(self, *shape):
        return FakeArray(self._ary.reshape(*shape))

    def __getitem__(self, key):
        """Indexing issued on the current stream; a boolean array index first blocks the
        host until the current stream has computed it (CuPy must know the result's size,
        so its boolean indexing synchronizes that stream).  Basic indices (the simulated
        kernels' element reads) are the simulator's own."""
        keys = key if isinstance(key, tuple) else (key,)
        if not any(isinstance(k, (FakeCUDAArray, np.ndarray, list)) for k in keys):
            return super().__getitem__(key)
        if _has_bool_array(key):
            _wait_current()
            mask = _host(key)
            shape_of = np.empty(self._ary.shape, np.bool_)[mask]
            out = FakeArray(np.full(shape_of.shape, np.nan if self._ary.dtype.kind in "fc"
                                    else -1, self._ary.dtype))

            def work():
                out._ary[...] = self._ary[mask]
            _issue(work)
            return out
        shape_of = np.empty(self._ary.shape, np.bool_)[_index_probe(key)]
        out = FakeArray(np.full(shape_of.shape, np.nan if self._ary.dtype.kind in "fc"
                                else -1, self._ary.dtype))

        def work():
            out._ary[...] = self._ary[_host(key)]
        _issue(work)
        return out

    @property
    def flags(self):
        return self._ary.flags


def _index_probe(key):
    """``key`` with its device index arrays replaced by zeros (the result's shape)."""
    if isinstance(key, tuple):
        return tuple(_index_probe(k) for k in key)
    return np.zeros_like(key._ary) if isinstance(key, FakeCUDAArray) else key


def _has_bool_array(key) -> bool:
    keys = key if isinstance(key, tuple) else (key,)
    return any(isinstance(k, FakeCUDAArray) and k._ary.dtype == np.bool_ for k in keys)


def _wait_current() -> None:
    """Block the host until the current stream's queued work has run (interleaved with
    the other streams, honouring their events)."""
    s = _state["current"] or _state["null"]
    backend = _state["backend"]
    if _state["executing"] is s:
        return                      # (inside that stream's work: already in order)
    backend.synchronize(backend.record(s))


def _copyto(dst, src) -> None:
    _issue(lambda: np.copyto(dst._ary, _host(src)))


def _ascontiguousarray(a):
    return _deferred(np.ascontiguousarray, (a,), {})


class _CupyContext:
    def __init__(self, stream):
        self.stream = stream
        self.old = []

    def __enter__(self):
        self.old.append(_state["current"])
        _state["current"] = self.stream

    def __exit__(self, *exc):
        _state["current"] = self.old.pop()


class _Stream(streams.SimStream):
    """A simulated stream that is also a CuPy stream (``with stream.cupy:``)."""

    @property
    def cupy(self):
        return _CupyContext(self)


class _Backend(streams.SimBackend):
    def new_stream(self, name: str):
        s = _Stream(name)
        self.streams.append(s)
        return s

    def enqueue(self, stream, fn) -> None:
        stream.queue.append(("run", lambda: _run_as(stream, fn)))


fake_cupy = types.SimpleNamespace(ndarray=FakeArray, copyto=_copyto,
                                  ascontiguousarray=_ascontiguousarray)


@contextlib.contextmanager
def installed(monkeypatch):
    """lazynp's ``cuda:0`` running NumPy's functions on fake CuPy arrays (see above)."""
    import lazynp as lnp
    lnp.zeros(1, device="cuda")
    from lazynp.cuda import memory, runtime
    memory._load()                  # (before its state is patched: the simulator's)
    runtime.synchronize()
    backend = _Backend()
    _state.update(current=None, executing=None, null=backend.new_stream("null"),
                  backend=backend)
    monkeypatch.setitem(runtime._engines, "cuda:0", streams.StreamEngine(backend))
    monkeypatch.setitem(memory._state, "cupy", fake_cupy)
    monkeypatch.setitem(memory._state, "fake", FakeArray)
    monkeypatch.setattr(memory, "library_arrays", lambda: True)
    yield backend
