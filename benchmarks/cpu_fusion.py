#!/usr/bin/env python
"""CPU fusion benchmark: lazynp's fused Numba kernels against NumPy, numexpr and JAX.

Every contender runs in this one process on the same inputs (10M float64 elements unless
noted; ``--quick``: 1M elements and 3 repetitions, a CI smoke run whose figures are rough).
Timings are medians of interleaved repetitions (the contenders take turns, and the order
alternates every round) taken after warm-up; lazynp is warmed until its background kernel
compiles finished (``lazynp.kernels.cpu.wait_compiles()``) plus one more run, so its figures
are steady state.  Every lazynp measurement forces the final array (``numpy.asarray``).

Workloads and targets (ratios are ``other_time / lazynp_time``, so > 1 means lazynp is faster):

* W1 ``a*b + c*d - e*0.5``                         >= 2.5x NumPy and >= 1.5x numexpr
* W2 ``np.sum(a*b + c)``                           >= 2.5x NumPy
* W3 ``a*b + c*d - np.exp(e)*0.5``                 >= 1.3x NumPy
* W4 row softmax of a 2000x5000 array              >= 1.5x NumPy
* W5 first call of a never-seen expression          lazynp / NumPy <= 1.2
  (a fresh expression structure per measurement; ``LAZYNP_CACHE_DIR`` is a fresh temporary
  folder, set before lazynp is imported, so no kernel comes from the disk cache)
* W1 memory: tracemalloc peak growth of one forced evaluation <= one output array + slack

The script reports; it does not gate: it exits 0 even when targets are missed.

    python benchmarks/cpu_fusion.py [--quick] [--reps N] [--profile]

``--profile`` (automatic when W1 misses a target) splits lazynp's W1 time into recording,
the fusion pass, output allocation, the Numba kernel call and the rest of the flush, next to
a hand-written parallel Numba loop over the same data.
"""
from __future__ import annotations

# --- environment that must be set before lazynp / JAX are imported ---------------------------
import os
import sys
import tempfile

_CACHE_DIR = tempfile.mkdtemp(prefix="lazynp-bench-kernels-")
os.environ["LAZYNP_CACHE_DIR"] = _CACHE_DIR          # fresh kernel cache: nothing on disk yet
os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.pop("LAZYNP_SYNC_COMPILE", None)            # measure the default (background) mode

_HERE = os.path.dirname(os.path.abspath(__file__))
_ROOT = os.path.dirname(_HERE)
for _p in (_ROOT, _HERE):
    if _p not in sys.path:
        sys.path.insert(0, _p)

import argparse  # noqa: E402
import atexit  # noqa: E402
import gc  # noqa: E402
import shutil  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
import tracemalloc  # noqa: E402

import numpy  # noqa: E402

atexit.register(shutil.rmtree, _CACHE_DIR, True)

from _common import fmt_time, header, print_table  # noqa: E402


def interleaved(fns: dict, repeat: int) -> dict:
    """Seconds per call of each of ``fns`` (name -> list of samples), measured round-robin.

    The contenders take turns and the order reverses every round, so neither a drifting
    machine load nor a fixed position (e.g. always running right after a cache-trashing
    contender) biases a ratio.  The garbage collector is off inside each timed call; each
    call's result is dropped before the next call starts (buffers can be reused).
    """
    names = list(fns)
    samples = {k: [] for k in names}
    gc_was = gc.isenabled()
    try:
        for r in range(repeat):
            order = names if r % 2 == 0 else names[::-1]
            for name in order:
                fn = fns[name]
                gc.collect()
                gc.disable()
                t0 = time.perf_counter()
                out = fn()
                t1 = time.perf_counter()
                del out
                if gc_was:
                    gc.enable()
                samples[name].append(t1 - t0)
    finally:
        if gc_was:
            gc.enable()
    return samples


def med(xs) -> float:
    return statistics.median(xs)


def fmt_ratio(x: float) -> str:
    return f"{x:.2f}x"


class Results:
    """Target rows of the final summary."""

    def __init__(self):
        self.rows = []

    def add(self, name, target, measured, ok):
        self.rows.append((name, target, measured, "PASS" if ok else "FAIL"))
        return ok


PROBLEMS: list = []     # crashes / wrong results seen in lazynp (printed at the end)


def check_close(name: str, got, want, rtol: float = 1e-12, atol: float = 0.0) -> bool:
    got = numpy.asarray(got)
    want = numpy.asarray(want)
    if got.shape != want.shape or got.dtype != want.dtype:
        PROBLEMS.append(f"{name}: shape/dtype {got.shape} {got.dtype} != NumPy's "
                        f"{want.shape} {want.dtype}")
        return False
    if not numpy.allclose(got, want, rtol=rtol, atol=atol, equal_nan=True):
        err = numpy.nanmax(numpy.abs(got - want))
        PROBLEMS.append(f"{name}: result differs from NumPy (max abs err {err:.3g})")
        return False
    return True


# --- contenders ---------------------------------------------------------------------------------

def environment_report(args) -> dict:
    """Print the machine and library set-up; return the optional modules (or None)."""
    import numba
    import numexpr
    import lazynp  # noqa: F401  (already imported; LAZYNP_CACHE_DIR was set before)
    from lazynp.kernels import cpu

    header("Set-up")
    print(f"python {sys.version.split()[0]}, numpy {numpy.__version__}, numba "
          f"{numba.__version__}, numexpr {numexpr.__version__}")
    print(f"os.cpu_count() = {os.cpu_count()}", end="")
    try:
        print(f", usable CPUs = {len(os.sched_getaffinity(0))}")
    except AttributeError:
        print()
    numexpr.set_num_threads(2)
    print(f"numexpr threads: 2 (set_num_threads(2)); numexpr VML: "
          f"{getattr(numexpr, 'use_vml', '?')}")
    try:
        layer = numba.threading_layer()
    except Exception:
        layer = "(not initialised yet)"
    print(f"numba threads: {numba.config.NUMBA_NUM_THREADS}, threading layer: {layer}, "
          f"SVML (vectorized exp/log in Numba): {bool(getattr(numba.config, 'USING_SVML', 0))}")
    try:
        from numpy._core._multiarray_umath import __cpu_features__ as feats
        simd = [k for k in ("AVX2", "AVX512F", "AVX512_SKX", "AVX512_ICL", "NEON", "ASIMD")
                if feats.get(k)]
        print(f"numpy SIMD on this CPU: {', '.join(simd) or 'baseline only'}")
    except Exception:
        pass
    try:
        import threadpoolctl
        for info in threadpoolctl.threadpool_info():
            print(f"threadpool: {info.get('internal_api')} ({info.get('user_api')}), "
                  f"{info.get('num_threads')} threads, {info.get('filepath')}")
    except ImportError:
        print("threadpoolctl not installed: BLAS / OpenMP thread pools not listed")
    try:
        blas = numpy.show_config(mode="dicts")["Build Dependencies"]["blas"]
        print(f"numpy BLAS (build): {blas.get('name')} {blas.get('version', '')}")
    except Exception:
        pass
    print(f"lazynp kernel cache dir (fresh): {cpu.CACHE_DIR}")
    try:
        import jax
        jax.config.update("jax_enable_x64", True)
        import jax.numpy as jnp
        print(f"jax {jax.__version__}, devices {jax.devices()}")
    except Exception as exc:  # ImportError, or a broken install
        print(f"JAX not available ({type(exc).__name__}: {exc}): JAX columns skipped")
        jax = jnp = None
    n = args.n
    print(f"size: {n:,} float64 elements ({n * 8 / 1e6:.0f} MB per array), "
          f"{args.reps} timed repetitions per contender{' (--quick)' if args.quick else ''}")
    return {"jax": jax, "jnp": jnp}


def lazy_counters():
    from lazynp.kernels import cpu
    s = cpu.STATS
    return (s["kernel_compiles"], s["kernel_cache_hits"], s["fused_groups_numpy"],
            s["kernel_compile_failures"])


def warm_lazy(fn, max_rounds: int = 8) -> None:
    """Run ``fn`` until no kernel is compiled and no fused group falls back to NumPy in a
    run (background compiles waited for), then once more: steady state."""
    from lazynp.kernels import cpu
    for _ in range(max_rounds):
        before = lazy_counters()
        fn()
        cpu.wait_compiles()
        after = lazy_counters()
        if after[0] == before[0] and after[2] == before[2]:
            break
    fn()
    cpu.wait_compiles()


def warm_other(fn, runs: int = 2) -> None:
    for _ in range(runs):
        fn()


def run_workload(wid: str, title: str, fns: dict, args, results: Results, targets: dict,
                 check=None) -> dict:
    """Warm up, time interleaved, print the table.  ``targets``: contender -> min ratio."""
    from lazynp.kernels import cpu
    header(f"{wid}: {title}")
    lazy_fn = fns["lazynp"]
    try:
        warm_lazy(lazy_fn)
    except Exception as exc:
        PROBLEMS.append(f"{wid}: lazynp raised {type(exc).__name__}: {exc}")
        print(f"lazynp FAILED: {type(exc).__name__}: {exc}")
        fns = {k: v for k, v in fns.items() if k != "lazynp"}
        lazy_fn = None
    for name, fn in fns.items():
        if name != "lazynp":
            warm_other(fn)
    if check is not None and lazy_fn is not None:
        check(lazy_fn(), fns["numpy"]())
    before = lazy_counters()
    fused_before = cpu.STATS["fused_groups_run"]
    samples = interleaved(fns, args.reps)
    after = lazy_counters()
    fused = cpu.STATS["fused_groups_run"] - fused_before
    meds = {k: med(v) for k, v in samples.items()}
    t_lazy = meds.get("lazynp")
    rows = []
    for name, v in samples.items():
        ratio = "" if t_lazy is None or name == "lazynp" else fmt_ratio(meds[name] / t_lazy)
        tgt = targets.get(name)
        rows.append((name, fmt_time(meds[name]), fmt_time(min(v)), fmt_time(max(v)), ratio,
                     f">= {tgt}x" if tgt else ""))
    print_table(rows, ("contender", "median", "min", "max", "time / lazynp", "target"))
    if t_lazy is not None:
        print(f"lazynp during timing: {fused} fused kernel runs, "
              f"{after[2] - before[2]} fused groups fell back to NumPy, "
              f"{after[0] - before[0]} kernels compiled")
    for name, tgt in targets.items():
        if t_lazy is None:
            results.add(f"{wid} vs {name}", f">= {tgt}x", "lazynp failed", False)
        elif name in meds:
            r = meds[name] / t_lazy
            results.add(f"{wid} vs {name}", f">= {tgt}x", fmt_ratio(r), r >= tgt)
    return meds


# --- workloads ----------------------------------------------------------------------------------

def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true",
                   help="1M elements, 3 repetitions (CI smoke run; figures are rough)")
    p.add_argument("--reps", type=int, default=None,
                   help="timed repetitions per contender (default 11, --quick 3)")
    p.add_argument("--profile", action="store_true",
                   help="print where lazynp's W1 time goes (record / flush / kernel); done "
                        "anyway when W1 misses a target")
    args = p.parse_args(argv)
    args.n = 1_000_000 if args.quick else 10_000_000
    args.reps = args.reps or (3 if args.quick else 11)
    n = args.n

    t_import = time.perf_counter()
    import lazynp as lnp
    t_import = time.perf_counter() - t_import
    import numexpr as ne
    from lazynp.kernels import cpu

    opt = environment_report(args)
    jax, jnp = opt["jax"], opt["jnp"]
    print(f"import lazynp: {fmt_time(t_import)}")

    rng = numpy.random.default_rng(12345)
    A, B, C, D, E = (rng.random(n) for _ in range(5))
    la, lb, lc, ld, le = (lnp.evaluate(lnp.asarray(v)) for v in (A, B, C, D, E))
    env = dict(a=A, b=B, c=C, d=D, e=E)
    if jax is not None:
        ja, jb, jc, jd, je = (jax.device_put(v) for v in (A, B, C, D, E))
        for v in (ja, jb, jc, jd, je):
            v.block_until_ready()
    results = Results()

    # --- W5 (cold) first: the very first lazynp expression of the process -----------------------
    # Informational: it also pays lazynp's one-off start-up (Numba import, compile thread).
    cold = _cold_first_call(lnp, (la, lb, lc, ld, le), env)

    # --- W1 -----------------------------------------------------------------------------------
    fns = {
        "numpy": lambda: A * B + C * D - E * 0.5,
        "lazynp": lambda: numpy.asarray(la * lb + lc * ld - le * 0.5),
        "numexpr": lambda: ne.evaluate("a*b + c*d - e*0.5", local_dict=env),
    }
    if jax is not None:
        f1 = jax.jit(lambda a, b, c, d, e: a * b + c * d - e * 0.5)
        fns["jax"] = lambda: f1(ja, jb, jc, jd, je).block_until_ready()
    run_workload("W1", "a*b + c*d - e*0.5", fns, args, results,
                 {"numpy": 2.5, "numexpr": 1.5},
                 check=lambda got, want: check_close("W1", got, want))

    # --- W1 memory ----------------------------------------------------------------------------
    _w1_memory(lnp, (la, lb, lc, ld, le), (A, B, C, D, E), n, results)

    # --- W2 -----------------------------------------------------------------------------------
    fns = {
        "numpy": lambda: numpy.sum(A * B + C),
        "lazynp": lambda: numpy.asarray(lnp.sum(la * lb + lc)),
        "numexpr": lambda: ne.evaluate("sum(a*b + c)", local_dict=env),
    }
    if jax is not None:
        f2 = jax.jit(lambda a, b, c: jnp.sum(a * b + c))
        fns["jax"] = lambda: f2(ja, jb, jc).block_until_ready()
    run_workload("W2", "np.sum(a*b + c)", fns, args, results, {"numpy": 2.5},
                 check=lambda got, want: check_close("W2", got, want, rtol=1e-9))

    # --- W3 -----------------------------------------------------------------------------------
    fns = {
        "numpy": lambda: A * B + C * D - numpy.exp(E) * 0.5,
        "lazynp": lambda: numpy.asarray(la * lb + lc * ld - lnp.exp(le) * 0.5),
        "numexpr": lambda: ne.evaluate("a*b + c*d - exp(e)*0.5", local_dict=env),
    }
    if jax is not None:
        f3 = jax.jit(lambda a, b, c, d, e: a * b + c * d - jnp.exp(e) * 0.5)
        fns["jax"] = lambda: f3(ja, jb, jc, jd, je).block_until_ready()
    run_workload("W3", "a*b + c*d - np.exp(e)*0.5", fns, args, results, {"numpy": 1.3},
                 # Numba's exp and NumPy's SIMD exp may differ in the last bit; results near zero
                 # then differ by ~1e-16 absolute
                 check=lambda got, want: check_close("W3", got, want, rtol=1e-12,
                                                     atol=1e-13))

    # --- W4 -----------------------------------------------------------------------------------
    rows_, cols_ = (2000, 5000) if not args.quick else (200, 5000)
    X = rng.standard_normal((rows_, cols_))
    lX = lnp.evaluate(lnp.asarray(X))

    def np_softmax(x=X):
        e = numpy.exp(x - x.max(1, keepdims=True))
        return e / e.sum(1, keepdims=True)

    def lazy_softmax(x=lX):
        e = lnp.exp(x - x.max(1, keepdims=True))
        return numpy.asarray(e / e.sum(1, keepdims=True))

    def ne_softmax(x=X):
        m = x.max(1, keepdims=True)
        e = ne.evaluate("exp(x - m)", local_dict={"x": x, "m": m})
        s = e.sum(1, keepdims=True)
        return ne.evaluate("e / s", local_dict={"e": e, "s": s})

    fns = {"numpy": np_softmax, "lazynp": lazy_softmax, "numexpr": ne_softmax}
    if jax is not None:
        jX = jax.device_put(X)

        @jax.jit
        def f4(x):
            e = jnp.exp(x - x.max(1, keepdims=True))
            return e / e.sum(1, keepdims=True)
        fns["jax"] = lambda: f4(jX).block_until_ready()
    run_workload("W4", f"row softmax of a {rows_}x{cols_} array", fns, args, results,
                 {"numpy": 1.5}, check=lambda got, want: check_close("W4", got, want,
                                                                      rtol=1e-12))
    del lX, X

    # --- W5 -----------------------------------------------------------------------------------
    _w5_first_call(lnp, cpu, (la, lb, lc, ld, le), env, args, results, cold)

    # --- optional profile ---------------------------------------------------------------------
    w1_failed = any(r[0].startswith("W1 vs") and r[3] != "PASS" for r in results.rows)
    if args.profile or w1_failed:
        if w1_failed and not args.profile:
            print("\n(W1 missed a target: profiling it)")
        _profile_w1(lnp, cpu, (la, lb, lc, ld, le), (A, B, C, D, E), args)

    # --- summary ------------------------------------------------------------------------------
    header("Summary (ratios: other / lazynp time; W5: lazynp / NumPy)")
    print_table(results.rows, ("benchmark", "target", "measured", "result"))
    if PROBLEMS:
        print("\nlazynp problems observed:")
        for prob in PROBLEMS:
            print(f"  - {prob}")
    else:
        print("\nlazynp results matched NumPy in every workload.")
    failed = [r[0] for r in results.rows if r[3] != "PASS"]
    print(f"\n{len(results.rows) - len(failed)}/{len(results.rows)} targets met"
          + (f"; missed: {', '.join(failed)}" if failed else "")
          + " (this script reports only: exit status 0)")
    return 0


# --- W1 memory ----------------------------------------------------------------------------------

def _traced_peak_growth(fn) -> float:
    """Peak traced bytes above the starting point while ``fn()`` runs and its result is held
    (the result counts: it is the one output array allowed)."""
    gc.collect()
    tracemalloc.start()
    try:
        base, _ = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        out = fn()
        _, peak = tracemalloc.get_traced_memory()
        del out
    finally:
        tracemalloc.stop()
    return (peak - base) / 1e6


def _w1_memory(lnp, lazy_in, np_in, n, results: Results) -> bool:
    from lazynp.kernels import pool
    la, lb, lc, ld, le = lazy_in
    A, B, C, D, E = np_in
    header("W1 memory: tracemalloc peak growth of one forced evaluation (after warm-up)")
    out_mb = n * 8 / 1e6
    slack = 0.1 * out_mb + 1.0
    limit = out_mb + slack

    def lazy():
        return numpy.asarray(la * lb + lc * ld - le * 0.5)

    # Steady state: lazynp's buffer pool may hand back the buffer of an earlier result.
    warm = _traced_peak_growth(lazy)
    # Pool emptied first: the evaluation must allocate its output; anything above one output
    # array is an intermediate that fusion should have removed.
    pool.clear()
    gc.collect()
    cold = _traced_peak_growth(lazy)
    ref = _traced_peak_growth(lambda: A * B + C * D - E * 0.5)
    print_table([("lazynp (buffer pool warm)", f"{warm:.1f} MB"),
                 ("lazynp (buffer pool emptied first)", f"{cold:.1f} MB"),
                 ("numpy (reference)", f"{ref:.1f} MB")],
                ("evaluation", "peak growth"))
    worst = max(warm, cold)
    print(f"limit: one output array ({out_mb:.0f} MB) + slack {slack:.0f} MB = {limit:.0f} MB")
    return results.add("W1 memory", f"<= {limit:.0f} MB", f"{worst:.1f} MB", worst <= limit)


# --- W5 -----------------------------------------------------------------------------------------

_W5_NAMES = "abcde"


def _fresh_expressions(count: int, seed: int = 7, seen: set | None = None) -> list:
    """``count`` expressions over a..e with 4 binary operators (+ - *) whose *structure*
    (operators and the pattern of operands, i.e. the kernel lazynp generates) differs from
    every other one and from ``seen``."""
    import random
    rnd = random.Random(seed)
    seen = set() if seen is None else seen
    out = []
    while len(out) < count:
        ops = [rnd.choice("+-*") for _ in range(4)]
        operands = [rnd.choice(_W5_NAMES) for _ in range(5)]
        expr = operands[0] + "".join(f" {o} {v}" for o, v in zip(ops, operands[1:]))
        # canonical form: operands renamed in order of first appearance (lazynp numbers a
        # kernel's inputs the same way, so two expressions equal up to renaming share one)
        names: dict = {}
        canon = "".join(names.setdefault(ch, f"x{len(names)}") if ch in _W5_NAMES else ch
                        for ch in expr)
        if canon in seen:
            continue
        seen.add(canon)
        out.append(expr)
    return out


_W5_SEEN: set = set()


def _cold_first_call(lnp, lazy_in, env) -> tuple:
    """The first fused expression of the process (before any other lazynp work)."""
    from lazynp.kernels import cpu
    (expr,) = _fresh_expressions(1, seed=1, seen=_W5_SEEN)
    lazy_f = eval(f"lambda a, b, c, d, e: numpy.asarray({expr})")
    np_f = eval(f"lambda a, b, c, d, e: {expr}")
    t0 = time.perf_counter()
    got = lazy_f(*lazy_in)
    t_lazy = time.perf_counter() - t0
    t0 = time.perf_counter()
    cpu.wait_compiles()
    t_bg = time.perf_counter() - t0
    t0 = time.perf_counter()
    want = np_f(**env)
    t_np = time.perf_counter() - t0
    check_close("W5 cold", got, want)
    return expr, t_lazy, t_np, t_bg


def _w5_first_call(lnp, cpu, lazy_in, env, args, results: Results, cold) -> None:
    header("W5: first call of a never-seen expression (lazynp / NumPy time, <= 1.2)")
    reps = max(args.reps, 3)
    exprs = _fresh_expressions(reps, seed=5, seen=_W5_SEEN)
    rows = []
    ratios, t_l, t_n, t_b = [], [], [], []
    c0 = cpu.STATS["kernel_compiles"]
    h0 = cpu.STATS["kernel_cache_hits"]
    for i, expr in enumerate(exprs):
        lazy_f = eval(f"lambda a, b, c, d, e: numpy.asarray({expr})")
        np_f = eval(f"lambda a, b, c, d, e: {expr}")
        cpu.wait_compiles()
        gc.collect()
        tl = tn = tb = None
        got = want = None
        for who in (("lazy", "np") if i % 2 == 0 else ("np", "lazy")):
            gc.disable()
            if who == "lazy":
                t0 = time.perf_counter()
                try:
                    got = lazy_f(*lazy_in)
                except Exception as exc:
                    PROBLEMS.append(f"W5 {expr!r}: lazynp raised {type(exc).__name__}: {exc}")
                    got = None
                tl = time.perf_counter() - t0
                gc.enable()
                t0 = time.perf_counter()
                cpu.wait_compiles()       # keep the compile out of NumPy's timing
                tb = time.perf_counter() - t0
            else:
                t0 = time.perf_counter()
                want = np_f(**env)
                tn = time.perf_counter() - t0
                gc.enable()
        if got is not None:
            check_close(f"W5 {expr!r}", got, want)
        del got, want
        ratios.append(tl / tn)
        t_l.append(tl)
        t_n.append(tn)
        t_b.append(tb)
        rows.append((expr, fmt_time(tl), fmt_time(tn), f"{tl / tn:.2f}", fmt_time(tb)))
    print_table(rows, ("expression (fresh structure)", "lazynp 1st", "numpy", "lazynp/numpy",
                       "compile after"))
    compiled = cpu.STATS["kernel_compiles"] - c0
    hits = cpu.STATS["kernel_cache_hits"] - h0
    print(f"kernels compiled: {compiled}, cache hits: {hits} (expected {len(exprs)} and 0)")
    if hits:
        PROBLEMS.append(f"W5: {hits} kernel cache hits with a fresh cache dir and fresh "
                        "expression structures")
    expr, cl, cn, cb = cold
    print(f"process-cold first call (numba import, compile thread start), {expr!r}: lazynp "
          f"{fmt_time(cl)}, numpy {fmt_time(cn)}, ratio {cl / cn:.2f} (informational), "
          f"compile finished {fmt_time(cb)} later")
    r = med(ratios)
    print(f"lazynp first call is {r:.2f} times NumPy (median of per-expression ratios; "
          f"medians: lazynp {fmt_time(med(t_l))}, numpy {fmt_time(med(t_n))}, "
          f"ratio of medians {med(t_l) / med(t_n):.2f}; background compile "
          f"{fmt_time(med(t_b))} after the call returned)")
    results.add("W5 first call", "<= 1.2 (lazynp/numpy)", f"{r:.2f}", r <= 1.2)


# --- W1 profile ---------------------------------------------------------------------------------

def _profile_w1(lnp, cpu, lazy_in, np_in, args) -> None:
    """Split lazynp's W1 time: recording the expression, the flush (fusion planning,
    scheduling, waiting), and inside it the Numba kernel call and the output allocation."""
    from lazynp.kernels import pool
    header("W1 profile: where lazynp's time goes (steady state, medians)")
    la, lb, lc, ld, le = lazy_in
    A, B, C, D, E = np_in
    acc = {"kernel": 0.0, "alloc": 0.0, "fuse": 0.0}
    orig_get, orig_empty = cpu.get_kernel, pool.empty
    from lazynp.core import fusion
    orig_fuse = fusion.fuse

    def timed_get(source, args_, block=False):
        k = orig_get(source, args_, block)
        if k is None:
            return None

        def run(*a):
            t0 = time.perf_counter()
            k(*a)
            acc["kernel"] += time.perf_counter() - t0
        return run

    def timed_empty(shape, dtype):
        t0 = time.perf_counter()
        out = orig_empty(shape, dtype)
        acc["alloc"] += time.perf_counter() - t0
        return out

    def timed_fuse(work, node_type):
        t0 = time.perf_counter()
        out = orig_fuse(work, node_type)
        acc["fuse"] += time.perf_counter() - t0
        return out

    rec, force, kern, alloc, fuse, tot = [], [], [], [], [], []

    def one_rep():
        # (a function of its own: a line inside a ``try`` block runs ops that can warn at
        # the call -- lazynp.core.policy.run_at_call -- which would time the kernel as recording)
        for k in acc:
            acc[k] = 0.0
        gc.collect()
        gc.disable()
        t0 = time.perf_counter()
        r = la * lb + lc * ld - le * 0.5
        t1 = time.perf_counter()
        v = numpy.asarray(r)
        t2 = time.perf_counter()
        gc.enable()
        del r, v
        rec.append(t1 - t0)
        force.append(t2 - t1)
        tot.append(t2 - t0)
        kern.append(acc["kernel"])
        alloc.append(acc["alloc"])
        fuse.append(acc["fuse"])
    cpu.get_kernel, pool.empty, fusion.fuse = timed_get, timed_empty, timed_fuse
    try:
        for _ in range(args.reps):
            one_rep()
    finally:
        cpu.get_kernel, pool.empty, fusion.fuse = orig_get, orig_empty, orig_fuse
    # the bare kernel work: a hand-written Numba loop over the same data, for reference
    bare = _bare_numba_w1(np_in, args.reps)
    t_np = med(interleaved({"numpy": lambda: A * B + C * D - E * 0.5}, args.reps)["numpy"])
    other = [f - k - a - u for f, k, a, u in zip(force, kern, alloc, fuse)]
    rows = [("record 4 ops (Python, lazy)", fmt_time(med(rec))),
            ("force: fusion pass", fmt_time(med(fuse))),
            ("force: output allocation (pool)", fmt_time(med(alloc))),
            ("force: Numba kernel call", fmt_time(med(kern))),
            ("force: rest (planning, engine, wait)", fmt_time(med(other))),
            ("total", fmt_time(med(tot))),
            ("bare parallel Numba loop, preallocated out", fmt_time(bare[0])),
            ("bare parallel Numba loop, fresh np.empty out", fmt_time(bare[1])),
            ("numpy a*b + c*d - e*0.5", fmt_time(t_np))]
    print_table(rows, ("part", "median"))
    gb = 6 * args.n * 8 / 1e9
    if med(kern) > 0:
        print(f"kernel traffic {gb:.2f} GB (5 reads + 1 write): {gb / med(kern):.1f} GB/s in "
              f"lazynp's kernel; the NumPy/lazynp ceiling at this bandwidth is about "
              f"{t_np / med(kern):.2f}x")
    else:
        print("no fused kernel ran while profiling (the ops ran at the call)")


def _bare_numba_w1(np_in, reps: int) -> tuple:
    import numba

    @numba.njit(parallel=True, nogil=True, error_model="numpy")
    def k(a, b, c, d, e, o):
        for i in numba.prange(a.shape[0]):
            o[i] = a[i] * b[i] + c[i] * d[i] - e[i] * 0.5

    out = numpy.empty_like(np_in[0])
    k(*np_in, out)
    samples = interleaved({"pre": lambda: k(*np_in, out),
                           "fresh": lambda: k(*np_in, numpy.empty_like(np_in[0]))}, reps)
    return med(samples["pre"]), med(samples["fresh"])


if __name__ == "__main__":
    try:
        main()
    except SystemExit:
        raise
    except BaseException:
        import traceback
        traceback.print_exc()
        print("cpu_fusion: the benchmark itself crashed (see above); exit status 0 anyway")
    sys.exit(0)
