"""Gradient of an MLP loss (784-256-10, batch 256, tanh, softmax cross-entropy).

lazynp eager ``grad`` against HIPS ``autograd`` and ``jax`` (each skipped with a note when
not installed), in the same run, as ratios.  Targets: eager ``grad`` within 1.15x of the same
gradient written out by hand in NumPy; ``jit(grad)`` within 1.2x of ``jax.jit(jax.grad)``.

Eager ``grad`` called again on a forward graph of the same structure replays a compiled plan
(``lazynp/_grad_replay.py``); the "replay off" row records every backward pass.  A second
table (information only) compares smaller gradients: logistic regression and Rosenbrock.

A third table (issue 18) times whole programs of the kind autograd's examples are (an RNN
over a sequence, a GP marginal likelihood through a Cholesky, a fluid-style stencil
simulation, a mixture model's log-likelihood with logsumexp, black-box variational
inference, a ``scipy.optimize`` fit), eager ``lazynp.grad`` against ``autograd.grad`` in
the same run (medians; the first call of a fresh gradient function in its own columns).
Target: lazynp's speed at least autograd's in geometric mean, no row below 0.67x.

A fourth table (issue 35) times per-example gradients of the same MLP (one example's loss,
batch 256): ``lazynp.vmap(lazynp.grad(loss), in_axes=(None, 0, 0))`` against the Python
loop over examples (``stack`` of one ``grad`` per example) and against the per-example
gradient written out by hand in NumPy (batched, no autodiff).  Targets: at least 10x the
loop's speed, within 2x of the hand-written NumPy.  (Information: vmap with its stack of
outer products, the 411 MB weight gradient, written on one thread instead of two.)  ``--only per-example`` runs this table
alone.
"""
from __future__ import annotations

import sys

import numpy

from _common import Summary, fmt_ratio, fmt_time, header, interleaved_medians, make_parser, \
    parse_args, print_table

import lazynp


def make_loss(np):
    def loss(params, X, Y):
        W1, b1, W2, b2 = params
        h = np.tanh(X @ W1 + b1)
        logits = h @ W2 + b2
        m = np.max(logits, axis=1, keepdims=True)
        lse = np.log(np.sum(np.exp(logits - m), axis=1, keepdims=True)) + m
        return -np.sum(Y * (logits - lse)) / X.shape[0]
    return loss


def numpy_gradient(params, X, Y):
    """The same gradient written out by hand in NumPy (no autodiff at all)."""
    W1, b1, W2, b2 = params
    h = numpy.tanh(X @ W1 + b1)
    logits = h @ W2 + b2
    e = numpy.exp(logits - logits.max(axis=1, keepdims=True))
    p = e / e.sum(axis=1, keepdims=True)
    g = (p * Y.sum(axis=1, keepdims=True) - Y) / X.shape[0]
    dz = (g @ W2.T) * (1.0 - h * h)
    return [X.T @ dz, dz.sum(axis=0), h.T @ g, g.sum(axis=0)]


def logreg_loss(np):
    def loss(w, X, y):
        p = 1 / (1 + np.exp(-(X @ w)))
        return -np.mean(y * np.log(p + 1e-9) + (1 - y) * np.log(1 - p + 1e-9)) + \
            0.01 * np.sum(w * w)
    return loss


def rosenbrock(np):
    def f(x):
        return np.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2)
    return f


def small_gradients(repeat: int) -> None:
    """lazynp eager grad (replay on and off) vs autograd on gradients where per-op
    overhead matters; prints one table, checks that the gradients agree."""
    try:
        import autograd
        import autograd.numpy as anp
    except ImportError:
        print("note: autograd is not installed: small-gradient table skipped")
        return
    rng = numpy.random.default_rng(0)
    cases = []
    for n, d in [(400, 8), (10000, 50)]:
        X = rng.standard_normal((n, d))
        y = (rng.random(n) > 0.5).astype(float)
        w = rng.standard_normal(d)
        cases.append((f"logistic regression {n}x{d}", logreg_loss, (w, X, y)))
    for n in (100, 100000):
        cases.append((f"Rosenbrock, {n} variables", rosenbrock, (rng.standard_normal(n),)))
    rows = []
    for name, make, args in cases:
        lz = lazynp.grad(make(lazynp))
        ag = autograd.grad(make(anp))
        lz_args = [lazynp.asarray(a) for a in args]

        def run_lz():
            return numpy.asarray(lz(*lz_args))

        def run_off():
            lazynp._base.config.GRAD_REPLAY = False
            try:
                return numpy.asarray(lazynp.grad(make(lazynp))(*lz_args))
            finally:
                lazynp._base.config.GRAD_REPLAY = True
        numpy.testing.assert_allclose(run_lz(), ag(*args), rtol=1e-9, atol=1e-12)
        numpy.testing.assert_allclose(run_off(), ag(*args), rtol=1e-9, atol=1e-12)
        t = interleaved_medians({"lz": run_lz, "off": run_off, "ag": lambda: ag(*args)},
                                repeat=repeat, warmup=3)
        rows.append((name, fmt_time(t["lz"]), fmt_time(t["off"]), fmt_time(t["ag"]),
                     fmt_ratio(t["ag"], t["lz"]), fmt_ratio(t["ag"], t["off"])))
    header("Smaller gradients (information): time for one gradient")
    print_table(rows, ("function", "lazynp", "replay off", "autograd",
                       "autograd / lazynp", "autograd / replay off"))


# --- whole programs (issue 18): the kind of code autograd's examples are ------------------------

def _logsumexp(np, a, axis):
    m = np.max(a, axis=axis, keepdims=True)
    return np.squeeze(m, axis) + np.log(np.sum(np.exp(a - m), axis=axis))


def rnn_program(np, rng):
    """A tanh RNN over a 20-step sequence (batch 8, 16 -> 32 -> 4), squared error per step."""
    T, B, I, H, O = 20, 8, 16, 32, 4
    xs = rng.standard_normal((T, B, I))
    ys = rng.standard_normal((T, B, O))
    params = [rng.standard_normal((I, H)) * 0.2, rng.standard_normal((H, H)) * 0.2,
              numpy.zeros(H), rng.standard_normal((H, O)) * 0.2, numpy.zeros(O)]

    def loss(params, xs, ys):
        Wx, Wh, b, Wo, bo = params
        h = np.zeros((xs.shape[1], Wh.shape[0]))
        total = 0.0
        for t in range(xs.shape[0]):
            h = np.tanh(xs[t] @ Wx + h @ Wh + b)
            out = h @ Wo + bo
            total = total + np.sum((out - ys[t]) ** 2)
        return total / xs.shape[0]
    return loss, (params, xs, ys)


def gp_program(np, rng):
    """A GP's negative log marginal likelihood (RBF kernel, 60 points) through a Cholesky."""
    N = 60
    x = numpy.sort(rng.uniform(-3, 3, N))
    y = numpy.sin(x) + 0.1 * rng.standard_normal(N)
    theta = numpy.array([0.1, -0.2, -2.0])       # log lengthscale, log variance, log noise

    def loss(theta, x, y):
        ls, var, noise = np.exp(theta[0]), np.exp(theta[1]), np.exp(theta[2])
        d = (x[:, None] - x[None, :]) / ls
        K = var * np.exp(-0.5 * d * d) + (noise + 1e-6) * np.eye(x.shape[0])
        L = np.linalg.cholesky(K)
        alpha = np.linalg.solve(K, y)
        return 0.5 * np.dot(y, alpha) + np.sum(np.log(np.diag(L))) + \
            0.5 * x.shape[0] * np.log(2 * numpy.pi)
    return loss, (theta, x, y)


def fluid_program(np, rng):
    """A fluid-style stencil simulation (32x32 periodic grid, 8 steps): advection by the
    velocity field, diffusion, and a few Jacobi sweeps of a pressure-like projection, all
    with np.roll; the loss compares the final density with a target."""
    n, steps = 32, 8
    d0 = rng.random((n, n))
    vx, vy = rng.standard_normal((n, n)) * 0.3, rng.standard_normal((n, n)) * 0.3
    target = rng.random((n, n))

    def lap(f):
        return np.roll(f, 1, 0) + np.roll(f, -1, 0) + np.roll(f, 1, 1) + np.roll(f, -1, 1) \
            - 4.0 * f

    def loss(d, vx, vy, target):
        for _ in range(steps):
            div = 0.5 * (np.roll(vx, -1, 1) - np.roll(vx, 1, 1) + np.roll(vy, -1, 0)
                         - np.roll(vy, 1, 0))
            p = np.zeros_like(div)
            for _ in range(4):
                p = 0.25 * (np.roll(p, 1, 0) + np.roll(p, -1, 0) + np.roll(p, 1, 1)
                            + np.roll(p, -1, 1) - div)
            vx = vx - 0.5 * (np.roll(p, -1, 1) - np.roll(p, 1, 1))
            vy = vy - 0.5 * (np.roll(p, -1, 0) - np.roll(p, 1, 0))
            gx = 0.5 * (np.roll(d, -1, 1) - np.roll(d, 1, 1))
            gy = 0.5 * (np.roll(d, -1, 0) - np.roll(d, 1, 0))
            d = d - 0.1 * (vx * gx + vy * gy) + 0.05 * lap(d)
        return np.sum((d - target) ** 2)
    return loss, (d0, vx, vy, target)


def mixture_program(np, rng):
    """A Gaussian mixture's log-likelihood (5 diagonal components, 300 points in 2-D),
    through logsumexp."""
    N, K, D = 300, 5, 2
    X = rng.standard_normal((N, D)) * 2
    params = [rng.standard_normal((K, D)), rng.standard_normal((K, D)) * 0.1,
              numpy.zeros(K)]

    def loss(params, X):
        mu, log_s, logits = params
        log_w = logits - _logsumexp(np, logits, 0)
        z = (X[:, None, :] - mu[None, :, :]) / np.exp(log_s)[None, :, :]
        comp = -0.5 * np.sum(z * z, axis=2) - np.sum(log_s, axis=1) - \
            0.5 * D * np.log(2 * numpy.pi)
        return -np.sum(_logsumexp(np, comp + log_w, 1))
    return loss, (params, X)


def bbvi_program(np, rng):
    """Black-box variational inference: a reparameterised ELBO (diagonal Gaussian, 32
    samples) for Bayesian logistic regression (200 points, 10 features)."""
    N, D, S = 200, 10, 32
    X = rng.standard_normal((N, D))
    y = (rng.random(N) > 0.5).astype(float)
    eps = rng.standard_normal((S, D))
    params = [rng.standard_normal(D) * 0.1, numpy.full(D, -1.0)]

    def loss(params, X, y, eps):
        mean, log_std = params
        z = mean + np.exp(log_std) * eps                      # S x D
        logits = z @ X.T                                      # S x N
        loglik = np.sum(y * logits - np.logaddexp(0.0, logits), axis=1)
        logprior = -0.5 * np.sum(z * z, axis=1)
        return -(np.mean(loglik + logprior) + np.sum(log_std))
    return loss, (params, X, y, eps)


PROGRAMS = [("RNN, 20 steps", rnn_program), ("GP marginal likelihood", gp_program),
            ("fluid stencil, 8 steps", fluid_program), ("mixture model", mixture_program),
            ("BBVI (ELBO)", bbvi_program)]


def _scipy_fit_row(repeat):
    """``scipy.optimize.minimize(f, x0, jac=grad(f), method='BFGS')`` on a regularised
    logistic regression (30 iterations): lazynp's grad vs autograd's.  (BFGS: SciPy's own
    time per iteration is small; L-BFGS-B's compiled ``setulb`` takes milliseconds a call
    here and would hide the gradients.)"""
    import autograd
    import autograd.numpy as anp
    from scipy.optimize import minimize
    rng = numpy.random.default_rng(1)
    X = rng.standard_normal((300, 12))
    y = (X @ rng.standard_normal(12) + 0.5 * rng.standard_normal(300) > 0).astype(float)
    w0 = numpy.zeros(12)

    def make(np):
        def f(w):
            z = X @ w
            return np.sum(np.logaddexp(0.0, z) - y * z) / X.shape[0] + 0.01 * np.sum(w * w)
        return f

    def fit(f, gradf):
        # (a fresh gradient function per fit, as minimize(f, x0, jac=grad(f)) is written)
        return minimize(f, w0, jac=gradf(f), method="BFGS",
                        options={"maxiter": 30, "gtol": 0.0}).x
    f_lz, f_ag = make(lazynp), make(anp)

    def run_lz():
        return fit(f_lz, lazynp.grad)

    def run_ag():
        return fit(f_ag, autograd.grad)
    return "scipy.optimize fit (BFGS)", run_lz, run_ag, run_lz, run_ag


def _first_call(make_run, n=3):
    """Median time of the first call of a freshly made gradient function."""
    import statistics
    import time
    ts = []
    for _ in range(n):
        fn = make_run()
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def whole_programs(repeat: int, summary) -> None:
    """Eager lazynp.grad vs autograd.grad on whole programs, in the same run."""
    try:
        import autograd
        import autograd.numpy as anp
    except ImportError:
        print("note: autograd is not installed: whole-program table skipped")
        return
    import math
    rows, ratios = [], []
    cases = []
    for name, program in PROGRAMS:
        loss_lz, args = program(lazynp, numpy.random.default_rng(0))
        loss_ag, _ = program(anp, numpy.random.default_rng(0))
        lz_args = _to_lazy(args)

        def make_lz(program=program, lz_args=lz_args, fresh=True):
            # (a fresh function each time for the first-call column: replay plans are
            # shared by the grad functions of one Python function)
            g = lazynp.grad(program(lazynp, numpy.random.default_rng(0))[0] if fresh
                            else loss_lz)
            return lambda: _as_numpy(g(*lz_args))

        def make_ag(loss_ag=loss_ag, args=args):
            g = autograd.grad(loss_ag)
            return lambda: g(*args)
        cases.append((name, make_lz(fresh=False), make_ag(), make_lz, make_ag))
    name, run_lz, run_ag, _a, _b = _scipy_fit_row(repeat)
    cases.append((name, run_lz, run_ag, lambda: run_lz, lambda: run_ag))
    for name, run_lz, run_ag, make_lz, make_ag in cases:
        first_lz = _first_call(make_lz)
        first_ag = _first_call(make_ag)
        for a, b in zip(_leaves(run_lz()), _leaves(run_ag())):
            numpy.testing.assert_allclose(a, b, rtol=1e-8, atol=1e-10)
        t = interleaved_medians({"lz": run_lz, "ag": run_ag}, repeat=repeat, warmup=3)
        r = t["ag"] / t["lz"]
        ratios.append(r)
        rows.append((name, fmt_time(first_lz), fmt_time(first_ag), fmt_time(t["lz"]),
                     fmt_time(t["ag"]), f"{r:.2f}x"))
    header("Whole programs: eager grad, lazynp vs autograd (same run; first call apart)")
    print_table(rows, ("program", "lazynp 1st", "autograd 1st", "lazynp", "autograd",
                       "lazynp speed / autograd's"))
    geo = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
    summary.add("whole programs: eager grad speed vs autograd, geomean", ">= 1.0x",
                f"{geo:.2f}x", geo >= 1.0)
    summary.add("whole programs: slowest row vs autograd", ">= 0.67x", f"{min(ratios):.2f}x",
                min(ratios) >= 0.67)


def _to_lazy(obj):
    if isinstance(obj, numpy.ndarray):
        return lazynp.asarray(obj)
    if isinstance(obj, (list, tuple)):
        return type(obj)(_to_lazy(x) for x in obj)
    return obj


def _leaves(obj):
    if isinstance(obj, (list, tuple)):
        return [y for x in obj for y in _leaves(x)]
    return [numpy.asarray(obj)]


def _as_numpy(obj):
    if isinstance(obj, (list, tuple)):
        return type(obj)(_as_numpy(x) for x in obj)
    return numpy.asarray(obj)


# --- per-example gradients (issue 35): vmap(grad) ----------------------------------------------

def example_loss(np):
    """The MLP's softmax cross-entropy for one example (``x``: (D,), ``y``: one-hot (C,))."""
    def loss(params, x, y):
        W1, b1, W2, b2 = params
        h = np.tanh(x @ W1 + b1)
        logits = h @ W2 + b2
        m = np.max(logits, axis=-1, keepdims=True)
        lse = np.log(np.sum(np.exp(logits - m), axis=-1, keepdims=True)) + m
        return -np.sum(y * (logits - lse))
    return loss


def numpy_per_example_gradient(params, X, Y):
    """Every example's gradient of :func:`example_loss`, written out by hand in NumPy
    (batched: one broadcast outer product per weight matrix)."""
    W1, b1, W2, b2 = params
    h = numpy.tanh(X @ W1 + b1)
    logits = h @ W2 + b2
    e = numpy.exp(logits - logits.max(axis=1, keepdims=True))
    p = e / e.sum(axis=1, keepdims=True)
    g = p * Y.sum(axis=1, keepdims=True) - Y
    dz = (g @ W2.T) * (1.0 - h * h)
    return [X[:, :, None] * dz[:, None, :], dz, h[:, :, None] * g[:, None, :], g]


def per_example_gradients(repeat: int, summary) -> None:
    """vmap(grad) vs the Python loop of grads vs hand-written NumPy: one table, the
    results checked equal first."""
    rng = numpy.random.RandomState(0)
    B, D, H, C = 256, 784, 256, 10
    X = rng.standard_normal((B, D))
    Y = numpy.eye(C)[rng.randint(0, C, B)]
    params = [rng.standard_normal((D, H)) * 0.05, rng.standard_normal(H) * 0.05,
              rng.standard_normal((H, C)) * 0.05, rng.standard_normal(C) * 0.05]
    lz_params = [lazynp.asarray(p) for p in params]
    lz_X, lz_Y = lazynp.asarray(X), lazynp.asarray(Y)
    per_example = lazynp.vmap(lazynp.grad(example_loss(lazynp)), in_axes=(None, 0, 0))
    one = lazynp.grad(example_loss(lazynp))

    def run_vmap():
        g = per_example(lz_params, lz_X, lz_Y)
        lazynp.evaluate(*g)
        return [numpy.asarray(x) for x in g]

    def run_vmap_one_thread():
        # (the stack of outer products on one thread: lazynp/_base/split.py's einsum_into off)
        split = lazynp._base.split
        was, split.enabled = split.enabled, False
        try:
            return run_vmap()
        finally:
            split.enabled = was

    def run_loop():
        gs = [one(lz_params, lz_X[i], lz_Y[i]) for i in range(B)]
        out = [lazynp.stack([g[k] for g in gs]) for k in range(4)]
        lazynp.evaluate(*out)
        return [numpy.asarray(x) for x in out]

    def run_numpy():
        return numpy_per_example_gradient(params, X, Y)

    lazynp.reset_stats()
    got = run_vmap()
    looped = lazynp.stats()["vmap_op_loops"] + lazynp.stats()["vmap_function_loops"]
    for a, b in zip(got, run_loop()):          # the loop's values bit for bit
        numpy.testing.assert_array_equal(a, b)
        numpy.testing.assert_array_equal(numpy.signbit(a), numpy.signbit(b))
    for a, b in zip(got, run_numpy()):
        numpy.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)
    del got
    fns = {"lazynp vmap(grad)": run_vmap,
           "lazynp vmap(grad), outer products on one thread": run_vmap_one_thread,
           "Python loop of lazynp grad": run_loop,
           "numpy, hand-written per-example gradient": run_numpy}
    times = interleaved_medians(fns, repeat=repeat, warmup=1)
    header("Per-example gradients, MLP 784-256-10, batch 256, float64 (issue 35)")
    base = times["lazynp vmap(grad)"]
    print_table([(k, fmt_time(v), fmt_ratio(v, base)) for k, v in times.items()],
                ("implementation", "median", "time / vmap(grad)"))
    summary.add("vmap(grad(MLP)) equals the loop, no op looped", "0 per-example loops",
                str(looped), looped == 0, kind="check")
    r = times["Python loop of lazynp grad"] / base
    summary.add("vmap(grad(MLP)) vs the loop over examples", ">= 10x faster", f"{r:.1f}x",
                r >= 10)
    r = base / times["numpy, hand-written per-example gradient"]
    summary.add("vmap(grad(MLP)) vs hand-written NumPy per-example", "<= 2x its time",
                f"{r:.2f}x", r <= 2)


def main() -> int:
    parser = make_parser(__doc__)
    parser.add_argument("--only", choices=("per-example",),
                        help="run one table alone (per-example: vmap(grad))")
    args = parse_args(__doc__, parser=parser)
    if args.only == "per-example":
        summary = Summary()
        per_example_gradients(args.repeat(9, 3), summary)
        return summary.print(strict=args.strict)
    rng = numpy.random.RandomState(0)
    B, D, H, C = 256, 784, 256, 10
    X = rng.standard_normal((B, D))
    Y = numpy.eye(C)[rng.randint(0, C, B)]
    params = [rng.standard_normal((D, H)) * 0.05, numpy.zeros(H),
              rng.standard_normal((H, C)) * 0.05, numpy.zeros(C)]
    repeat = args.repeat(30, 5)

    lz_params = [lazynp.asarray(p) for p in params]
    lz_X, lz_Y = lazynp.asarray(X), lazynp.asarray(Y)
    lz_grad = lazynp.grad(make_loss(lazynp))

    def run_lazynp():
        g = lz_grad(lz_params, lz_X, lz_Y)
        lazynp.evaluate(*g)
        return [numpy.asarray(x) for x in g]

    lz_jit = lazynp.jit(lazynp.grad(make_loss(lazynp)))

    def run_lazynp_jit():
        g = lz_jit(params, X, Y)
        return [numpy.asarray(x) for x in g]

    def run_lazynp_no_replay():
        # every call records its backward pass and schedules it node by node
        lazynp._base.config.GRAD_REPLAY = False
        try:
            return run_lazynp()
        finally:
            lazynp._base.config.GRAD_REPLAY = True

    fns = {"lazynp": run_lazynp, "lazynp (jit)": run_lazynp_jit,
           "lazynp, replay off": run_lazynp_no_replay}
    # references that bound what any implementation can reach on this machine
    fns["numpy, hand-written gradient"] = lambda: numpy_gradient(params, X, Y)
    dz = numpy.ones((B, H))
    fns["numpy, the 2 large matmuls only"] = lambda: (X @ params[0], X.T @ dz)
    ref = run_lazynp()
    for a, b in zip(ref, numpy_gradient(params, X, Y)):
        numpy.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)
    for a, b in zip(ref, run_lazynp_no_replay()):
        numpy.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)
    for a, b in zip(ref, run_lazynp_jit()):
        numpy.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)
    notes = []
    try:
        import autograd
        import autograd.numpy as anp
        ag_grad = autograd.grad(make_loss(anp))

        def run_autograd():
            return ag_grad(params, X, Y)
        for a, b in zip(run_autograd(), ref):
            numpy.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)
        fns["autograd"] = run_autograd
    except ImportError:
        notes.append("autograd is not installed: skipped (pip install autograd)")
    try:
        import jax
        import jax.numpy as jnp
        jax.config.update("jax_enable_x64", True)
        jp = [jnp.asarray(p) for p in params]
        jX, jY = jnp.asarray(X), jnp.asarray(Y)
        j_grad = jax.grad(make_loss(jnp))           # eager (op by op), like the others
        j_jit = jax.jit(j_grad)

        def run_jax():
            return [numpy.asarray(x) for x in j_grad(jp, jX, jY)]

        def run_jax_jit():
            return [numpy.asarray(x) for x in j_jit(jp, jX, jY)]
        fns["jax (eager)"] = run_jax
        fns["jax (jit)"] = run_jax_jit
    except ImportError:
        notes.append("jax is not installed: skipped")

    # steady state: lazynp's background kernel compiles finish before anything is timed
    # (a compile running during the measurement takes one of the two cores)
    from lazynp.kernels import cpu
    for _ in range(2):
        run_lazynp()
        run_lazynp_jit()
    cpu.wait_compiles()
    times = interleaved_medians(fns, repeat=repeat, warmup=2)
    header("MLP 784-256-10, batch 256, float64: time for one gradient")
    rows = [(k, fmt_time(v), fmt_ratio(v, times["lazynp"])) for k, v in times.items()]
    print_table(rows, ("implementation", "median", "time / lazynp"))
    for n in notes:
        print("note:", n)
    summary = Summary()
    # (issue 15: the earlier ">= 2x autograd" target was, as measured, the time of the same
    # gradient written out by hand in NumPy; the target is now that limit)
    r = times["lazynp"] / times["numpy, hand-written gradient"]
    summary.add("grad(MLP) vs hand-written NumPy gradient", "<= 1.15x its time", f"{r:.2f}x",
                r <= 1.15)
    if "autograd" in times:
        r = times["autograd"] / times["lazynp"]
        summary.add("grad(MLP) vs autograd", "info (x faster)", f"{r:.2f}x", True,
                    kind="info")
    if "jax (jit)" in times:
        r = times["lazynp (jit)"] / times["jax (jit)"]
        summary.add("jit(grad(MLP)) vs jax.jit(jax.grad)", "<= 1.2x jax's time", f"{r:.2f}x",
                    r <= 1.2)
    else:
        summary.add("jit(grad(MLP)) vs jax.jit(jax.grad)", "<= 1.2x jax's time",
                    "skipped (jax not installed)", True, kind="info")
    floor = times["numpy, the 2 large matmuls only"]
    summary.add("BLAS floor (2 matmuls) / lazynp time", "info",
                f"{floor / times['lazynp']:.2f}", True, kind="info")
    if "jax (eager)" in times:
        r = times["jax (eager)"] / times["lazynp"]
        summary.add("grad(MLP) vs jax eager", "info", f"{r:.2f}x", True, kind="info")
    small_gradients(args.repeat(100, 10))
    whole_programs(args.repeat(30, 5), summary)
    per_example_gradients(args.repeat(9, 3), summary)
    return summary.print(strict=args.strict)


if __name__ == "__main__":
    sys.exit(main())
