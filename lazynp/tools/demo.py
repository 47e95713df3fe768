"""``python -m lazynp demo``: run a few ordinary NumPy programs under lazynp and under NumPy.

Each demo program is written once, as ``program(np) -> dict``, and run twice: with the real
``numpy`` module and with ``lazynp``.  For the lazynp run we print what the engine did
(operations recorded, flushes, graph nodes executed, in-place writes, NumPy fallbacks), check
every result against NumPy, and compare the run times.

The list :data:`PROGRAMS` drives everything: to add a demo, write a function and append a
:class:`DemoProgram` entry.
"""
from __future__ import annotations

import dataclasses
import statistics
import sys
import threading
import time
from typing import Callable

import numpy

import lazynp

#: Results are compared like ``tests/programs``: exactly for integer / bool data, to these
#: tolerances for floating / complex data.
RTOL = 1e-7
ATOL = 1e-9


# --- the demo programs ---------------------------------------------------------------------
# Each builds its own deterministic inputs with the module it is given, so that the NumPy run
# and the lazynp run see identical data.

def heat_equation(np, n: int = 64, steps: int = 150):
    """2-D explicit heat equation: a 5-point stencil updated in place through slices."""
    x = np.linspace(0.0, 1.0, n)
    X, Y = np.meshgrid(x, x, indexing="ij")
    u = np.exp(-((X - 0.5) ** 2 + (Y - 0.5) ** 2) / 0.02)
    u[0, :] = 1.0                       # hot left edge, cold elsewhere
    u[-1, :] = 0.0
    u[:, 0] = 0.0
    u[:, -1] = 0.0
    r = 0.2
    for _ in range(steps):
        u[1:-1, 1:-1] += r * (u[2:, 1:-1] + u[:-2, 1:-1] + u[1:-1, 2:] + u[1:-1, :-2]
                              - 4.0 * u[1:-1, 1:-1])
    return {"u": u, "total_heat": u[1:-1, 1:-1].sum(), "peak": u[1:-1, 1:-1].max()}


def heat_equation_512(np):
    """The same stencil on a 512x512 grid (arrays of 2 MB: where fusion pays)."""
    return heat_equation(np, n=512, steps=40)


def kmeans(np):
    """K-means (Lloyd) on Gaussian blobs: broadcasting, argmin, one-hot matmul for centroids."""
    rng = np.random.default_rng(7)
    k, per = 4, 150
    centres = np.array([[0.0, 0.0], [6.0, 6.0], [-5.0, 7.0], [7.0, -4.0]])
    X = np.concatenate([c + 1.5 * rng.standard_normal((per, 2)) for c in centres])
    C = X[:: (k * per) // k][:k].copy()         # every 150th point as the initial centroids
    for _ in range(10):
        d2 = ((X[:, None, :] - C[None, :, :]) ** 2).sum(axis=-1)
        labels = np.argmin(d2, axis=1)
        onehot = (labels[:, None] == np.arange(k)[None, :]).astype(np.float64)
        counts = onehot.sum(axis=0)
        C = (onehot.T @ X) / np.maximum(counts, 1.0)[:, None]
    inertia = ((X - C[labels]) ** 2).sum()
    return {"centroids": C, "labels": labels, "counts": counts, "inertia": inertia}


def logistic_regression(np):
    """Logistic regression trained by batch gradient descent (matvecs, exp, log)."""
    rng = np.random.default_rng(3)
    n, d = 400, 8
    X = rng.standard_normal((n, d))
    w_true = np.linspace(-2.0, 2.0, d)
    y = (X @ w_true + 0.5 * rng.standard_normal(n) > 0).astype(np.float64)
    w = np.zeros(d)
    b = 0.0
    lr = 0.5
    for _ in range(150):
        p = 1.0 / (1.0 + np.exp(-(X @ w + b)))
        g = p - y
        w = w - lr * (X.T @ g) / n
        b = b - lr * g.mean()
    p = 1.0 / (1.0 + np.exp(-(X @ w + b)))
    eps = 1e-12
    loss = -(y * np.log(p + eps) + (1 - y) * np.log(1 - p + eps)).mean()
    accuracy = ((p > 0.5) == (y > 0.5)).mean()
    return {"w": w, "b": b, "loss": loss, "accuracy": accuracy}


def monte_carlo(np):
    """Monte-Carlo with ``np.random.default_rng``: pi, and a European call option price."""
    rng = np.random.default_rng(2024)
    n = 200_000
    xy = rng.random((n, 2))
    pi = 4.0 * ((xy ** 2).sum(axis=1) <= 1.0).mean()
    s0, strike, rate, sigma, t = 100.0, 105.0, 0.02, 0.25, 1.0
    z = rng.standard_normal(n)
    st = s0 * np.exp((rate - 0.5 * sigma ** 2) * t + sigma * np.sqrt(t) * z)
    payoff = np.maximum(st - strike, 0.0)
    price = np.exp(-rate * t) * payoff.mean()
    stderr = np.exp(-rate * t) * payoff.std() / np.sqrt(n)
    return {"pi": pi, "call_price": price, "call_stderr": stderr}


@dataclasses.dataclass(frozen=True)
class DemoProgram:
    name: str
    fn: Callable
    description: str


#: The demo programs, in the order they run.  Append entries to extend the demo.
PROGRAMS: list[DemoProgram] = [
    DemoProgram("heat_equation", heat_equation, "64x64 stencil, 150 in-place slice updates"),
    DemoProgram("heat_equation_512", heat_equation_512,
                "the same stencil on a 512x512 grid, 40 updates"),
    DemoProgram("kmeans", kmeans, "600 points, 4 clusters, 10 Lloyd iterations"),
    DemoProgram("logistic_regression", logistic_regression,
                "400x8 data, 150 gradient-descent steps"),
    DemoProgram("monte_carlo", monte_carlo, "200k samples: pi and an option price"),
]


# --- running and checking ------------------------------------------------------------------

def _force(result: dict) -> dict:
    """Every value of a program's result as a NumPy array (forces lazy arrays)."""
    return {k: numpy.asarray(v) for k, v in result.items()}


def compare(ref: dict, got: dict) -> tuple[bool, float, list[str]]:
    """(all equal?, max abs difference over float results, problems) for two forced results."""
    problems = []
    max_diff = 0.0
    if sorted(ref) != sorted(got):
        return False, float("nan"), [f"keys differ: {sorted(ref)} vs {sorted(got)}"]
    for key, r in ref.items():
        g = got[key]
        if g.shape != r.shape:
            problems.append(f"{key}: shape {g.shape} != {r.shape}")
            continue
        if g.dtype != r.dtype:
            problems.append(f"{key}: dtype {g.dtype} != {r.dtype}")
        if r.dtype.kind in "fc":
            with numpy.errstate(invalid="ignore"):
                diff = numpy.abs(g.astype(r.dtype) - r)
            if diff.size:
                finite = numpy.isfinite(diff)
                if finite.any():
                    max_diff = max(max_diff, float(diff[finite].max()))
            if not numpy.allclose(g, r, rtol=RTOL, atol=ATOL, equal_nan=True):
                problems.append(f"{key}: values differ (max abs diff "
                                f"{float(numpy.nanmax(diff)) if diff.size else 0.0:.3g})")
        elif not numpy.array_equal(g, r):
            problems.append(f"{key}: values differ")
            max_diff = float("inf")
    return not problems, max_diff, problems


def wait_compiles(timeout: float) -> bool:
    """Wait at most ``timeout`` s for lazynp's background kernel compiles; True if all done."""
    try:
        from lazynp.kernels import cpu
        waiter = cpu.wait_compiles
    except (ImportError, AttributeError):
        return True
    t = threading.Thread(target=waiter, name="lazynp-demo-wait", daemon=True)
    t.start()
    t.join(max(timeout, 0.0))
    return not t.is_alive()


def _median_time(fn: Callable[[], object], repeat: int) -> tuple[float, object]:
    """(median seconds of ``repeat`` calls of ``fn``, the last call's return value)."""
    times = []
    out = None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


@dataclasses.dataclass
class DemoResult:
    program: DemoProgram
    stats: dict
    ok: bool
    max_diff: float
    problems: list
    t_numpy: float = float("nan")
    t_lazynp: float = float("nan")
    error: str | None = None


def _lazy_run(prog: DemoProgram):
    """One forced lazynp run from zeroed counters: (result, stats) or (exception, stats)."""
    lazynp.reset_stats()
    try:
        got = _force(prog.fn(lazynp))
    except Exception as exc:
        return exc, dict(lazynp.stats())
    return got, dict(lazynp.stats())


def run_program(prog: DemoProgram, repeat: int = 5, timing: bool = True,
                compile_wait: float = 5.0) -> DemoResult:
    """Run one demo program with NumPy and lazynp: counters, result check, timings.

    The first lazynp run is checked against NumPy; with ``timing`` the last timed run (kernels
    compiled by then, as far as ``compile_wait`` allowed) is checked too, and the counters
    shown are that run's.
    """
    ref = _force(prog.fn(numpy))
    got, st = _lazy_run(prog)
    if isinstance(got, Exception):   # a crash is reported as a failure, not a traceback
        return DemoResult(prog, st, False, float("nan"), [],
                          error=f"{type(got).__name__}: {got}")
    ok, max_diff, problems = compare(ref, got)
    res = DemoResult(prog, st, ok, max_diff, problems)
    if timing:
        # Kernels seen for the first time compile in the background; give them a moment so
        # that the timed runs measure the steady state (bounded: the demo must stay short).
        wait_compiles(compile_wait)
        res.t_numpy, _ = _median_time(lambda: _force(prog.fn(numpy)), repeat)
        res.t_lazynp, (got, st) = _median_time(lambda: _lazy_run(prog), repeat)
        if isinstance(got, Exception):
            res.ok, res.error = False, f"(warm run) {type(got).__name__}: {got}"
            return res
        res.stats = st
        ok2, diff2, problems2 = compare(ref, got)
        res.ok = res.ok and ok2
        res.max_diff = max(res.max_diff, diff2)
        res.problems += [f"(warm run) {p}" for p in problems2]
    return res


# --- output --------------------------------------------------------------------------------

INTRO = """\
lazynp demo
===========
lazynp is a drop-in replacement for NumPy: `import lazynp as np`.  Small work runs at once on
NumPy (element access gives NumPy's scalars); large elementwise, reduction and write work is
*recorded* into a dependency graph that runs (fused, planned, multi-threaded) when a value is
needed -- printing, float(), numpy.asarray(), a Python `if` -- or when it grows too large.
Anything lazynp has no lazy version of runs NumPy instead (a "fallback").

Below, each program is written once as `def program(np)` and run with numpy and with lazynp.
Columns:
  ops       NumPy operations lazynp recorded into its graph (the rest ran at once)
  flushes   times the graph was executed (each forcing of a value, or the size bound)
  nodes     graph nodes that actually ran (unused results are never computed)
  in-place  writes (a[...] = v, a += b) applied in place to an existing buffer
  kernels   fused groups of elementwise ops that ran as one compiled kernel / all fused
            groups (the rest ran op by op on NumPy while their kernel was compiling)
  fallback  calls that ran plain NumPy (names listed below the table)
  max|diff| largest absolute difference from the NumPy result; check = OK or MISMATCH
  time      lazynp time / NumPy time for the whole program (median of {repeat} runs,
            after a first untimed run); > 1 means slower than NumPy.  Small work runs at
            once on NumPy (a wrapper's cost per call); large work is fused.
  The counters are those of the last lazynp run.
"""


def _fmt_time(seconds: float) -> str:
    if seconds != seconds:
        return "-"
    if seconds < 1e-3:
        return f"{seconds * 1e6:.0f}us"
    if seconds < 1.0:
        return f"{seconds * 1e3:.1f}ms"
    return f"{seconds:.2f}s"


def _table(rows, headers) -> list[str]:
    widths = [max(len(str(h)), *(len(str(r[i])) for r in rows)) for i, h in enumerate(headers)]

    def line(cells):
        return "  ".join(str(c).ljust(w) if i == 0 else str(c).rjust(w)
                         for i, (c, w) in enumerate(zip(cells, widths))).rstrip()

    return [line(headers), "  ".join("-" * w for w in widths)] + [line(r) for r in rows]


def report(results: list[DemoResult], timing: bool = True) -> str:
    fused = any("fused_groups_run" in r.stats for r in results)
    headers = ["program", "ops", "flushes", "nodes", "in-place"]
    headers += ["kernels"] if fused else []
    headers += ["fallback", "max|diff|", "check"]
    if timing:
        headers += ["numpy", "lazynp", "time"]
    rows = []
    for r in results:
        st = r.stats
        nfb = sum(st.get("fallbacks", {}).values())
        row = [r.program.name, st.get("ops_recorded", 0), st.get("flushes", 0),
               st.get("nodes_executed", 0), st.get("inplace_writes", 0)]
        if fused:
            nk = st.get("fused_groups_run", 0)
            row.append(f"{nk}/{nk + st.get('fused_groups_numpy', 0)}")
        row += [nfb,
               "-" if r.max_diff != r.max_diff else f"{r.max_diff:.1e}",
               "OK" if r.ok else "MISMATCH"]
        if timing:
            ratio = (r.t_lazynp / r.t_numpy) if r.t_numpy > 0 else float("nan")
            row += [_fmt_time(r.t_numpy), _fmt_time(r.t_lazynp),
                    "-" if ratio != ratio else f"{ratio:.1f}x"]
        rows.append(row)
    lines = _table(rows, headers)
    lines.append("")
    for r in results:
        fb = r.stats.get("fallbacks", {})
        names = ", ".join(f"{k} x{v}" if v > 1 else k for k, v in sorted(fb.items()))
        lines.append(f"  {r.program.name}: {r.program.description}")
        lines.append(f"      fallbacks: {names or 'none'}")
        if r.error:
            lines.append(f"      CRASHED: {r.error}")
        for p in r.problems:
            lines.append(f"      MISMATCH {p}")
    return "\n".join(lines)


def _logistic_loss(np, w, X, y):
    p = 1.0 / (1.0 + np.exp(-(X @ w)))
    p = np.clip(p, 1e-12, 1 - 1e-12)
    return -np.mean(y * np.log(p) + (1 - y) * np.log(1 - p))


def _chain(np, x):
    for i in range(50):
        x = np.sin(x) * 0.5 + x * 0.999
    return x


def extras(out, repeat: int = 5, timing: bool = True) -> bool:
    """Beyond NumPy: a gradient checked against finite differences, and a jitted loop."""
    ok = True
    rng = numpy.random.default_rng(0)
    X = rng.standard_normal((200, 5))
    y = (X @ numpy.arange(1.0, 6.0) > 0).astype(float)
    w = rng.standard_normal(5) * 0.1
    g = numpy.asarray(lazynp.grad(lambda w: _logistic_loss(lazynp, w, X, y))(lazynp.asarray(w)))
    eps = 1e-6
    fd = numpy.array([(_logistic_loss(numpy, w + eps * e, X, y) -
                       _logistic_loss(numpy, w - eps * e, X, y)) / (2 * eps)
                      for e in numpy.eye(5)])
    err = float(numpy.max(numpy.abs(g - fd)))
    good = err < 1e-6
    ok &= good
    print("Beyond NumPy", file=out)
    print(f"  lazynp.grad of a logistic-regression loss vs finite differences: "
          f"max|diff| {err:.1e}  {'OK' if good else 'MISMATCH'}", file=out)
    x = rng.standard_normal(100)
    f = lazynp.jit(lambda x: _chain(lazynp, x))
    res = numpy.asarray(f(x))
    ref = _chain(numpy, x)
    good = numpy.allclose(res, ref, rtol=1e-12, atol=1e-12)
    ok &= good
    line = f"  lazynp.jit of a 150-op elementwise loop on 100 elements: " \
           f"{'OK' if good else 'MISMATCH'}"
    if timing:
        wait_compiles(5.0)
        t_np, _ = _median_time(lambda: _chain(numpy, x), repeat * 20)
        t_jit, _ = _median_time(lambda: f(x), repeat * 20)
        line += f"  NumPy {_fmt_time(t_np)}, jit {_fmt_time(t_jit)} ({t_np / t_jit:.1f}x faster)"
    print(line, file=out)
    return ok


def main(names: list[str] | None = None, repeat: int = 5, timing: bool = True,
         compile_wait: float = 5.0, out=None) -> int:
    """Run the demo; return the exit status (1 if any program crashed or mismatched)."""
    out = out or sys.stdout
    progs = PROGRAMS
    if names:
        known = {p.name: p for p in PROGRAMS}
        unknown = [n for n in names if n not in known]
        if unknown:
            print(f"unknown demo program(s): {', '.join(unknown)}; "
                  f"available: {', '.join(known)}", file=sys.stderr)
            return 2
        progs = [known[n] for n in names]
    print(INTRO.format(repeat=repeat), file=out)
    print(f"numpy {numpy.__version__}, lazynp {lazynp.__version__}, "
          f"Python {sys.version.split()[0]}\n", file=out)
    out.flush()
    t0 = time.perf_counter()
    results = [run_program(p, repeat=repeat, timing=timing, compile_wait=compile_wait)
               for p in progs]
    print(report(results, timing=timing), file=out)
    bad = [r.program.name for r in results if not r.ok]
    print(file=out)
    if not names and not extras(out, repeat=repeat, timing=timing):
        bad.append("grad/jit")
        print(file=out)
    if bad:
        print(f"MISMATCH against NumPy in: {', '.join(bad)}", file=out)
    else:
        n = len(results)
        print(f"All {n} program{'s' if n != 1 else ''} match{'' if n != 1 else 'es'} NumPy "
              f"({time.perf_counter() - t0:.1f} s).", file=out)
    out.flush()
    return 1 if bad else 0
