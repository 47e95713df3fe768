"""Central finite differences: the oracle of the gradient tests."""
from __future__ import annotations

import numpy


def fd_grad(f, x, eps: float = 1e-6) -> numpy.ndarray:
    """Central finite-difference gradient of scalar ``f`` at float array ``x``."""
    x = numpy.array(x, dtype=numpy.float64)
    g = numpy.zeros_like(x)
    for i in numpy.ndindex(x.shape):
        xp, xm = x.copy(), x.copy()
        xp[i] += eps
        xm[i] -= eps
        g[i] = (float(f(xp)) - float(f(xm))) / (2 * eps)
    return g
