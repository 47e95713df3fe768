"""Capture every CUDA kernel lazynp generates, and compile each one with numba-cuda's real compiler.

Two steps in two processes (Numba's CUDA simulator and its real target cannot share one):

``python tests/_cuda_kernel_capture.py capture OUT.json``
    Under the simulator (``NUMBA_ENABLE_CUDASIM=1``), runs the device tests
    (``tests/test_cuda_*.py``, this file's caller excluded) and ``benchmarks/gpu.py --smoke``
    with :func:`lazynp.cuda.codegen.compile_source` wrapped so each launch records its kernel
    source and argument types; writes the distinct (source, signature) pairs.

``python tests/_cuda_kernel_capture.py benchmark OUT.json``
    Under the simulator, runs ``benchmarks/gpu.py --smoke`` (its output on stdout) and writes
    the pairs its launches used (tests/test_cuda_benchmark.py runs it this way).

In a full test session the capture is not rerun: tests/conftest.py records the launches of
the device tests as they run in the suite (:func:`install_session_recorder`, gated by
:data:`RECORDING`) and tests/test_cuda_benchmark.py hands over the benchmark's pairs;
tests/test_cuda_compile.py, run last, uses them when every device test ran
(:func:`session_capture`), and runs ``capture`` otherwise.

``python tests/_cuda_kernel_capture.py compile IN.json OUT.json [CACHE_DIR]``
    On the real target (no GPU needed): ``numba.cuda.compile_ptx`` for compute capability
    9.0 and ``ptxas -arch=sm_90 -v`` where ``ptxas`` is found, two worker processes; results
    (registers, spills or the error) are cached in ``CACHE_DIR`` by a hash of the source,
    signature, numba-cuda version, ptxas path and lazynp/cuda/devmath.py.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CC = (9, 0)


# ------------------------------------------------------------------ capture (simulator)

def _signature(args) -> list:
    """Argument types as the real target would type them (arrays: dtype, ndim, layout)."""
    import numba
    sig = []
    for a in args:
        t = numba.typeof(a)
        if isinstance(t, numba.types.Array):
            sig.append(["array", str(t.dtype), t.ndim, t.layout])
        else:
            sig.append(["scalar", str(t)])
    return sig


def _install_recorder(seen: dict, gate: list | None = None) -> None:
    """Wrap :func:`lazynp.cuda.codegen.compile_source` so that each launch of the kernels it
    gives records ``(source, signature)`` in ``seen`` (only while ``gate[0]`` is true, when
    a gate is given)."""
    from lazynp.cuda import codegen
    original = codegen.compile_source

    class Recorder:
        def __init__(self, kernel, source):
            self.kernel, self.source = kernel, source

        def __getattr__(self, name):
            return getattr(self.kernel, name)

        def __getitem__(self, config):
            launch = self.kernel[config]

            def record_and_launch(*args):
                if gate is None or gate[0]:
                    sig = _signature(args)
                    seen.setdefault(json.dumps([self.source, sig]), None)
                return launch(*args)
            return record_and_launch

    def compile_and_record(source):
        return Recorder(original(source), source)
    codegen.compile_source = compile_and_record


def device_test_files() -> list:
    """The device test files whose launches the capture records (this module's callers
    excluded: the compile test, and the benchmark's test, which runs ``benchmark``)."""
    folder = os.path.join(ROOT, "tests")
    return sorted(f for f in os.listdir(folder)
                  if f.startswith("test_cuda_") and f.endswith(".py") and
                  f not in ("test_cuda_compile.py", "test_cuda_benchmark.py"))


def _run_benchmark_smoke() -> None:
    """``benchmarks/gpu.py --smoke`` as its ``__main__``, in this process."""
    import runpy
    argv = sys.argv
    sys.argv = [os.path.join(ROOT, "benchmarks", "gpu.py"), "--smoke"]
    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    try:
        runpy.run_path(sys.argv[0], run_name="__main__")
    except SystemExit as e:
        if e.code not in (None, 0):
            raise
    finally:
        sys.argv = argv


def _write_pairs(seen: dict, out_path: str) -> int:
    pairs = [json.loads(k) for k in seen]
    with open(out_path, "w") as f:
        json.dump(pairs, f)
    return len(pairs)


def capture(out_path: str) -> None:
    import pytest
    seen: dict = {}
    sys.path.insert(0, os.path.join(ROOT, "tests"))
    import _cuda_sim  # noqa: F401  (numba.cuda in simulator mode, before lazynp imports it)
    _install_recorder(seen)
    tests = [os.path.join(ROOT, "tests", f) for f in device_test_files()]
    rc = pytest.main(["-q", "-x", "-p", "no:cacheprovider", *tests])
    if rc != 0:
        raise SystemExit(f"the device tests failed under the simulator (pytest exit {rc})")
    _run_benchmark_smoke()
    print(f"captured {_write_pairs(seen, out_path)} kernel launches signatures")


def benchmark(out_path: str) -> None:
    seen: dict = {}
    _install_recorder(seen)
    _run_benchmark_smoke()
    n = _write_pairs(seen, out_path)
    print(f"captured {n} kernel launches signatures", file=sys.stderr)


# ------------------------------------------------------------------ capture in the test session

#: launches recorded in this test session, while :data:`RECORDING` ``[0]`` is true (a
#: device test runs: tests/conftest.py sets it)
SESSION_SEEN: dict = {}
RECORDING = [False]
#: what tests/conftest.py learns of the session: the device tests collected (node ids by
#: file), deselected, run (node ids reported passed or skipped), whether one failed, the
#: command line's arguments, and the benchmark's pairs (tests/test_cuda_benchmark.py)
SESSION: dict = {"installed": False, "collected": {}, "deselected": set(), "ran": set(),
                 "failed": False, "args": [], "benchmark": None}


def install_session_recorder() -> None:
    """Record the device tests' launches in this session (tests/_cuda_sim.py, once the
    simulator is imported and before any test runs)."""
    if not SESSION["installed"]:
        _install_recorder(SESSION_SEEN, gate=RECORDING)
        SESSION["installed"] = True


def session_capture() -> list | None:
    """The pairs this session's device tests and benchmark smoke run launched, when every
    device test was collected whole and ran without failing (what ``capture`` would record);
    None otherwise."""
    if not SESSION["installed"] or SESSION["failed"] or SESSION["benchmark"] is None:
        return None
    for name in device_test_files():
        ids = SESSION["collected"].get(name)
        if not ids or any(d.split("::")[0].endswith(name) for d in SESSION["deselected"]):
            return None
        if any("::" in a and a.split("::")[0].endswith(name) for a in SESSION["args"]):
            return None                 # (only some of the file's tests were asked for)
        if not ids <= SESSION["ran"]:
            return None
    seen = dict.fromkeys(SESSION_SEEN)
    for pair in SESSION["benchmark"]:
        seen.setdefault(json.dumps(pair), None)
    return [json.loads(k) for k in seen]


# ------------------------------------------------------------------ compile (real target)

def _numba_type(entry):
    import numba
    import numpy as np
    if entry[0] == "array":
        return numba.types.Array(numba.from_dtype(np.dtype(entry[1])), entry[2], entry[3])
    return numba.from_dtype(np.dtype(entry[1]))


_PTXAS_LINE = re.compile(r"Used (\d+) registers")
_SPILL = re.compile(r"(\d+) bytes spill stores, (\d+) bytes spill loads")


_PTXAS_TOO_OLD: list = []


def _compile_one(item):
    """(index, result dict) for one (source, signature) pair."""
    index, source, sig, ptxas = item
    from numba import cuda
    try:
        ns: dict = {}
        exec(compile(source, f"<lazynp cuda kernel {index}>", "exec"), ns)
        pyfunc = ns["kernel"].py_func
        ptx, _ = cuda.compile_ptx(pyfunc, tuple(_numba_type(e) for e in sig), cc=CC)
    except Exception as e:       # the failure is the result
        return index, {"ok": False, "stage": "numba-cuda",
                       "error": f"{type(e).__name__}: {str(e)[:2000]}"}
    res = {"ok": True, "registers": None, "spill_stores": None, "spill_loads": None,
           "assembler": None}
    log = None
    if ptxas and not _PTXAS_TOO_OLD:
        code, log = _ptxas(ptxas, ptx)
        if code != 0 and "Unsupported .version" in log:
            _PTXAS_TOO_OLD.append(ptxas)
            log = None          # (an older ptxas than the NVVM: assemble with nvJitLink)
        elif code != 0:
            return index, {"ok": False, "stage": "ptxas", "error": log[-2000:]}
        else:
            res["assembler"] = "ptxas"
    if log is None:
        try:
            log = _nvjitlink(ptx)
            res["assembler"] = "nvJitLink"
        except ImportError:
            log = ""
        except Exception as e:
            return index, {"ok": False, "stage": "nvJitLink", "error": str(e)[-2000:]}
    regs = [int(x) for x in _PTXAS_LINE.findall(log)]
    spills = [(int(a), int(b)) for a, b in _SPILL.findall(log)]
    if regs:
        res.update(registers=max(regs), spill_stores=sum(s for s, _ in spills),
                   spill_loads=sum(n for _, n in spills))
    return index, res


def _ptxas(ptxas: str, ptx: str) -> tuple:
    """(exit status, ``ptxas -v`` log) of assembling ``ptx`` for the target."""
    with tempfile.TemporaryDirectory() as d:
        p = os.path.join(d, "k.ptx")
        with open(p, "w") as f:
            f.write(ptx)
        r = subprocess.run([ptxas, f"-arch=sm_{CC[0]}{CC[1]}", "-v", p, "-o",
                            os.path.join(d, "k.cubin")], capture_output=True, text=True)
    return r.returncode, r.stdout + r.stderr


def _nvjitlink(ptx: str) -> str:
    """The ptxas log of assembling ``ptx`` with nvJitLink (the ptxas of the NVVM's release,
    from the ``numba-cuda[cu13]`` wheels); raises with the error log on failure."""
    from cuda.bindings import nvjitlink
    h = nvjitlink.create(2, [f"-arch=sm_{CC[0]}{CC[1]}", "-Xptxas=-v"])
    try:
        data = ptx.encode()
        nvjitlink.add_data(h, nvjitlink.InputType.PTX, data, len(data), "kernel.ptx")
        try:
            nvjitlink.complete(h)
        except Exception as e:
            n = nvjitlink.get_error_log_size(h)
            buf = bytearray(n)
            nvjitlink.get_error_log(h, buf)
            raise RuntimeError(f"{e}: {buf.decode(errors='replace')}") from None
        n = nvjitlink.get_info_log_size(h)
        buf = bytearray(n)
        nvjitlink.get_info_log(h, buf)
        return buf.decode(errors="replace")
    finally:
        nvjitlink.destroy(h)


def find_ptxas():
    p = shutil.which("ptxas")
    if p:
        return p
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH") or "/usr/local/cuda"
    p = os.path.join(home, "bin", "ptxas")
    return p if os.path.exists(p) else None


def _cache_key(source: str, sig, ptxas) -> str:
    from importlib.metadata import version
    h = hashlib.sha256()
    h.update(json.dumps([source, sig, CC, version("numba-cuda"), ptxas]).encode())
    with open(os.path.join(ROOT, "lazynp", "cuda", "devmath.py"), "rb") as f:
        h.update(f.read())      # (the device templates the sources call)
    return h.hexdigest()


def compile_all(in_path: str, out_path: str, cache_dir: str | None = None) -> None:
    from concurrent.futures import ProcessPoolExecutor
    with open(in_path) as f:
        pairs = json.load(f)
    ptxas = find_ptxas()
    results: list = [None] * len(pairs)
    todo = []
    for i, (source, sig) in enumerate(pairs):
        if cache_dir:
            p = os.path.join(cache_dir, _cache_key(source, sig, ptxas) + ".json")
            if os.path.exists(p):
                with open(p) as f:
                    results[i] = json.load(f)
                continue
        todo.append((i, source, sig, ptxas))
    workers = min(2, os.cpu_count() or 1)
    if todo:
        with ProcessPoolExecutor(workers) as pool:
            for i, res in pool.map(_compile_one, todo, chunksize=8):
                results[i] = res
                if cache_dir and res["ok"]:
                    os.makedirs(cache_dir, exist_ok=True)
                    p = os.path.join(cache_dir, _cache_key(*pairs[i], ptxas) + ".json")
                    with open(p, "w") as f:
                        json.dump(res, f)
    for (source, sig), res in zip(pairs, results):
        res["source"], res["signature"] = source, sig
    with open(out_path, "w") as f:
        json.dump({"ptxas": ptxas, "compiled_now": len(todo), "results": results}, f)


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "capture":
        capture(sys.argv[2])
    elif cmd == "benchmark":
        benchmark(sys.argv[2])
    elif cmd == "compile":
        compile_all(sys.argv[2], sys.argv[3], sys.argv[4] if len(sys.argv) > 4 else None)
    else:
        raise SystemExit(f"unknown command {cmd!r}")
