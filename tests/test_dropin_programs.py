"""The programs of ``benchmarks/dropin.py`` (issue 12) at a tiny size: lazynp gives NumPy's
results (values, shapes, dtypes).

Each program is ordinary NumPy code from ``benchmarks/dropin_programs``, run once with
``numpy`` and once with ``lazynp`` on the same seeded inputs. No timing is asserted here (the
speed targets live in the benchmark). A program that lazynp gets wrong is a lazynp bug: its
test is marked ``xfail(strict=True)`` with the reason, the program is not changed.
"""
from __future__ import annotations

import os
import sys

import numpy
import pytest

import lazynp

_BENCHMARKS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                           "benchmarks")
if _BENCHMARKS not in sys.path:
    sys.path.insert(0, _BENCHMARKS)

from dropin_programs import (BY_NAME, PROGRAMS, SCALAR_LOOP_TARGETS, TAGS,  # noqa: E402
                             as_results, compare)

#: Programs lazynp currently gets wrong at the tiny size: name -> reason (a lazynp bug).
KNOWN_BUGS: dict[str, str] = {}


def _params():
    for p in PROGRAMS:
        marks = [pytest.mark.xfail(strict=True, reason=KNOWN_BUGS[p.name])] \
            if p.name in KNOWN_BUGS else []
        yield pytest.param(p.name, marks=marks, id=p.name)


@pytest.mark.parametrize("name", list(_params()))
def test_program_matches_numpy(name):
    prog = BY_NAME[name]
    inputs = prog.inputs(prog.tiny)
    want = as_results(prog.func(numpy, *inputs))
    got = as_results(prog.func(lazynp, *inputs))
    problems = compare(want, got)
    assert not problems, f"{name}: " + "; ".join(problems)


@pytest.mark.parametrize("name", [p.name for p in PROGRAMS if p.peers])
def test_peer_versions_match_numpy(name):
    """The peer-library versions (numexpr) compute what the NumPy program computes."""
    prog = BY_NAME[name]
    inputs = prog.inputs(prog.tiny)
    want = as_results(prog.func(numpy, *inputs))
    for peer, fn in prog.peers.items():
        pytest.importorskip(peer)
        problems = compare(want, as_results(fn(*inputs)))
        assert not problems, f"{name} ({peer}): " + "; ".join(problems)


def test_registry_covers_the_issue():
    """At least 32 programs, every pattern tag used, the scalar-loop targets present, sizes
    well formed (the large size is never the small one)."""
    assert len(PROGRAMS) >= 32
    assert {p.tag for p in PROGRAMS} == set(TAGS)
    assert set(SCALAR_LOOP_TARGETS) <= set(BY_NAME)
    for p in PROGRAMS:
        assert p.func.__doc__, p.name
        assert set(p.small) == set(p.large) == set(p.tiny), p.name
        assert p.small != p.large, p.name
        assert all(p.large[k] >= p.small[k] >= p.tiny[k] for k in p.small), p.name


def test_inputs_are_deterministic_and_read_only():
    prog = BY_NAME["lu_rows"]
    (a,), (b,) = prog.inputs(prog.tiny), prog.inputs(prog.tiny)
    assert numpy.array_equal(a, b)
    assert not a.flags.writeable       # a program writing into its input fails loudly


def test_compare_reports_differences():
    x = numpy.arange(4.0)
    assert compare((x,), (x + 1e-13,)) == []
    assert compare((x,), (x + 1e-3,))
    assert compare((x,), (x.astype(numpy.float32),))            # dtype
    assert compare((x,), (x[:3],))                                # shape
    assert compare((numpy.arange(3),), (numpy.array([0, 1, 3]),))  # exact integers


def test_benchmark_quick_smoke(capsys):
    """``dropin.py --quick --only ...`` runs, checks and prints its table (no timing target)."""
    import dropin
    rc = dropin.main(["--quick", "--only", "trisolv,jacobi_2d,crc16_table"])
    out = capsys.readouterr().out
    assert rc == 0, out
    for name in ("trisolv", "jacobi_2d", "crc16_table", "geometric mean", "Summary"):
        assert name in out
    assert "MISMATCH" not in out
