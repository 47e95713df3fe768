"""``benchmarks/dask_arrays.py --smoke`` runs, and both of its sides give NumPy's answers.

No timing is asserted: the smoke sizes are tiny and the cluster is in-process.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

pytest.importorskip("distributed")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "benchmarks", "dask_arrays.py")
WORKLOADS = ("W1 ", "W2 ", "softmax of rows", "standardize columns", "stencil, ",
             "linear regression, ", "out of core (smoke")


@pytest.fixture(scope="module")
def smoke_output() -> str:
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
               LAZYNP_DASK_PROGRESS="0")
    proc = subprocess.run([sys.executable, SCRIPT, "--smoke"], capture_output=True, text=True,
                          env=env, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    return proc.stdout


def _row(out: str, workload: str) -> str:
    rows = [line for line in out.splitlines() if line.startswith(workload)]
    assert len(rows) == 1, f"no single row for {workload!r}"
    return rows[0]


@pytest.mark.parametrize("workload", WORKLOADS)
def test_every_workload_has_a_row_whose_dask_side_equals_numpy(smoke_output, workload):
    assert re.search(r"NumPy: (lazynp yes, )?dask yes\s*$", _row(smoke_output, workload))


@pytest.mark.parametrize("workload", WORKLOADS)
def test_the_lazynp_side_runs_and_agrees_with_dask_and_numpy(smoke_output, workload):
    # (the linear-regression row included: lazynp.grad of its loss over chunked data)
    row = _row(smoke_output, workload)
    assert "error:" not in row
    assert re.search(r"\byes; NumPy: lazynp yes, dask yes\s*$", row)


def test_no_answer_disagrees_and_the_summary_is_printed(smoke_output):
    assert " NO" not in smoke_output
    assert "out of core (lazynp) completes" in smoke_output
    assert "FAILED" not in smoke_output


def test_the_w1_memory_note_gives_its_arithmetic(smoke_output):
    note = next(line for line in smoke_output.splitlines() if line.startswith("W1's memory"))
    numbers = [float(x) for x in re.findall(r"(\d+(?:\.\d+)?) MiB", note)]
    result, lazynp_peak, _, dask_peak, _, half = numbers[:6]
    assert half == pytest.approx(dask_peak / 2, abs=0.51)
    assert lazynp_peak >= 0 and result >= 0
