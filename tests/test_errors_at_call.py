"""Value-dependent errors and warnings reach the user's try/except, np.errstate,
warnings.catch_warnings, pytest.raises and pytest.warns, as in NumPy (issue 17, item 1).

Each pattern runs on NumPy and on lazynp, at a small size (run at once by the policy) and a
large one (above ``EAGER_MAX_ELEMS``: recorded), under the ``auto`` and ``lazy`` policies;
the exception class, the warnings (category, message, count) and the warnings' file and
line (this file, the calling line) must be NumPy's.
"""
from __future__ import annotations

import inspect
import warnings

import numpy
import pytest

import lazynp
from lazynp.core import policy as _policy

LARGE = _policy.EAGER_MAX_ELEMS + 2


@pytest.fixture(params=["auto", "lazy"])
def policy(request):
    # (set_policy: inside a ``with lazynp.policy(...)`` block, the user's recording scope,
    # the block itself does not make ops run at the call)
    old = lazynp.get_policy()
    lazynp.set_policy(request.param)
    yield request.param
    lazynp.set_policy(old)


@pytest.fixture(params=[4, LARGE], ids=["small", "large"])
def size(request):
    return request.param


def _line_of(fn, text: str) -> int:
    """The line number of the line of ``fn``'s source containing ``text``."""
    lines, start = inspect.getsourcelines(fn)
    return start + next(i for i, line in enumerate(lines) if text in line)


def _caught(ws) -> list:
    return [(w.category, str(w.message)) for w in ws]


def _force(r):
    return None if r is None else numpy.asarray(r)


# --- the four patterns -----------------------------------------------------------------

def pattern_inv(np, shape):
    A = np.ones(shape)                         # singular
    try:
        Ainv = np.linalg.inv(A)
        caught = False
    except np.linalg.LinAlgError:
        Ainv = np.linalg.pinv(A)
        caught = True
    return caught, _force(Ainv)


# (large: a stack of 16x16 matrices of more than EAGER_MAX_ELEMS elements in all, as a
# 730x730 one has, but whose pinv takes milliseconds, not seconds)
@pytest.mark.parametrize("shape", [(3, 3), (-(-LARGE // 256), 16, 16)], ids=["3x3", "large"])
def test_linalg_error_reaches_except(policy, shape):
    got_caught, got = pattern_inv(lazynp, shape)
    ref_caught, ref = pattern_inv(numpy, shape)
    assert got_caught is ref_caught is True
    numpy.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-15)


def pattern_errstate(np, n):
    x = np.ones(n)
    with np.errstate(divide="raise"):
        try:
            r = x / 0.0
        except FloatingPointError:
            r = None
    return r


def test_errstate_raise_reaches_except(policy, size):
    assert pattern_errstate(numpy, size) is None
    assert pattern_errstate(lazynp, size) is None


def pattern_ignore(np, n):
    x = np.zeros(n)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = np.log(x)
    return r


def test_ignored_warning_never_appears_later(policy, size):
    with warnings.catch_warnings(record=True) as ws:
        warnings.simplefilter("always")
        r = pattern_ignore(lazynp, size)
        got = _force(r)
        got_sum = float(lazynp.sum(r))
    assert ws == []
    ref = pattern_ignore(numpy, size)
    numpy.testing.assert_array_equal(got, ref)
    assert got_sum == -numpy.inf


def pattern_record(np, n):
    base = np.array([1.0, 0.0] * (n // 2))
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        r = np.asarray(base / 0.0)
    return r, w


def test_recorded_warnings_are_numpys(policy, size):
    r, got = pattern_record(lazynp, size)
    ref_r, ref = pattern_record(numpy, size)
    assert _caught(got) == _caught(ref)
    assert len(got) == 2            # divide by zero (1/0) and invalid value (0/0)
    line = _line_of(pattern_record, "r = np.asarray(base / 0.0)")
    assert {(w.filename, w.lineno) for w in got} == {(__file__, line)}
    numpy.testing.assert_array_equal(_force(r), ref_r)


# --- pytest's own helpers ------------------------------------------------------------------------

def test_pytest_raises_and_warns(policy, size):
    x = lazynp.ones(size)
    with pytest.raises(FloatingPointError, match="divide by zero encountered in divide"):
        with lazynp.errstate(divide="raise"):
            x / 0.0
    with pytest.warns(RuntimeWarning, match="invalid value encountered in sqrt") as rec:
        r = lazynp.sqrt(-x)
    assert len(rec) == 1 and rec[0].filename == __file__
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        numpy.testing.assert_array_equal(_force(r), numpy.sqrt(-numpy.ones(size)))
    with pytest.raises(numpy.linalg.LinAlgError):
        lazynp.linalg.cholesky(-lazynp.eye(3))


def test_integer_division_by_zero_warns_at_the_call(policy, size):
    def run(np):
        i = np.arange(size)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            q = i // 0
            m = i % 0
        return _caught(w), numpy.asarray(q), numpy.asarray(m)

    got, ref = run(lazynp), run(numpy)
    assert got[0] == ref[0] and len(got[0]) == 2
    numpy.testing.assert_array_equal(got[1], ref[1])
    numpy.testing.assert_array_equal(got[2], ref[2])


def test_cast_and_reduction_warnings(policy, size):
    def run(np):
        x = np.full(size, 1e300)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            a = x.astype(np.float32)
            s = np.sum(x * 1e8)
        return _caught(w), numpy.asarray(a), numpy.asarray(s)

    got, ref = run(lazynp), run(numpy)
    assert got[0] == ref[0]
    assert any("overflow encountered in cast" in m for _, m in got[0])
    numpy.testing.assert_array_equal(got[1], ref[1])
    assert got[2] == ref[2]


# --- contexts set in an outer frame: the state at the call applies ---------------------------------

def _log_of(np, x):
    return np.log(x)                # no try/with here: the caller's context applies


def test_outer_catch_warnings_applies_at_the_later_flush(policy, size):
    z = lazynp.zeros(size)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = _log_of(lazynp, z)
    with warnings.catch_warnings(record=True) as later:
        warnings.simplefilter("always")
        _force(r)
    assert later == []

    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        r = _log_of(lazynp, z)
    _force(r)                       # (forced after the block: NumPy warned inside it)
    assert _caught(w) == [(RuntimeWarning, "divide by zero encountered in log")]
    assert (w[0].filename, w[0].lineno) == (__file__, _line_of(_log_of, "return np.log(x)"))


def test_outer_error_filter_raises_at_the_call(policy, size):
    z = lazynp.zeros(size)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(RuntimeWarning, match="divide by zero encountered in log"):
            _log_of(lazynp, z)


def _divide(x):
    return x / 0.0


def test_outer_errstate_raise_applies_at_the_call(policy, size):
    with lazynp.errstate(divide="raise"):
        with pytest.raises(FloatingPointError):
            _divide(lazynp.ones(size))


def test_outer_linalg_error_in_a_helper_is_raised_when_read():
    # (documented: under the lazy policy, a helper function's LinAlgError without a
    # handler in its own frame is raised when the result is read)
    lazynp.set_policy("lazy")
    try:
        r = (lambda A: lazynp.linalg.inv(A))(lazynp.ones((3, 3)))
        with pytest.raises(numpy.linalg.LinAlgError):
            _force(r)
    finally:
        lazynp.set_policy("auto")


# --- laziness is kept outside try/with blocks -------------------------------------------------------

def _recorded_outside(x):
    return x / 3.0


def test_large_work_outside_blocks_is_still_recorded():
    x = lazynp.ones(LARGE)
    before = lazynp.stats()["ops_recorded"]
    r = _recorded_outside(x)
    assert lazynp.stats()["ops_recorded"] == before + 1
    assert r._node().state != 2             # still pending
    numpy.testing.assert_array_equal(_force(r), numpy.ones(LARGE) / 3.0)


def test_silent_ops_stay_recorded_inside_blocks():
    x = lazynp.ones(LARGE)
    try:
        r = x < 2.0                          # comparisons never warn: recorded
    except FloatingPointError:               # pragma: no cover
        raise
    assert r._node().state != 2
    assert bool(numpy.asarray(r).all())


def test_warnings_of_deferred_work_name_the_recording_line():
    x = lazynp.zeros(LARGE)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        r = _log_of(lazynp, x)              # recorded (no block around the helper's line)
        assert r._node().state != 2 and w == []
        _force(r)
    assert _caught(w) == [(RuntimeWarning, "divide by zero encountered in log")]
    assert (w[0].filename, w[0].lineno) == (__file__, _line_of(_log_of, "return np.log(x)"))


def test_handler_ranges_come_from_the_exception_table():
    def f():
        a = 1
        try:
            b = 2
        except ValueError:
            b = 3
        return a + b

    import dis
    code = f.__code__
    offsets = {i.argval: i.offset for i in dis.get_instructions(f) if i.opname == "STORE_FAST"}
    inside = _policy.in_handler_block
    assert not inside(code, offsets["a"])
    assert inside(code, offsets["b"])
