"""Gradient rules added for issue 35: ``i0`` (with the helper op ``ad.i1``) and the
functions NumPy computes through other differentiable ones (``linalg.cond``, a wide or
complex ``linalg.qr``).  Registered into :mod:`lazynp.autograd.rules`'s tables on import
(:mod:`lazynp.autograd.tape` imports this module).

Conventions as in :mod:`lazynp.autograd.rules`: cotangents of complex values are
``df/dx - i df/dy`` for a real ``f``; each rule's docstring states its formula.
"""
from __future__ import annotations

import numpy as np

from .._numpy import namespace as lnp
from ..array.calls import lazy_call
from .rules import call_rule


# --- i0 and its derivative i1 -----------------------------------------------------------------

def _i1_impl(x):
    """The modified Bessel function of the first kind of order 1, by its power series
    ``sum_k (x/2)**(2k+1) / (k! (k+1)!)``: every term has the sign of ``x`` (no
    cancellation), and ``|x| + 40`` terms reach double precision wherever ``i0`` is
    finite."""
    x = np.asarray(x, dtype=np.result_type(x, 1.0))
    half = x / 2.0
    q = half * half
    term = half.copy()
    total = term.copy()
    n_terms = int(np.max(np.abs(x), initial=0.0)) + 40 if x.size else 0
    with np.errstate(over="ignore", invalid="ignore"):
        for k in range(n_terms):
            term = term * q / ((k + 1.0) * (k + 2.0))
            total = total + term
    return total


def i1(x):
    """``I1(x)`` recorded lazily (``i0``'s derivative)."""
    x = lnp.asarray(x)
    return lazy_call("ad.i1", _i1_impl, (x,), {}, kind="elementwise",
                     meta=lambda n, t: (x.shape, np.result_type(x.dtype, 1.0)))


@call_rule("i0")
def _i0_rule(g, ans, A, K, node):
    """``i0' = i1``."""
    return (g * i1(A[0]),)


@call_rule("ad.i1")
def _i1_rule(g, ans, A, K, node):
    """``i1'(x) = i0(x) - i1(x) / x`` (``1/2`` at 0)."""
    x = A[0]
    safe = lnp.where(x == 0, 1.0, x)
    return (g * lnp.where(x == 0, 0.5, lnp.i0(x) - ans / safe),)
