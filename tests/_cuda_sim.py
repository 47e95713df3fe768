"""Run the CUDA tests on Numba's simulator unless ``LAZYNP_TEST_REAL_GPU=1``.

Imported by the ``tests/test_cuda_*.py`` modules at collection, before any test runs: it
imports Numba's CUDA target in simulator mode (``NUMBA_ENABLE_CUDASIM=1`` while it is
imported; Numba fixes the mode then), and restores the environment, so no other test and
no subprocess (notebooks, the demo) sees the setting.  lazynp asks the imported module
whether it is the simulator.
"""
from __future__ import annotations

import os

import pytest

REAL_GPU = os.environ.get("LAZYNP_TEST_REAL_GPU") == "1"


def _import_simulator() -> None:
    from numba.core import config
    old = os.environ.get("NUMBA_ENABLE_CUDASIM")
    os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
    try:
        config.reload_config()
        from numba import cuda  # noqa: F401
        assert cuda.is_available.__module__.endswith("simulator_init"), \
            "numba.cuda was imported before the CUDA tests (not in simulator mode)"
    finally:
        if old is None:
            del os.environ["NUMBA_ENABLE_CUDASIM"]
        else:
            os.environ["NUMBA_ENABLE_CUDASIM"] = old
        config.reload_config()


if not REAL_GPU:
    _import_simulator()
    # (the device tests' launches in this session, for tests/test_cuda_compile.py)
    from _cuda_kernel_capture import install_session_recorder
    install_session_recorder()

#: real-GPU-only tests: ``LAZYNP_TEST_REAL_GPU=1 pytest -m gpu``
gpu = pytest.mark.gpu
real_gpu_only = pytest.mark.skipif(not REAL_GPU, reason="needs a real GPU "
                                   "(LAZYNP_TEST_REAL_GPU=1)")
