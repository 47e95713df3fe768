"""Device arrays (Numba's simulator in CI): placement, copies, views and writes, the stream
engine's ordering, errors."""
from __future__ import annotations

import os

import _cuda_sim  # noqa: F401  (sets NUMBA_ENABLE_CUDASIM before numba.cuda is imported)
import numpy as np
import pytest

import lazynp as lnp


def dev(x, **kw):
    return lnp.asarray(x, device="cuda", **kw)


def _runtime():
    from lazynp.cuda import runtime
    return runtime


# --- devices and creation --------------------------------------------------------------------

def test_device_names_and_round_trip():
    x = np.arange(6.0).reshape(2, 3)
    d = dev(x)
    assert d.device == "cuda:0" and str(d.device) == "cuda:0"
    assert lnp.asarray(x, device="cuda:0").device == d.device
    back = d.to_device("cpu")
    assert isinstance(back, lnp.ndarray) and back.device == "cpu"
    np.testing.assert_array_equal(back, x)
    assert d.to_device("cuda") is d
    np.testing.assert_array_equal(lnp.asarray(d, device="cpu"), x)
    with pytest.raises(ValueError, match="unknown device"):
        lnp.asarray(x, device="tpu")


def test_creation_functions_take_device():
    for got, want in [
            (lnp.zeros((2, 3), device="cuda"), np.zeros((2, 3))),
            (lnp.ones(4, dtype=np.int32, device="cuda"), np.ones(4, np.int32)),
            (lnp.full((2,), 7, device="cuda"), np.full((2,), 7)),
            (lnp.arange(5, device="cuda"), np.arange(5)),
            (lnp.linspace(0, 1, 5, device="cuda"), np.linspace(0, 1, 5)),
            (lnp.array([1, 2, 3], device="cuda"), np.array([1, 2, 3])),
            (lnp.asarray([[1.5]], dtype=np.float32, device="cuda"), np.array([[1.5]], np.float32))]:
        assert got.device == "cuda:0"
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(np.asarray(got), want)
    e = lnp.empty((3,), device="cuda")
    assert e.shape == (3,) and e.device == "cuda:0"
    d = dev(np.arange(4.0))
    for like, want in [(lnp.zeros_like(d), np.zeros(4)), (lnp.ones_like(d), np.ones(4)),
                       (lnp.full_like(d, 2.5), np.full(4, 2.5))]:
        assert like.device == "cuda:0"
        np.testing.assert_array_equal(np.asarray(like), want)
    assert lnp.zeros_like(d, device="cpu").device == "cpu"


def test_default_device_block():
    with lnp.default_device("cuda:0"):
        a = lnp.ones(3)
        b = lnp.arange(3)
        c = lnp.asarray([1.0, 2.0])
    assert a.device == b.device == c.device == "cuda:0"
    assert lnp.ones(3).device == "cpu"
    np.testing.assert_array_equal(np.asarray(a + b), np.ones(3) + np.arange(3))


def test_host_copies_at_forcing_points():
    x = np.array([[1.5, -2.0], [3.0, 4.25]])
    d = dev(x)
    assert repr(d) == repr(x)[:-1] + ", device='cuda:0')"
    assert str(d) == str(x)
    assert float(d[1, 1]) == 4.25 and int(d[0, 0]) == 1
    assert d.sum().item() == x.sum()
    assert d.tolist() == x.tolist()
    assert bool(d[0, 0] > 1)
    np.testing.assert_array_equal(np.asarray(d), x)
    assert np.asarray(d).dtype == x.dtype


def test_cuda_array_interface():
    d = dev(np.arange(6, dtype=np.float32).reshape(2, 3))
    cai = d.__cuda_array_interface__
    assert cai["shape"] == (2, 3) and cai["typestr"] == "<f4" and cai["version"] == 3
    assert d.T.__cuda_array_interface__["strides"] == (4, 12)
    from lazynp.cuda import memory
    assert d.__dlpack_device__() == ((1, 0) if memory.simulated() else (2, 0))
    if memory.simulated():
        np.testing.assert_array_equal(np.from_dlpack(d), np.arange(6).reshape(2, 3))


def test_asarray_of_another_librarys_device_array_shares_memory():
    """``lazynp.asarray(cupy_array)`` (here Numba's device array: the simulator's)."""
    from numba import cuda
    f = cuda.to_device(np.arange(4.0))
    d = lnp.asarray(f)
    assert d.device == "cuda:0"
    d[0] = 7.0
    lnp.evaluate(d)
    np.testing.assert_array_equal(f.copy_to_host(), [7.0, 1.0, 2.0, 3.0])
    np.testing.assert_array_equal(np.asarray(d * 2), [14.0, 2.0, 4.0, 6.0])


def test_mixed_devices_raise_naming_both():
    d = dev(np.ones(3))
    c = lnp.asarray(np.ones(3))
    for f in (lambda: d + c, lambda: c + d, lambda: lnp.add(d, c), lambda: d * np.ones(3),
              lambda: lnp.maximum(c, d)):
        with pytest.raises(ValueError, match="cpu and cuda:0|cuda:0 and cpu"):
            f()
    with pytest.raises(ValueError, match="cuda:0"):
        d[0:1] = c[0:1]
    # Python and NumPy scalars belong to no device
    np.testing.assert_array_equal(np.asarray(d + 1 + 2.5 + np.float32(1) + np.int64(2)),
                                  np.ones(3) + 1 + 2.5 + np.float32(1) + np.int64(2))


# --- views and writes -----------------------------------------------------------------------

def test_views_and_in_place_writes():
    x = np.arange(12.0).reshape(3, 4)
    d = dev(x)
    v = d[1:, ::2]
    d[1:, ::2] = -1.0
    x[1:, ::2] = -1.0
    np.testing.assert_array_equal(np.asarray(v), x[1:, ::2])     # a view sees the write
    d[0] += 10
    x[0] += 10
    d.T[1] *= 2
    x.T[1] *= 2
    d[2, 3] = d[0, 0]
    x[2, 3] = x[0, 0]
    np.testing.assert_array_equal(np.asarray(d), x)
    d[1:] = d[:-1]           # overlapping read and write: NumPy's result
    x[1:] = x[:-1]
    np.testing.assert_array_equal(np.asarray(d), x)
    d[...] = dev(np.arange(4.0))       # broadcast
    x[...] = np.arange(4.0)
    np.testing.assert_array_equal(np.asarray(d), x)


def test_write_after_pending_read_keeps_old_values():
    x = np.arange(5.0)
    d = dev(x)
    before = d * 2           # recorded, not run
    d += 1
    d[0] = 100
    np.testing.assert_array_equal(np.asarray(before), x * 2)
    np.testing.assert_array_equal(np.asarray(d), np.array([100, 2, 3, 4, 5.0]))
    s = _runtime().STATS
    assert s["device_copy_on_write"] >= 1 and s["device_inplace_writes"] >= 1


def test_inplace_casting_errors_as_numpy():
    d = dev(np.arange(3))
    with pytest.raises(np.exceptions._UFuncOutputCastingError if hasattr(
            np.exceptions, "_UFuncOutputCastingError") else TypeError):
        d += 1.5
    d += 2
    np.testing.assert_array_equal(np.asarray(d), np.arange(3) + 2)


# --- the engine -----------------------------------------------------------------------------

def _random_program(seed: int, mod):
    """Reads and writes over three arrays of ``mod`` (numpy or a device namespace)."""
    rng = np.random.default_rng(seed)
    arrs = [mod.asarray(np.arange(8.0) + k) for k in range(3)]
    outs = []
    for step in range(14):
        i, j = rng.integers(0, 3, 2)
        c = float(rng.integers(1, 4))
        kind = rng.integers(0, 5)
        if kind == 0:
            arrs[i] = arrs[i] * c + arrs[j]
        elif kind == 1:
            arrs[i][1::2] = arrs[j][::2] - c
        elif kind == 2:
            arrs[i] += arrs[j] * c
        elif kind == 3:
            outs.append(arrs[i].sum() + arrs[j].max())
        else:
            outs.append(arrs[i][::-1] * arrs[j])
    return arrs + outs


class _Dev:
    @staticmethod
    def asarray(x):
        return dev(x)


@pytest.mark.parametrize("seed", range(6))
def test_random_reads_and_writes_on_several_streams(seed):
    from lazynp.engine import streams
    streams.SIM_RANDOM.seed(seed)
    before = dict(streams.STATS)
    want = _random_program(seed, np)
    got = _random_program(seed, _Dev)
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), w)
    assert streams.STATS["gpu_event_waits"] > before["gpu_event_waits"]


def test_dead_intermediates_lend_their_buffers():
    """Memory planning: an output takes the buffer of an input nothing else reads."""
    x = np.linspace(-1, 1, 12).reshape(3, 4)
    d = dev(x)
    before = _runtime().STATS["device_buffer_reuse"]
    w = dev(np.eye(4))
    y = lnp.exp(d @ w) * 2 - 1            # matmul (not fused) -> its buffer is reused
    kept = d @ w                          # ... unless an array still holds it
    z = lnp.tanh(kept) + 1
    np.testing.assert_allclose(np.asarray(y), np.exp(x) * 2 - 1)
    np.testing.assert_allclose(np.asarray(z), np.tanh(x) + 1)
    np.testing.assert_allclose(np.asarray(kept), x)
    assert _runtime().STATS["device_buffer_reuse"] - before == 1


def test_independent_chains_use_two_streams_and_events():
    from lazynp.engine import streams
    a, b = dev(np.ones(6)), dev(np.full(6, 2.0))
    x = a * 3 + 1
    y = b * 5 - 1
    z = x.sum() + y.sum()
    lnp.evaluate(z)
    ex, ey = x._node().event, y._node().event
    assert ex.stream is not ey.stream                       # overlap: two compute streams
    assert float(z) == (6 * 4 + 6 * 9)
    eng = _runtime().engine_for(a.device)
    assert eng.copy not in (ex.stream, ey.stream)           # uploads: the copy stream


def test_missing_event_is_caught_by_the_simulated_streams(monkeypatch):
    """The stress test can fail: without the events, reads overtake writes."""
    from lazynp.engine import streams
    real = streams.StreamEngine.launch

    def no_waits(self, stream, fn, waits=(), keep=()):
        return real(self, stream, fn, (), keep)
    monkeypatch.setattr(streams.StreamEngine, "launch", no_waits)
    wrong = 0
    for seed in range(6):
        streams.SIM_RANDOM.seed(seed)
        want = _random_program(seed, np)
        try:
            got = _random_program(seed, _Dev)
            wrong += any(not np.allclose(np.asarray(g), w) for g, w in zip(got, want))
        except Exception:
            wrong += 1
    assert wrong > 0


def test_error_raised_at_the_next_wait_with_the_recording_line(monkeypatch):
    """A kernel that fails while it runs on its stream: the error is kept on what it
    writes and raised at the next wait on it (and on what reads it), with the line that
    recorded the op; lazynp keeps working."""
    from lazynp.cuda import codegen

    class Failing:
        def __getitem__(self, config):
            def launch(*args):
                raise FloatingPointError("kernel failed")
            return launch

    d = dev(np.ones(4))
    monkeypatch.setattr(codegen, "compile_source", lambda source: Failing())
    bad = d * 7 + 3          # recorded: nothing raised here
    _runtime().flush([bad._node()])          # launched: nothing raised either
    monkeypatch.undo()
    later = bad + 1          # reads a failed node: fails in turn
    for arr in (bad, later):
        with pytest.raises(FloatingPointError, match="kernel failed") as info:
            np.asarray(arr)
        notes = "\n".join(getattr(info.value, "__notes__", []))
        assert "test_cuda_devices.py" in notes and "recorded at" in notes
    np.testing.assert_array_equal(np.asarray(d + 1), np.full(4, 2.0))   # still works


# --- grad and jit ---------------------------------------------------------------------------

def _mlp_loss(np_):
    def loss(W1, b1, W2, b2, X, Y):
        h = np_.tanh(X @ W1 + b1)
        logits = h @ W2 + b2
        m = np_.max(logits, axis=1, keepdims=True)
        lse = np_.log(np_.sum(np_.exp(logits - m), axis=1, keepdims=True)) + m
        return -np_.sum(Y * (logits - lse)) / X.shape[0]
    return loss


def test_grad_on_device_equals_cpu_grad():
    rng = np.random.RandomState(0)
    B, D, H, C = 5, 4, 3, 3
    args = [rng.standard_normal((D, H)) * 0.5, np.full(H, 0.1), rng.standard_normal((H, C)),
            np.zeros(C), rng.standard_normal((B, D)), np.eye(C)[rng.randint(0, C, B)]]
    want = lnp.grad(_mlp_loss(lnp), argnums=(0, 1, 2, 3))(*[lnp.asarray(a) for a in args])
    got = lnp.grad(_mlp_loss(lnp), argnums=(0, 1, 2, 3))(*[dev(a) for a in args])
    for g, w in zip(got, want):
        assert g.device == "cuda:0" and g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-10, atol=1e-12)


def test_grad_through_views_writes_and_reductions():
    def f(x):
        y = x * 1.0
        y[1:3] = x[::2][:2] * 3          # a write through a view, reading a strided view
        return lnp.sum(y.T[0] ** 2) + lnp.mean(lnp.maximum(x, 0.2)) + x.max()

    x = np.array([[0.5, -1.0], [2.0, 0.3], [1.5, -0.2], [0.1, 0.9]])
    want = lnp.grad(f)(lnp.asarray(x))
    value, got = lnp.value_and_grad(f)(dev(x))
    assert got.device == "cuda:0"
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-12)
    np.testing.assert_allclose(float(value), float(f(lnp.asarray(x))), rtol=1e-12)


def test_jit_of_device_functions():
    def f(x, y):
        return lnp.sum(lnp.exp(x) * y, axis=0)

    x, y = np.linspace(0, 1, 6).reshape(3, 2), np.arange(6.0).reshape(3, 2)
    jf = lnp.jit(f)
    for k in range(2):
        got = jf(dev(x + k), dev(y))
        assert got.device == "cuda:0"
        np.testing.assert_allclose(np.asarray(got), np.sum(np.exp(x + k) * y, axis=0))
    jg = lnp.jit(lnp.grad(lambda x: lnp.sum(lnp.tanh(x) * x[::-1] ** 2)))
    got = jg(dev(x[:, 0]))
    want = lnp.grad(lambda x: lnp.sum(lnp.tanh(x) * x[::-1] ** 2))(lnp.asarray(x[:, 0]))
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-12)


def test_grad_needs_device_arguments_and_known_rules():
    with pytest.raises(NotImplementedError, match="no gradient rule"):
        lnp.grad(lambda x: lnp.prod(x))(dev(np.ones(3)))
    with pytest.raises(ValueError, match="two devices"):
        lnp.grad(lambda x, y: lnp.sum(x * y))(dev(np.ones(3)), lnp.asarray(np.ones(3)))


def test_import_loads_no_cuda_library():
    import subprocess
    import sys
    code = ("import sys, lazynp\n"
            "bad = [m for m in sys.modules if m.startswith(('numba.cuda', 'numba_cuda', 'cupy'))]\n"
            "assert not bad, bad\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=120, cwd=os.path.dirname(os.path.dirname(__file__)))
    assert r.returncode == 0, r.stderr
