"""``import lazynp`` loads no Numba (it costs about 0.3 s, and a program that never compiles a
kernel should not pay it); Numba is loaded at its first use, and what lazynp did with Numba at
import is done then: lazynp arrays typed as Numba arguments (``numba.njit(f)(a)``) in either
import order, and lazynp's threading-layer choice made before Numba's threads start.

Each case runs in a fresh interpreter.  Numba's ``numba_extensions`` entry point (pyproject.toml)
reaches an installed lazynp only; the cases that need it install the declared entry point into
a folder of their own (:func:`_with_entry_point`), so they test what pyproject.toml declares.
"""
from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import textwrap

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _run(code: str, path: list | None = None, **env) -> dict:
    """Run ``code`` in a fresh interpreter (``path`` put on PYTHONPATH after the checkout,
    ``env`` added); returns the JSON its last line printed."""
    environ = {k: v for k, v in os.environ.items()
               if not k.startswith(("LAZYNP_THREADING", "NUMBA_THREADING"))}
    environ["PYTHONPATH"] = os.pathsep.join([str(ROOT), *map(str, path or []),
                                            environ.get("PYTHONPATH", "")])
    environ.update(env)
    p = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                       text=True, timeout=300, env=environ, cwd=str(ROOT))
    assert p.returncode == 0, p.stderr[-3000:]
    assert "failed to load" not in p.stderr, p.stderr[-3000:]   # (Numba's extension warning)
    return json.loads(p.stdout.strip().splitlines()[-1])


def _declared_entry_point() -> str:
    """The ``numba_extensions`` ``init`` entry point pyproject.toml declares."""
    tomllib = pytest.importorskip("tomllib")     # (Python 3.11+)
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return project["entry-points"]["numba_extensions"]["init"]


@pytest.fixture
def _with_entry_point(tmp_path) -> list:
    """A folder holding a distribution's metadata with pyproject.toml's Numba entry point,
    as ``pip install`` writes it (for PYTHONPATH)."""
    info = tmp_path / "lazynp_entry_point_test-0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: lazynp-entry-point-test\n"
                                   "Version: 0\n")
    (info / "entry_points.txt").write_text(f"[numba_extensions]\n"
                                           f"init = {_declared_entry_point()}\n")
    return [tmp_path]


_NUMBA_LOADED = """
    import json, sys
    import lazynp
    print(json.dumps({"numba": sorted(m for m in sys.modules
                                      if m.split(".")[0] in ("numba", "llvmlite"))}))
"""


@pytest.mark.parametrize("pure_python", ["0", "1"])
def test_import_lazynp_loads_no_numba(pure_python):
    out = _run(_NUMBA_LOADED, LAZYNP_PURE_PYTHON=pure_python)
    assert out["numba"] == []


def test_array_work_without_a_kernel_loads_no_numba():
    # (LAZYNP_FUSION=0: every op runs on NumPy, so no kernel is ever compiled)
    code = _NUMBA_LOADED.replace("import lazynp", """import lazynp
    a = lazynp.arange(10.0)
    assert float(((a * 2) + 1).sum()) == 100.0
    """)
    assert _run(code, LAZYNP_FUSION="0")["numba"] == []


_NJIT = """
    import json, sys
    {imports}
    import numpy
    from lazynp.kernels import threading_layer

    @numba.njit(cache=False)
    def scale_first_row(x):
        x[0] = 42.0
        return x * 2

    a = lazynp.arange(6.0).reshape(2, 3)
    r = scale_first_row(a)
    print(json.dumps({{"result": r.tolist(), "type": type(r).__name__,
                      "a": numpy.asarray(a).tolist(),
                      "argument": type(numba.typeof(a)).__name__,
                      "layer": str(numba.config.THREADING_LAYER),
                      "decision": threading_layer.decision}}))
"""
_NJIT_EXPECTED = {"result": [[84.0, 84.0, 84.0], [6.0, 8.0, 10.0]], "type": "ndarray",
                  "a": [[42.0, 42.0, 42.0], [3.0, 4.0, 5.0]], "argument": "LazyArrayType",
                  "layer": "workqueue"}


def test_njit_takes_a_lazynp_array_when_numba_was_imported_first():
    out = _run(_NJIT.format(imports="import numba\n    import lazynp"))
    assert {k: out[k] for k in _NJIT_EXPECTED} == _NJIT_EXPECTED
    assert "set by lazynp" in out["decision"]


def test_njit_takes_a_lazynp_array_when_numba_is_imported_after(_with_entry_point):
    code = _NJIT.format(imports="import lazynp\n    assert 'numba' not in sys.modules\n"
                                "    import numba")
    out = _run(code, path=_with_entry_point)
    assert {k: out[k] for k in _NJIT_EXPECTED} == _NJIT_EXPECTED
    assert "set by lazynp" in out["decision"]


_PARALLEL = """
    import json
    import lazynp
    import numba, numpy
    {between}
    @numba.njit(parallel=True, cache=False)
    def total(x):
        s = 0.0
        for i in numba.prange(x.shape[0]):
            s += x[i]
        return s

    assert total(numpy.ones(1000)) == 1000.0
    from lazynp.kernels import threading_layer
    print(json.dumps({{"running": numba.threading_layer(),
                      "decision": threading_layer.decision}}))
"""


def test_the_layer_is_chosen_before_numbas_threads_start_when_numba_comes_after(
        _with_entry_point):
    # (the user's own parallel function runs first: lazynp's choice was made at its compile)
    out = _run(_PARALLEL.format(between=""), path=_with_entry_point)
    assert out["running"] == "workqueue"
    assert "set by lazynp" in out["decision"]


def test_a_layer_set_in_code_after_import_lazynp_is_respected(_with_entry_point):
    out = _run(_PARALLEL.format(between="numba.config.THREADING_LAYER = 'threadsafe'"),
               path=_with_entry_point)
    assert "numba.config.THREADING_LAYER" in out["decision"]
    assert "'threadsafe'" in out["decision"]


_KERNEL = """\
import numpy as np
from numba import njit
from lazynp.kernels.fpflags import fp_clear, fp_test


@njit(nogil=True, cache=False)
def kernel(x, out):
    fp_clear()
    for i in range(x.shape[0]):
        out[i] = x[i] * 2.0
    return fp_test()
"""


def test_lazynps_first_kernel_loads_numba_and_chooses_the_layer():
    code = f"""
        import json, sys
        import numpy, lazynp
        from lazynp.kernels import cpu
        assert "numba" not in sys.modules
        x = numpy.linspace(0.0, 1.0, 1000)
        kernel = cpu.get_kernel({_KERNEL!r}, (x, numpy.empty_like(x)), block=True)
        out = numpy.empty_like(x)
        flags = kernel(x, out)
        import numba
        print(json.dumps({{"ok": bool((out == x * 2.0).all()), "flags": int(flags),
                          "layer": str(numba.config.THREADING_LAYER)}}))
    """
    out = _run(code)
    assert out == {"ok": True, "flags": 0, "layer": "workqueue"}


def test_the_kernel_cache_counts_numbas_cache_dir_before_numba_is_loaded(tmp_path):
    # (Numba keeps a kernel's compiled files under NUMBA_CACHE_DIR when it is set; the cache's
    # size, bound and clearing must see them in a process that has not loaded Numba yet)
    code = f"""
        import json
        import lazynp
        from lazynp.kernels import cache
        folders = cache._folders()
        print(json.dumps({{"numba_dir": any(f.startswith({str(tmp_path / "nb")!r})
                                         for f in folders)}}))
    """
    out = _run(code, NUMBA_CACHE_DIR=str(tmp_path / "nb"), LAZYNP_CACHE_DIR=str(tmp_path / "k"))
    assert out["numba_dir"]
