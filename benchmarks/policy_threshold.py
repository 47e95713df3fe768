"""Where recording starts to pay: the size bound of the execution policy (lazynp.core.policy).

Below ``lazynp.core.policy.EAGER_MAX_ELEMS`` elements, elementwise, reduction and write work on
computed arrays runs at once on NumPy; from it, it is recorded, fused and run on the engine.
This benchmark measures, for float64 arrays of 2^10 .. 2^21 elements, three typical pieces
of work run both ways in the same process (NumPy itself as the reference):

* ``chain``: ``np.exp(a * 1.5 + b) * c - 0.5`` then a read (5 elementwise ops, fusable);
* ``stencil``: ``0.25 * (a[:-2] + a[2:] + 2 * a[1:-1])`` then a read (views + 4 ops);
* ``softmax-row``: ``e = np.exp(a - a.max()); e / e.sum()`` then a read (reductions).

Policy ``auto`` with the bound set above every size ("eager") against policy ``lazy``
("recorded").  The bound that pays is the smallest size from which the recorded run is no
slower than the eager one for a piece of work, at that size and all larger ones; the
crossing is the geometric mean of the three (work whose recording never pays counts as twice
the largest size).  The summary compares it with the current bound: a bound within a factor
of 4 of the measured crossing passes (below the crossing small work is slowed down by
recording; far above it large work misses fusion and threads).

Usage::

    python benchmarks/policy_threshold.py            # full run (about a minute)
    python benchmarks/policy_threshold.py --quick    # rough figures
"""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy  # noqa: E402

from _common import (Summary, fmt_time, header, interleaved_medians, parse_args,  # noqa: E402
                     print_table)


def chain(np, a, b, c):
    return np.exp(a * 1.5 + b) * c - 0.5


def stencil(np, a, b, c):
    return 0.25 * (a[:-2] + a[2:] + 2.0 * a[1:-1])


def softmax_row(np, a, b, c):
    e = np.exp(a - a.max())
    return e / e.sum()


WORK = {"chain": chain, "stencil": stencil, "softmax-row": softmax_row}


def main(argv=None) -> int:
    args = parse_args(__doc__.split("\n\n")[0], argv)
    import lazynp
    from lazynp.core import policy as _policy
    from lazynp.kernels import cpu

    print(f"numpy {numpy.__version__}, lazynp {lazynp.__version__}, {os.cpu_count()} CPUs; "
          f"current bound EAGER_MAX_ELEMS = {_policy.EAGER_MAX_ELEMS}")
    sizes = [1 << k for k in range(10, 22 if not args.quick else 19)]
    rng = numpy.random.default_rng(0)
    current = _policy.EAGER_MAX_ELEMS
    rows = []
    faster_from: dict[str, int | None] = {}
    ratios: dict[str, list] = {w: [] for w in WORK}
    try:
        for n in sizes:
            an, bn, cn = (rng.standard_normal(n) for _ in range(3))
            al, bl, cl = (lazynp.array(v) for v in (an, bn, cn))
            for name, fn in WORK.items():
                want = fn(numpy, an, bn, cn)

                def eager():
                    _policy.set_eager_max_elems(1 << 40)
                    return numpy.asarray(fn(lazynp, al, bl, cl))

                def recorded():
                    with lazynp.policy("lazy"):
                        r = fn(lazynp, al, bl, cl)
                    # (the read outside the block, as a program's: under policy "lazy" a
                    # read is a snapshot, a copy of the result that auto does not make)
                    return numpy.asarray(r)

                for f in (eager, recorded):       # compile, and check the values
                    numpy.testing.assert_allclose(f(), want, rtol=1e-12, atol=1e-300)
                cpu.wait_compiles()
                # (at least 15 rounds: under load one slow round of 5 decided a size)
                reps = args.repeat(max(15, min(200, (1 << 22) // n)), 3)
                med = interleaved_medians({"numpy": lambda: numpy.asarray(fn(numpy, an, bn, cn)),
                                           "eager": eager, "recorded": recorded},
                                          repeat=reps, number=1, warmup=1)
                _policy.set_eager_max_elems(current)
                r = med["recorded"] / med["eager"]
                ratios[name].append((n, r))
                rows.append((f"{n:,}", name, fmt_time(med["numpy"]), fmt_time(med["eager"]),
                             fmt_time(med["recorded"]), f"{r:.2f}"))
    finally:
        _policy.set_eager_max_elems(current)

    header("recorded (policy lazy) vs run at once (policy auto, bound above the size)")
    print_table(rows, ("elements", "work", "numpy", "at once", "recorded",
                       "recorded / at once"))
    starts = []
    for name, rs in ratios.items():
        start = None
        for n, r in rs:                  # the smallest size from which recording never loses
            if r <= 1.0:
                start = n if start is None else start
            else:
                start = None
        faster_from[name] = start
        print(f"{name}: recording pays from {start:,} elements" if start else
              f"{name}: recording never paid up to {rs[-1][0]:,} elements")
        starts.append(start if start is not None else rs[-1][0] * 2)
    crossing = int(round(float(numpy.exp(numpy.mean(numpy.log(starts))))))
    print(f"measured crossing (geometric mean over the work): {crossing:,} elements; "
          f"current bound {current:,}")
    summary = Summary()
    ok = crossing / 4 <= current <= crossing * 4
    summary.add("EAGER_MAX_ELEMS within 4x of the measured crossing",
                f"{crossing // 4:,} .. {crossing * 4:,}", f"{current:,}", ok)
    return summary.print(strict=args.strict)


if __name__ == "__main__":
    sys.exit(main())
