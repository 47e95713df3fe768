"""Shared fixtures.

``lazy_policy``: run a test under ``lazynp.set_policy("lazy")`` (every operation recorded),
for the tests of lazynp's graph machinery (fusion, tree kernels, flush planning, errors
raised when a pending value is read).  Under the default policy small work on computed
arrays runs at once and never reaches that machinery.

``kernel_dir``: the on-disk kernel cache in the test's own temporary folder, holding only
the kernels the test compiles (see its docstring).

The hooks record the CUDA kernels the device tests launch as they run, for
tests/test_cuda_compile.py (moved to the end of the session), which compiles them for a real
GPU: a full session need not rerun the device tests to capture them
(tests/_cuda_kernel_capture.py).
"""
from __future__ import annotations

import importlib.util
import sys

import pytest

# (run by an interpreter lazynp was not installed in, the first test to import it fails
# with "No module named 'numba'": said once, naming the interpreter, instead)
_MISSING = [m for m in ("numba", "dask") if importlib.util.find_spec(m) is None]
if _MISSING:
    pytest.exit(f"lazynp's tests: {sys.executable} lacks lazynp's dependencies "
                f"{', '.join(_MISSING)}; run them with the interpreter of the environment "
                f"lazynp is installed in (e.g. after activating it)", returncode=4)

import _cuda_kernel_capture as _capture  # noqa: E402
import lazynp  # noqa: E402
from lazynp.kernels import cache, cpu  # noqa: E402

_COMPILE_TEST = "test_cuda_compile.py"
_DEVICE_FILES = frozenset(_capture.device_test_files())


# --- the device tests' kernels, captured as they run (tests/_cuda_kernel_capture.py) -------

def pytest_collection_modifyitems(config, items):
    # tests/test_cuda_compile.py compiles the kernels the device tests launched in this
    # session: it runs after them (and after the benchmark's smoke run)
    last = [item for item in items if item.path.name == _COMPILE_TEST]
    if last:
        items[:] = [item for item in items if item.path.name != _COMPILE_TEST] + last


def pytest_deselected(items):
    _capture.SESSION["deselected"].update(item.nodeid for item in items)


def pytest_collection_finish(session):
    collected: dict = {}
    for item in session.items:
        if item.path.name in _DEVICE_FILES:
            collected.setdefault(item.path.name, set()).add(item.nodeid)
    _capture.SESSION.update(collected=collected, args=list(session.config.args))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    _capture.RECORDING[0] = item.path.name in _DEVICE_FILES
    try:
        yield
    finally:
        _capture.RECORDING[0] = False


def pytest_runtest_logreport(report):
    if report.nodeid.split("::")[0].rsplit("/", 1)[-1] in _DEVICE_FILES:
        if report.failed:
            _capture.SESSION["failed"] = True
        elif report.when == "call" or report.skipped:
            _capture.SESSION["ran"].add(report.nodeid)


@pytest.fixture
def lazy_policy():
    with lazynp.policy("lazy"):
        yield


@pytest.fixture
def kernels_at_any_size(monkeypatch):
    """Kernels compile on first use (in the calling thread) and run at any size, through
    the fusion pass (not tree kernels)."""
    import lazynp._base.config as lconfig
    from lazynp.core.state import shared as graph_state
    monkeypatch.setattr(cpu, "SYNC_COMPILE", True)
    monkeypatch.setattr(lconfig, "FUSION", True)
    monkeypatch.setattr(graph_state, "min_fused_work", 0)
    monkeypatch.setattr(graph_state, "min_kernel_work", 0)
    monkeypatch.setattr(graph_state, "tree_flushes", False)


@pytest.fixture
def kernel_dir(tmp_path):
    """The kernel cache in a fresh temporary folder without a size bound, restored after.

    The background compile thread writes a kernel's files to the folder set when it
    compiles it, not when the kernel was queued: compiles still queued by earlier tests are
    waited for before the folder changes (else they land in this test's folder), and those
    this test queued are waited for before it is restored."""
    cpu.wait_compiles()
    old_dir, old_bound = cache.directory(), cache.max_bytes()
    lazynp.configure(kernel_cache_dir=tmp_path, kernel_cache_max_bytes=0)
    try:
        yield tmp_path
    finally:
        cpu.wait_compiles()
        lazynp.configure(kernel_cache_dir=old_dir, kernel_cache_max_bytes=old_bound)
