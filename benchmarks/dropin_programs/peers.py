"""The same programs written for peer libraries, for the benchmark's peer columns.

Each peer version takes the same inputs as its program and returns the same results. Only
programs where the peer is a natural fit have one (numexpr: long elementwise expressions).
"""
from __future__ import annotations

import numpy


def _numexpr():
    import numexpr
    return numexpr


def jacobi_2d_numexpr(A, steps):
    """jacobi_2d with each sweep one ``numexpr.evaluate``."""
    ne = _numexpr()
    A = numpy.asarray(A).copy()
    B = A.copy()
    expr = "0.2 * (c + w + e + s + n)"
    for _ in range(steps):
        for src, dst in ((A, B), (B, A)):
            dst[1:-1, 1:-1] = ne.evaluate(expr, local_dict={
                "c": src[1:-1, 1:-1], "w": src[1:-1, :-2], "e": src[1:-1, 2:],
                "s": src[2:, 1:-1], "n": src[:-2, 1:-1]})
    return A


def heat_3d_numexpr(A, steps):
    """heat_3d with each sweep one ``numexpr.evaluate``."""
    ne = _numexpr()
    A = numpy.asarray(A).copy()
    B = A.copy()
    expr = ("0.125 * (xp - 2.0 * m + xm) + 0.125 * (yp - 2.0 * m + ym)"
            " + 0.125 * (zp - 2.0 * m + zm) + m")
    for _ in range(steps):
        for src, dst in ((A, B), (B, A)):
            dst[1:-1, 1:-1, 1:-1] = ne.evaluate(expr, local_dict={
                "m": src[1:-1, 1:-1, 1:-1],
                "xp": src[2:, 1:-1, 1:-1], "xm": src[:-2, 1:-1, 1:-1],
                "yp": src[1:-1, 2:, 1:-1], "ym": src[1:-1, :-2, 1:-1],
                "zp": src[1:-1, 1:-1, 2:], "zm": src[1:-1, 1:-1, :-2]})
    return A


def black_scholes_numexpr(S, K, T, r, sigma):
    """black_scholes with every expression in ``numexpr.evaluate``."""
    ne = _numexpr()
    d1 = ne.evaluate("(log(S / K) + (r + 0.5 * sigma * sigma) * T) / (sigma * sqrt(T))")
    d2 = ne.evaluate("d1 - sigma * sqrt(T)")

    def norm_cdf(x):
        t = ne.evaluate("1.0 / (1.0 + 0.2316419 * abs(x))")
        tail = ne.evaluate(
            "0.3989422804014327 * exp(-0.5 * x * x) * (t * (0.319381530 + t * (-0.356563782"
            " + t * (1.781477937 + t * (-1.821255978 + t * 1.330274429)))))")
        return ne.evaluate("where(x < 0, tail, 1.0 - tail)")

    n1, n2 = norm_cdf(d1), norm_cdf(d2)
    call = ne.evaluate("S * n1 - K * exp(-r * T) * n2")
    put = ne.evaluate("call - S + K * exp(-r * T)")
    return call, put


def horner_poly_numexpr(coeffs, x):
    """horner_poly with Horner's scheme unrolled into ``numexpr`` expressions, 16
    coefficients per call (numexpr's parser limits the nesting depth)."""
    ne = _numexpr()
    coeffs = numpy.asarray(coeffs)
    p = numpy.zeros_like(x)
    dp = numpy.zeros_like(x)
    for start in range(0, len(coeffs), 16):
        local = {"x": x, "p": p, "dp": dp}
        ep, edp = "p", "dp"
        for i, a in enumerate(coeffs[start:start + 16]):
            local[f"c{i}"] = float(a)
            edp = f"({edp}) * x + ({ep})"
            ep = f"({ep}) * x + c{i}"
        dp = ne.evaluate(edp, local_dict=local)
        p = ne.evaluate(ep, local_dict=local)
    return p, dp


def monte_carlo_option_numexpr(Z, S0, K, r, sigma, T):
    """monte_carlo_option with the increments and the exponential in ``numexpr`` (cumsum and
    the reductions stay NumPy's)."""
    ne = _numexpr()
    steps = Z.shape[1]
    dt = T / steps
    sq = numpy.sqrt(dt)
    log_paths = numpy.cumsum(ne.evaluate("(r - 0.5 * sigma ** 2) * dt + sigma * sq * Z"), axis=1)
    S = ne.evaluate("S0 * exp(log_paths)")
    payoff = numpy.maximum(S.mean(axis=1) - K, 0.0)
    disc = numpy.exp(-r * T)
    return disc * payoff.mean(), disc * payoff.std(ddof=1) / numpy.sqrt(payoff.shape[0])
