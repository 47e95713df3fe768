"""``lazynp.jit`` of functions of device arrays: a plan of the device's launches per
signature, replayed with no recording (``lazynp.cuda.jit_plan``).  Values against NumPy
over several calls and stream interleavings (the simulator), CuPy-run ops through the fake
CuPy, and the functions that run unplanned."""
from __future__ import annotations

import _cuda_sim  # noqa: F401  (sets NUMBA_ENABLE_CUDASIM before numba.cuda is imported)
import numpy as np
import pytest

import lazynp as lnp

RNG = np.random.default_rng(3)


def _stats() -> dict:
    return lnp.stats()


def _softmax_plus(x, y, s):
    e = lnp.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True) * s + (y * y).sum(axis=0)


def _softmax_plus_np(x, y, s):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True) * s + (y * y).sum(axis=0)


def _pair(shape=(3, 4)):
    xh = RNG.standard_normal(shape)
    yh = RNG.standard_normal((5, shape[1]))
    return xh, yh, lnp.asarray(xh, device="cuda"), lnp.asarray(yh, device="cuda")


def test_a_plan_is_replayed_with_no_recording():
    from lazynp.engine import streams
    f = lnp.jit(_softmax_plus)
    xh, yh, x, y = _pair()
    first = f(x, y, 2.0)
    np.testing.assert_allclose(np.asarray(first), _softmax_plus_np(xh, yh, 2.0), rtol=1e-12)
    s0 = _stats()
    kept = []
    for k in range(5):
        streams.SIM_RANDOM.seed(k)
        xh, yh, x, y = _pair()
        kept.append((f(x, y, 2.0), _softmax_plus_np(xh, yh, 2.0)))
    s1 = _stats()
    assert s1["device_jit_replays"] - s0["device_jit_replays"] == 5
    assert s1["device_flushes"] == s0["device_flushes"]          # (nothing recorded)
    steps = (s1["device_jit_steps"] - s0["device_jit_steps"]) // 5
    assert 1 <= steps <= 5, steps     # (one host call per launch: 9 ops, 5 launches)
    for got, want in kept:            # (earlier results are not overwritten by later calls)
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-12)


def test_a_new_signature_makes_a_new_plan():
    f = lnp.jit(_softmax_plus)
    before = _stats()["device_jit_plans"]
    for shape, s in (((3, 4), 2.0), ((3, 4), 3.0), ((2, 6), 2.0), ((3, 4), 2.0)):
        xh, yh, x, y = _pair(shape)
        np.testing.assert_allclose(np.asarray(f(x, y, s)), _softmax_plus_np(xh, yh, s),
                                   rtol=1e-12)
    assert _stats()["device_jit_plans"] - before == 3


def test_several_results_and_a_view_argument():
    @lnp.jit
    def g(a, b):
        return a * b, (a - b).sum(axis=0), a.T + 1

    for _ in range(3):
        ah = RNG.standard_normal((4, 6))
        bh = RNG.standard_normal((6, 4))
        a = lnp.asarray(ah, device="cuda")
        b = lnp.asarray(bh, device="cuda").T          # (a view: copied into the plan)
        p, q, r = g(a, b)
        np.testing.assert_allclose(np.asarray(p), ah * bh.T)
        np.testing.assert_allclose(np.asarray(q), (ah - bh.T).sum(axis=0))
        np.testing.assert_allclose(np.asarray(r), ah.T + 1)


def test_cupy_run_ops_are_replayed_in_stream_order(monkeypatch):
    import _fake_cupy
    from lazynp.engine import streams

    @lnp.jit
    def h(a, w):
        return lnp.tanh(a @ w) * 2 + a.sum()

    with _fake_cupy.installed(monkeypatch):
        for k in range(6):
            streams.SIM_RANDOM.seed(k)
            ah, wh = RNG.standard_normal((3, 4)), RNG.standard_normal((4, 4))
            got = h(lnp.asarray(ah, device="cuda"), lnp.asarray(wh, device="cuda"))
            np.testing.assert_allclose(np.asarray(got), np.tanh(ah @ wh) * 2 + ah.sum(),
                                       rtol=1e-12)
        assert lnp.stats()["device_jit_replays"] >= 5


def test_a_training_step_with_grad_is_one_plan():
    def loss(w, x, t):
        return ((lnp.tanh(x * w) - t) ** 2).sum()

    @lnp.jit
    def step(w, x, t):
        return w - 0.1 * lnp.grad(loss)(w, x, t)

    wh = RNG.standard_normal(5)
    w = lnp.asarray(wh, device="cuda")
    xh, th = RNG.standard_normal(5), RNG.standard_normal(5)
    x, t = lnp.asarray(xh, device="cuda"), lnp.asarray(th, device="cuda")
    before = _stats()
    for _ in range(4):
        w = step(w, x, t)
        wh = wh - 0.1 * 2 * (np.tanh(xh * wh) - th) * (1 - np.tanh(xh * wh) ** 2) * xh
    np.testing.assert_allclose(np.asarray(w), wh, rtol=1e-10)
    after = _stats()
    assert after["device_jit_plans"] - before["device_jit_plans"] == 1
    assert after["device_jit_replays"] - before["device_jit_replays"] == 3


@pytest.mark.parametrize("case", ["reads a value", "writes its argument", "closes over",
                                  "returns a scalar"])
def test_functions_that_cannot_be_replayed_run_as_they_are(case):
    outer = lnp.asarray(np.arange(4.0), device="cuda")

    def fn(x):
        if case == "reads a value":
            return x * float(x.sum())
        if case == "writes its argument":
            x[0] = 100.0
            return x * 2
        if case == "closes over":
            return x + outer
        return 3.0

    f = lnp.jit(fn)
    before = _stats()["device_jit_unplanned"]
    for k in range(3):
        xh = np.arange(4.0) + k
        x = lnp.asarray(xh, device="cuda")
        got, want_x = f(x), xh.copy()
        if case == "reads a value":
            want = xh * xh.sum()
        elif case == "writes its argument":
            want_x[0] = 100.0
            want = want_x * 2
        elif case == "closes over":
            want = xh + np.arange(4.0)
        else:
            want = 3.0
        np.testing.assert_allclose(np.asarray(got), want)
        np.testing.assert_allclose(np.asarray(x), want_x)       # (the caller's array)
    assert _stats()["device_jit_unplanned"] - before == 2


def test_clear_forgets_device_plans_and_the_next_call_plans_again():
    f = lnp.jit(_softmax_plus)
    xh, yh, x, y = _pair()
    f(x, y, 2.0)
    f(x, y, 2.0)
    plans = _stats()["device_jit_plans"]
    f.clear()
    assert "not called yet" in f.explain()
    got = f(x, y, 2.0)                           # (a new capture, not a replay)
    assert _stats()["device_jit_plans"] == plans + 1
    np.testing.assert_allclose(np.asarray(got), _softmax_plus_np(xh, yh, 2.0), rtol=1e-12)
    np.testing.assert_allclose(np.asarray(f(x, y, 2.0)), _softmax_plus_np(xh, yh, 2.0),
                               rtol=1e-12)


def test_explain_tells_each_device_signature_and_why_one_is_not_planned():
    f = lnp.jit(_softmax_plus)
    xh, yh, x, y = _pair()
    f(x, y, 2.0)
    f(x, y, 2.0)
    f(lnp.asarray(xh.astype(np.float32), device="cuda"), y, 2.0)
    text = f.explain()
    assert "2 device signature(s)" in text
    assert "device plan 1: first call: argument 0 (x): device array float64[3, 4] on cuda:0" \
        in text and "argument 2 (s): float 2.0" in text
    assert "device plan 2: signature changed: argument 0 (x): device array float64[3, 4] " \
        "on cuda:0 -> device array float32[3, 4] on cuda:0" in text
    assert "launch(es) replayed per call" in text
    g = lnp.jit(lambda a: float(a.sum()))
    g(x)
    assert "not planned, runs as it is on every call: a read of a value" in g.explain()
