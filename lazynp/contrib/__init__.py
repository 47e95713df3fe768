"""Differentiable building blocks written on :func:`lazynp.custom_vjp`.

* :func:`odeint`: an ODE solver (fixed-step classical Runge-Kutta 4) whose gradient is
  computed by the adjoint method (a backward ODE solve), not by differentiating the solver.
* :func:`fixed_point`: the solution of ``x = f(params, x)`` by iteration, with the gradient
  of the implicit function theorem.
"""
from .ode import odeint
from .fixed_point import fixed_point

__all__ = ["odeint", "fixed_point"]
