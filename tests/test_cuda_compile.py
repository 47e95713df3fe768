"""Every CUDA kernel lazynp generates compiles for real, without a GPU.

The device tests (``tests/test_cuda_*.py``) and ``benchmarks/gpu.py --smoke`` run under Numba's
CUDA simulator, which compiles nothing.  Here one subprocess runs them under the simulator and
captures each generated kernel source with its argument types; a second one (the simulator and
the real target cannot share a process) compiles each with numba-cuda's real compiler (NVVM)
for compute capability 9.0 (H100) and assembles it with ``ptxas -arch=sm_90`` (or nvJitLink,
the ptxas of the NVVM's release, when the installed ``ptxas`` is older), printing the count,
register use and spills.  Results are cached by source hash in the temp directory, and so is
the captured list, under a hash of the sources and tests that generate it.  In a full test
session the device tests and the benchmark's smoke run have already run (this test runs
last, tests/conftest.py): the kernels they launched were recorded then, and no second
capture runs.

Skipped only when numba-cuda finds no NVVM (``pip install numba-cuda[cu13]`` brings it; a
CUDA toolkit at ``CUDA_HOME`` or ``/usr/local/cuda`` also serves).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

import pytest

import _cuda_kernel_capture

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HELPER = os.path.join(ROOT, "tests", "_cuda_kernel_capture.py")
CACHE = os.path.join(tempfile.gettempdir(), "lazynp-cuda-compile-cache")

_NVVM_CHECK = """
from numba.cuda.cudadrv import nvvm
nvvm.NVVM()
from numba.cuda.cudadrv.libs import get_libdevice
assert get_libdevice(), "no libdevice"
"""


def _env(simulator: bool) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    if simulator:
        env["NUMBA_ENABLE_CUDASIM"] = "1"
    elif not (env.get("CUDA_HOME") or env.get("CUDA_PATH")) and \
            os.path.isdir("/usr/local/cuda/nvvm"):
        env["CUDA_HOME"] = "/usr/local/cuda"     # (used only where no wheel provides NVVM)
    return env


def _nvvm_missing():
    """None when numba-cuda finds NVVM and libdevice, else why not."""
    r = subprocess.run([sys.executable, "-c", _NVVM_CHECK], capture_output=True, text=True,
                       env=_env(False), cwd=ROOT, timeout=120)
    return None if r.returncode == 0 else (r.stderr.strip().splitlines() or ["?"])[-1]


def _capture_key() -> str:
    """A hash of everything the captured kernels depend on: lazynp's sources, the device
    tests and the benchmark that generate them, and the versions of Python, NumPy and
    Numba.  The same key captures the same kernels (code generation is deterministic)."""
    import hashlib
    import platform

    import numba
    import numpy
    h = hashlib.sha256(f"{platform.python_version()} {numpy.__version__} "
                       f"{numba.__version__}".encode())
    files = []
    for folder in ("lazynp", "tests", "benchmarks"):
        for dirpath, _, filenames in os.walk(os.path.join(ROOT, folder)):
            for f in filenames:
                if folder == "lazynp" and f.endswith((".py", ".pyx")) or \
                        folder == "tests" and (f.startswith(("test_cuda_", "_cuda_")) or
                                               f in ("_fake_cupy.py", "conftest.py")) or \
                        folder == "benchmarks" and f in ("gpu.py", "_common.py"):
                    files.append(os.path.join(dirpath, f))
    for path in sorted(files):
        h.update(os.path.relpath(path, ROOT).encode())
        with open(path, "rb") as f:
            h.update(f.read())
    return h.hexdigest()[:32]


def _captured_kernels(tmp_path):
    """The kernel sources and signatures the device tests generate under the simulator.
    In a session that ran every device test and the benchmark's smoke run (this test runs
    after them: tests/conftest.py), the launches they recorded; else capturing reruns every
    device test, so the list is kept in the compile cache's folder under a hash of what it
    depends on."""
    kept = os.path.join(CACHE, f"capture-{_capture_key()}.json")
    captured = tmp_path / "kernels.json"
    in_session = _cuda_kernel_capture.session_capture()
    if in_session is not None:
        captured.write_text(json.dumps(in_session))
    elif os.path.exists(kept):
        with open(kept) as f:
            captured.write_text(f.read())
        return captured
    else:
        r = subprocess.run([sys.executable, HELPER, "capture", str(captured)],
                           capture_output=True, text=True, env=_env(True), cwd=ROOT, timeout=600)
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    os.makedirs(CACHE, exist_ok=True)
    with open(kept + ".part", "w") as f:
        f.write(captured.read_text())
    os.replace(kept + ".part", kept)
    return captured


def test_every_generated_kernel_compiles_for_sm90(tmp_path):
    why = _nvvm_missing()
    if why is not None:
        pytest.skip("numba-cuda finds no NVVM (install numba-cuda[cu13] or a CUDA toolkit, "
                    f"set CUDA_HOME): {why}")
    captured = _captured_kernels(tmp_path)
    results = tmp_path / "results.json"
    r = subprocess.run([sys.executable, HELPER, "compile", str(captured), str(results), CACHE],
                       capture_output=True, text=True, env=_env(False), cwd=ROOT, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    with open(results) as f:
        report = json.load(f)
    res = report["results"]
    assert len(res) > 100, f"only {len(res)} kernels captured"
    failures = [x for x in res if not x["ok"]]
    ok = [x for x in res if x["ok"]]
    regs = [x["registers"] for x in ok if x["registers"] is not None]
    spills = sum((x["spill_stores"] or 0) + (x["spill_loads"] or 0) for x in ok)
    assemblers = sorted({x["assembler"] for x in ok if x["assembler"]})
    print(f"\n{len(res)} kernels (source x signature) compiled for sm_90: {len(ok)} ok, "
          f"{len(failures)} failed ({report['compiled_now']} compiled now, the rest cached); "
          f"assembled with {', '.join(assemblers) or 'nothing (no ptxas)'}; registers "
          f"max {max(regs, default=0)}, median {sorted(regs)[len(regs) // 2] if regs else 0}; "
          f"spill bytes {spills}")
    detail = "\n\n".join(f"[{x['stage']}] {x['error'][:800]}\n{x['signature']}\n"
                         f"{x['source'][-1500:]}" for x in failures[:5])
    assert not failures, f"{len(failures)} kernels do not compile:\n{detail}"
    if assemblers:
        assert len(regs) == len(ok), "a kernel's ptxas log has no register count"
    assert spills == 0, "a generated kernel spills registers"
