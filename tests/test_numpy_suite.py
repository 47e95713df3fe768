"""A fast subset of NumPy's own test files, run against lazynp by benchmarks/numpy_tests.py.

Each file runs in its own pytest process (time and memory limits), with NumPy's imports
rewritten to lazynp's (``numpy`` and the public modules lazynp has), beside NumPy's own run
of the same file; the share of the tests NumPy passes that pass on lazynp too must stay at
or above the floor (the figure on 2026-12-07, rounded down).
``python benchmarks/numpy_tests.py`` runs all the files.
"""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

_PATH = Path(__file__).resolve().parent.parent / "benchmarks" / "numpy_tests.py"
_spec = importlib.util.spec_from_file_location("numpy_tests", _PATH)
numpy_tests = importlib.util.module_from_spec(_spec)
sys.modules.setdefault("numpy_tests", numpy_tests)     # (its dataclasses look it up)
_spec.loader.exec_module(numpy_tests)

# (file, -k expression, floor in % of the tests NumPy passes)
SUBSET = [
    ("lib/tests/test_shape_base.py", None, 98.0),
    ("_core/tests/test_shape_base.py", "TestConcatenate or TestStack", 100.0),
]


def test_the_rewrite_touches_only_numpys_public_imports():
    src = ("import numpy as np\nimport numpy.linalg\nfrom numpy.testing import (\n"
           "    assert_equal,\n)\n    import numpy as np\nimport numpy as npx\n"
           "from numpy import (\n    array,\n)\nfrom numpy.linalg import norm\n"
           "from numpy.exceptions import AxisError\nfrom numpy._core import umath\n"
           "from numpy.lib._nanfunctions_impl import _nan_mask\n")
    assert numpy_tests.rewrite(src) == (
        "import lazynp as np\nimport numpy.linalg\nfrom lazynp.testing import (\n"
        "    assert_equal,\n)\n    import lazynp as np\nimport numpy as npx\n"
        "from lazynp import (\n    array,\n)\nfrom lazynp.linalg import norm\n"
        "from numpy.exceptions import AxisError\nfrom numpy._core import umath\n"
        "from numpy.lib._nanfunctions_impl import _nan_mask\n")


@pytest.mark.parametrize("rel,k,floor", SUBSET, ids=[f"{r}:{k}" for r, k, _ in SUBSET])
def test_numpy_test_file_share(rel, k, floor):
    c = numpy_tests.compare(rel, timeout=300, memory_gb=4.0, k=k, cache=False)
    assert c.numpy.status == "ok" and len(c.numpy.passed()) > 0, c.numpy.messages
    assert c.lazy.status == "ok", c.lazy.messages.get("<process>")
    lost = "\n".join(f"{o}: {n}  {m[:120]}" for n, o, m in c.lost())
    assert c.share >= floor, f"{rel}: {c.share:.2f}% of NumPy's passes < {floor}%\n{lost}"


# --- lazynp.testing ---------------------------------------------------------------------------

def test_lazynp_testing_has_every_name_of_numpy_testing():
    import numpy.testing
    import lazynp.testing
    missing = [n for n in numpy.testing.__all__ if not hasattr(lazynp.testing, n)]
    assert not missing
    assert lazynp.testing._gen_alignment_data is numpy.testing._gen_alignment_data


@pytest.mark.parametrize("name", ["assert_equal", "assert_array_equal", "assert_allclose",
                                  "assert_almost_equal", "assert_array_almost_equal"])
def test_lazynp_testing_compares_lazynp_arrays(name):
    import numpy
    import lazynp
    import lazynp.testing
    check = getattr(lazynp.testing, name)
    a = lazynp.arange(6.0).reshape(2, 3) * 2
    check(a, lazynp.arange(0.0, 12.0, 2.0).reshape(2, 3))
    check([a, a], [numpy.asarray(a), a])                            # (inside lists)
    with pytest.raises(AssertionError):
        check(a, a + 1)
    with pytest.raises(AssertionError):
        check([a], [a + 1])
    if name == "assert_equal":                  # (it walks tuples, lists and dicts)
        check((a, [a, {"k": a}]), (numpy.asarray(a), [a, {"k": a}]))
        with pytest.raises(AssertionError):
            check({"k": (a,)}, {"k": (a + 1,)})


def test_lazynp_testing_keeps_numpy_scalar_rules():
    import numpy
    import lazynp
    import lazynp.testing
    lazynp.testing.assert_equal(lazynp.float64(2.0), 2.0)
    lazynp.testing.assert_array_less(lazynp.zeros(3), lazynp.ones(3))
    lazynp.testing.assert_(lazynp.all(lazynp.ones(3) > 0))
    with pytest.raises(AssertionError):
        lazynp.testing.assert_equal(lazynp.ones(2), numpy.ones(3), strict=True)


def test_plain_numpy_assert_equal_needs_lazynp_testing():
    """numpy.testing.assert_equal sends arrays to assert_array_equal only when they are
    numpy.ndarray instances (a check only a subclass passes): the documented fix is
    lazynp.testing.  Its array functions do take lazynp arrays (through __array__)."""
    import numpy
    import lazynp
    a = lazynp.arange(3.0)
    numpy.testing.assert_array_equal(a, a)
    numpy.testing.assert_allclose(a, a)
    with pytest.raises(ValueError, match="truth value"):
        numpy.testing.assert_equal(a, a)


def test_submodules_have_numpys_all():
    """``lazynp.lib._nanfunctions_impl.__all__`` and the like are NumPy's lists (NumPy's
    test_nanfunctions checks its coverage with one); ``import *`` works from them."""
    import numpy
    import lazynp
    assert lazynp.lib._nanfunctions_impl.__all__ == numpy.lib._nanfunctions_impl.__all__
    assert lazynp.linalg.__all__ == numpy.linalg.__all__
    namespace: dict = {}
    exec("from lazynp.linalg import *", namespace)
    assert "solve" in namespace
