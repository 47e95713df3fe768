"""lazynp.jit: results equal eager lazynp and NumPy, plans reused and rebuilt exactly when
the signature changes, no stale buffers and no aliasing between calls."""
import numpy
import pytest

import lazynp as np
from lazynp.core.graph import TracingError


def _np(x):
    return numpy.asarray(x)


def heat_step(u, r):
    # traceable kernel of tests/programs/heat_equation.py: a 5-point stencil update
    u = u.copy()
    u[1:-1, 1:-1] = u[1:-1, 1:-1] + r * (u[2:, 1:-1] + u[:-2, 1:-1] + u[1:-1, 2:]
                                         + u[1:-1, :-2] - 4.0 * u[1:-1, 1:-1])
    return u


def softmax_mlp(X, W1, b1, W2, b2):
    # kernel of tests/programs/softmax_mlp_forward.py
    h = np.maximum(X @ W1 + b1, 0)
    logits = h @ W2 + b2
    shifted = logits - logits.max(axis=1, keepdims=True)
    e = np.exp(shifted)
    m = logits.max(axis=1, keepdims=True)
    lse = m[:, 0] + np.log(np.exp(logits - m).sum(axis=1))
    return e / e.sum(axis=1, keepdims=True), lse


def logistic_step(w, X, y, lr):
    # kernel of tests/programs/logistic_regression.py: one gradient-descent step
    p = 1.0 / (1.0 + np.exp(-(X @ w)))
    grad = X.T @ (p - y) / X.shape[0]
    return w - lr * grad


def life_step(board):
    # kernel of tests/programs/game_of_life.py on a padded board
    n = (board[:-2, :-2] + board[:-2, 1:-1] + board[:-2, 2:] + board[1:-1, :-2]
         + board[1:-1, 2:] + board[2:, :-2] + board[2:, 1:-1] + board[2:, 2:])
    inner = board[1:-1, 1:-1]
    alive = ((inner == 1) & ((n == 2) | (n == 3))) | ((inner == 0) & (n == 3))
    return alive.astype(board.dtype)


def jacobi_step(x, R, b, D):
    # kernel of tests/programs/jacobi.py
    return (b - R @ x) / D


def _check(f, *args, rtol=1e-12, atol=0.0):
    jf = np.jit(f)
    got = jf(*args)
    eager = f(*[np.asarray(a) if isinstance(a, numpy.ndarray) else a for a in args])
    ref = f.__globals__["np"] is np and None
    got_l = got if isinstance(got, tuple) else (got,)
    eager_l = eager if isinstance(eager, tuple) else (eager,)
    for g, e in zip(got_l, eager_l):
        assert _np(g).shape == _np(e).shape and _np(g).dtype == _np(e).dtype
        numpy.testing.assert_allclose(_np(g), _np(e), rtol=rtol, atol=atol)
    del ref
    return jf, got_l


def test_program_kernels_match_eager_and_numpy():
    rng = numpy.random.default_rng(0)
    u = rng.random((12, 10))
    jf, (got,) = _check(heat_step, u, 0.2)
    ref = u.copy()
    ref[1:-1, 1:-1] = ref[1:-1, 1:-1] + 0.2 * (ref[2:, 1:-1] + ref[:-2, 1:-1] + ref[1:-1, 2:]
                                              + ref[1:-1, :-2] - 4.0 * ref[1:-1, 1:-1])
    numpy.testing.assert_allclose(_np(got), ref, rtol=1e-12)
    # repeated application with fresh inputs each time
    v = u
    for _ in range(5):
        v2 = jf(v, 0.2)
        numpy.testing.assert_allclose(_np(v2), _np(heat_step(np.asarray(v), 0.2)), rtol=1e-12)
        v = _np(v2)
    X = rng.standard_normal((16, 5))
    W1, b1 = rng.standard_normal((5, 8)), rng.standard_normal(8)
    W2, b2 = rng.standard_normal((8, 3)), rng.standard_normal(3)
    _check(softmax_mlp, X, W1, b1, W2, b2, rtol=1e-10)
    w, y = rng.standard_normal(5), (rng.random(16) > 0.5).astype(float)
    _check(logistic_step, w, X, y, 0.1, rtol=1e-10)
    board = (rng.random((10, 9)) > 0.6).astype(numpy.int64)
    _check(life_step, board)
    R, b, D = rng.standard_normal((6, 6)), rng.standard_normal(6), rng.random(6) + 1
    _check(jacobi_step, rng.standard_normal(6), R, b, D, rtol=1e-10)


def test_repeated_calls_no_stale_buffers_no_aliasing():
    def f(x, y):
        a = np.exp(x) * y
        b = a @ y.T
        c = np.maximum(b, 0.0).sum(axis=1)
        return a, c, x.T, x
    jf = np.jit(f)
    rng = numpy.random.default_rng(1)
    results = []
    inputs = []
    for k in range(4):
        x, y = rng.standard_normal((5, 4)), rng.standard_normal((5, 4))
        inputs.append((x.copy(), y.copy()))
        results.append([_np(r).copy() for r in jf(x, y)] + [jf(x, y)])
    assert jf.num_plans == 1
    for (x, y), res in zip(inputs, results):
        exp = [numpy.exp(x) * y, None, x.T, x]
        exp[1] = numpy.maximum(exp[0] @ y.T, 0).sum(axis=1)
        for got, e in zip(res[:4], exp):
            numpy.testing.assert_allclose(got, e, rtol=1e-12)
        # arrays returned by a call keep their values after later calls
        for got, e in zip(res[4], exp):
            numpy.testing.assert_allclose(_np(got), e, rtol=1e-12)
    plan = jf.plan_for(*inputs[0])
    out = jf(*inputs[0])
    for o in out:
        for blk in plan.blocks:
            assert not numpy.shares_memory(_np(o), blk)
        assert not numpy.shares_memory(_np(o), inputs[0][0])


def test_retrace_exactly_when_signature_changes():
    calls = []

    def f(x, n):
        calls.append(1)
        return x * n
    jf = np.jit(f)
    a = numpy.ones(3)
    jf(a, 2)
    jf(numpy.zeros(3), 2)
    jf(a + 1, 2)
    assert len(calls) == 1
    jf(numpy.ones(4), 2)                      # shape
    assert len(calls) == 2
    jf(numpy.ones(4, numpy.float32), 2)       # dtype
    assert len(calls) == 3
    jf(numpy.ones(4, numpy.float32), 3)       # Python scalar value (a constant)
    assert len(calls) == 4
    jf(np.ones(4, dtype=np.float32), 3)       # lazynp array, same signature
    assert len(calls) == 4
    text = jf.explain()
    assert "argument 0 (x) shape (3,) -> (4,)" in text
    assert "dtype float64 -> float32" in text
    assert "constant 2 -> constant 3" in text
    assert jf.num_plans == 4


def test_static_argnums_and_pytrees():
    def f(params, x, act):
        h = x
        for w, b in params:
            h = h @ w + b
            h = np.tanh(h) if act == "tanh" else np.maximum(h, 0)
        return {"out": h, "n": h.sum()}
    rng = numpy.random.default_rng(2)
    params = [(rng.standard_normal((4, 4)), rng.standard_normal(4)) for _ in range(2)]
    x = rng.standard_normal((3, 4))
    jf = np.jit(f, static_argnums=2)
    for act in ("tanh", "relu", "tanh"):
        got = jf(params, x, act)
        ref = f([(np.asarray(w), np.asarray(b)) for w, b in params], np.asarray(x), act)
        numpy.testing.assert_allclose(_np(got["out"]), _np(ref["out"]), rtol=1e-12)
        numpy.testing.assert_allclose(float(got["n"]), float(ref["n"]), rtol=1e-12)
    assert jf.num_plans == 2
    assert "static value 'tanh' -> static value 'relu'" in jf.explain()


def test_control_flow_error_names_line_and_fix():
    def f(x):
        if x.sum() > 0:    # the offending line
            return x
        return -x
    jf = np.jit(f)
    with pytest.raises(TracingError) as ei:
        jf(numpy.ones(3))
    msg = str(ei.value)
    assert "if x.sum() > 0" in msg and "test_jit.py" in msg
    assert "np.where" in msg.replace("lazynp.where", "np.where") and "static" in msg


def test_memory_report_and_unplanned_ops_counted():
    def f(x):
        a = x * 2
        b = np.sort(a)           # no out=: allocated per call, counted
        return (b + 1) * 3
    jf = np.jit(f)
    x = numpy.random.default_rng(3).standard_normal(64)
    r = jf.memory_report(x)
    for k in ("naive_bytes", "planned_bytes", "num_buffers"):
        assert k in r
    assert r["unplanned_bytes"] >= 64 * 8
    numpy.testing.assert_allclose(_np(jf(x)), (numpy.sort(x * 2) + 1) * 3)


def test_mutation_inside_jit():
    def f(x):
        y = x * 1.0
        y[0] = 5.0
        y += 1
        z = y[1:]
        z *= 2
        return y
    x = numpy.arange(4.0)
    jf = np.jit(f)
    for k in range(3):
        got = jf(x + k)
        ref = (x + k) * 1.0
        ref[0] = 5.0
        ref += 1
        ref[1:] *= 2
        numpy.testing.assert_allclose(_np(got), ref)
    numpy.testing.assert_array_equal(x, numpy.arange(4.0))     # input untouched


def test_fuse_off_and_plan_off_agree():
    def f(x):
        for _ in range(5):
            x = np.sin(x) * 0.5 + x
        return x
    x = numpy.random.default_rng(4).standard_normal(50)
    a = _np(np.jit(f)(x))
    b = _np(np.jit(f, fuse=False)(x))
    c = _np(np.jit(f, fuse=False, plan_memory=False)(x))
    ref = x
    for _ in range(5):
        ref = numpy.sin(ref) * 0.5 + ref
    numpy.testing.assert_allclose(a, ref, rtol=1e-12)
    numpy.testing.assert_array_equal(b, c)
    numpy.testing.assert_allclose(b, ref, rtol=1e-15)


def test_jit_decorator_form():
    @np.jit(static_argnums=(1,))
    def f(x, k):
        return x ** k
    numpy.testing.assert_allclose(_np(f(numpy.arange(3.0), 2)), [0, 1, 4])


def test_fused_plans_warn_and_raise_like_numpy():
    """A fused kernel that raised a floating-point flag NumPy would warn about reruns the
    call on NumPy ops, which warn (or raise, under np.errstate) exactly as NumPy does."""
    import warnings
    x = numpy.array([1.0, 800.0, -1.0, 0.0])
    f = lambda x: np.sqrt(x) * np.exp(x) + 1.0 / x

    def run(fn):
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            out = numpy.asarray(fn())
        return out, sorted(str(m.message) for m in w if issubclass(m.category, RuntimeWarning))
    j = np.jit(f)
    assert j.plan_for(x).n_kernels >= 1
    want = run(lambda: numpy.sqrt(x) * numpy.exp(x) + 1.0 / x)
    for _ in range(2):
        got = run(lambda: j(x))
        numpy.testing.assert_allclose(got[0], want[0], rtol=1e-15)
        assert got[1] == want[1]
    # no flag: no warning, and the fused plan's result
    ok = numpy.array([1.0, 2.0, 3.0, 4.0])
    assert run(lambda: j(ok))[1] == []
    with np.errstate(divide="raise"), warnings.catch_warnings():
        warnings.simplefilter("ignore")          # (sqrt and exp still warn first)
        with pytest.raises(FloatingPointError):
            j(x)
    with np.errstate(all="ignore"):
        assert run(lambda: j(x))[1] == []


def test_constants_that_warn_are_computed_at_each_call():
    import warnings
    j = np.jit(lambda x: x + np.log(np.zeros(3)))
    for _ in range(3):
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            out = numpy.asarray(j(numpy.ones(3)))
        assert [str(m.message) for m in w] == ["divide by zero encountered in log"]
        numpy.testing.assert_array_equal(out, numpy.full(3, -numpy.inf))


def test_a_rerun_after_numpy_steps_warns_once():
    """arcsin on a large array runs on NumPy inside the fused plan and warns; a later kernel's
    flag reruns the call unfused: the first run's warnings are not given twice."""
    import warnings
    f = lambda m: (lambda x: m.arcsin(x) / (x - x))
    x = numpy.full((90, 90), 2.0)
    x[0, 0] = 0.5

    def rec(fn):
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            numpy.asarray(fn())
        return [str(m.message) for m in w]
    j = np.jit(f(np))
    want = rec(lambda: f(numpy)(x))
    assert rec(lambda: j(x)) == want == ["invalid value encountered in arcsin",
                                         "divide by zero encountered in divide"]


@pytest.mark.parametrize("fuse", [False, True])
def test_reductions_in_plans_equal_numpy_for_every_axis_form(fuse):
    """Plans run sum/prod/max/min through the ufuncs' own ``reduce`` methods, whose default
    axis (0) is not NumPy's functions' (None): every axis form, as an intermediate (a buffer
    planned once) and as an output (a fresh array), equals NumPy's on 2-D and 3-D arrays."""
    def f(x):
        outs = []
        for red in (np.sum, np.prod, np.max, np.min):
            for kw in ({}, {"axis": 0}, {"axis": -1, "keepdims": True}, {"axis": (0, 1)},
                       {"keepdims": True}):
                r = red(x, **kw)
                outs.append(r)               # an output: computed into a fresh array
                outs.append(red(x * 0.5, **kw) + 1.0)   # (an intermediate into a buffer)
        return outs

    def ref(x):
        outs = []
        for red in (numpy.sum, numpy.prod, numpy.max, numpy.min):
            for kw in ({}, {"axis": 0}, {"axis": -1, "keepdims": True}, {"axis": (0, 1)},
                       {"keepdims": True}):
                outs.append(red(x, **kw))
                outs.append(red(x * 0.5, **kw) + 1.0)
        return outs
    rng = numpy.random.default_rng(5)
    for shape in [(6, 5), (3, 4, 5)]:
        x = rng.uniform(0.5, 1.5, shape)
        got = np.jit(f, fuse=fuse)(x)
        for g, r in zip(got, ref(x)):
            g = numpy.asarray(g)
            assert g.shape == numpy.shape(r)
            numpy.testing.assert_allclose(g, r, rtol=1e-12)
        g2 = np.grad(lambda x: sum(np.sum(o) for o in f(x)))(np.array(x))
        g3 = np.grad(lambda x: sum(np.sum(o) for o in f(x)))(np.array(x))   # (replayed)
        g4 = np.grad(lambda x: sum(np.sum(o) for o in f(x)))(np.array(x))
        numpy.testing.assert_allclose(numpy.asarray(g4), numpy.asarray(g2), rtol=1e-12)
        numpy.testing.assert_allclose(numpy.asarray(g3), numpy.asarray(g2), rtol=1e-12)
