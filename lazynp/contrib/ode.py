"""``odeint``: fixed-step RK4 with an adjoint-method gradient."""
from __future__ import annotations

from .._numpy import namespace as lnp
from ..autograd import tape
from ..autograd.api import vjp
from ..autograd.custom import custom_vjp


def _rk4_step(func, y, t, h, args):
    k1 = func(y, t, *args)
    k2 = func(y + (0.5 * h) * k1, t + 0.5 * h, *args)
    k3 = func(y + (0.5 * h) * k2, t + 0.5 * h, *args)
    k4 = func(y + h * k3, t + h, *args)
    return y + (h / 6.0) * (k1 + 2.0 * k2 + 2.0 * k3 + k4)


def _integrate(func, y, t0, t1, n_steps, args):
    """``y`` carried from ``t0`` to ``t1`` by ``n_steps`` RK4 steps (``t1 < t0`` works)."""
    h = (t1 - t0) / n_steps
    for k in range(n_steps):
        y = _rk4_step(func, y, t0 + k * h, h, args)
    return y


def _check_closure(func, y0, t0, args):
    """``func`` must not read a differentiated value from its closure: its gradient would be
    silently lost (the adjoint only sees ``y`` and ``args``)."""
    if not tape.depth():
        return
    stop = tape.stop_gradient     # (detached arguments: a dependence left is a closure's)
    args = [stop(a) if isinstance(a, lnp.ndarray) else a for a in args]
    if tape.depends_on_inputs(lnp.asarray(func(stop(y0), stop(t0), *args))):
        raise tape.AutogradError(
            "lazynp.contrib.odeint: func reads a differentiated value that is not one of "
            "its arguments (a closure or global); pass it through odeint's *args so that "
            "the adjoint gradient covers it")


def _solve(func, n_steps, y0, t, *args):
    y0 = lnp.asarray(y0)
    t = lnp.asarray(t)
    ys = [y0]
    y = y0
    for i in range(t.shape[0] - 1):
        y = _integrate(func, y, t[i], t[i + 1], n_steps, args)
        ys.append(y)
    return lnp.stack(ys)


_odeint = custom_vjp(_solve, nondiff_argnums=(0, 1))


def _fwd(func, n_steps, y0, t, *args):
    y0 = lnp.asarray(y0)
    t = lnp.asarray(t)
    _check_closure(func, y0, t[0], args)
    ys = _solve(func, n_steps, y0, t, *args)
    return ys, (ys, t, args)


def _bwd(func, n_steps, res, g):
    """The adjoint method: between consecutive output times, the augmented system
    ``(y, a, a_args)`` with ``dy/dt = f``, ``da/dt = -a df/dy``, ``da_args/dt = -a df/dargs``
    is integrated backwards (RK4, same number of steps); ``a`` jumps by the output's
    cotangent at each output time.  ``dL/dt_i = g_i . f(y_i, t_i)`` for the output times
    and ``dL/dt_0 = -a(t_0) . f(y_0, t_0)``."""
    ys, t, args = res
    T = t.shape[0]
    diff = [i for i, p in enumerate(args) if lnp.asarray(p).dtype.kind in "fc"]
    const = [lnp.asarray(p) for p in args]

    def aug(state, tt, *_unused):
        y, a = state[0], state[1]
        def f_of(y_, *dp):
            full = list(const)
            for i, v in zip(diff, dp):
                full[i] = v
            return func(y_, tt, *full)
        dy, pull = vjp(f_of, y, *[const[i] for i in diff])
        cots = pull(a)
        return [dy, -cots[0]] + [-c for c in cots[1:]]

    def step_aug(state, t0, h):
        def add(s, k, c):
            return [x + c * d for x, d in zip(s, k)]
        k1 = aug(state, t0)
        k2 = aug(add(state, k1, 0.5 * h), t0 + 0.5 * h)
        k3 = aug(add(state, k2, 0.5 * h), t0 + 0.5 * h)
        k4 = aug(add(state, k3, h), t0 + h)
        return [x + (h / 6.0) * (a + 2.0 * b + 2.0 * c + d)
                for x, a, b, c, d in zip(state, k1, k2, k3, k4)]

    a = g[T - 1]
    a_args = [lnp.zeros_like(const[i]) for i in diff]
    t_bar = [None] * T
    for i in range(T - 1, 0, -1):
        t_bar[i] = lnp.sum(g[i] * func(ys[i], t[i], *const))
        state = [ys[i], a] + a_args
        h = (t[i - 1] - t[i]) / n_steps
        for k in range(n_steps):
            state = step_aug(state, t[i] + k * h, h)
        a = state[1] + g[i - 1]
        a_args = state[2:]
    t_bar[0] = -lnp.sum((a - g[0]) * func(ys[0], t[0], *const))
    args_bar = [None] * len(args)
    for i, c in zip(diff, a_args):
        args_bar[i] = c
    return (a, lnp.stack(t_bar)) + tuple(args_bar)


_odeint.defvjp(_fwd, _bwd)


def odeint(func, y0, t, *args, n_steps: int = 20):
    """Solve ``dy/dt = func(y, t, *args)`` from ``y(t[0]) = y0``; ``y`` at each time of ``t``.

    Parameters
    ----------
    func : callable
        ``func(y, t, *args) -> dy/dt`` (an array like ``y``), written with lazynp ops.  It
        must read differentiated values only through ``y``, ``t`` and ``args`` (a closure
        over one raises :class:`lazynp.autograd.AutogradError` under ``grad``).
    y0 : array_like
        The initial state (one array of any shape).
    t : array_like
        1-D array of output times (increasing or decreasing), ``t[0]`` the initial time.
    *args : array_like
        Parameters passed to ``func``.
    n_steps : int
        Fixed classical Runge-Kutta (RK4) steps between consecutive output times.

    Returns
    -------
    ndarray
        Shape ``(len(t),) + y0.shape``: the solution at the times ``t``.

    Notes
    -----
    The gradient w.r.t. ``y0``, ``t`` and ``args`` is computed by the adjoint method
    (Pontryagin; Chen et al. 2018): the state and its adjoint are integrated backwards in
    time with the same RK4 steps, so it equals the derivative of the exact solution to
    the solver's accuracy, not the derivative of the discrete solver.  The forward trajectory
    is not stored between output times (the state is integrated backwards again).

    Examples
    --------
    >>> import lazynp as np
    >>> from lazynp.contrib import odeint
    >>> def loss(k):
    ...     ys = odeint(lambda y, t, k: -k * y, np.array([1.0]), np.array([0.0, 1.0]), k)
    ...     return ys[-1, 0]
    >>> round(float(np.grad(loss)(0.5)), 6)    # d/dk exp(-k) = -exp(-k)
    -0.606531
    """
    return _odeint(func, int(n_steps), y0, t, *args)
