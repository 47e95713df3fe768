"""Gradient of an MLP loss (784-256-10, batch 256, tanh, softmax cross-entropy).

lazynp eager ``grad`` against HIPS ``autograd`` and ``jax`` (each skipped with a note when
not installed), in the same run, as ratios.  Targets: eager ``grad`` within 1.15x of the same
gradient written out by hand in NumPy; ``jit(grad)`` within 1.2x of ``jax.jit(jax.grad)``.

Eager ``grad`` called again on a forward graph of the same structure replays a compiled plan
(``lazynp/_grad_replay.py``); the "replay off" row records every backward pass.  A second
table (information only) compares smaller gradients: logistic regression and Rosenbrock.
"""
from __future__ import annotations

import sys

import numpy

from _common import Summary, fmt_ratio, fmt_time, header, interleaved_medians, parse_args, \
    print_table

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
            lazynp._config.GRAD_REPLAY = False
            try:
                return numpy.asarray(lazynp.grad(make(lazynp))(*lz_args))
            finally:
                lazynp._config.GRAD_REPLAY = True
        numpy.testing.assert_allclose(run_lz(), ag(*args), rtol=1e-9, atol=1e-12)
        numpy.testing.assert_allclose(run_off(), ag(*args), rtol=1e-9, atol=1e-12)
        t = interleaved_medians({"lz": run_lz, "off": run_off, "ag": lambda: ag(*args)},
                                repeat=repeat, warmup=3)
        rows.append((name, fmt_time(t["lz"]), fmt_time(t["off"]), fmt_time(t["ag"]),
                     fmt_ratio(t["ag"], t["lz"]), fmt_ratio(t["ag"], t["off"])))
    header("Smaller gradients (information): time for one gradient")
    print_table(rows, ("function", "lazynp", "replay off", "autograd",
                       "autograd / lazynp", "autograd / replay off"))


def main() -> int:
    args = parse_args(__doc__)
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
        lazynp._config.GRAD_REPLAY = False
        try:
            return run_lazynp()
        finally:
            lazynp._config.GRAD_REPLAY = True

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
    return summary.print(strict=args.strict)


if __name__ == "__main__":
    sys.exit(main())
