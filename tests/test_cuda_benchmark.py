"""benchmarks/gpu.py keeps working: its --smoke run (every section, tiny sizes) under Numba's
CUDA simulator.

The run goes through tests/_cuda_kernel_capture.py (``benchmark``: the script as its
``__main__``, its kernels' launches recorded), so that tests/test_cuda_compile.py compiles
its kernels without running it again."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import _cuda_kernel_capture
import _cuda_sim  # noqa: F401

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_gpu_benchmark_smoke_run_on_the_simulator(tmp_path):
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1", PYTHONPATH=ROOT)
    launched = tmp_path / "kernels.json"
    r = subprocess.run([sys.executable, _cuda_kernel_capture.__file__, "benchmark",
                        str(launched)],
                       capture_output=True, text=True, timeout=300, env=env, cwd=ROOT)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    out = r.stdout
    for section in ("W1 a*b + c*d - e*0.5", "row softmax", "two independent chains",
                    "MLP training step", "Numba CUDA simulator", "Summary"):
        assert section in out, out[-3000:]
    _cuda_kernel_capture.SESSION["benchmark"] = json.loads(launched.read_text())
