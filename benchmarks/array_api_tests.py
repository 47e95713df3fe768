"""data-apis/array-api-tests run on NumPy and on lazynp, with the lazynp-only failures (issue 34).

Usage::

    python benchmarks/array_api_tests.py [--vendor PATH] [--max-examples N] [-k EXPR]
                                         [--seed S] [--timeout SECONDS] [--policy lazy]
                                         [--confirm-runs N] [--show-all]

``--vendor`` is a clone of https://github.com/data-apis/array-api-tests with its ``array-api``
submodule (the specification's signature stubs, which the suite imports) checked out; default
``$ARRAY_API_TESTS_SRC`` or ``/work/vendor/array-api-tests``.  Nothing of it is copied into
this repository.  The suite is run twice, each time in its own pytest process with the same
settings (Hypothesis ``--max-examples``, ``--hypothesis-seed``, no deadline, a fresh example
database): once with ``ARRAY_API_TESTS_MODULE=numpy`` and once with
``ARRAY_API_TESTS_MODULE=lazynp``.  NumPy is the oracle: a test that fails on both is not
lazynp's.  Hypothesis draws different examples for the two modules, so each test that failed
on lazynp only is rerun on NumPy (``--confirm-runs`` times, replaying lazynp's failing examples,
with ten times the examples) before it counts.  The tests that fail on lazynp only are printed
grouped by cause (the exception type and the first line of its message, with numbers blanked),
then the totals of both runs.  ``--policy lazy`` runs lazynp with every operation recorded
(the default policy runs the suite's small arrays at once, through NumPy).

Exit status: 0 (also when the suite is missing: then it says how to get it).
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ElementTree
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_VENDOR = os.environ.get("ARRAY_API_TESTS_SRC", "/work/vendor/array-api-tests")

HOW_TO_GET = """\
array-api-tests not found at {path}. Get it with:

    git clone --recurse-submodules https://github.com/data-apis/array-api-tests {path}
    pip install -r {path}/requirements.txt      # pytest, hypothesis, ndindex

(the 'array-api' submodule, the specification, is needed: the suite imports its signature
stubs), then run this script again, or pass --vendor PATH."""


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line options (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vendor", default=DEFAULT_VENDOR,
                        help="array-api-tests checkout (with its array-api submodule)")
    parser.add_argument("--max-examples", type=int, default=20,
                        help="Hypothesis examples per test (same for both runs)")
    parser.add_argument("-k", dest="keyword", default=None, help="pytest -k expression")
    parser.add_argument("--seed", type=int, default=0, help="Hypothesis seed (both runs)")
    parser.add_argument("--timeout", type=int, default=1800,
                        help="seconds allowed for each of the two runs")
    parser.add_argument("--policy", default=None, choices=("auto", "lazy"),
                        help="lazynp's policy for its run (LAZYNP_POLICY); 'lazy' records "
                             "every operation, where the default runs small work at once")
    parser.add_argument("--confirm-runs", type=int, default=5,
                        help="reruns on NumPy of lazynp's own failures before they count")
    parser.add_argument("--show-all", action="store_true",
                        help="also list the tests that fail on NumPy")
    return parser.parse_args(argv)


def suite_is_present(vendor: Path) -> bool:
    """Whether ``vendor`` holds the tests and the specification stubs they import."""
    return ((vendor / "array_api_tests").is_dir()
            and (vendor / "array-api" / "src" / "array_api_stubs").is_dir())


def run_suite(module: str, args: argparse.Namespace, vendor: Path, work: Path,
              max_examples: int | None = None, test_ids: list[str] | None = None,
              seed: int | None = None) -> dict[str, str] | None:
    """Run the suite on ``module`` in folder ``work``; return ``{test id: failure text}``.

    ``work`` is the run's current folder, so its ``.hypothesis`` example database: a later
    run in the same folder replays the failing examples saved there first.  ``test_ids``
    restricts the run to those tests (else the whole suite, filtered by ``-k``);
    ``max_examples`` and ``seed`` override ``--max-examples`` and ``--seed``.  Returns ``None`` when the run produced no
    report (it timed out or crashed); what it printed last is shown.
    """
    report = work / f"report-{module}-{len(list(work.glob('report-*')))}.xml"
    targets = ([str(vendor / test_id) for test_id in test_ids] if test_ids
               else [str(vendor / "array_api_tests")])
    command = [sys.executable, "-m", "pytest", *targets,
               "-q", "-p", "no:cacheprovider", "--rootdir", str(vendor),
               f"--max-examples={max_examples or args.max_examples}",
               f"--hypothesis-seed={args.seed if seed is None else seed}",
               "--disable-deadline", f"--junitxml={report}", "-o", "junit_family=xunit1"]
    if args.keyword and not test_ids:
        command += ["-k", args.keyword]
    env = dict(os.environ, ARRAY_API_TESTS_MODULE=module,
               PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    if module == "lazynp" and args.policy:
        env["LAZYNP_POLICY"] = args.policy
    try:
        done = subprocess.run(command, cwd=work, env=env, capture_output=True, text=True,
                              timeout=args.timeout)
    except subprocess.TimeoutExpired:
        print(f"{module}: the run took more than {args.timeout} s (--timeout)")
        return None
    if not report.exists():
        print(f"{module}: no report (exit status {done.returncode}):\n"
              + (done.stdout + done.stderr)[-3000:])
        return None
    print(f"{module}: {done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ''}")
    return failures_from_junit(report)


def failures_from_junit(report: Path) -> dict[str, str]:
    """``{test id: failure text}`` for each failed or errored test case of a JUnit report."""
    failed: dict[str, str] = {}
    for case in ElementTree.parse(report).getroot().iter("testcase"):
        problem = case.find("failure")
        if problem is None:
            problem = case.find("error")
        if problem is None:
            continue
        test_file = case.get("file") or case.get("classname", "").replace(".", "/") + ".py"
        test_id = f"{test_file}::{case.get('name')}"
        failed[test_id] = (problem.get("message") or "") + "\n" + (problem.text or "")
    return failed


def cause_of(failure: str) -> str:
    """A short label shared by failures with the same cause.

    The exception line of the report (``E   SomeError: message``, else the message) with
    numbers, quoted values and array reprs blanked, so that one cause hit with different
    examples is counted once.
    """
    lines = [line[1:].strip() for line in failure.splitlines() if line.startswith("E ")]
    text = next((line for line in lines if re.match(r"[A-Za-z_.]+(Error|Exception|Warning)\b", line)),
                lines[0] if lines else failure.strip().splitlines()[0] if failure.strip() else "?")
    text = re.sub(r"array\(.*", "array(...)", text)
    text = re.sub(r"'[^']*'", "'…'", text)
    text = re.sub(r"(?<![\w.])[-+]?\d+(\.\d+)?(e[-+]?\d+)?(?![\w.])", "N", text)
    return text[:160]


def main(argv: list[str] | None = None) -> int:
    """Run both suites and print the failures that are lazynp's only."""
    args = parse_args(argv)
    vendor = Path(args.vendor).resolve()
    if not suite_is_present(vendor):
        print(HOW_TO_GET.format(path=vendor))
        return 0
    with tempfile.TemporaryDirectory(prefix="array_api_numpy_") as numpy_work, \
            tempfile.TemporaryDirectory(prefix="array_api_lazynp_") as lazynp_work:
        numpy_failed = run_suite("numpy", args, vendor, Path(numpy_work))
        lazynp_failed = run_suite("lazynp", args, vendor, Path(lazynp_work))
        if numpy_failed is None or lazynp_failed is None:
            return 0
        only_lazynp = {test: text for test, text in lazynp_failed.items()
                       if test not in numpy_failed}
        # Hypothesis draws different examples for the two modules: a special case ("x is +0
        # or x == -0") may be hit on one and missed on the other.  Rerun lazynp's own failures
        # on NumPy in lazynp's folder, whose example database replays lazynp's failing
        # examples first, then ten times the examples, before calling them lazynp's.  Some
        # tests (test_special_cases.py's test_unary) draw one example per run with
        # ``.example()``: these reruns are repeated with other seeds (--confirm-runs).
        numpy_too: dict[str, str] = {}
        for attempt in range(1, args.confirm_runs + 1):
            if not only_lazynp:
                break
            rerun = run_suite("numpy", args, vendor, Path(lazynp_work),
                              max_examples=10 * args.max_examples,
                              test_ids=sorted(only_lazynp), seed=args.seed + attempt) or {}
            numpy_too.update({test: only_lazynp.pop(test) for test in list(only_lazynp)
                              if test in rerun})
    by_cause: dict[str, list[str]] = defaultdict(list)
    for test, text in sorted(only_lazynp.items()):
        by_cause[cause_of(text)].append(test)
    for cause, tests in sorted(by_cause.items(), key=lambda item: -len(item[1])):
        print(f"\n[{len(tests)}] {cause}")
        for test in tests:
            print(f"    {test}")
    if numpy_too:
        print("\nfailing on NumPy too, given lazynp's failing examples or "
              f"{10 * args.max_examples} examples (not lazynp's):")
        for test in sorted(numpy_too):
            print(f"    {test}")
    if args.show_all:
        print("\nfailing on NumPy too (not lazynp's):")
        for test in sorted(set(numpy_failed) & set(lazynp_failed)):
            print(f"    {test}")
        for test in sorted(set(numpy_failed) - set(lazynp_failed)):
            print(f"    {test}   (fails on NumPy only)")
    print(f"\nfailures: numpy {len(numpy_failed)}, lazynp {len(lazynp_failed)}, "
          f"lazynp only {len(only_lazynp)} (--max-examples={args.max_examples}, "
          f"--seed={args.seed}, policy {args.policy or os.environ.get('LAZYNP_POLICY', 'auto')}; "
          f"{len(numpy_too)} more fail on NumPy on a rerun)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
