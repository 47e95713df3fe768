"""Whole NumPy programs under lazynp and NumPy, small and medium sizes (no targets: where
lazynp is faster than NumPy and where it is not).

Each program is written once against a module ``np`` and run with ``numpy`` and ``lazynp``
in the same process, interleaved; results are checked against NumPy.  The small sizes are the
demo's (``python -m lazynp demo``); the medium ones have arrays of 100k elements and more.
"""
from __future__ import annotations

import sys

import numpy

from _common import fmt_ratio, fmt_time, header, interleaved_medians, parse_args, print_table

import lazynp
from lazynp.tools.demo import heat_equation, kmeans, logistic_regression, monte_carlo


def logistic_regression_large(np, n: int = 100_000, d: int = 8, steps: int = 30):
    rng = np.random.default_rng(3)
    X = rng.standard_normal((n, d))
    y = (rng.random(n) > 0.5).astype(np.float64)
    w = np.zeros(d)
    b = 0.0
    for _ in range(steps):
        p = 1.0 / (1.0 + np.exp(-(X @ w + b)))
        g = p - y
        w = w - 0.5 * (X.T @ g) / n
        b = b - 0.5 * g.mean()
    return {"w": w, "b": b}


def kmeans_large(np, n: int = 100_000, k: int = 8, iters: int = 10):
    rng = np.random.default_rng(1)
    pts = rng.standard_normal((n, 2))
    c = pts[:k].copy()
    for _ in range(iters):
        d = ((pts[:, None, :] - c[None, :, :]) ** 2).sum(axis=2)
        onehot = (d.argmin(axis=1)[:, None] == np.arange(k)[None, :]).astype(np.float64)
        c = (onehot.T @ pts) / np.maximum(onehot.sum(axis=0), 1.0)[:, None]
    return {"centroids": c}


def standardize_large(np, n: int = 2_000_000):
    rng = np.random.default_rng(2)
    x = rng.standard_normal(n)
    z = (x - x.mean()) / x.std()
    return {"score": np.sum(np.where(z > 1.0, z * z, 0.5 * z)) + np.max(np.abs(z))}


PROGRAMS = [
    ("64x64 stencil, 150 steps (demo)", heat_equation),
    ("400x8 logistic regression, 150 steps (demo)", logistic_regression),
    ("600-point k-means (demo)", kmeans),
    ("Monte-Carlo, 200k samples (demo)", monte_carlo),
    ("512x512 stencil, 40 steps", lambda np: heat_equation(np, n=512, steps=40)),
    ("100k x 8 logistic regression, 30 steps", logistic_regression_large),
    ("100k-point k-means, 10 iterations", kmeans_large),
    ("standardize 2M samples", standardize_large),
]


def _forced(result: dict) -> dict:
    return {k: numpy.asarray(v) for k, v in result.items()}


def main() -> int:
    args = parse_args(__doc__)
    repeat = args.repeat(7, 3)
    rows = []
    for name, prog in PROGRAMS:
        want = _forced(prog(numpy))
        got = _forced(prog(lazynp))
        for k in want:
            numpy.testing.assert_allclose(got[k], want[k], rtol=1e-7, atol=1e-9, err_msg=name)
        from lazynp.kernels import cpu
        cpu.wait_compiles()
        t = interleaved_medians({"numpy": lambda: prog(numpy),
                                 "lazynp": lambda: _forced(prog(lazynp))},
                                repeat=repeat, warmup=1)
        rows.append((name, fmt_time(t["numpy"]), fmt_time(t["lazynp"]),
                     fmt_ratio(t["numpy"], t["lazynp"])))
    header("Whole programs: NumPy time / lazynp time (> 1: lazynp is faster)")
    print_table(rows, ("program", "numpy", "lazynp", "speedup"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
