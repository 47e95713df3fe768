"""Run the test files NumPy ships against lazynp, beside NumPy's own run.

Each test file of the installed ``numpy`` package is copied (with NumPy's ``conftest.py``)
to a temporary folder and run in its own pytest process, twice: as shipped (NumPy's run)
and with ``import numpy as np`` and ``from numpy[.testing|.linalg|.random|.fft] import``
rewritten to lazynp's.  Each process has a time limit and an address-space limit (``resource.setrlimit``), so a
test that would run the machine out of memory fails with ``MemoryError`` instead.

The two runs are compared by pytest node id: "% of NumPy" is the share of the tests NumPy
passes that pass on lazynp too (a test NumPy's parametrization generates and lazynp's does
not counts as not passed).

    python benchmarks/numpy_tests.py                       # all files
    python benchmarks/numpy_tests.py --only shape_base -k concatenate --failures 20
    python benchmarks/numpy_tests.py --csv out.csv --groups 15

NumPy's results are cached per NumPy version, file and ``-k`` (``--no-cache`` reruns them).
"""
from __future__ import annotations

import argparse
import collections
import csv
import hashlib
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

#: the test files, relative to the installed numpy package
FILES = (
    "lib/tests/test_function_base.py",
    "_core/tests/test_numeric.py",
    "linalg/tests/test_linalg.py",
    "lib/tests/test_shape_base.py",
    "fft/tests/test_pocketfft.py",
    "_core/tests/test_shape_base.py",
    "_core/tests/test_ufunc.py",
    "_core/tests/test_umath.py",
    "_core/tests/test_indexing.py",
    "lib/tests/test_nanfunctions.py",
)

#: the rewritten imports (at any indentation): what a user switching to lazynp changes,
#: ``numpy`` and the public modules lazynp has (``from numpy import array``, ``from
#: numpy.linalg import norm``...); NumPy's private modules and ``numpy.exceptions`` stay
REWRITES = (
    (re.compile(r"^(\s*)import numpy as np\b", re.M), r"\1import lazynp as np"),
    (re.compile(r"^(\s*)from numpy(\.testing|\.linalg|\.random|\.fft)? import\b", re.M),
     r"\1from lazynp\2 import"),
)

PASSED, FAILED, ERROR, SKIPPED = "passed", "failed", "error", "skipped"

# the pytest plugin each run loads: one JSON line per test (node id, outcome, first line of
# the failure), and one per collection error
_REPORT_PLUGIN = '''
import json, os

_OUT = open(os.environ["NUMPY_TESTS_REPORT"], "a")


def _line(nodeid, outcome, message=""):
    _OUT.write(json.dumps({"id": nodeid, "outcome": outcome, "message": message[:300]}) + "\\n")
    _OUT.flush()


def _message(report):
    crash = getattr(report.longrepr, "reprcrash", None)
    if crash is not None:
        return crash.message.splitlines()[0] if crash.message else ""
    return str(report.longrepr).strip().splitlines()[-1] if report.longrepr else ""


def pytest_runtest_logreport(report):
    xfail = hasattr(report, "wasxfail")
    if report.when == "call" or (report.when == "setup" and not report.passed):
        if report.passed:
            _line(report.nodeid, "failed" if xfail else "passed")   # (a strict xpass)
        elif report.skipped:
            _line(report.nodeid, "skipped")
        elif report.when == "setup":
            _line(report.nodeid, "error", _message(report))
        else:
            _line(report.nodeid, "failed", _message(report))
    elif report.when == "teardown" and report.failed:
        _line(report.nodeid, "error", "teardown: " + _message(report))


def pytest_collectreport(report):
    if report.failed:
        _line(report.nodeid + "::<collection>", "error", "collection: " + _message(report))
'''


@dataclass
class Run:
    """One pytest process over one file: outcome per node id, how the process ended."""
    outcomes: dict = field(default_factory=dict)      # node id -> outcome
    messages: dict = field(default_factory=dict)      # node id -> first line of the failure
    status: str = "ok"                                # ok | timeout | crashed (rc)
    seconds: float = 0.0

    def count(self, outcome: str) -> int:
        return sum(1 for o in self.outcomes.values() if o == outcome)

    def passed(self) -> set:
        return {k for k, o in self.outcomes.items() if o == PASSED}


def numpy_dir() -> Path:
    import numpy
    return Path(numpy.__file__).resolve().parent


def rewrite(source: str) -> str:
    """``source`` with NumPy's imports (:data:`REWRITES`) rewritten to lazynp's."""
    for pattern, repl in REWRITES:
        source = pattern.sub(repl, source)
    return source


def _limits(memory_bytes: int):
    def apply():
        resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
        os.setsid()             # its own process group: a timeout ends all of it
    return apply


def run_file(rel: str, lazy: bool, *, timeout: float, memory_gb: float, k: str | None,
             extra: list | None = None) -> Run:
    """Run NumPy's test file ``rel`` (rewritten to lazynp's imports when ``lazy``)."""
    src = numpy_dir() / rel
    with tempfile.TemporaryDirectory(prefix="numpy_tests_") as tmp:
        tmp = Path(tmp)
        shutil.copy(numpy_dir() / "conftest.py", tmp / "conftest.py")
        text = src.read_text()
        (tmp / src.name).write_text(rewrite(text) if lazy else text)
        (tmp / "_numpy_tests_report.py").write_text(_REPORT_PLUGIN)
        report = tmp / "report.jsonl"
        memory = int(memory_gb * 2**30)
        env = dict(os.environ, NUMPY_TESTS_REPORT=str(report), NPY_AVAILABLE_MEM=str(memory),
                   PYTHONPATH=os.pathsep.join([str(REPO), str(tmp)]),
                   PYTHONDONTWRITEBYTECODE="1")
        cmd = [sys.executable, "-m", "pytest", src.name, "-q", "-p", "_numpy_tests_report",
               "-p", "no:cacheprovider", "-o", "addopts=", "--rootdir", str(tmp),
               "-W", "ignore::pytest.PytestUnraisableExceptionWarning"]
        if k:
            cmd += ["-k", k]
        cmd += extra or []
        run = Run()
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=tmp, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, preexec_fn=_limits(memory))
        try:
            tail = proc.communicate(timeout=timeout)[0]
            if proc.returncode not in (0, 1, 5):     # 1: failures, 5: nothing collected
                run.status = f"crashed (rc {proc.returncode})"
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            tail = proc.communicate()[0]
            run.status = "timeout"
        run.seconds = time.perf_counter() - start
        if report.exists():
            for line in report.read_text().splitlines():
                rec = json.loads(line)
                nodeid = rec["id"]
                run.outcomes[nodeid] = rec["outcome"]
                if rec["message"]:
                    run.messages[nodeid] = rec["message"]
        if run.status != "ok" or not run.outcomes:
            run.messages["<process>"] = tail.decode(errors="replace")[-2000:]
        return run


def _cache_path(rel: str, k: str | None) -> Path:
    import numpy
    base = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    key = hashlib.sha1(f"{rel}|{k}".encode()).hexdigest()[:12]
    return base / "lazynp-numpy-tests" / numpy.__version__ / f"{Path(rel).stem}-{key}.json"


def numpy_run(rel: str, *, cache: bool, **kw) -> Run:
    """NumPy's own run of ``rel`` (cached when ``cache``)."""
    path = _cache_path(rel, kw.get("k"))
    if cache and path.exists():
        data = json.loads(path.read_text())
        return Run(data["outcomes"], data["messages"], data["status"], data["seconds"])
    run = run_file(rel, False, **kw)
    if cache and run.status == "ok":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(run.__dict__))
    return run


@dataclass
class Comparison:
    rel: str
    lazy: Run
    numpy: Run

    @property
    def kept(self) -> int:
        """How many of the tests NumPy passes pass on lazynp."""
        return len(self.numpy.passed() & self.lazy.passed())

    @property
    def share(self) -> float:
        n = len(self.numpy.passed())
        return 100.0 * self.kept / n if n else 100.0

    def lost(self) -> list:
        """The tests NumPy passes and lazynp does not, with lazynp's outcome and message."""
        out = []
        for nodeid in sorted(self.numpy.passed() - self.lazy.passed()):
            outcome = self.lazy.outcomes.get(nodeid, "not generated")
            out.append((nodeid, outcome, self.lazy.messages.get(nodeid, "")))
        return out


def compare(rel: str, *, timeout: float, memory_gb: float, k: str | None,
            cache: bool = True) -> Comparison:
    kw = dict(timeout=timeout, memory_gb=memory_gb, k=k)
    return Comparison(rel, run_file(rel, True, **kw), numpy_run(rel, cache=cache, **kw))


def _cells(run: Run) -> str:
    s = f"{run.count(PASSED):5d} {run.count(FAILED):4d} {run.count(ERROR):4d} " \
        f"{run.count(SKIPPED):4d}"
    return s if run.status == "ok" else f"{s} {run.status}"


HEADER = (f"{'file':34s} {'lazynp: pass fail err skip':27s} {'NumPy: pass fail err skip':27s} "
          f"{'% of NumPy':>10s}")


def print_row(c: Comparison) -> None:
    print(f"{c.rel:34s} {_cells(c.lazy):27s} {_cells(c.numpy):27s} {c.share:9.2f}%  "
          f"({c.lazy.seconds:.0f} s)", flush=True)


def normalized(message: str) -> str:
    """A failure message with its numbers and quoted values blanked (to group failures)."""
    message = re.sub(r"'[^']*'|\"[^\"]*\"", "'…'", message)
    return re.sub(r"\d+(\.\d+)?", "N", message)[:140]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--only", help="comma-separated substrings: run the files whose path has one")
    p.add_argument("-k", help="pytest's -k expression, for both runs")
    p.add_argument("--csv", help="write the per-file figures to this CSV file")
    p.add_argument("--timeout", type=float, default=900, help="seconds per process (900)")
    p.add_argument("--memory-gb", type=float, default=4.0,
                   help="address-space limit per process in GiB (4)")
    p.add_argument("--failures", type=int, default=0, metavar="N",
                   help="list up to N tests per file that NumPy passes and lazynp does not")
    p.add_argument("--groups", type=int, default=0, metavar="N",
                   help="the N most common failure messages per file")
    p.add_argument("--no-cache", action="store_true", help="rerun NumPy's side too")
    args = p.parse_args(argv)
    files = FILES
    if args.only:
        wanted = args.only.split(",")
        files = [f for f in FILES if any(w in f for w in wanted)]
    print(HEADER, flush=True)
    rows = []
    for rel in files:
        c = compare(rel, timeout=args.timeout, memory_gb=args.memory_gb, k=args.k,
                    cache=not args.no_cache)
        rows.append(c)
        print_row(c)
        if c.lazy.status != "ok" or not c.lazy.outcomes:
            print("   process output:", c.lazy.messages.get("<process>", "")[-800:])
        lost = c.lost()
        if args.groups and lost:
            groups = collections.Counter(f"{o}: {normalized(m)}" for _, o, m in lost)
            for msg, n in groups.most_common(args.groups):
                print(f"   {n:5d}  {msg}")
        for nodeid, outcome, message in lost[:args.failures]:
            print(f"   {outcome:13s} {nodeid}  {message[:160]}")
    numpy_passed = sum(len(c.numpy.passed()) for c in rows)
    kept = sum(c.kept for c in rows)
    overall = 100.0 * kept / numpy_passed if numpy_passed else 100.0
    print(f"{'all files':34s} {kept} of the {numpy_passed} tests NumPy passes: {overall:.2f}%")
    if args.csv:
        with open(args.csv, "w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(["file", "lazynp_passed", "lazynp_failed", "lazynp_errors",
                        "lazynp_skipped", "lazynp_status", "numpy_passed", "numpy_failed",
                        "numpy_errors", "numpy_skipped", "kept", "percent_of_numpy"])
            for c in rows:
                w.writerow([c.rel, *(c.lazy.count(o) for o in (PASSED, FAILED, ERROR, SKIPPED)),
                            c.lazy.status,
                            *(c.numpy.count(o) for o in (PASSED, FAILED, ERROR, SKIPPED)),
                            c.kept, f"{c.share:.2f}"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
