"""Shared helpers for the lazynp benchmarks (timing, memory, tables, pass/fail summary).

Every benchmark compares lazynp with its peers *in the same run* and prints ratios: these
machines are noisy and absolute times are not comparable across runs.

Typical use::

    from _common import parse_args, median_time, print_table, Summary

    args = parse_args("what this benchmark measures")
    t_np = median_time(lambda: f(numpy), repeat=args.repeat(50, 5))
    ...
    summary = Summary()
    summary.add("name", target="<= 3.0x", measured=f"{r:.2f}x", ok=r <= 3.0)
    sys.exit(summary.print())       # 0 unless --strict and a target failed

With ``--write-table`` the summary is also written to ``docs/benchmarks/<script>.md`` with
the date, the machine and the commit (:func:`write_table`): benchmark figures live in these
generated tables, not in the documentation's prose.
"""
from __future__ import annotations

import argparse
import datetime
import gc
import os
import platform
import statistics
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Callable, Iterable, Sequence

# Benchmarks are run as scripts (``python benchmarks/x.py``) from a checkout: make the
# repository's ``lazynp`` importable without installing it.
_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)


# --- command line ------------------------------------------------------------------------------

class Args(argparse.Namespace):
    quick: bool = False
    strict: bool = False

    def repeat(self, full: int, quick: int) -> int:
        """``full`` repetitions normally, ``quick`` under ``--quick``."""
        return quick if self.quick else full

    def size(self, full: int, quick: int) -> int:
        """A problem size: ``full`` normally, ``quick`` under ``--quick``."""
        return quick if self.quick else full


#: set by ``--write-table``: :meth:`Summary.print` then writes the generated table
_write_table_requested = False


class _WriteTableFlag(argparse.Action):
    """``--write-table``: remembered for :meth:`Summary.print`, however the script parses."""

    def __init__(self, option_strings, dest, **kwargs):
        super().__init__(option_strings, dest, nargs=0, default=False, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        global _write_table_requested
        _write_table_requested = True
        setattr(namespace, self.dest, True)


def make_parser(description: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--quick", action="store_true",
                   help="few repetitions and small sizes (CI smoke run; figures are rough)")
    p.add_argument("--strict", action="store_true",
                   help="exit non-zero when a target is missed (timing targets included)")
    p.add_argument("--write-table", action=_WriteTableFlag,
                   help="also write the summary to docs/benchmarks/<script>.md with the date, "
                        "the machine and the commit")
    return p


def parse_args(description: str, argv: Sequence[str] | None = None,
               parser: argparse.ArgumentParser | None = None) -> Args:
    """Parse the common flags (``--quick``, ``--strict``) plus any the caller added."""
    parser = parser or make_parser(description)
    return parser.parse_args(argv, namespace=Args())


# --- timing ------------------------------------------------------------------------------------

def time_runs(fn: Callable[[], object], repeat: int = 7, number: int = 1,
              warmup: int = 1) -> list[float]:
    """Seconds per call of ``fn``, one figure per repetition (each the mean of ``number`` calls).

    ``warmup`` calls run first (JIT compilation, caches). The garbage collector is disabled
    during each repetition, like :mod:`timeit`.
    """
    for _ in range(warmup):
        fn()
    return [_timed(fn, number) for _ in range(repeat)]


def _timed(fn: Callable[[], object], number: int) -> float:
    """Seconds per call of ``fn`` over ``number`` calls, with the garbage collector paused."""
    gc_was = gc.isenabled()
    gc.disable()
    try:
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        t1 = time.perf_counter()
    finally:
        if gc_was:
            gc.enable()
    return (t1 - t0) / number


def median_time(fn: Callable[[], object], repeat: int = 7, number: int = 1,
                warmup: int = 1) -> float:
    """Median over ``repeat`` repetitions of the seconds one call of ``fn`` takes."""
    return statistics.median(time_runs(fn, repeat, number, warmup))


def interleaved_medians(fns: dict[str, Callable[[], object]], repeat: int = 7,
                        number: int = 1, warmup: int = 1) -> dict[str, float]:
    """Median seconds per call of each of ``fns``, measured round-robin.

    Interleaving the contenders makes a ratio robust to the machine's load changing during
    the run (the usual failure of timing A fully, then B).  Each round runs them in a new
    (seeded) random order: a contender that leaves threads spinning after its call (BLAS,
    XLA's pool) would otherwise always slow down the one timed after it.
    """
    import random
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    samples: dict[str, list[float]] = {k: [] for k in fns}
    order = list(fns)
    rng = random.Random(0)
    for _ in range(repeat):
        rng.shuffle(order)
        for name in order:
            samples[name].append(_timed(fns[name], number))
    return {k: statistics.median(v) for k, v in samples.items()}


def fmt_time(seconds: float) -> str:
    """A duration with a sensible unit: ``12.3 µs``, ``4.56 ms``, ``1.23 s``."""
    s = abs(seconds)
    if s < 1e-3:
        return f"{seconds * 1e6:.1f} µs"
    if s < 1.0:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds:.2f} s"


def fmt_ratio(num: float, den: float) -> str:
    return f"{num / den:.2f}x" if den > 0 else "inf"


# --- memory ------------------------------------------------------------------------------------

def rss_mb() -> float | None:
    """Current resident set size in MB (psutil), or None when psutil is not installed."""
    try:
        import psutil
    except ImportError:
        return None
    return psutil.Process().memory_info().rss / 2**20


def max_rss_mb() -> float:
    """Peak resident set size of this process so far, in MB (``getrusage``)."""
    import resource
    r = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    # Linux reports kB, macOS bytes.
    return r / 2**20 if sys.platform == "darwin" else r / 2**10


class TraceMalloc:
    """``with TraceMalloc() as tm: ...`` then ``tm.peak_mb`` / ``tm.current_mb``.

    NumPy reports its data buffers to tracemalloc, so the peak includes array memory.
    ``reset_peak()`` restarts the peak measurement inside the block.
    """

    def __enter__(self):
        self._was = tracemalloc.is_tracing()
        if not self._was:
            tracemalloc.start()
        tracemalloc.reset_peak()
        self.peak_mb = self.current_mb = 0.0
        return self

    def reset_peak(self) -> None:
        tracemalloc.reset_peak()

    def sample(self) -> tuple[float, float]:
        cur, peak = tracemalloc.get_traced_memory()
        self.current_mb, self.peak_mb = cur / 2**20, peak / 2**20
        return self.current_mb, self.peak_mb

    def __exit__(self, *exc):
        self.sample()
        if not self._was:
            tracemalloc.stop()
        return False


# --- output ------------------------------------------------------------------------------------

def print_table(rows: Iterable[Sequence[object]], headers: Sequence[str],
                title: str | None = None, file=None) -> None:
    """Print an aligned plain-text table (first column left-aligned, the others right)."""
    file = file or sys.stdout
    rows = [[str(c) for c in r] for r in rows]
    headers = [str(h) for h in headers]
    widths = [len(h) for h in headers]
    for r in rows:
        for i, c in enumerate(r):
            widths[i] = max(widths[i], len(c))

    def line(cells):
        out = []
        for i, c in enumerate(cells):
            out.append(c.ljust(widths[i]) if i == 0 else c.rjust(widths[i]))
        return "  ".join(out).rstrip()

    if title:
        print(title, file=file)
    print(line(headers), file=file)
    print("  ".join("-" * w for w in widths), file=file)
    for r in rows:
        print(line(r), file=file)
    file.flush()


def header(text: str, file=None) -> None:
    file = file or sys.stdout
    print(file=file)
    print(text, file=file)
    print("=" * len(text), file=file)


class Summary:
    """The "target / measured / PASS-FAIL" table printed at the end of a benchmark.

    ``kind`` is ``"time"`` for timing targets (noisy: reported, but they only fail the exit
    status under ``--strict``), ``"check"`` for deterministic ones (memory flatness,
    correctness), which always do, or ``"info"`` for a figure shown without a target.
    """

    def __init__(self):
        self.rows: list[tuple[str, str, str, bool, str]] = []

    def add(self, name: str, target: str, measured: str, ok: bool, kind: str = "time") -> None:
        self.rows.append((name, target, measured, bool(ok), kind))

    @property
    def all_ok(self) -> bool:
        return all(r[3] for r in self.rows)

    def failed(self, kinds: Iterable[str] = ("time", "check")) -> list[str]:
        kinds = set(kinds)
        return [r[0] for r in self.rows if not r[3] and r[4] in kinds]

    def print(self, strict: bool = False, file=None) -> int:
        """Print the summary; return the exit status to use (0 or 1)."""
        header("Summary", file)
        print_table([(n, t, m, "-" if kind == "info" else "PASS" if ok else "FAIL")
                     for n, t, m, ok, kind in self.rows],
                    ("benchmark", "target", "measured", "result"), file=file)
        bad = self.failed(("time", "check") if strict else ("check",))
        soft = [n for n in self.failed(("time",)) if n not in bad]
        file = file or sys.stdout
        if soft:
            print(f"\n(timing targets missed, not an error without --strict: {', '.join(soft)})",
                  file=file)
        if bad:
            print(f"\nFAILED: {', '.join(bad)}", file=file)
        file.flush()
        if _write_table_requested:
            path = write_table(Path(sys.argv[0]).stem, ("benchmark", "target", "measured",
                                                         "result"), self.table_rows())
            print(f"\n(table written to {path})", file=file)
        return 1 if bad else 0

    def table_rows(self) -> list[tuple[str, str, str, str]]:
        """The summary's rows as written to a generated table."""
        return [(n, t, m, "-" if kind == "info" else "PASS" if ok else "FAIL")
                for n, t, m, ok, kind in self.rows]


# --- generated tables (docs/benchmarks/) -------------------------------------------------------

TABLES_DIR = Path(_ROOT) / "docs" / "benchmarks"


def machine_description() -> str:
    """The machine in one line: CPU model, logical CPUs, load, OS, Python and NumPy versions."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f
                       if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    import numpy
    load = f", load average {os.getloadavg()[0]:.1f} at the end" \
        if hasattr(os, "getloadavg") else ""
    return (f"{cpu}, {os.cpu_count()} logical CPUs{load}, {platform.system()} "
            f"{platform.release()}, Python {platform.python_version()}, "
            f"NumPy {numpy.__version__}")


def git_commit() -> str:
    """The checkout's commit (short hash), with ``+changes`` when tracked files differ."""
    def git(*args: str) -> str:
        return subprocess.run(("git", *args), cwd=_ROOT, capture_output=True, text=True,
                              check=True).stdout.strip()
    try:
        commit = git("rev-parse", "--short", "HEAD")
        dirty = git("status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.CalledProcessError):
        return "unknown (not a git checkout)"
    return commit + (" +changes" if dirty else "")


def _cell(value: object) -> str:
    return str(value).replace("|", "\\|").replace("\n", " ")


def write_table(name: str, headers: Sequence[str], rows: Iterable[Sequence[object]], *,
                command: str | None = None, date: str | None = None,
                machine: str | None = None, commit: str | None = None,
                notes: Sequence[str] = (), directory: Path | None = None) -> Path:
    """Write one benchmark's figures as ``<directory>/<name>.md`` and return its path.

    Parameters
    ----------
    name : str
        The benchmark (the script's name without ``.py``); also the file name.
    headers, rows : sequences
        The table.
    command, date, machine, commit : str, optional
        Where the figures come from.  By default: this process's command line, the current
        UTC time, :func:`machine_description` and :func:`git_commit`.  Figures measured
        elsewhere (transcribed) must state all four.
    notes : sequence of str
        Paragraphs printed under the table.
    directory : Path, optional
        ``docs/benchmarks`` of this checkout by default.
    """
    directory = Path(directory) if directory is not None else TABLES_DIR
    directory.mkdir(parents=True, exist_ok=True)
    if command is None:
        command = "python " + " ".join([os.path.relpath(sys.argv[0], _ROOT)] + sys.argv[1:])
    if date is None:
        date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = [f"# {name}", "",
             "<!-- generated by benchmarks/_common.py write_table(): edit by running the "
             "benchmark again, not by hand -->", "",
             f"* command: `{command}`" if command.startswith("python") else
             f"* source: {command}",
             f"* date: {date}",
             f"* machine: {machine if machine is not None else machine_description()}",
             f"* commit: {commit if commit is not None else git_commit()}", "",
             "| " + " | ".join(_cell(h) for h in headers) + " |",
             "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    for note in notes:
        lines += ["", note]
    path = directory / f"{name}.md"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path
