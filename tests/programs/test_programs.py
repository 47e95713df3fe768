"""Realistic NumPy programs run under both ``numpy`` and ``lazynp``.

Every ``*.py`` module in this directory (other than this file and private
``_*.py`` helpers) defines ``run(np)`` which builds its own deterministic
input data using only the module passed in and returns a dict of named
results.  The program is run once with real NumPy and once with lazynp and
every result is compared: same keys, same shape, same dtype, and values
equal (exactly for integer / bool / string data, to ``rtol=1e-7,
atol=1e-9`` for floating / complex data).
"""

import importlib.util
import pathlib

import numpy
import pytest

import lazynp

HERE = pathlib.Path(__file__).resolve().parent

PROGRAM_NAMES = sorted(
    p.stem
    for p in HERE.glob("*.py")
    if not p.stem.startswith(("test_", "_")) and p.stem != "conftest"
)

RTOL = 1e-7
ATOL = 1e-9

_module_cache = {}


def load_program(name):
    """Import ``tests/programs/<name>.py`` under a private module name."""
    if name not in _module_cache:
        path = HERE / f"{name}.py"
        spec = importlib.util.spec_from_file_location(f"_lazynp_program_{name}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        assert callable(getattr(module, "run", None)), f"{name}.py has no run(np)"
        _module_cache[name] = module
    return _module_cache[name]


_PY_SCALARS = (bool, int, float, complex)


def assert_result_equal(key, ref, got):
    """Compare one NumPy result ``ref`` with the lazynp result ``got``."""
    if isinstance(ref, numpy.generic):
        # A NumPy scalar: lazynp gives a lazy 0-d array (documented in the README).
        assert numpy.ndim(got) == 0, f"{key}: expected a 0-d result, got {type(got).__name__}"
    elif isinstance(ref, _PY_SCALARS):
        # The program produced a plain Python scalar (via float()/int()/bool()
        # or len()); lazynp must produce the same Python type.
        assert type(got) is type(ref), (
            f"{key}: expected Python {type(ref).__name__}, got {type(got).__name__}"
        )
    ref_arr = numpy.asarray(ref)
    got_arr = numpy.asarray(got)
    assert got_arr.shape == ref_arr.shape, (
        f"{key}: shape mismatch: numpy {ref_arr.shape} vs lazynp {got_arr.shape}"
    )
    assert got_arr.dtype == ref_arr.dtype, (
        f"{key}: dtype mismatch: numpy {ref_arr.dtype} vs lazynp {got_arr.dtype}"
    )
    if ref_arr.dtype.kind in "fc":
        numpy.testing.assert_allclose(
            got_arr, ref_arr, rtol=RTOL, atol=ATOL, equal_nan=True,
            err_msg=f"{key}: values differ",
        )
    else:
        numpy.testing.assert_array_equal(
            got_arr, ref_arr, err_msg=f"{key}: values differ"
        )


def test_programs_discovered():
    # Guard against the glob silently picking up nothing.
    assert len(PROGRAM_NAMES) >= 12, PROGRAM_NAMES


@pytest.mark.parametrize("name", PROGRAM_NAMES)
def test_program_matches_numpy(name):
    program = load_program(name)
    expected = program.run(numpy)
    actual = program.run(lazynp)

    assert isinstance(expected, dict)
    assert isinstance(actual, dict), f"run(lazynp) returned {type(actual).__name__}"
    assert sorted(actual) == sorted(expected)

    failures = []
    for key in expected:
        try:
            assert_result_equal(key, expected[key], actual[key])
        except AssertionError as exc:
            failures.append(f"[{key}] {exc}")
    if failures:
        pytest.fail(f"{name}: {len(failures)} result(s) differ:\n" + "\n".join(failures))


@pytest.mark.parametrize("name", PROGRAM_NAMES)
def test_program_fallbacks(name, record_property):
    """Report which functions fell back to NumPy; asserts nothing about them."""
    program = load_program(name)
    lazynp.reset_stats()
    result = program.run(lazynp)
    # Force every result so that deferred work is counted too.
    for value in result.values():
        numpy.asarray(value)
    fallbacks = dict(lazynp.stats()["fallbacks"])
    record_property("fallbacks", sorted(fallbacks))
    print(name, sorted(fallbacks))
