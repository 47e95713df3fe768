"""lazynp.jit against NumPy eager on small arrays, where per-op overhead dominates.

1. A chain of 100 elementwise ops on a 100-element array: jitted (one fused Numba kernel,
   one planned call) vs the same Python loop on NumPy.  Target: >= 3x faster.
2. A cached call of a 10-input function (sum of ten 10-element arrays): total time per call
   of the jitted function minus the time of its kernel alone.  Target: <= 20 us.
"""
from __future__ import annotations

import sys
import time

import numpy

import lazynp as np


def chain(x):
    for k in range(50):
        x = x * 0.999 + 0.001
    return x


def add10(a, b, c, d, e, f, g, h, i, j):
    return a + b + c + d + e + f + g + h + i + j


def best_time(fn, n, repeat=7):
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        for _ in range(n):
            fn()
        best = min(best, (time.perf_counter() - t) / n)
    return best


def main() -> int:
    ok = True
    x = numpy.random.default_rng(0).standard_normal(100)
    jchain = np.jit(chain)
    numpy.testing.assert_allclose(numpy.asarray(jchain(x)), chain(x), rtol=1e-12)
    t_np = best_time(lambda: chain(x), 300)
    t_jit = best_time(lambda: jchain(x), 3000)
    r = t_np / t_jit
    ok &= r >= 3
    print(f"100 elementwise ops, 100 elements: numpy {t_np * 1e6:8.1f} us  jit "
          f"{t_jit * 1e6:8.1f} us  speedup {r:6.1f}x  target >= 3x  "
          f"{'PASS' if r >= 3 else 'FAIL'}")

    xs = [numpy.random.default_rng(k).standard_normal(10) for k in range(10)]
    j10 = np.jit(add10)
    numpy.testing.assert_allclose(numpy.asarray(j10(*xs)), add10(*xs))
    plan = j10.plan_for(*xs)
    t_call = best_time(lambda: j10(*xs), 20000)
    # the kernel alone (its dispatcher call included: that is not Python overhead of lazynp)
    env = plan.env0.copy()
    for s, v in zip(plan.in_slots, xs):
        env[s] = v
    steps = plan.steps
    t_kernel = best_time(lambda: [s(env) for s in steps], 20000)
    overhead = (t_call - t_kernel) * 1e6
    ok &= overhead <= 20
    print(f"cached call, 10 inputs: total {t_call * 1e6:6.2f} us  kernel {t_kernel * 1e6:6.2f} us"
          f"  overhead {overhead:6.2f} us  target <= 20 us  {'PASS' if overhead <= 20 else 'FAIL'}"
          f"   (numpy eager {best_time(lambda: add10(*xs), 20000) * 1e6:6.2f} us)")
    print("OVERALL", "PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
