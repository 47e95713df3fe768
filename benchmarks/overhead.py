"""Per-operation overhead and memory flatness of lazynp, against NumPy in the same run.

(a) 100 elementwise ops on 100-element float64 arrays (a chain of ``*``, ``+``, ``-``,
    ``np.sin`` and ``np.exp`` with Python-scalar and array operands), then a force
    (``numpy.asarray``), under both execution policies:

    * ``auto`` (the default: small work runs at once on NumPy).  Target: lazynp time /
      NumPy time <= 1.3;
    * ``lazy`` (every op recorded, then fused and flushed).  Target <= 3; printed: the
      split into recording time per op and flush time.
(c) a scalar loop ``s = s * 0.5 + x[i]`` over the 10,000 elements of an array (element
    reads return NumPy scalars under ``auto``).  Target: lazynp time / NumPy time <= 1.3.
(b) ``x = x * 1.0001 + 1`` on a 1000-element array for 100,000 steps: peak memory after 10k
    steps vs after 100k steps (tracemalloc peak, and RSS), for lazynp and NumPy, each in a
    fresh process.  lazynp runs under the ``lazy`` policy (every step recorded: the graph
    must be flushed and freed as it grows).  Target: growth < 5 MB (flat).  Also the time
    ratio.

Usage::

    python benchmarks/overhead.py            # full run (a minute or two)
    python benchmarks/overhead.py --quick    # CI smoke run (small sizes, rough figures)
    python benchmarks/overhead.py --strict   # exit 1 when a timing target is missed too

The exit status is 1 when a deterministic check fails (a result differs from NumPy, memory
grows); timing targets only fail the exit status with ``--strict`` (timings are noisy).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy  # noqa: E402

from _common import (Summary, TraceMalloc, fmt_time, header, interleaved_medians,  # noqa: E402
                     make_parser, max_rss_mb, parse_args, print_table, rss_mb)

N_OPS = 100
SIZE_A = 100
SIZE_B = 1000
TARGET_RATIO = 3.0          # (a) under the lazy policy
TARGET_EAGER_RATIO = 1.3    # (a) and (c) under the default policy
SIZE_C = 10_000
TARGET_GROWTH_MB = 5.0


# --- (a) a chain of 100 elementwise ops ------------------------------------------------------

def chain(np, a, b, c):
    """Exactly 100 elementwise ops: 20 rounds of (* scalar, + array, - scalar, * array, sin|exp).

    The values stay bounded (sin maps into [-1, 1] every other round).
    """
    x = a
    for i in range(20):
        x = x * 1.0001
        x = x + b
        x = x - 0.5
        x = x * c
        x = np.sin(x) if i % 2 == 0 else np.exp(x)
    return x


def chain_inputs(lib):
    a = numpy.linspace(0.0, 1.0, SIZE_A)
    b = numpy.linspace(-1.0, 1.0, SIZE_A)
    c = numpy.linspace(0.1, 0.5, SIZE_A)
    if lib is numpy:
        return a, b, c
    return tuple(lib.evaluate(lib.asarray(v)) for v in (a, b, c))


def wait_compiles(timeout: float) -> bool:
    """Wait at most ``timeout`` s for lazynp's background kernel compiles (True: all done)."""
    import threading
    try:
        from lazynp.kernels import cpu
    except ImportError:
        return True
    t = threading.Thread(target=cpu.wait_compiles, daemon=True)
    t.start()
    t.join(timeout)
    return not t.is_alive()


def bench_chain(args, summary: Summary) -> None:
    import lazynp

    header(f"(a) {N_OPS} elementwise ops on {SIZE_A}-element float64 arrays, then a force")
    an, bn, cn = chain_inputs(numpy)
    al, bl, cl = chain_inputs(lazynp)
    ref = chain(numpy, an, bn, cn)
    repeat = args.repeat(400, 40)
    number = args.repeat(5, 2)

    # default policy: every op runs at once on NumPy (arrays far below the size bound)
    lazynp.reset_stats()
    t0 = time.perf_counter()
    got = numpy.asarray(chain(lazynp, al, bl, cl))
    first = time.perf_counter() - t0
    st = lazynp.stats()
    ok = (got.shape == ref.shape and got.dtype == ref.dtype
          and numpy.array_equal(got, ref))
    summary.add("(a) auto: result equals NumPy", "bit-identical",
                f"{float(numpy.abs(got - ref).max()):.1e}", ok, kind="check")
    print(f"policy auto: ops run at once: {st.get('ops_eager', 0)}, ops recorded: "
          f"{st['ops_recorded']}, flushes: {st['flushes']}; first run {fmt_time(first)}")
    med = interleaved_medians({
        "numpy": lambda: numpy.asarray(chain(numpy, an, bn, cn)),
        "lazynp": lambda: numpy.asarray(chain(lazynp, al, bl, cl)),
    }, repeat=repeat, number=number, warmup=2)
    eager_ratio = med["lazynp"] / med["numpy"]
    rows = [("numpy (ops + asarray)", fmt_time(med["numpy"]),
             f"{med['numpy'] / N_OPS * 1e6:.2f}", "1.00x"),
            ("lazynp, policy auto", fmt_time(med["lazynp"]),
             f"{med['lazynp'] / N_OPS * 1e6:.2f}", f"{eager_ratio:.2f}x")]
    summary.add("(a) auto: 100 ops + force, lazynp/numpy", f"<= {TARGET_EAGER_RATIO:.1f}x",
                f"{eager_ratio:.2f}x", eager_ratio <= TARGET_EAGER_RATIO)

    # lazy policy: every op recorded, the chain fused and flushed at the force
    with lazynp.policy("lazy"):
        lazynp.reset_stats()
        t0 = time.perf_counter()
        got = numpy.asarray(chain(lazynp, al, bl, cl))
        first = time.perf_counter() - t0
        st = lazynp.stats()
        ok = got.shape == ref.shape and got.dtype == ref.dtype and numpy.allclose(
            got, ref, rtol=1e-12)
        t0 = time.perf_counter()
        compiled = wait_compiles(args.repeat(120.0, 20.0))
        t_compile = time.perf_counter() - t0
        got2 = numpy.asarray(chain(lazynp, al, bl, cl))
        ok = ok and numpy.allclose(got2, ref, rtol=1e-12)
        summary.add("(a) lazy: result equals NumPy", "max abs diff <= 1e-12*|x|",
                    f"{float(numpy.abs(got2 - ref).max()):.1e}", ok, kind="check")
        print(f"policy lazy: ops recorded: {st['ops_recorded']}, flushes: {st['flushes']}, "
              f"nodes executed: {st['nodes_executed']}, "
              f"fallbacks: {sum(st['fallbacks'].values())}")
        print(f"first run (cold): {fmt_time(first)}; waited {t_compile:.2f} s for background "
              f"kernel compiles "
              f"({'done' if compiled else 'NOT done, timing includes NumPy fallback'})")
        med_lazy = interleaved_medians({
            "numpy": lambda: numpy.asarray(chain(numpy, an, bn, cn)),
            "lazynp": lambda: numpy.asarray(chain(lazynp, al, bl, cl)),
        }, repeat=repeat, number=number, warmup=2)

        # split: recording (building the graph) vs flushing (running it and waiting)
        rec, fl = [], []
        for _ in range(repeat):
            t0 = time.perf_counter()
            x = chain(lazynp, al, bl, cl)
            t1 = time.perf_counter()
            numpy.asarray(x)
            t2 = time.perf_counter()
            rec.append(t1 - t0)
            fl.append(t2 - t1)
            del x
        rec.sort()
        fl.sort()
        t_rec, t_flush = rec[len(rec) // 2], fl[len(fl) // 2]
        lazynp.reset_stats()
        numpy.asarray(chain(lazynp, al, bl, cl))
        st = lazynp.stats()

    ratio = med_lazy["lazynp"] / med_lazy["numpy"]
    rows += [("lazynp, policy lazy (record + flush)", fmt_time(med_lazy["lazynp"]),
              f"{med_lazy['lazynp'] / N_OPS * 1e6:.2f}", f"{ratio:.2f}x"),
             ("  lazynp recording", fmt_time(t_rec), f"{t_rec / N_OPS * 1e6:.2f}", ""),
             ("  lazynp flush", fmt_time(t_flush), "", "")]
    print_table(rows, ("", "median time", "per op (µs)", "vs numpy"))
    if "fused_groups_run" in st:
        print(f"lazy steady state: {st.get('fused_groups_run', 0)} fused group(s) ran as "
              f"compiled kernels, {st.get('fused_groups_numpy', 0)} op by op on NumPy")
    print(f"({repeat} repetitions x {number} calls, interleaved; the lazy ratio is against "
          f"NumPy measured in its own interleaving)")
    summary.add("(a) lazy: 100 ops + force, lazynp/numpy", f"<= {TARGET_RATIO:.1f}x",
                f"{ratio:.2f}x", ratio <= TARGET_RATIO)
    summary.add("(a) lazy: recording time per op", "(info)",
                f"{t_rec / N_OPS * 1e6:.2f} µs", True, kind="info")
    summary.add("(a) lazy: flush time", "(info)", fmt_time(t_flush), True, kind="info")


# --- (c) a scalar loop over the elements of an array -------------------------------------------

def scalar_loop(x, n):
    s = 0.0
    for i in range(n):
        s = s * 0.5 + x[i]
    return s


def bench_scalar_loop(args, summary: Summary) -> None:
    import lazynp

    n = SIZE_C
    header(f"(c) s = s * 0.5 + x[i] over the {n:,} elements of an array")
    xn = numpy.linspace(0.0, 1.0, n)
    xl = lazynp.asarray(xn)
    ref = scalar_loop(xn, n)
    got = scalar_loop(xl, n)
    ok = type(got) is type(ref) and got == ref
    summary.add("(c) result equals NumPy (value and scalar type)", "identical",
                f"{type(got).__name__} {got!r}", ok, kind="check")
    med = interleaved_medians({"numpy": lambda: scalar_loop(xn, n),
                               "lazynp": lambda: scalar_loop(xl, n)},
                              repeat=args.repeat(60, 10), number=1, warmup=1)
    ratio = med["lazynp"] / med["numpy"]
    print_table([("numpy", fmt_time(med["numpy"]), f"{med['numpy'] / n * 1e9:.0f}", "1.00x"),
                 ("lazynp, policy auto", fmt_time(med["lazynp"]),
                  f"{med['lazynp'] / n * 1e9:.0f}", f"{ratio:.2f}x")],
                ("", "median time", "per step (ns)", "vs numpy"))
    summary.add("(c) scalar loop, lazynp/numpy", f"<= {TARGET_EAGER_RATIO:.1f}x",
                f"{ratio:.2f}x", ratio <= TARGET_EAGER_RATIO)


# --- (b) a long loop: memory must stay flat --------------------------------------------------

def memory_loop(lib_name: str, steps: int, checkpoint: int, traced: bool,
                warmup: bool = True, compile_wait: float = 600.0) -> dict:
    """Run ``x = x * 1.0001 + 1`` for ``steps`` steps on ``SIZE_B`` elements, forcing ``x`` at
    ``checkpoint`` and at the end; report memory at both points (and the time).

    ``traced``: measure the tracemalloc peak (slow: traces every allocation) instead of
    the time.  ``warmup`` (lazynp): first run the same loop shape once and wait for the
    background kernel compiles, so that one-time compile memory is not counted as growth.
    Returns a dict of plain numbers (JSON-able).
    """
    lib = numpy if lib_name == "numpy" else __import__("lazynp")
    if lib is not numpy:
        with lib.policy("lazy"):
            return _memory_loop(lib, lib_name, steps, checkpoint, traced, warmup,
                                compile_wait)
    return _memory_loop(lib, lib_name, steps, checkpoint, traced, warmup, compile_wait)


def _memory_loop(lib, lib_name, steps, checkpoint, traced, warmup, compile_wait) -> dict:
    import gc
    out: dict = {"lib": lib_name, "steps": steps, "checkpoint": checkpoint}

    if warmup and lib_name != "numpy":
        t0 = time.perf_counter()
        w = lib.zeros(SIZE_B)
        for i in range(2 * checkpoint):
            w = w * 1.0001 + 1
            if i == checkpoint - 1:
                numpy.asarray(w)
        numpy.asarray(w)
        del w
        out["compiles_done"] = wait_compiles(compile_wait)
        out["warmup_s"] = time.perf_counter() - t0
    gc.collect()

    x = lib.zeros(SIZE_B)
    if traced:
        with TraceMalloc() as tm:
            for i in range(steps):
                x = x * 1.0001 + 1
                if i == checkpoint - 1:
                    numpy.asarray(x)
                    out["traced_current_ck_mb"], out["traced_peak_ck_mb"] = tm.sample()
            val = numpy.asarray(x)
            out["traced_current_end_mb"], out["traced_peak_end_mb"] = tm.sample()
    else:
        rss0 = rss_mb()
        out["maxrss_start_mb"] = max_rss_mb()
        t0 = time.perf_counter()
        for i in range(steps):
            x = x * 1.0001 + 1
            if i == checkpoint - 1:
                numpy.asarray(x)
                out["t_ck_s"] = time.perf_counter() - t0
                out["maxrss_ck_mb"] = max_rss_mb()
                out["rss_ck_mb"] = rss_mb()
        val = numpy.asarray(x)
        out["t_end_s"] = time.perf_counter() - t0
        out["maxrss_end_mb"] = max_rss_mb()
        out["rss_end_mb"] = rss_mb()
        out["rss_start_mb"] = rss0
    # the value must equal NumPy's (elementwise, no reassociation: bit-identical)
    ref = numpy.zeros(SIZE_B)
    for _ in range(steps):
        ref = ref * 1.0001 + 1
    out["max_abs_diff"] = float(numpy.abs(numpy.asarray(val) - ref).max())
    out["value_ok"] = bool(numpy.allclose(val, ref, rtol=1e-12, atol=0))
    if lib_name != "numpy":
        out["bound_flushes"] = lib.stats().get("bound_flushes")
    return out


def _child_cmd(lib_name: str, steps: int, checkpoint: int, traced: bool) -> list:
    cmd = [sys.executable, os.path.abspath(__file__), "--_child", lib_name,
           "--_steps", str(steps), "--_checkpoint", str(checkpoint)]
    return cmd + ["--_traced"] if traced else cmd


def _run_children(cmds: list, timeout: float, parallel: bool) -> list:
    """Run :func:`memory_loop` children (fresh interpreters, so RSS measures that loop only);
    ``parallel``: all at once (faster; timings then disturb each other)."""
    def result(cmd, p, out, err):
        if p.returncode != 0:
            raise RuntimeError(f"child {cmd[2:]} failed (rc {p.returncode}):\n{err[-3000:]}")
        return json.loads(out.strip().splitlines()[-1])

    if not parallel:
        out = []
        for cmd in cmds:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
            out.append(result(cmd, p, p.stdout, p.stderr))
        return out
    procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for cmd in cmds]
    outs = []
    try:
        for p in procs:
            outs.append(p.communicate(timeout=timeout))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    return [result(cmd, p, o, e) for cmd, p, (o, e) in zip(cmds, procs, outs)]


def measure_memory(args) -> dict:
    """Run the loop of (b) in fresh processes: per library, one timed run (RSS) and one run
    under tracemalloc.  Call this before the parent imports lazynp: on Linux a child's
    ``ru_maxrss`` starts from its parent's RSS at fork/exec time.  Under ``--quick`` the
    children run concurrently (memory figures are unaffected, the time ratio is rough)."""
    steps = args.size(100_000, 20_000)
    ck = steps // 10
    timeout = args.repeat(1800, 600)
    res = {"steps": steps, "checkpoint": ck}
    libs = ("numpy", "lazynp")
    cmds = [_child_cmd(lib, steps, ck, traced) for lib in libs for traced in (False, True)]
    outs = _run_children(cmds, timeout, parallel=args.quick)
    for i, lib in enumerate(libs):
        timed, traced = outs[2 * i], outs[2 * i + 1]
        timed.update({k: v for k, v in traced.items() if k.startswith("traced")})
        timed["value_ok"] = timed["value_ok"] and traced["value_ok"]
        timed["max_abs_diff"] = max(timed["max_abs_diff"], traced["max_abs_diff"])
        res[lib] = timed
    return res


def report_memory(res: dict, summary: Summary) -> None:
    steps, ck = res["steps"], res["checkpoint"]
    header(f"(b) x = x * 1.0001 + 1 on {SIZE_B} elements: memory after {ck:,} vs "
           f"{steps:,} steps")
    k1, k2 = f"{ck // 1000}k", f"{steps // 1000}k"
    rows = []
    growth = {}
    for lib in ("numpy", "lazynp"):
        r = res[lib]
        g_tm = r["traced_peak_end_mb"] - r["traced_peak_ck_mb"]
        g_max = r["maxrss_end_mb"] - r["maxrss_ck_mb"]
        g_rss = (r["rss_end_mb"] - r["rss_ck_mb"]) if r.get("rss_end_mb") is not None else None
        growth[lib] = (g_tm, g_max, g_rss)
        rows.append((lib,
                     f"{r['traced_peak_ck_mb']:.2f}", f"{r['traced_peak_end_mb']:.2f}",
                     f"{g_tm:+.2f}",
                     f"{r['maxrss_ck_mb']:.1f}", f"{r['maxrss_end_mb']:.1f}", f"{g_max:+.1f}",
                     "-" if g_rss is None else f"{g_rss:+.1f}",
                     fmt_time(r["t_end_s"])))
    print_table(rows, ("", f"tm peak@{k1}", f"tm peak@{k2}", "growth",
                       f"peak RSS@{k1}", f"peak RSS@{k2}", "growth", "RSS growth",
                       f"time {k2} steps"))
    print("(MB. tm = tracemalloc peak (Python + NumPy allocations) since the loop began; "
          "peak RSS = ru_maxrss;\n RSS growth = current RSS (psutil) at the end minus at "
          "the checkpoint; each library runs in a fresh process)")
    lz = res["lazynp"]
    if "warmup_s" in lz:
        print(f"lazynp warm-up (the same loop once, plus kernel compiles): {lz['warmup_s']:.1f} s, "
              f"compiles {'done' if lz.get('compiles_done') else 'NOT done'}; "
              f"bound flushes in the measured loop: {lz.get('bound_flushes')}")
    ratio = lz["t_end_s"] / res["numpy"]["t_end_s"]
    print(f"time ratio lazynp/numpy: {ratio:.1f}x "
          f"({lz['t_end_s'] / steps * 1e6:.1f} µs vs "
          f"{res['numpy']['t_end_s'] / steps * 1e6:.2f} µs per step)")

    g_tm, g_max, g_rss = growth["lazynp"]
    summary.add(f"(b) lazynp tracemalloc peak growth {k1}->{k2}",
                f"< {TARGET_GROWTH_MB:.0f} MB", f"{g_tm:+.2f} MB",
                g_tm < TARGET_GROWTH_MB, kind="check")
    summary.add(f"(b) lazynp peak RSS growth {k1}->{k2}",
                f"< {TARGET_GROWTH_MB:.0f} MB", f"{g_max:+.1f} MB",
                g_max < TARGET_GROWTH_MB, kind="check")
    summary.add("(b) result equals NumPy", "max abs diff <= 1e-12*|x|",
                f"{lz['max_abs_diff']:.1e}", lz["value_ok"], kind="check")
    summary.add(f"(b) {k2}-step loop, lazynp/numpy", "(info)", f"{ratio:.1f}x",
                True, kind="info")


def main(argv=None) -> int:
    parser = make_parser(__doc__.split("\n\n")[0])
    parser.add_argument("--only", choices=("a", "b", "c"), help="run only part (a), (b) or (c)")
    parser.add_argument("--_child", help=argparse_suppress())
    parser.add_argument("--_steps", type=int, help=argparse_suppress())
    parser.add_argument("--_checkpoint", type=int, help=argparse_suppress())
    parser.add_argument("--_traced", action="store_true", help=argparse_suppress())
    args = parse_args("", argv, parser)
    if args._child:
        print(json.dumps(memory_loop(args._child, args._steps, args._checkpoint,
                                     args._traced)))
        return 0

    print(f"lazynp overhead benchmark{' (--quick: rough figures)' if args.quick else ''}",
          flush=True)
    # (b) runs first, in child processes, while this process is still small (see
    # measure_memory); it is printed after (a).
    mem = measure_memory(args) if args.only in (None, "b") else None
    import lazynp
    print(f"numpy {numpy.__version__}, lazynp {lazynp.__version__}, "
          f"Python {sys.version.split()[0]}, {os.cpu_count()} CPUs")
    summary = Summary()
    if args.only in (None, "a"):
        bench_chain(args, summary)
    if args.only in (None, "c"):
        bench_scalar_loop(args, summary)
    if mem is not None:
        report_memory(mem, summary)
    return summary.print(strict=args.strict)


def argparse_suppress():
    import argparse
    return argparse.SUPPRESS


if __name__ == "__main__":
    sys.exit(main())
