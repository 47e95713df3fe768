"""Compiled CUDA kernels are kept on disk: a cold second process compiles nothing.

Each kernel source is written to the kernel cache folder (``LAZYNP_CACHE_DIR``) as
``lazynp_k_cuda_<digest>.py`` and imported with ``cuda.jit(cache=True)`` (numba-cuda keeps
the compiled code beside it, keyed by argument types, compute capability and its version).
Under the simulator, which compiles nothing, ``cuda_kernel_compiles`` counts the sources
that were not in the disk cache yet; on a GPU numba-cuda's own cache misses.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import _cuda_sim  # noqa: F401  (sets NUMBA_ENABLE_CUDASIM before numba.cuda is imported)

from lazynp.cuda import codegen

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_PROGRAM = """
import json
import numpy
import lazynp as lnp
x = lnp.asarray(numpy.linspace(-2, 2, 24, dtype=numpy.float32).reshape(4, 6), device="cuda")
e = lnp.exp(x - x.max(axis=1, keepdims=True))
p = e / e.sum(axis=1, keepdims=True)
q = (abs(x) ** 0.5 + lnp.sqrt(x * x)).mean(axis=0)
values = {"p": numpy.asarray(p).tolist(), "q": numpy.asarray(q).tolist()}
s = lnp.stats()
print(json.dumps({**values, "compiles": s["cuda_kernel_compiles"],
                  "hits": s["cuda_kernel_cache_hits"]}))
"""


def _run(cache_dir, code: str = _PROGRAM) -> dict:
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1", LAZYNP_CACHE_DIR=str(cache_dir),
               PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env=env, cwd=ROOT, timeout=240)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1]) if r.stdout.strip() else {}


def test_a_cold_second_process_compiles_no_kernel(tmp_path):
    first = _run(tmp_path)
    assert first["compiles"] > 0 and first["hits"] == 0, first
    files = sorted(os.listdir(tmp_path))
    assert files and all(f.startswith(codegen.CACHE_PREFIX) for f in files), files
    second = _run(tmp_path)
    assert second["compiles"] == 0, second
    assert second["hits"] == first["compiles"], (first, second)
    assert second["p"] == first["p"] and second["q"] == first["q"]
    # (the CPU cache's files: its size bound and clearing cover them)
    _run(tmp_path, "import lazynp; lazynp.clear_kernel_cache()")
    assert not [f for f in os.listdir(tmp_path) if f.startswith(codegen.CACHE_PREFIX)]


def test_the_cache_key_covers_the_source_and_the_device_math():
    src = codegen.elementwise_source(["t0 = (v0 + v0)"], [], 1, (0,), 1, True, ((False,),))
    name, text = codegen.cache_module_source(src)
    assert name.startswith(codegen.CACHE_PREFIX)
    assert "@cuda.jit(cache=True)" in text and "@cuda.jit\n" not in text
    other = codegen.elementwise_source(["t0 = (v0 * v0)"], [], 1, (0,), 1, True, ((False,),))
    assert codegen.cache_module_source(other)[0] != name
    old = list(codegen._FINGERPRINT)
    codegen._FINGERPRINT[:] = ["another devmath"]
    try:
        assert codegen.cache_module_source(src)[0] != name
    finally:
        codegen._FINGERPRINT[:] = old
