"""``fixed_point``: iterate to ``x = f(params, x)``; implicit-function-theorem gradient."""
from __future__ import annotations

from .._numpy import namespace as lnp
from ..autograd.api import vjp
from ..autograd.tape import stop_gradient
from ..autograd.custom import custom_vjp


def _iterate(step, x, tol, max_iter, what):
    for _ in range(max_iter):
        nxt = step(x)
        # (a convergence test: its value is a constant on purpose)
        delta = float(stop_gradient(lnp.max(lnp.abs(nxt - x)))) if lnp.size(x) else 0.0
        x = nxt
        if delta <= tol:
            return x
    raise RuntimeError(f"lazynp.contrib.fixed_point: the {what} iteration did not converge "
                       f"to {tol} in {max_iter} steps")


def _solve(f, tol, max_iter, params, x0):
    return _iterate(lambda x: f(params, x), lnp.asarray(x0) * 1.0, tol, max_iter, "forward")


_fixed_point = custom_vjp(_solve, nondiff_argnums=(0, 1, 2))


def _fwd(f, tol, max_iter, params, x0):
    x = _solve(f, tol, max_iter, params, x0)
    return x, (params, x)


def _bwd(f, tol, max_iter, res, g):
    """``w = g + (df/dx)^T w`` by iteration, then ``params_bar = (df/dparams)^T w``."""
    params, x = res
    _, pull_x = vjp(lambda x_: f(params, x_), x)
    w = _iterate(lambda w_: g + pull_x(w_)[0], lnp.asarray(g), tol, max_iter, "adjoint")
    _, pull_p = vjp(lambda p: f(p, x), params)
    return pull_p(w)[0], None


_fixed_point.defvjp(_fwd, _bwd)


def fixed_point(f, params, x0, tol: float = 1e-12, max_iter: int = 1000):
    """The fixed point ``x = f(params, x)`` reached by iterating ``f`` from ``x0``.

    Parameters
    ----------
    f : callable
        ``f(params, x) -> x`` (lazynp ops), a contraction in ``x`` near the fixed point.
    params : array or pytree of arrays
        What the fixed point is differentiated against.
    x0 : array_like
        The starting point (no gradient flows to it: the fixed point does not depend on it).
    tol, max_iter
        The iteration stops when the largest change of an element is at most ``tol``;
        RuntimeError after ``max_iter`` steps.

    Notes
    -----
    The gradient does not differentiate the iterations: by the implicit function theorem,
    ``dx*/dparams = (I - df/dx)^-1 df/dparams`` at the fixed point, so a VJP solves
    ``w = g + (df/dx)^T w`` by the same kind of iteration and returns ``(df/dparams)^T w``.
    The iteration reads values (a convergence test), so it is not for :func:`lazynp.jit`.

    Examples
    --------
    >>> import lazynp as np
    >>> from lazynp.contrib import fixed_point
    >>> sqrt = lambda a: fixed_point(lambda a, x: 0.5 * (x + a / x), a, 1.0)   # Newton
    >>> round(float(np.grad(sqrt)(2.0)), 8)      # 1 / (2 sqrt 2)
    0.35355339
    """
    return _fixed_point(f, float(tol), int(max_iter), params, x0)
