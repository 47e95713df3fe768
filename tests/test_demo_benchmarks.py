"""``python -m lazynp demo`` and ``benchmarks/overhead.py --quick`` run, check their results,
and print what they promise.  No timing target is asserted here (performance targets live in
the benchmarks); the memory-flatness check is not a timing check and is asserted."""
from __future__ import annotations

import importlib.util
import io
import os
import subprocess
import sys

import pytest

import lazynp
from lazynp.tools import demo as _demo

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OVERHEAD = os.path.join(ROOT, "benchmarks", "overhead.py")


def _run(args, timeout=300):
    env = dict(os.environ)
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    p = subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True,
                       text=True, timeout=timeout)
    return p.returncode, p.stdout + p.stderr


def _load_overhead():
    spec = importlib.util.spec_from_file_location("_lazynp_bench_overhead", OVERHEAD)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# --- python -m lazynp --------------------------------------------------------------------------

def test_cli_without_command_prints_help():
    rc, out = _run(["-m", "lazynp"], timeout=60)
    assert rc == 0, out
    assert "usage" in out and "demo" in out


def test_demo_runs_and_every_program_matches_numpy():
    rc, out = _run(["-m", "lazynp", "demo", "--repeat", "1", "--compile-wait", "2"])
    assert rc == 0, out
    lines = out.splitlines()
    for prog in _demo.PROGRAMS:
        rows = [ln for ln in lines if ln.startswith(prog.name + " ")]
        assert rows, f"no table row for {prog.name}:\n{out}"
        assert " OK " in rows[0] + " ", f"{prog.name} not OK:\n{out}"
    assert "MISMATCH against NumPy" not in out and "All " in out
    # the header tells a new user what the numbers mean
    for word in ("lazy", "ops", "flushes", "nodes", "in-place", "fallback"):
        assert word in out


def test_demo_list():
    rc, out = _run(["-m", "lazynp", "demo", "--list"], timeout=60)
    assert rc == 0, out
    for prog in _demo.PROGRAMS:
        assert prog.name in out


def _wrong_under_lazynp(np):
    x = np.arange(4.0)
    return {"x": x * (2.0 if np is lazynp else 1.0), "n": np.arange(3)}


def test_demo_reports_mismatch_with_nonzero_status(monkeypatch):
    bad = _demo.DemoProgram("wrong", _wrong_under_lazynp, "differs on purpose")
    monkeypatch.setattr(_demo, "PROGRAMS", [bad])
    buf = io.StringIO()
    assert _demo.main(timing=False, out=buf) == 1
    text = buf.getvalue()
    assert "MISMATCH" in text and "wrong" in text


def test_demo_compare():
    import numpy
    ok, diff, problems = _demo.compare({"a": numpy.ones(3)}, {"a": numpy.ones(3)})
    assert ok and diff == 0.0 and not problems
    ok, diff, problems = _demo.compare({"a": numpy.ones(3)}, {"a": numpy.ones(3) + 1e-3})
    assert not ok and abs(diff - 1e-3) < 1e-12
    ok, _, problems = _demo.compare({"a": numpy.ones(3)}, {"a": numpy.ones(4)})
    assert not ok and "shape" in problems[0]
    ok, _, problems = _demo.compare({"a": numpy.ones(3, dtype=numpy.int64)},
                                    {"a": numpy.ones(3, dtype=numpy.float64)})
    assert not ok and "dtype" in problems[0]


# --- benchmarks/overhead.py ------------------------------------------------------------------

def test_overhead_benchmark_quick_runs_and_memory_is_flat():
    rc, out = _run([OVERHEAD, "--quick"])
    assert rc == 0, out
    assert "Summary" in out
    for row in ("(a) auto: 100 ops + force, lazynp/numpy", "(a) lazy: 100 ops + force",
                "(c) scalar loop, lazynp/numpy"):
        assert row in out
    assert "policy auto: ops run at once: 100, ops recorded: 0," in out
    assert "policy lazy: ops recorded: 100," in out
    # deterministic checks (memory flatness, results): must PASS; timing rows are not checked
    for name in ("(a) auto: result equals NumPy", "(a) lazy: result equals NumPy",
                 "(c) result equals NumPy", "(b) lazynp tracemalloc peak growth",
                 "(b) lazynp peak RSS growth", "(b) result equals NumPy"):
        rows = [ln for ln in out.splitlines() if ln.startswith(name)]
        assert rows, f"no summary row {name!r}:\n{out}"
        assert rows[-1].rstrip().endswith("PASS"), f"{rows[-1]}\n\n{out}"


def test_long_loop_tracemalloc_peak_is_flat():
    """In this process: the tracemalloc peak after 10x the steps is not above the peak at the
    checkpoint by more than the target (the benchmark's own loop, run directly)."""
    overhead = _load_overhead()
    r = overhead.memory_loop("lazynp", steps=8_000, checkpoint=2_000, traced=True,
                             compile_wait=120.0)
    assert r["value_ok"], r
    growth = r["traced_peak_end_mb"] - r["traced_peak_ck_mb"]
    assert growth < overhead.TARGET_GROWTH_MB, r
    assert r["bound_flushes"] >= 1, r


def test_common_helpers():
    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    try:
        import _common
    finally:
        sys.path.pop(0)
    calls = []
    t = _common.median_time(lambda: calls.append(1), repeat=5, number=3, warmup=1)
    assert t >= 0 and len(calls) == 16
    med = _common.interleaved_medians({"a": lambda: None, "b": lambda: None}, repeat=3)
    assert set(med) == {"a", "b"}
    args = _common.parse_args("x", ["--quick"])
    assert args.quick and args.repeat(100, 3) == 3 and args.size(10, 2) == 2
    s = _common.Summary()
    s.add("t", "<= 1x", "2x", False)                    # timing: soft
    buf = io.StringIO()
    assert s.print(file=buf) == 0 and "FAIL" in buf.getvalue()
    assert s.print(strict=True, file=io.StringIO()) == 1
    s.add("c", "< 5 MB", "9 MB", False, kind="check")   # deterministic: hard
    assert s.print(file=io.StringIO()) == 1
    buf = io.StringIO()
    _common.print_table([("x", 1), ("yy", 22)], ("name", "n"), file=buf)
    assert buf.getvalue().splitlines()[2].startswith("x ")


@pytest.mark.parametrize("seconds,unit", [(5e-6, "µs"), (5e-3, "ms"), (5.0, "s")])
def test_fmt_time(seconds, unit):
    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    try:
        import _common
    finally:
        sys.path.pop(0)
    assert _common.fmt_time(seconds).endswith(unit)


def test_programs_benchmark_quick_runs_and_matches_numpy():
    """benchmarks/programs.py checks every program's result against NumPy before timing."""
    rc, out = _run([os.path.join(ROOT, "benchmarks", "programs.py"), "--quick"], timeout=600)
    assert rc == 0, out
    assert "100k-point k-means" in out and "speedup" in out
