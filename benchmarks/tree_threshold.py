"""Where tree kernels start to pay: ``TREE_MIN_ELEMS`` and ``TREE_MIN_WORK`` (lazynp.core.policy).

Below ``EAGER_MAX_ELEMS`` elements, elementwise work on computed arrays runs at once on
NumPy, unless it joins a *tree kernel* (kernels/tree.py: a chain of elementwise ops recorded
and run as one loop when read or assigned).  A tree is recorded from ``TREE_MIN_ELEMS``
elements; a tree that does fewer element-ops than ``TREE_MIN_WORK`` (its ops times its
elements) makes its ops' lines run at once below that size from its second such run on
(core/trees.py, ``lone_sites``).  This benchmark measures, for float64 arrays of 2^12 ..
2^17 elements, seven pieces of work, each called repeatedly as a program's loop would (the
lines' feedback settles in the warm-up calls), in the same process:

* ``stencil1d``: ``B[1:-1] = 0.33333 * (A[:-2] + A[1:-1] + A[2:])`` (3 ops, assigned);
* ``chain5max``: ``((((x * 2 + 1) * x - 3) / y).max()`` (5 ops, then a reduction);
* ``chain2sum``: ``(x * y + 1).sum()`` (2 ops, then a reduction);
* ``one_sum``: ``z = x * y; z.sum()`` (1 op);
* ``jacobi2d``: a 5-point 2-D stencil assigned to the interior (5 ops);
* ``heat3d``: NPBench's 3-D heat statement (15 ops on 7 views, assigned);
* ``where``: ``where(x > 0.5, x * y, y - x).sum()``.

Columns: NumPy itself, lazynp with tree kernels off (``TREE_MIN_ELEMS`` above every size:
NumPy at once), and lazynp with trees from 8192 elements (``LAZYNP_TREE_MIN_ELEMS=8192``;
the default stays 2^17, lazynp.core.policy says why).  The check: with tree kernels no piece of work is
slower than without them by more than 15% (the per-op cost of asking whether an op joins a
tree, about 0.3 us, is most of it at 4096 elements), and the long statements gain.

Usage::

    python benchmarks/tree_threshold.py            # full run (about two minutes)
    python benchmarks/tree_threshold.py --quick    # fewer sizes and rounds
"""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy  # noqa: E402

from _common import (Summary, fmt_time, header, interleaved_medians, make_parser,  # noqa: E402
                     parse_args, print_table)


def _work(np):
    """The pieces of work, each ``(name, fn(a, b), layout)`` on arrays of module ``np``."""
    def stencil1d(A, B):
        B[1:-1] = 0.33333 * (A[:-2] + A[1:-1] + A[2:])

    def chain5max(x, y):
        return float((((x * 2.0 + 1.0) * x - 3.0) / y).max())

    def chain2sum(x, y):
        return float((x * y + 1.0).sum())

    def one_sum(x, y):
        z = x * y
        return float(z.sum())

    def jacobi2d(A, B):
        B[1:-1, 1:-1] = 0.2 * (A[1:-1, 1:-1] + A[1:-1, :-2] + A[1:-1, 2:] + A[2:, 1:-1] +
                               A[:-2, 1:-1])

    def heat3d(A, B):
        B[1:-1, 1:-1, 1:-1] = (
            0.125 * (A[2:, 1:-1, 1:-1] - 2.0 * A[1:-1, 1:-1, 1:-1] + A[:-2, 1:-1, 1:-1]) +
            0.125 * (A[1:-1, 2:, 1:-1] - 2.0 * A[1:-1, 1:-1, 1:-1] + A[1:-1, :-2, 1:-1]) +
            0.125 * (A[1:-1, 1:-1, 2:] - 2.0 * A[1:-1, 1:-1, 1:-1] + A[1:-1, 1:-1, 0:-2]) +
            A[1:-1, 1:-1, 1:-1])

    def where(x, y):
        return float(np.where(x > 0.5, x * y, y - x).sum())

    return [("stencil1d", stencil1d, 1, True), ("chain5max", chain5max, 1, False),
            ("chain2sum", chain2sum, 1, False), ("one_sum", one_sum, 1, False),
            ("jacobi2d", jacobi2d, 2, True), ("heat3d", heat3d, 3, True),
            ("where", where, 1, False)]


def _shape(n: int, ndim: int) -> tuple:
    side = int(round(n ** (1 / ndim)))
    return (n,) if ndim == 1 else (side,) * ndim


def main(argv=None) -> int:
    parser = make_parser(__doc__.split("\n\n")[0])
    args = parse_args("", argv, parser)
    import lazynp
    from lazynp.core import policy as _policy
    from lazynp.kernels import cpu

    tree_min = _policy.TREE_MIN_ELEMS
    measured = 8192
    print(f"numpy {numpy.__version__}, lazynp {lazynp.__version__}, {os.cpu_count()} CPUs; "
          f"TREE_MIN_ELEMS = {tree_min}, TREE_MIN_WORK = {_policy.TREE_MIN_WORK}")
    sizes = [1 << k for k in (range(12, 18) if not args.quick else (13, 15, 17))]
    rng = numpy.random.default_rng(0)
    rows = []
    worst = (0.0, "")
    gains = {}
    keep_sync = cpu.SYNC_COMPILE
    cpu.SYNC_COMPILE = True         # (kernels compile in the warm-up, not in a timed call)
    try:
        for n in sizes:
            for (name, fn_np, ndim, assigns), (_, fn_lz, _, _) in zip(_work(numpy),
                                                                     _work(lazynp)):
                shape = _shape(n, ndim)
                A, B = rng.random(shape) + 0.5, rng.random(shape) + 0.5
                a_np, b_np = A.copy(), B.copy()
                sides = {}
                outputs = {}
                for label, bound in (("no trees", 1 << 40), ("trees", measured)):
                    a, b = lazynp.array(A), lazynp.array(B)
                    outputs[label] = b

                    def call(a=a, b=b, bound=bound):
                        _policy.set_tree_min_elems(bound)
                        r = fn_lz(a, b)
                        if assigns:
                            numpy.asarray(b)
                        return r
                    for _ in range(30):      # (the lines' feedback settles)
                        call()
                    sides[label] = call
                want = fn_np(a_np, b_np)
                for label, call in sides.items():     # (NumPy's values, both ways)
                    got = call()
                    if assigns:
                        numpy.testing.assert_allclose(numpy.asarray(outputs[label]), b_np,
                                                      rtol=1e-12)
                    else:
                        numpy.testing.assert_allclose(got, want, rtol=1e-9)
                reps = args.repeat(max(15, min(300, (1 << 22) // n)), 5)
                med = interleaved_medians({"numpy": lambda: fn_np(a_np, b_np), **sides}, reps)
                _policy.set_tree_min_elems(tree_min)
                r = med["trees"] / med["no trees"]
                if r > worst[0]:
                    worst = (r, f"{name} at {n:,}")
                gains.setdefault(name, []).append(r)
                rows.append((f"{n:,}", name, str(shape), fmt_time(med["numpy"]),
                             fmt_time(med["no trees"]), fmt_time(med["trees"]), f"{r:.2f}"))
    finally:
        _policy.set_tree_min_elems(tree_min)
        cpu.SYNC_COMPILE = keep_sync
    header("tree kernels on / off, policy auto (median per call)")
    print_table(rows, ("elements", "work", "shape", "numpy", "no trees", "trees",
                       "trees / no trees"))
    summary = Summary()
    summary.add("slowest piece of work with trees vs without", "<= 1.15x",
                f"{worst[0]:.2f}x ({worst[1]})", worst[0] <= 1.15)
    for name in ("heat3d", "jacobi2d"):
        summary.add(f"{name} at {sizes[-1]:,} elements, trees vs without", "< 1.0x",
                    f"{gains[name][-1]:.2f}x", gains[name][-1] < 1.0)
    return summary.print(strict=args.strict)


if __name__ == "__main__":
    sys.exit(main())
