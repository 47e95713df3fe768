"""Run the CUDA tests on Numba's simulator unless ``LAZYNP_TEST_REAL_GPU=1``.

Imported by the ``tests/test_cuda_*.py`` modules at collection, before any test runs:
lazynp imports Numba's CUDA target only on the first device use and re-reads Numba's
environment then, so setting ``NUMBA_ENABLE_CUDASIM`` here is enough and touches no other
test (nothing else in the suite imports ``numba.cuda``).
"""
from __future__ import annotations

import os

import pytest

REAL_GPU = os.environ.get("LAZYNP_TEST_REAL_GPU") == "1"
if not REAL_GPU:
    os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")

#: real-GPU-only tests: ``LAZYNP_TEST_REAL_GPU=1 pytest -m gpu``
gpu = pytest.mark.gpu
real_gpu_only = pytest.mark.skipif(not REAL_GPU, reason="needs a real GPU "
                                   "(LAZYNP_TEST_REAL_GPU=1)")
