"""What lazynp changes in the process (issue 37, Build 4): Numba's threading layer and
glibc's malloc tuning are each left alone when the user configured them, each has a switch
(an environment variable and ``lazynp.configure``), and ``lazynp.show_config`` says what was
done and which recorder runs."""
from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import textwrap

import pytest

import lazynp
from lazynp._base import malloc, native

# (show_config first: lazynp chooses the layer at Numba's first use, show_config among them)
_REPORT = """
    import json, lazynp, numba
    from lazynp._base import malloc
    from lazynp.kernels import threading_layer
    info = lazynp.show_config(mode="dicts")["lazynp"]
    print(json.dumps({"layer": str(numba.config.THREADING_LAYER),
                      "decision": threading_layer.decision,
                      "malloc": malloc.report, "tuned": malloc.tuned, "info": info}))
"""


def _run(code: str, before: str = "", **env) -> dict:
    """Run ``before`` + ``code`` in a fresh interpreter with ``env`` added (None removes a
    variable); returns the JSON it printed last."""
    environ = {k: v for k, v in os.environ.items()
               if not k.startswith(("LAZYNP_THREADING", "NUMBA_THREADING", "LAZYNP_MALLOC",
                                    "MALLOC_", "GLIBC_TUNABLES"))}
    environ.update(env)
    p = subprocess.run([sys.executable, "-c", textwrap.dedent(before) + textwrap.dedent(code)],
                       capture_output=True, text=True, timeout=300, env=environ)
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


# --- Numba's threading layer ----------------------------------------------------------------

def test_lazynp_asks_for_workqueue_by_default():
    out = _run(_REPORT)
    assert out["layer"] == "workqueue"
    assert "set by lazynp" in out["decision"]
    assert "'workqueue', set by lazynp" in out["info"]["numba threading layer"]


def test_the_users_numba_threading_layer_variable_is_kept():
    out = _run(_REPORT, NUMBA_THREADING_LAYER="omp")
    assert out["layer"] == "omp"
    assert "NUMBA_THREADING_LAYER" in out["decision"]


def test_the_users_numba_config_set_in_code_is_kept():
    out = _run(_REPORT, before="import numba\nnumba.config.THREADING_LAYER = 'threadsafe'\n")
    assert out["layer"] == "threadsafe"
    assert "numba.config.THREADING_LAYER" in out["decision"]


_PARALLEL_FIRST = """
    import numba, numpy
    @numba.njit(parallel=True)
    def total(x):
        s = 0.0
        for i in numba.prange(x.shape[0]):
            s += x[i]
        return s
    assert total(numpy.ones(1000)) == 1000.0
    running_before = numba.threading_layer()
"""


def test_a_numba_threading_layer_already_running_is_left_alone():
    code = _REPORT.replace('"layer": str(numba.config.THREADING_LAYER)',
                           '"layer": numba.threading_layer(), "before": running_before')
    out = _run(code, before=_PARALLEL_FIRST)
    assert "running before lazynp" in out["decision"]
    assert out["layer"] == out["before"]


def test_lazynp_threading_layer_default_leaves_numbas_choice():
    out = _run(_REPORT, LAZYNP_THREADING_LAYER="default")
    assert out["layer"] == "default"
    assert "Numba's own choice" in out["decision"]


def test_an_unknown_layer_name_is_refused_with_the_variables_name():
    environ = dict(os.environ, LAZYNP_THREADING_LAYER="fastest")
    environ.pop("NUMBA_THREADING_LAYER", None)
    p = subprocess.run([sys.executable, "-c", "import lazynp"], capture_output=True,
                       text=True, timeout=300, env=environ)
    assert p.returncode != 0 and "LAZYNP_THREADING_LAYER='fastest'" in p.stderr


def test_configure_changes_the_layer_until_numba_threads_run():
    code = """
        import json, numba, numpy, lazynp
        seen = [str(numba.config.THREADING_LAYER)]
        lazynp.configure(threading_layer="default")
        seen.append(str(numba.config.THREADING_LAYER))
        lazynp.configure(threading_layer="workqueue")
        seen.append(str(numba.config.THREADING_LAYER))
        @numba.njit(parallel=True)
        def double(x):
            for i in numba.prange(x.shape[0]):
                x[i] *= 2
        double(numpy.ones(100))
        try:
            lazynp.configure(threading_layer="omp")
        except RuntimeError as exc:
            seen.append(str(exc))
        print(json.dumps(seen))
    """
    seen = _run(code)
    assert seen[:3] == ["workqueue", "default", "workqueue"]
    assert "lazynp.configure" in seen[3] and "'workqueue' already runs" in seen[3]


# --- glibc's malloc ------------------------------------------------------------------------

glibc_only = pytest.mark.skipif(
    not sys.platform.startswith("linux") or platform.libc_ver()[0] != "glibc",
    reason="lazynp tunes glibc's malloc only")


@pytest.fixture
def fake_mallopt(monkeypatch):
    """``malloc.tune``/``untune`` call a recorder instead of glibc (state restored after)."""
    calls = []

    def mallopt(param, value):
        calls.append((param, value))
        return 1
    monkeypatch.setattr(malloc, "_mallopt", lambda: mallopt)
    monkeypatch.setattr(malloc, "tuned", False)
    monkeypatch.setattr(malloc, "report", {})
    return calls


def test_tune_sets_the_three_parameters(fake_mallopt):
    assert malloc.tune(enabled=True, environ={})
    assert sorted(fake_mallopt) == sorted([(malloc.M_MMAP_THRESHOLD, 32 << 20),
                                           (malloc.M_TRIM_THRESHOLD, 64 << 20),
                                           (malloc.M_ARENA_MAX, 1)])


@pytest.mark.parametrize("environ, kept", [
    ({"MALLOC_ARENA_MAX": "4"}, "M_ARENA_MAX"),
    ({"MALLOC_MMAP_THRESHOLD_": "1000000"}, "M_MMAP_THRESHOLD"),
    ({"MALLOC_TRIM_THRESHOLD_": "0"}, "M_TRIM_THRESHOLD"),
    ({"GLIBC_TUNABLES": "glibc.malloc.arena_max=2"}, "M_ARENA_MAX"),
])
def test_a_parameter_the_user_set_is_left_alone(fake_mallopt, environ, kept):
    malloc.tune(enabled=True, environ=environ)
    number = malloc.PARAMETERS[kept][0]
    assert [p for p, _ in fake_mallopt] and number not in [p for p, _ in fake_mallopt]
    assert "left as the user set it" in malloc.report[kept]
    assert len(fake_mallopt) == 2


def test_switched_off_nothing_is_called(fake_mallopt):
    assert not malloc.tune(enabled=False, environ={})
    assert fake_mallopt == [] and "LAZYNP_MALLOC_TUNING=0" in malloc.report["all"]


def test_untune_gives_back_only_what_lazynp_set(fake_mallopt):
    malloc.tune(enabled=True, environ={"MALLOC_ARENA_MAX": "4"})
    del fake_mallopt[:]
    malloc.untune()
    assert sorted(fake_mallopt) == sorted([(malloc.M_MMAP_THRESHOLD, 128 << 10),
                                           (malloc.M_TRIM_THRESHOLD, 128 << 10)])
    assert not malloc.tuned


@glibc_only
def test_the_switch_and_the_users_variables_at_import():
    assert _run(_REPORT)["tuned"]
    off = _run(_REPORT, LAZYNP_MALLOC_TUNING="0")
    assert not off["tuned"] and "LAZYNP_MALLOC_TUNING=0" in off["info"]["glibc malloc"]
    users = _run(_REPORT, MALLOC_ARENA_MAX="2")
    assert users["malloc"]["M_ARENA_MAX"] == "left as the user set it (MALLOC_ARENA_MAX=2)"
    assert users["malloc"]["M_MMAP_THRESHOLD"] == 32 << 20


# --- show_config ---------------------------------------------------------------------------

def test_show_config_names_the_recorder_and_prints_numpys_too(capsys):
    info = lazynp.show_config(mode="dicts")
    expected = "C extension" if native.ext is not None else "pure Python"
    assert info["lazynp"]["recorder"].startswith(expected)
    assert "Python Information" in info                      # NumPy's own sections
    assert lazynp.show_config() is None
    printed = capsys.readouterr().out
    assert printed.startswith("lazynp:\n") and "recorder:" in printed
    assert "Python Information" in printed


def test_show_config_says_when_the_pure_python_recorder_was_asked_for():
    out = _run(_REPORT, LAZYNP_PURE_PYTHON="1")
    assert out["info"]["recorder"] == "pure Python (LAZYNP_PURE_PYTHON=1)"
