"""A kernel compiling on lazynp's background thread leaves the user's warning filters alone.

Numba captures each typing step's warnings with ``warnings.catch_warnings(record=True)``,
which swaps the process's filters and ``showwarning`` (shared by all threads before Python
3.14).  Its exit, on the compile thread, used to restore the state from before a
``catch_warnings`` the user entered meanwhile: the user's recorder or ``"error"`` filter was
gone, and NumPy's warning went elsewhere.  The interleaving is forced here with events."""
from __future__ import annotations

import threading
import warnings

import numpy
import pytest

import lazynp
from lazynp.kernels import cpu


def _compile_step_around(user_block) -> None:
    """Run ``user_block`` in the main thread while another thread, marked as compiling a
    lazynp kernel, is inside one of Numba's warning captures, which it leaves halfway."""
    from numba.core import errors
    cpu._capture_warnings_off_main_thread()
    entered, user_in, done = threading.Event(), threading.Event(), threading.Event()
    failure = []

    def compile_step():
        cpu._compiling.active = True
        try:
            with errors.WarningsFixer(errors.NumbaWarning).catch_warnings():
                entered.set()
                user_in.wait(10)
        except BaseException as exc:      # pragma: no cover (reported below)
            failure.append(exc)
        finally:
            cpu._compiling.active = False
            done.set()

    t = threading.Thread(target=compile_step)
    t.start()
    assert entered.wait(10)
    try:
        user_block(user_in, done)
    finally:
        user_in.set()
        t.join(10)
    assert not failure


def test_a_recorded_numpy_warning_is_not_lost_to_a_compile():
    got = []

    def user_block(user_in, done):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            user_in.set()
            assert done.wait(10)            # the compile step left its capture
            numpy.log(numpy.array([-1.0]))
        got.extend(str(w.message) for w in caught)

    _compile_step_around(user_block)
    assert got == ["invalid value encountered in log"]


def test_an_error_filter_still_raises_after_a_compile_step():
    def user_block(user_in, done):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            user_in.set()
            assert done.wait(10)
            with pytest.raises(RuntimeWarning):
                numpy.log(numpy.array([-1.0]))

    _compile_step_around(user_block)


def test_numbas_capture_is_unchanged_outside_a_compile_thread():
    """In the main thread (and in threads not compiling a lazynp kernel) Numba captures
    its warnings as before."""
    from numba.core import errors
    cpu._capture_warnings_off_main_thread()
    fixer = errors.WarningsFixer(errors.NumbaWarning)
    with warnings.catch_warnings(record=True) as outer:
        warnings.simplefilter("always")
        with fixer.catch_warnings():
            warnings.warn("typing detail", errors.NumbaWarning)
        assert outer == []                  # captured by Numba, not yet issued
        fixer.flush()
    assert [str(w.message) for w in outer] == ["typing detail"]


def test_kernels_with_exp_compile_and_are_numpys(monkeypatch):
    """The kernels' own exp (its table built under ``np.errstate``, no warning filter)."""
    monkeypatch.setattr(cpu, "SYNC_COMPILE", True)
    x = numpy.linspace(-3, 3, 4096)

    def kernels_run():
        stats = lazynp.stats()
        return stats["fused_groups_run"] + stats["tree_kernels_run"]
    before = kernels_run()
    with lazynp.policy("lazy"):
        got = numpy.asarray(lazynp.exp(lazynp.array(x) * 2.0) + 1.0)
    assert kernels_run() > before
    # (the kernels' exp is within an ulp of NumPy's: README, "What differs from NumPy")
    numpy.testing.assert_allclose(got, numpy.exp(x * 2.0) + 1.0, rtol=4.5e-16, atol=0)
