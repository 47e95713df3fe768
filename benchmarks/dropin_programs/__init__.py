"""The drop-in programs: ordinary NumPy code run unchanged under ``numpy`` and ``lazynp``.

:data:`PROGRAMS` is the registry used by ``benchmarks/dropin.py`` and
``tests/test_dropin_programs.py``. Each entry names a program ``func(np, *inputs)``, the
function ``make_inputs(rng, **size)`` that builds its inputs as NumPy arrays (and Python
numbers), a small size (5-100 ms per call under NumPy on the 2-core reference machine), a
large size with 10x the small size's work (flops or element updates: ``n`` grows by 10**(1/3)
for an O(n^3) program, by 10**(1/2) for a grid), a tiny size for tests and smoke runs, the
pattern it covers, and optional peer-library versions.

Programs use only the public NumPy API through the module they are given, convert their
inputs with ``np.asarray`` (copying those they modify), and return their results.
"""
from __future__ import annotations

import zlib
from typing import Callable, NamedTuple

import numpy

from . import linalg_loops as la
from . import peers
from . import scalar_loops as sl
from . import stencils as st
from . import whole_array as wa

#: The pattern tags.
TAGS = ("scalar-loop", "linalg-loop", "stencil", "whole-array", "cnn")

#: The scalar-loop programs that issue 12 holds to "within 1.5x of NumPy" at the small size.
SCALAR_LOOP_TARGETS = ("lu_rows", "nussinov", "crc16_bitwise", "crc16_table", "gauss_seidel",
                       "csr_power_iteration")


class Program(NamedTuple):
    name: str
    func: Callable
    make_inputs: Callable
    small: dict
    large: dict
    tag: str
    tiny: dict
    peers: dict = {}

    def inputs(self, size: dict) -> tuple:
        """The inputs at ``size``, from a generator seeded by the program's name. Arrays are
        made read-only so that a program which writes into its input fails loudly."""
        rng = numpy.random.default_rng(zlib.crc32(self.name.encode()))
        args = self.make_inputs(rng, **size)
        for a in args:
            if isinstance(a, numpy.ndarray):
                a.flags.writeable = False
        return args


def _p(name, func, make_inputs, small, large, tag, tiny, peers=None):
    return Program(name, func, make_inputs, small, large, tag, tiny, peers or {})


PROGRAMS: list[Program] = [
    # --- linear algebra with Python loops over rows / elements
    _p("lu_rows", la.lu_rows, la.lu_inputs,
       dict(n=60), dict(n=129), "scalar-loop", dict(n=6)),
    _p("cholesky_rows", la.cholesky_rows, la.spd_inputs,
       dict(n=100), dict(n=215), "scalar-loop", dict(n=6)),
    _p("gram_schmidt", la.gram_schmidt, la.tall_inputs,
       dict(m=200, n=60), dict(m=431, n=129), "linalg-loop", dict(m=10, n=5)),
    _p("trisolv", la.trisolv, la.trisolv_inputs,
       dict(n=3000), dict(n=9500), "scalar-loop", dict(n=8)),
    _p("trmm_rows", la.trmm_rows, la.trmm_inputs,
       dict(m=1000, n=200), dict(m=2000, n=500), "linalg-loop", dict(m=8, n=5)),
    _p("syrk_rows", la.syrk_rows, la.syrk_inputs,
       dict(n=1000, m=200), dict(n=2000, m=500), "linalg-loop", dict(n=8, m=5)),
    _p("syr2k_rows", la.syr2k_rows, la.syr2k_inputs,
       dict(n=1000, m=200), dict(n=2000, m=500), "linalg-loop", dict(n=8, m=5)),
    _p("symm_rows", la.symm_rows, la.symm_inputs,
       dict(m=400, n=100), dict(m=1000, n=160), "linalg-loop", dict(m=8, n=5)),
    _p("durbin", la.durbin, la.durbin_inputs,
       dict(n=2000), dict(n=6300), "linalg-loop", dict(n=10)),
    _p("floyd_warshall", la.floyd_warshall, la.floyd_inputs,
       dict(n=200), dict(n=431), "linalg-loop", dict(n=8)),
    # --- element loops: iterative solvers, DP, bytes, sparse rows
    _p("gauss_seidel", sl.gauss_seidel, sl.gauss_seidel_inputs,
       dict(n=200, sweeps=10), dict(n=632, sweeps=10), "scalar-loop", dict(n=8, sweeps=3)),
    _p("seidel_2d", sl.seidel_2d, sl.grid_inputs,
       dict(n=40, steps=4), dict(n=126, steps=4), "scalar-loop", dict(n=6, steps=2)),
    _p("nussinov", sl.nussinov, sl.rna_inputs,
       dict(n=60), dict(n=129), "scalar-loop", dict(n=8)),
    _p("edit_distance", sl.edit_distance, sl.strings_inputs,
       dict(m=100, n=120), dict(m=316, n=380), "scalar-loop", dict(m=5, n=7)),
    _p("crc16_bitwise", sl.crc16_bitwise, sl.packets_inputs,
       dict(packets=20, length=500), dict(packets=200, length=500), "scalar-loop",
       dict(packets=3, length=10)),
    _p("crc16_table", sl.crc16_table, sl.bytes_inputs,
       dict(n=40000), dict(n=400000), "scalar-loop", dict(n=30)),
    _p("csr_power_iteration", sl.csr_power_iteration, sl.csr_inputs,
       dict(n=2000, per_row=8, iters=3), dict(n=20000, per_row=8, iters=3), "scalar-loop",
       dict(n=10, per_row=3, iters=2)),
    # --- stencils and grids
    _p("jacobi_1d", st.jacobi_1d, st.vector_inputs,
       dict(n=20000, steps=200), dict(n=200000, steps=200), "stencil", dict(n=12, steps=3)),
    _p("jacobi_2d", st.jacobi_2d, st.grid_inputs,
       dict(n=200, steps=50), dict(n=632, steps=50), "stencil", dict(n=8, steps=3),
       {"numexpr": peers.jacobi_2d_numexpr}),
    _p("fdtd_2d", st.fdtd_2d, st.fdtd_inputs,
       dict(nx=200, ny=240, steps=40), dict(nx=632, ny=760, steps=40), "stencil",
       dict(nx=6, ny=7, steps=3)),
    _p("heat_3d", st.heat_3d, st.cube_inputs,
       dict(n=40, steps=20), dict(n=86, steps=20), "stencil", dict(n=5, steps=2),
       {"numexpr": peers.heat_3d_numexpr}),
    _p("cavity_flow", st.cavity_flow, st.flow_inputs,
       dict(n=41, nt=50, nit=20), dict(n=130, nt=50, nit=20), "stencil",
       dict(n=6, nt=3, nit=2)),
    _p("channel_flow", st.channel_flow, st.channel_inputs,
       dict(n=41, nt=25, nit=20), dict(n=130, nt=25, nit=20), "stencil",
       dict(n=6, nt=3, nit=2)),
    _p("deriche", st.deriche, st.image_inputs,
       dict(h=300, w=360), dict(h=950, w=1140), "stencil", dict(h=6, w=7)),
    _p("game_of_life", st.game_of_life, st.board_inputs,
       dict(n=250, steps=50), dict(n=790, steps=50), "stencil", dict(n=8, steps=3)),
    # --- convolutions and a CNN
    _p("conv2d_bias", wa.conv2d_bias, wa.conv_inputs,
       dict(n=64, c=8, h=32, k=16), dict(n=640, c=8, h=32, k=16), "cnn",
       dict(n=2, c=2, h=6, k=3)),
    _p("conv2d_offsets", wa.conv2d_offsets, wa.conv_inputs,
       dict(n=32, c=8, h=32, k=16), dict(n=320, c=8, h=32, k=16), "cnn",
       dict(n=2, c=2, h=6, k=3)),
    _p("cnn_inference", wa.cnn_inference, wa.cnn_inputs,
       dict(n=96, h=28), dict(n=960, h=28), "cnn", dict(n=2, h=10)),
    # --- statistics, machine learning, simulations, data processing
    _p("covariance", wa.covariance, wa.table_inputs,
       dict(n=8000, m=200), dict(n=80000, m=200), "whole-array", dict(n=10, m=5)),
    _p("correlation", wa.correlation, wa.table_inputs,
       dict(n=5000, m=200), dict(n=50000, m=200), "whole-array", dict(n=10, m=5)),
    _p("kmeans", wa.kmeans, wa.blobs_inputs,
       dict(n=5000, d=2, k=8, iters=10), dict(n=50000, d=2, k=8, iters=10), "whole-array",
       dict(n=30, d=2, k=3, iters=3)),
    _p("logistic_regression", wa.logistic_regression, wa.classification_inputs,
       dict(n=5000, d=20, steps=100), dict(n=50000, d=20, steps=100), "whole-array",
       dict(n=20, d=3, steps=12)),
    _p("mlp_softmax", wa.mlp_softmax, wa.mlp_inputs,
       dict(n=5000, d=100, hidden=128), dict(n=50000, d=100, hidden=128), "whole-array",
       dict(n=6, d=4, hidden=5)),
    _p("monte_carlo_option", wa.monte_carlo_option, wa.paths_inputs,
       dict(paths=15000, steps=100), dict(paths=150000, steps=100), "whole-array",
       dict(paths=10, steps=4), {"numexpr": peers.monte_carlo_option_numexpr}),
    _p("nbody", wa.nbody, wa.bodies_inputs,
       dict(n=200, steps=10), dict(n=632, steps=10), "whole-array", dict(n=5, steps=2)),
    _p("mandelbrot", wa.mandelbrot, wa.plane_inputs,
       dict(n=250, maxiter=30), dict(n=790, maxiter=30), "whole-array",
       dict(n=8, maxiter=5)),
    _p("black_scholes", wa.black_scholes, wa.options_inputs,
       dict(n=300000), dict(n=3000000), "whole-array", dict(n=10),
       {"numexpr": peers.black_scholes_numexpr}),
    _p("horner_poly", wa.horner_poly, wa.poly_inputs,
       dict(degree=30, n=300000), dict(degree=30, n=3000000), "whole-array",
       dict(degree=4, n=10), {"numexpr": peers.horner_poly_numexpr}),
    _p("histogram_equalize", wa.histogram_equalize, wa.images_inputs,
       dict(count=30, h=128), dict(count=300, h=128), "whole-array", dict(count=2, h=6)),
    _p("timeseries_stats", wa.timeseries_stats, wa.prices_inputs,
       dict(series=120, length=2000), dict(series=1200, length=2000), "whole-array",
       dict(series=3, length=30)),
    _p("groupby_sort", wa.groupby_sort, wa.groups_inputs,
       dict(n=150000, groups=1000), dict(n=1500000, groups=1000), "whole-array",
       dict(n=40, groups=5)),
]

BY_NAME = {p.name: p for p in PROGRAMS}
assert len(BY_NAME) == len(PROGRAMS), "program names must be unique"
assert all(p.tag in TAGS for p in PROGRAMS)
assert all(n in BY_NAME for n in SCALAR_LOOP_TARGETS)


# --- results ----------------------------------------------------------------------------------------

def as_results(out) -> tuple:
    """A program's result(s) as a tuple of NumPy arrays (``numpy.asarray`` forces lazynp)."""
    if not isinstance(out, (tuple, list)):
        out = (out,)
    return tuple(numpy.asarray(r) for r in out)


def compare(want: tuple, got: tuple, rtol: float = 1e-9) -> list[str]:
    """Differences between two results from :func:`as_results` (empty when they agree).

    Shapes and dtypes must be equal; integer, boolean and other exact data must be equal;
    floating and complex data agree to ``rtol`` with an absolute tolerance of ``rtol`` times
    the largest magnitude in the result (for elements that are sums cancelling to ~0).
    """
    if len(want) != len(got):
        return [f"{len(got)} results instead of {len(want)}"]
    problems = []
    for i, (w, g) in enumerate(zip(want, got)):
        if w.shape != g.shape:
            problems.append(f"result {i}: shape {g.shape} instead of {w.shape}")
        elif w.dtype != g.dtype:
            problems.append(f"result {i}: dtype {g.dtype} instead of {w.dtype}")
        elif w.dtype.kind in "fc":
            finite = numpy.isfinite(w)
            scale = float(numpy.max(numpy.abs(w[finite]), initial=0.0))
            if not numpy.allclose(g, w, rtol=rtol, atol=rtol * scale, equal_nan=True):
                err = numpy.abs(g - w)
                err[~finite & (g == w)] = 0.0
                err[numpy.isnan(w) & numpy.isnan(g)] = 0.0
                j = numpy.unravel_index(numpy.nanargmax(err), w.shape)
                problems.append(f"result {i}: values differ, worst at {tuple(map(int, j))}: "
                                f"{g[j]!r} instead of {w[j]!r}")
        elif not numpy.array_equal(g, w):
            bad = numpy.argwhere(g != w)
            problems.append(f"result {i}: {len(bad)} elements differ, first at "
                            f"{tuple(map(int, bad[0]))}: {g[tuple(bad[0])]!r} instead of "
                            f"{w[tuple(bad[0])]!r}")
    return problems
