"""NPBench (spcl/npbench): its NumPy kernels, unchanged but for the import line, under NumPy and lazynp.

NPBench is the benchmark the NumPy-accelerator papers report: 54 NumPy programs from
PolyBench, stencils, deep learning, weather and physics codes. This script runs them from a
checkout of spcl/npbench kept in ``benchmarks/vendor/npbench`` (git-ignored, never committed;
when it is missing the script says how to get it and exits 0). For each kernel and preset,
in a subprocess of its own with a timeout:

* the inputs come from the kernel's own ``initialize`` with the preset's parameters (from
  NPBench's ``bench_info/<kernel>.json``). Two lazynp columns: ``own``, inputs made by lazynp
  (the ``initialize`` module's source run with ``import lazynp as np``, as the program would
  make them under that import; if that fails or gives other values, ``lazynp.array`` copies
  of NumPy's, marked ``*``), and ``asarray``, ``lazynp.asarray`` of NumPy's arrays (a buffer
  the caller shares: work reading it runs at once);
* the kernel is the ``<module>_numpy.py`` source with ``import numpy as np`` replaced by
  ``import lazynp as np``;
* as in NPBench, the array arguments are copied before every call (untimed), and the
  outputs are the kernel's return values plus the arguments it writes (``output_args``);
* every lazynp call's outputs are checked with NPBench's rule (``numpy.allclose`` with the
  kernel's ``rtol``/``atol``, default 1e-5/1e-8, else a relative 2-norm error below its
  ``norm_error``, default 1e-5) against NumPy's; the per-kernel tolerances are printed;
* the first call of each library is timed in a column of its own (for lazynp it includes
  kernel compilation), then ``--repeat`` (5) rounds alternate NumPy, lazynp (own) and lazynp
  (asarray) calls in one process; each library's figure is the median. The timed region
  includes ``numpy.asarray`` of every output (lazynp's pending work is finished in it);
* where NPBench ships a hand-ported Numba version (``<module>_numba_n.py``, nopython mode,
  one thread; else another of its Numba variants), its median time is a reference column:
  the speed a rewrite of the program reaches (``--no-numba`` skips it).

Ratios are NumPy's time / lazynp's time (> 1: lazynp is faster). Geometric means per preset
over the kernels whose answers validated, and the slowest five, close the table.

Caveat: on a shared or busy machine absolute times are noisy; the ratios come from calls
alternated in one process and are the fairer figure.
"""
from __future__ import annotations

import argparse
import csv
import gc
import importlib.util
import json
import math
import os
import re
import statistics
import subprocess
import sys
import time
import types
from typing import Any, Callable, Sequence

_HERE = os.path.dirname(os.path.abspath(__file__))
_ROOT = os.path.dirname(_HERE)
VENDOR = os.path.join(_HERE, "vendor", "npbench")
NUMBA_VARIANTS = ("n", "np", "npr", "o", "op", "opr")
IMPORT_LINE = re.compile(r"^import numpy as np\s*$", re.MULTILINE)
#: The clock of the timed calls: wall time (``time.perf_counter``), or with ``--clock cpu``
#: the process's CPU time over all its threads (``time.process_time``): on a machine other
#: programs load, a wall time includes waits for a core (a thread handed work waits for the
#: scheduler), a CPU time does not, but it also leaves out the gain of a second core.
CLOCK = [time.perf_counter]
COMPILE_WAIT = 60.0          # seconds a first call waits at most for its kernel compilations
DEFAULT_TIMEOUT = {"S": 300, "M": 600, "L": 1800, "paper": 3600}

HOW_TO_GET = """NPBench is not checked out: this benchmark needs spcl/npbench in
  {path}
Get it with (the folder is git-ignored; never commit it):
  git clone https://github.com/spcl/npbench {path}
(or symlink an existing checkout there)."""


# --- the kernels -----------------------------------------------------------------------------

def bench_infos(vendor: str) -> list[dict]:
    """NPBench's kernel descriptions (``bench_info/*.json``), sorted by short name."""
    folder = os.path.join(vendor, "bench_info")
    infos = []
    for name in sorted(os.listdir(folder)):
        if name.endswith(".json"):
            with open(os.path.join(folder, name)) as f:
                infos.append(json.load(f)["benchmark"])
    return sorted(infos, key=lambda i: i["short_name"])


def _module_path(vendor: str, info: dict, suffix: str = "") -> str:
    return os.path.join(vendor, "npbench", "benchmarks", info["relative_path"],
                        info["module_name"] + suffix + ".py")


def load_source(path: str, name: str, library: str | None = None,
                required: bool = True) -> types.ModuleType:
    """Load a Python file as a module; with ``library``, its ``import numpy as np`` swapped
    (``required``: a file without that line is an error)."""
    with open(path) as f:
        source = f.read()
    if library is not None:
        source, n = IMPORT_LINE.subn(f"import {library} as np", source)
        if n == 0 and required:
            raise RuntimeError(f"{path}: no 'import numpy as np' line to swap")
    module = types.ModuleType(name)
    module.__file__ = path
    exec(compile(source, path, "exec"), module.__dict__)
    return module


def make_data(vendor: str, info: dict, preset: str, library: str) -> dict:
    """The preset's parameters plus the outputs of the kernel's ``initialize`` under ``library``."""
    import numpy
    data = dict(info["parameters"][preset])
    init = info.get("init")
    if init:
        numpy.random.seed(0)  # some use the unseeded global generator (lazynp shares NumPy's)
        module = load_source(_module_path(vendor, info), f"npb_init_{library}", library,
                             required=False)
        values = getattr(module, init["func_name"])(*[data[a] for a in init["input_args"]])
        names = init["output_args"]
        if len(names) == 1:
            values = (values,)
        data.update(zip(names, values))
    return data


# --- NPBench's validation rule ---------------------------------------------------------------

def tolerances(info: dict) -> tuple[float, float, float]:
    """NPBench's per-kernel ``rtol``, ``atol`` and ``norm_error`` (defaults 1e-5, 1e-8, 1e-5)."""
    return info.get("rtol", 1e-5), info.get("atol", 1e-8), info.get("norm_error", 1e-5)


def validate(ref: Sequence[Any], val: Sequence[Any], info: dict) -> str:
    """'' when ``val`` passes NPBench's rule against ``ref``, else what failed."""
    import numpy
    rtol, atol, norm_error = tolerances(info)
    if len(ref) != len(val):
        return f"{len(val)} outputs, NumPy gave {len(ref)}"
    for k, (r, v) in enumerate(zip(ref, val)):
        r, v = numpy.asarray(r), numpy.asarray(v)
        if r.shape != v.shape:
            return f"output {k}: shape {v.shape}, NumPy's {r.shape}"
        if numpy.allclose(r, v, rtol=rtol, atol=atol):
            continue
        with numpy.errstate(all="ignore"):
            rel = numpy.linalg.norm(r - v) / numpy.linalg.norm(r)
        if not rel < norm_error:
            return f"output {k}: relative error {rel:.3g}"
    return ""


# --- one kernel (runs in the subprocess) -----------------------------------------------------

class Runner:
    """Calls of one kernel under one library: fresh argument copies, outputs as NumPy arrays."""

    def __init__(self, info: dict, impl: Callable, data: dict, copy: Callable,
                 wrap: Callable | None = None, settle: Callable | None = None):
        self.info, self.impl, self.data = info, impl, data
        self.copy, self.wrap, self.settle = copy, wrap, settle

    def _args(self) -> dict:
        args = dict(self.data)
        for name in self.info["array_args"]:
            value = self.copy(self.data[name])
            args[name] = self.wrap(value) if self.wrap else value
        if self.settle:
            self.settle([args[n] for n in self.info["array_args"]])
        return args

    def call(self) -> tuple[float, list]:
        """Seconds of one call (the ``numpy.asarray`` of its outputs included), and the outputs."""
        import numpy
        args = self._args()
        positional = [args[a] for a in self.info["input_args"]]
        gc.collect()
        gc.disable()
        try:
            t0 = CLOCK[0]()
            result = self.impl(*positional)
            if result is None:
                result = []
            elif isinstance(result, (tuple, list)):
                result = list(result)
            else:
                result = [result]
            outputs = [numpy.asarray(r) for r in result]
            outputs += [numpy.asarray(args[a]) for a in self.info["output_args"]]
            elapsed = CLOCK[0]() - t0
        finally:
            gc.enable()
        return elapsed, outputs


def _wait_compiles(limit: float = COMPILE_WAIT) -> None:
    """Wait for lazynp's background kernel compilations, where this lazynp version has them
    (at most ``limit`` seconds: on a loaded machine the low-priority compile thread can
    starve; the timed calls then show what a user would see meanwhile)."""
    try:
        from lazynp.kernels import cpu
    except ImportError:
        return
    queue = getattr(cpu, "_queue", None)
    if queue is None:
        cpu.wait_compiles()
        return
    deadline = time.perf_counter() + limit
    while queue.unfinished_tasks and time.perf_counter() < deadline:
        time.sleep(0.01)


def _numba_impl(vendor: str, info: dict) -> tuple[Callable, str] | None:
    for variant in NUMBA_VARIANTS:
        path = _module_path(vendor, info, f"_numba_{variant}")
        if os.path.exists(path):
            try:
                module = load_source(path, f"npb_numba_{variant}")
                return getattr(module, info["func_name"]), variant
            except Exception:  # a variant that needs what this machine lacks: try the next
                continue
    return None


def _equal_data(a: dict, b: dict, names: Sequence[str]) -> bool:
    import numpy
    for n in names:
        x, y = numpy.asarray(a[n]), numpy.asarray(b[n])
        if x.dtype != y.dtype or x.shape != y.shape or not numpy.array_equal(x, y, equal_nan=True):
            return False
    return True


def run_kernel(vendor: str, info: dict, preset: str, repeat: int, numba: bool,
               budget: float) -> dict:
    """Time one kernel at one preset; the result is a JSON-able dict (see ``main``)."""
    import numpy
    import lazynp

    out: dict = {"kernel": info["short_name"], "preset": preset, "errors": []}
    rtol, atol, norm_error = tolerances(info)
    out["tolerances"] = f"rtol={rtol:g} atol={atol:g} norm_error={norm_error:g}"

    np_data = make_data(vendor, info, preset, "numpy")
    own_note = ""
    try:
        lz_data = make_data(vendor, info, preset, "lazynp")
        if not _equal_data(np_data, lz_data, info["array_args"]):
            raise ValueError("lazynp's initialize gave other values")
        # An initialize that calls numpy.random directly made NumPy arrays even under lazynp.
        foreign = [n for n in info["array_args"] if not isinstance(lz_data[n], lazynp.ndarray)]
        for n in foreign:
            lz_data[n] = lazynp.array(lz_data[n])
        if foreign:
            own_note = f"lazynp.array of {', '.join(foreign)} (made by numpy.random in initialize)"
    except Exception as e:  # noqa: BLE001 - the column says it used copies instead
        own_note = f"own inputs by lazynp.array ({type(e).__name__}: {e})"
        lz_data = dict(np_data)
        for n in info["array_args"]:
            lz_data[n] = lazynp.array(np_data[n])
    out["own_note"] = own_note

    np_kernel = getattr(load_source(_module_path(vendor, info, "_numpy"), "npb_numpy", "numpy"),
                        info["func_name"])
    lz_kernel = getattr(load_source(_module_path(vendor, info, "_numpy"), "npb_lazynp", "lazynp"),
                        info["func_name"])
    runners = {
        "numpy": Runner(info, np_kernel, np_data, numpy.copy),
        "own": Runner(info, lz_kernel, lz_data, lazynp.copy,
                      settle=lambda arrays: lazynp.evaluate(*arrays)),
        "asarray": Runner(info, lz_kernel, np_data, numpy.copy, wrap=lazynp.asarray),
    }

    # First calls: NumPy's answers are the reference; lazynp's first calls include compiling
    # (the wait for the kernel compilations they started in the background, as in dropin.py).
    ref = None
    first: dict = {}
    for name, runner in runners.items():
        try:
            first[name], outputs = runner.call()
            if name != "numpy":
                t0 = CLOCK[0]()
                _wait_compiles()
                first[name] += CLOCK[0]() - t0
        except Exception as e:  # noqa: BLE001 - reported in the table
            out["errors"].append(f"{name} first call: {type(e).__name__}: {e}")
            if name == "numpy":
                return out
            runners[name] = None
            continue
        if name == "numpy":
            ref = outputs
        else:
            bad = validate(ref, outputs, info)
            if bad:
                out["errors"].append(f"{name} first call: {bad}")
    out["first"] = first
    live = {k: r for k, r in runners.items() if r is not None}

    # Alternating rounds; fewer when NumPy's first call says they would exceed the budget.
    per_round = sum(first.get(k, 0.0) for k in live) or 1e-9
    rounds = max(1, min(repeat, int(budget / per_round)))
    times: dict = {k: [] for k in live}
    for i in range(rounds):
        for name, runner in live.items():
            t, outputs = runner.call()
            times[name].append(t)
            if name != "numpy" and i == rounds - 1:
                bad = validate(ref, outputs, info)
                if bad:
                    out["errors"].append(f"{name} timed call: {bad}")
    out["rounds"] = rounds
    out["median"] = {k: statistics.median(v) for k, v in times.items()}
    out["valid"] = {k: not any(e.startswith(k) for e in out["errors"]) for k in live}

    if numba:
        found = _numba_impl(vendor, info)
        if found is not None:
            impl, variant = found
            runner = Runner(info, impl, np_data, numpy.copy)
            try:
                t_first, outputs = runner.call()
                n_rounds = max(1, min(repeat, int(budget / 4 / max(t_first, 1e-9))))
                out["numba"] = statistics.median(runner.call()[0] for _ in range(n_rounds))
                out["numba_variant"] = variant
                out["numba_first"] = t_first
            except Exception as e:  # noqa: BLE001 - a reference column only
                out["numba_error"] = f"{type(e).__name__}: {e}"
    return out


def worker(args: argparse.Namespace) -> int:
    sys.path.insert(0, _ROOT)
    if args.clock == "cpu":
        CLOCK[0] = time.process_time
    info = {i["short_name"]: i for i in bench_infos(args.vendor)}[args.worker]
    result = run_kernel(args.vendor, info, args.preset, args.repeat, args.numba, args.budget)
    print("NPBENCH-RESULT " + json.dumps(result), flush=True)
    return 0


# --- the driver ------------------------------------------------------------------------------

def _spawn(kernel: str, args: argparse.Namespace) -> dict:
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", kernel, "--preset", args.preset,
           "--repeat", str(args.repeat), "--budget", str(args.budget), "--vendor", args.vendor,
           "--clock", args.clock]
    if not args.numba:
        cmd.append("--no-numba")
    env = dict(os.environ)
    env["PYTHONPATH"] = _ROOT + os.pathsep + env.get("PYTHONPATH", "")
    timeout = args.timeout or DEFAULT_TIMEOUT.get(args.preset, 600)
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return {"kernel": kernel, "preset": args.preset, "errors": [f"timed out after {timeout} s"]}
    for line in proc.stdout.splitlines():
        if line.startswith("NPBENCH-RESULT "):
            return json.loads(line[len("NPBENCH-RESULT "):])
    tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
    return {"kernel": kernel, "preset": args.preset,
            "errors": [f"exit {proc.returncode}: " + " | ".join(tail)]}


def _ratio(r: dict, column: str) -> float | None:
    med = r.get("median", {})
    if column in med and r.get("valid", {}).get(column) and med[column] > 0:
        return med["numpy"] / med[column]
    return None


def _numba_ratio(r: dict) -> float | None:
    if r.get("numba") and r.get("median", {}).get("numpy"):
        return r["median"]["numpy"] / r["numba"]
    return None


def geomean(values: Sequence[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1e3:.2f}"


def _x(ratio: float | None) -> str:
    return "-" if ratio is None else f"{ratio:.2f}x"


def report(results: list[dict], preset: str, csv_path: str | None) -> int:
    """Print the table, the geometric means and the slowest five; write the CSV. Exit status."""
    rows = []
    for r in results:
        med, first = r.get("median", {}), r.get("first", {})
        rows.append({
            "kernel": r["kernel"], "preset": preset,
            "numpy_first_ms": _ms(first.get("numpy")), "lazynp_first_ms": _ms(first.get("own")),
            "numpy_ms": _ms(med.get("numpy")), "lazynp_ms": _ms(med.get("own")),
            "asarray_ms": _ms(med.get("asarray")), "numba_ms": _ms(r.get("numba")),
            "own_x": _x(_ratio(r, "own")), "asarray_x": _x(_ratio(r, "asarray")),
            "numba_x": _x(_numba_ratio(r)), "rounds": r.get("rounds", "-"),
            "note": ("*" if r.get("own_note") else "") + "; ".join(r["errors"]),
        })
    cols = list(rows[0]) if rows else []
    widths = {c: max(len(c), *(len(str(row[c])) for row in rows)) for c in cols if c != "note"}
    print(" ".join(c.ljust(widths[c]) if c in widths else c for c in cols))
    for row in rows:
        print(" ".join(str(row[c]).ljust(widths[c]) if c in widths else str(row[c]) for c in cols))
    for r in results:
        if r.get("own_note"):
            print(f"* {r['kernel']}: {r['own_note']}")
    print(f"\ntolerances (NPBench's, per kernel): " + "; ".join(
        f"{r['kernel']} {r['tolerances']}" for r in results
        if "tolerances" in r and r["tolerances"] != "rtol=1e-05 atol=1e-08 norm_error=1e-05")
        + " (others rtol=1e-05 atol=1e-08 norm_error=1e-05)")

    own = [(r["kernel"], _ratio(r, "own")) for r in results if _ratio(r, "own")]
    asa = [_ratio(r, "asarray") for r in results if _ratio(r, "asarray")]
    nb = [_numba_ratio(r) for r in results if _numba_ratio(r)]
    failed = [r["kernel"] for r in results if r["errors"]]
    print(f"\npreset {preset}: {len(own)} of {len(results)} kernels validated (own inputs)")
    print(f"geometric mean, NumPy time / lazynp time: own inputs {geomean([v for _, v in own]):.3f}x,"
          f" asarray inputs {geomean(asa):.3f}x ({len(asa)} kernels)")
    if nb:
        print(f"Numba reference (NPBench's hand-ported versions): {geomean(nb):.3f}x ({len(nb)} kernels)")
    slowest = sorted(own, key=lambda kv: kv[1])[:5]
    print("slowest five (own inputs): " + ", ".join(f"{k} {v:.2f}x" for k, v in slowest))
    if failed:
        print("not validated or failed: " + ", ".join(failed))
    print("(ratios come from alternating calls in one process; absolute times on a busy machine are noisy)")

    if csv_path:
        with open(csv_path, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=cols)
            writer.writeheader()
            writer.writerows(rows)
        print(f"wrote {csv_path}")
    return 1 if failed else 0


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--preset", default="S", choices=("S", "M", "L", "paper"))
    p.add_argument("--only", default="", metavar="NAME[,NAME]",
                   help="run only these kernels (NPBench short names, e.g. durbin,mlp)")
    p.add_argument("--csv", default=None, metavar="PATH", help="also write the table as CSV")
    p.add_argument("--repeat", type=int, default=5, help="timed rounds per kernel (default 5)")
    p.add_argument("--budget", type=float, default=60.0,
                   help="seconds of timed rounds per kernel before fewer rounds are run")
    p.add_argument("--timeout", type=float, default=None,
                   help="seconds per kernel subprocess (default by preset: S 300, M 600, L 1800)")
    p.add_argument("--clock", default="wall", choices=("wall", "cpu"),
                   help="time the calls by the wall clock (default) or by the process's CPU "
                        "time over all its threads (steadier on a loaded machine)")
    p.add_argument("--no-numba", dest="numba", action="store_false",
                   help="skip the Numba reference column")
    p.add_argument("--list", action="store_true", help="list the kernels and exit")
    p.add_argument("--vendor", default=VENDOR, help=argparse.SUPPRESS)
    p.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if not os.path.isdir(os.path.join(args.vendor, "bench_info")):
        print(HOW_TO_GET.format(path=args.vendor))
        return 0
    if args.worker:
        return worker(args)
    infos = bench_infos(args.vendor)
    names = [i["short_name"] for i in infos if args.preset in i["parameters"]]
    if args.list:
        print("\n".join(names))
        return 0
    if args.only:
        wanted = [n.strip() for n in args.only.split(",") if n.strip()]
        unknown = sorted(set(wanted) - set(names))
        if unknown:
            print(f"unknown kernels: {', '.join(unknown)} (see --list)", file=sys.stderr)
            return 2
        names = [n for n in names if n in wanted]
    print(f"NPBench preset {args.preset}: {len(names)} kernels, {args.repeat} alternating rounds each,"
          f" {args.clock} clock"
          f"{', Numba reference' if args.numba else ''}\n")
    results = []
    for name in names:
        t0 = time.perf_counter()
        r = _spawn(name, args)
        results.append(r)
        print(f"  {name:12s} own {_x(_ratio(r, 'own')):>7s}  asarray {_x(_ratio(r, 'asarray')):>7s}"
              f"  numba {_x(_numba_ratio(r)):>7s}  ({time.perf_counter() - t0:.0f} s)"
              + (f"  {'; '.join(r['errors'])}" if r["errors"] else ""), flush=True)
    print()
    return report(results, args.preset, args.csv)


if __name__ == "__main__":
    sys.exit(main())
