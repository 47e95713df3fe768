"""Drop-in speed (issue 12): ordinary NumPy programs run unchanged under NumPy and lazynp.

Each program in ``benchmarks/dropin_programs`` is a function ``program(np, *inputs)`` written
the way people write NumPy (element loops, row loops, slicing stencils, reductions, matmul,
fancy indexing, boolean masks). For every program and size, in one process and interleaved:

* the inputs are made by a seeded NumPy generator (outside the timed region); each library
  gets them as its own arrays, as the program would have them had it made them itself with
  ``np.random``/``np.array`` under that import: NumPy arrays for NumPy, ``lazynp.array``
  copies for lazynp. ``--foreign-inputs`` gives lazynp the NumPy arrays instead (data from
  another library): lazynp must then assume the caller may change those buffers at any
  moment, so work that reads them runs at once, unrecorded;
* one untimed first call per library (its time is printed: for lazynp it includes kernel
  compilation, and the wait for compilations it started in the background);
* the lazynp result (forced with ``numpy.asarray``) is checked against NumPy's: shapes,
  dtypes, exact integer data, floats to rtol=1e-9 (the results of the timed calls too). A
  mismatch is printed loudly and makes the exit status 1;
* then 5 timed calls of each library, round-robin; the medians are compared as a speed-up
  (NumPy time / lazynp time: > 1 means lazynp is faster). Peer libraries (numexpr) get a
  column where a program has a version written for them.

A lazynp call that takes more than a few seconds gets fewer timed repetitions (the table
says how many), and a large-size run whose lazynp time, estimated from the small size, would
exceed ``--skip-above`` seconds is skipped (and reported): the whole run stays within about
10 minutes on 2 cores even when lazynp is hundreds of times slower than NumPy on a program.

Targets (issue 12): small size geometric mean >= 1.0 and no program below 0.67; 10x size
geometric mean >= 1.5; the scalar-loop programs (LU, Nussinov, CRC-16, Gauss-Seidel, CSR row
loop) each >= 0.67 at the small size. Timing targets affect the exit status only with
``--strict``.
"""
from __future__ import annotations

import argparse
import importlib.util
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy

from _common import Summary, fmt_time, header, make_parser, parse_args, print_table, time_runs

from dropin_programs import BY_NAME, PROGRAMS, SCALAR_LOOP_TARGETS, as_results, compare

SMALL_GEOMEAN, SMALL_MIN, LARGE_GEOMEAN, SCALAR_MIN = 1.0, 0.67, 1.5, 1 / 1.5


def _parser() -> argparse.ArgumentParser:
    p = make_parser(__doc__.split("\n\n")[0])
    p.add_argument("--size", dest="which_size", choices=("small", "large", "both"),
                   default="both",
                   help="which sizes to run (default: both)")
    p.add_argument("--only", default="", metavar="NAME[,NAME]",
                   help="run only these programs (comma-separated names, see --list)")
    p.add_argument("--list", action="store_true", help="list the programs and exit")
    p.add_argument("--repeat", dest="timed_calls", type=int, default=5,
                   help="timed calls per library (default 5)")
    p.add_argument("--lazy-budget", type=float, default=8.0, metavar="S",
                   help="seconds of timed lazynp calls per program and size; slower programs "
                        "get fewer repetitions (default 8)")
    p.add_argument("--skip-above", type=float, default=60.0, metavar="S",
                   help="skip a large-size lazynp run estimated to take longer than this many "
                        "seconds per call (default 60; 0 never skips)")
    p.add_argument("--foreign-inputs", action="store_true",
                   help="give lazynp the NumPy input arrays themselves (as data from another "
                        "library), not lazynp arrays of the same values")
    p.add_argument("--cold-cache", action="store_true",
                   help="compile lazynp's kernels into an empty cache directory, so that the "
                        "first-call column shows cold compilation")
    return p


# --- helpers ------------------------------------------------------------------------------------

def _fmt_size(size: dict) -> str:
    return ",".join(f"{k}={v}" for k, v in size.items())


def _wait_compiles() -> None:
    """Wait for lazynp's background kernel compilations, where this lazynp version has them."""
    try:
        from lazynp.kernels import cpu
        cpu.wait_compiles()
    except (ImportError, AttributeError):
        pass


def _available_peers(names) -> set[str]:
    """The peer libraries among ``names`` that are installed."""
    return {n for n in names if importlib.util.find_spec(n) is not None}


def _geomean(xs: list[float]) -> float:
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def _lazynp_commit() -> str:
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    try:
        out = subprocess.run(["git", "-C", root, "log", "-1", "--format=%h %cs", "--", "lazynp"],
                             capture_output=True, text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "-C", root, "status", "--porcelain", "--", "lazynp"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
        return (out or "unknown") + (" + uncommitted changes" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


class Row:
    """What was measured for one program at one size."""

    def __init__(self, prog, size_name):
        self.prog, self.size_name = prog, size_name
        self.t_np = self.t_lz = self.first_np = self.first_lz = float("nan")
        self.reps_lz = 0
        self.problems: list[str] = []
        self.error: str | None = None
        self.skipped: str | None = None
        self.peer_speedup: dict[str, float] = {}
        self.peer_problems: dict[str, list[str]] = {}

    @property
    def ok(self) -> bool:
        return (self.error is None and not self.problems
                and not any(self.peer_problems.values()))

    @property
    def measured(self) -> bool:
        return self.error is None and self.skipped is None

    @property
    def speedup(self) -> float:
        return self.t_np / self.t_lz


# --- measuring one program ------------------------------------------------------------------------

def _as_lazynp_arrays(inputs: tuple) -> tuple:
    """The inputs as a program running on lazynp would have made them: each NumPy array as a
    lazynp array of its own (a copy), everything else as it is."""
    import lazynp
    return tuple(lazynp.array(x) if type(x) is numpy.ndarray else x for x in inputs)


def _call(run):
    """One call of ``run`` (which returns forced results); returns (seconds, results)."""
    t0 = time.perf_counter()
    res = run()
    return time.perf_counter() - t0, res


def measure(prog, size_name: str, size: dict, repeat: int, args_ns, peers_ok: set,
            small: Row | None = None) -> Row:
    """Check and time ``prog`` at ``size``. ``small`` (the row of the same program at the
    small size) estimates lazynp's time here: its lazynp time times NumPy's growth."""
    import lazynp
    row = Row(prog, size_name)
    inputs = prog.inputs(size)
    lz_inputs = inputs if args_ns.foreign_inputs else _as_lazynp_arrays(inputs)
    run_np = lambda: as_results(prog.func(numpy, *inputs))      # noqa: E731
    run_lz = lambda: as_results(prog.func(lazynp, *lz_inputs))  # noqa: E731

    row.first_np, want = _call(run_np)
    estimate = small.t_lz * row.first_np / small.t_np if small and small.measured else 0.0
    if args_ns.skip_above and estimate > args_ns.skip_above:
        row.skipped = f"estimated {estimate:.0f} s per lazynp call"
        row.t_np = statistics.median(time_runs(run_np, repeat=repeat, warmup=0))
        return row
    try:
        t0 = time.perf_counter()
        got = run_lz()
        _wait_compiles()
        row.first_lz = time.perf_counter() - t0
    except Exception as e:  # a lazynp failure is a result to report, not a crash
        row.error = f"{type(e).__name__}: {e}"
        row.t_np = statistics.median(time_runs(run_np, repeat=repeat, warmup=0))
        return row
    row.problems = compare(want, got)

    peer_fns = {}
    for peer, fn in prog.peers.items():
        if peer not in peers_ok:
            continue
        run_peer = (lambda fn=fn: as_results(fn(*inputs)))
        _, got_peer = _call(run_peer)
        row.peer_problems[peer] = compare(want, got_peer)
        peer_fns[peer] = run_peer

    # lazynp repetitions: as many as fit the budget (at least one, decided on the timed calls,
    # since the first call includes compiling), or none (the first call stands in) when the
    # first call alone took more than twice the budget.
    timed_lz = row.first_lz <= 2 * args_ns.lazy_budget
    kept = [None]
    run_lz_kept = lambda: kept.__setitem__(0, run_lz())           # noqa: E731
    samples = {"numpy": [], "lazynp": [], **{p: [] for p in peer_fns}}
    for _ in range(repeat):                         # round-robin: robust to load changes
        samples["numpy"].append(time_runs(run_np, repeat=1, warmup=0)[0])
        lz = samples["lazynp"]
        if timed_lz and (not lz or sum(lz) + lz[-1] <= args_ns.lazy_budget):
            lz.append(time_runs(run_lz_kept, repeat=1, warmup=0)[0])
            if not row.problems:    # every call is checked: races show up on later calls
                row.problems = [f"timed call {len(lz)}: {p}" for p in compare(want, kept[0])]
        for peer, fn in peer_fns.items():
            samples[peer].append(time_runs(fn, repeat=1, warmup=0)[0])
    reps_lz = len(samples["lazynp"])
    row.t_np = statistics.median(samples["numpy"])
    row.reps_lz = reps_lz
    row.t_lz = statistics.median(samples["lazynp"]) if reps_lz else row.first_lz
    for peer in peer_fns:
        row.peer_speedup[peer] = row.t_np / statistics.median(samples[peer])
    return row


# --- output ----------------------------------------------------------------------------------------

def print_rows(rows: list[Row], size_name: str, peer_names: list[str], repeat: int,
               foreign: bool) -> None:
    inputs = "NumPy's arrays (--foreign-inputs)" if foreign else "lazynp arrays"
    header(f"{size_name} size: NumPy time / lazynp time (> 1: lazynp is faster); lazynp's "
           f"inputs: {inputs}")
    table = []
    for r in rows:
        if r.error is not None:
            lz, sp, first_lz, check = "ERROR", "-", "-", "ERROR"
        elif r.skipped is not None:
            lz, sp, first_lz, check = "skipped", "-", "-", "not run"
        else:
            lz = fmt_time(r.t_lz) + ("" if r.reps_lz == repeat else
                                     " (1st call)" if r.reps_lz == 0 else f" (x{r.reps_lz})")
            sp = f"{r.speedup:.2f}x"
            first_lz = fmt_time(r.first_lz)
            check = "OK" if not r.problems else "MISMATCH"
            bad_peers = [p for p, pr in r.peer_problems.items() if pr]
            if bad_peers:
                check += f" ({','.join(bad_peers)} MISMATCH)"
        peers = [f"{r.peer_speedup[p]:.2f}x" if p in r.peer_speedup else "-" for p in peer_names]
        table.append((r.prog.name, r.prog.tag, _fmt_size(getattr(r.prog, size_name)),
                      fmt_time(r.t_np), lz, sp, *peers, fmt_time(r.first_np), first_lz, check))
    print_table(table, ("program", "pattern", "size", "numpy", "lazynp", "speed-up",
                        *[f"{p} speed-up" for p in peer_names], "numpy 1st", "lazynp 1st",
                        "check"))
    measured = [r for r in rows if r.measured]
    if measured:
        sp = [r.speedup for r in measured]
        worst = min(measured, key=lambda r: r.speedup)
        print(f"\ngeometric mean speed-up: {_geomean(sp):.3f}x over {len(measured)} programs; "
              f"minimum {worst.speedup:.3f}x ({worst.prog.name})")
        for tag in sorted({r.prog.tag for r in measured}):
            tsp = [r.speedup for r in measured if r.prog.tag == tag]
            print(f"  {tag:12s} geometric mean {_geomean(tsp):.3f}x over {len(tsp)}")
    capped = [r for r in measured if r.reps_lz < repeat]
    if capped:
        print(f"\nslow under lazynp, fewer timed lazynp calls (x N = median of N; 1st call = "
              f"the first call's time): {', '.join(r.prog.name for r in capped)}")
    for r in rows:
        if r.skipped:
            print(f"SKIPPED {r.prog.name}: {r.skipped} (over --skip-above)")
    for r in rows:
        if r.error is not None:
            print(f"\n!!! ERROR {r.prog.name} ({size_name}): lazynp raised {r.error}")
        for p in r.problems:
            print(f"\n!!! MISMATCH {r.prog.name} ({size_name}): {p}")
        for peer, probs in r.peer_problems.items():
            for p in probs:
                print(f"\n!!! MISMATCH of the {peer} version of {r.prog.name} ({size_name}): {p}")
    sys.stdout.flush()


def summarize(results: dict[str, list[Row]], quick: bool) -> Summary:
    s = Summary()
    every = [r for rows in results.values() for r in rows]
    bad = [f"{r.prog.name}/{r.size_name}" for r in every if not r.ok]
    unchecked = sum(r.skipped is not None for r in every)
    s.add("results equal NumPy's", "all programs",
          ("all OK" if not bad else "MISMATCH/ERROR: " + ", ".join(bad))
          + (f" ({unchecked} skipped runs not checked)" if unchecked else ""),
          not bad, kind="check")
    kind = "info" if quick else "time"

    def stats(rows):
        m = [r for r in rows if r.measured]
        if not m:
            return None, None, 0
        return _geomean([r.speedup for r in m]), min(m, key=lambda r: r.speedup), len(m)

    if "small" in results:
        g, worst, n = stats(results["small"])
        if n:
            s.add("small size: geometric mean speed-up", f">= {SMALL_GEOMEAN:.2f}x",
                  f"{g:.3f}x ({n} programs)", g >= SMALL_GEOMEAN, kind)
            s.add("small size: slowest program", f">= {SMALL_MIN:.2f}x",
                  f"{worst.speedup:.3f}x ({worst.prog.name})", worst.speedup >= SMALL_MIN, kind)
        for r in results["small"]:
            if r.prog.name in SCALAR_LOOP_TARGETS:
                ok = r.measured and r.speedup >= SCALAR_MIN
                s.add(f"scalar loop {r.prog.name} (small)", f">= {SCALAR_MIN:.2f}x",
                      f"{r.speedup:.3f}x" if r.measured else "not measured", ok, kind)
    if "large" in results:
        g, worst, n = stats(results["large"])
        skipped = [r.prog.name for r in results["large"] if r.skipped]
        if n:
            note = f" ({n} programs" + (f", {len(skipped)} skipped" if skipped else "") + ")"
            s.add("10x size: geometric mean speed-up", f">= {LARGE_GEOMEAN:.2f}x",
                  f"{g:.3f}x{note}", g >= LARGE_GEOMEAN and not skipped, kind)
            s.add("10x size: slowest program", "(information)",
                  f"{worst.speedup:.3f}x ({worst.prog.name})", True, "info")
    if "tiny" in results:
        g, worst, n = stats(results["tiny"])
        if n:
            s.add("tiny size (--quick): geometric mean", "(information)", f"{g:.3f}x", True,
                  "info")
    return s


# --- main ------------------------------------------------------------------------------------------

def main(argv=None) -> int:
    args = parse_args(__doc__, argv, parser=_parser())
    progs = PROGRAMS
    if args.only:
        names = [n.strip() for n in args.only.split(",") if n.strip()]
        unknown = [n for n in names if n not in BY_NAME]
        if unknown:
            print(f"unknown program(s): {', '.join(unknown)} (see --list)", file=sys.stderr)
            return 2
        progs = [BY_NAME[n] for n in names]
    if args.list:
        print_table([(p.name, p.tag, _fmt_size(p.small), _fmt_size(p.large),
                      ",".join(p.peers) or "-", (p.func.__doc__ or "").split("\n")[0])
                     for p in progs],
                    ("program", "pattern", "small", "large", "peers", "what"))
        return 0
    if args.cold_cache:
        os.environ["LAZYNP_CACHE_DIR"] = tempfile.mkdtemp(prefix="lazynp-dropin-cache-")
    import lazynp

    start = time.perf_counter()
    if args.quick:
        size_names, repeat = ["tiny"], 1
    else:
        size_names = ["small", "large"] if args.which_size == "both" else [args.which_size]
        repeat = args.timed_calls
    wanted_peers = {p for prog in progs for p in prog.peers}
    peers_ok = _available_peers(wanted_peers)
    peer_names, missing = sorted(peers_ok), sorted(wanted_peers - peers_ok)

    print(f"lazynp {getattr(lazynp, '__version__', '?')} (commit {_lazynp_commit()}), "
          f"numpy {numpy.__version__}; {os.cpu_count()} CPUs; {len(progs)} programs; "
          f"{repeat} timed calls per library after one untimed call")
    if missing:
        print(f"peer libraries not installed (columns left out): {', '.join(missing)}")
    print("first-call columns: the untimed first call (lazynp's includes compiling kernels; "
          f"cache {'empty (--cold-cache)' if args.cold_cache else 'as left by earlier runs'})")

    results: dict[str, list[Row]] = {}
    for size_name in size_names:
        rows = []
        for prog in progs:
            size = getattr(prog, size_name)
            small = None
            if size_name == "large" and "small" in results:
                small = next((r for r in results["small"] if r.prog is prog), None)
            print(f"  {size_name:5s} {prog.name} ...", end="", flush=True)
            row = measure(prog, size_name, size, repeat, args, peers_ok, small)
            print(" " + (("ERROR" if row.error else "skipped" if row.skipped else
                          f"{row.speedup:.2f}x" + ("" if row.ok else " MISMATCH"))), flush=True)
            rows.append(row)
        results[size_name] = rows
        print_rows(rows, size_name, peer_names, repeat, args.foreign_inputs)

    summary = summarize(results, args.quick)
    elapsed = time.perf_counter() - start
    full_run = not args.quick and not args.only and args.which_size == "both"
    summary.add("total run time", "< 10 min (2 cores)" if full_run else "(information)",
                f"{elapsed / 60:.1f} min", elapsed < 600, "time" if full_run else "info")
    status = summary.print(strict=args.strict)
    targets = [r for r in summary.rows if r[4] == "time" and r[0] != "total run time"]
    correct = summary.rows[0][3]
    if targets:
        met = all(r[3] for r in targets)
        print(f"\nissue 12 timing targets: {'PASS' if met else 'FAIL'}"
              f"{'' if args.strict else ' (not an error without --strict)'}")
    print(f"correctness: {'PASS' if correct else 'FAIL (mismatches above)'}")
    return status


if __name__ == "__main__":
    sys.exit(main())
