"""``lazynp.jit``: trace once per input signature, run a compiled, memory-planned plan.

``jit(f)`` traces ``f`` on its first call (:func:`lazynp.trace`) and keeps one compiled
:class:`Plan` per *signature*: pytree structure, shapes and dtypes of the array leaves,
values of Python-scalar leaves and of ``static_argnums`` arguments, and the device (CPU).
``explain()`` says why each plan was made.

What a plan is and how it runs: :mod:`lazynp.jit.plan`; a call's signature:
:mod:`lazynp.jit.signature`.
"""
from __future__ import annotations

import functools
import inspect
from typing import Callable

import numpy as np

from .. import devices as _devices
from .. import symbol as _symbol
from ..array.ndarray import ndarray
from ..core import graph as _graph
from .plan import STATS, Plan, TiledPlan, compile_plan, run_symbol, wrap_outputs  # noqa: F401
from .signature import argument_key, describe, diff_keys

__all__ = ["jit", "Plan", "compile_plan", "run_symbol", "set_explanation_type",
           "set_gradient_trace_check"]


# --- hooks the layers above install -------------------------------------------------------

def _no_gradient_trace() -> bool:
    return False


#: tells whether a gradient trace (grad, vjp, jvp, record) is open: a jit call then runs its
#: function instead of a plan (see :meth:`jit.__call__`); lazynp.autograd installs its own
_gradient_trace_open: Callable[[], bool] = _no_gradient_trace


def set_gradient_trace_check(is_open: Callable[[], bool]) -> None:
    """Install the test of whether a gradient trace is open (``lazynp.autograd`` calls it
    at its import)."""
    global _gradient_trace_open
    _gradient_trace_open = is_open


def _plain_explanation(text: str, log, plans, name: str) -> str:
    return text


#: makes what :meth:`jit.explain` returns from ``(text, log, plans, function name)``;
#: lazynp.notebook installs its table-and-pictures report
_make_explanation: Callable[..., str] = _plain_explanation


def set_explanation_type(make: Callable[..., str]) -> None:
    """Install what :meth:`jit.explain` returns: ``make(text, log, plans, name)``, a ``str``
    (``lazynp.notebook`` installs :class:`lazynp.notebook.jupyter.JitExplanation`)."""
    global _make_explanation
    _make_explanation = make


class jit:
    """Compile ``fun`` per input signature (see the module docstring).

    ``static_argnums``: arguments passed to ``fun`` as they are (hashable; a new value makes
    a new plan), e.g. sizes or flags that drive Python control flow.  ``fuse``,
    ``plan_memory`` and ``tile`` switch off kernel fusion / buffer planning / running a
    row-local graph in slices of its batch (for comparisons).
    """

    def __init__(self, fun=None, static_argnums=(), *, fuse: bool = True,
                 plan_memory: bool = True, parallel_safe: bool = True, tile: bool = True):
        if isinstance(static_argnums, int):
            static_argnums = (static_argnums,)
        self._static = tuple(static_argnums)
        self._fuse = fuse
        self._tile = tile
        self._plan_memory = plan_memory
        self._parallel_safe = parallel_safe
        self._plans: dict = {}
        self._log: list = []           # (key, reason)
        self._fun = None
        if fun is not None:
            self._set_fun(fun)

    def _set_fun(self, fun):
        self._fun = fun
        functools.update_wrapper(self, fun)
        try:
            self._sigobj = inspect.signature(fun)
        except (TypeError, ValueError):
            self._sigobj = None
        try:
            self._argnames = [p.name for p in self._sigobj.parameters.values()]
        except AttributeError:
            self._argnames = []

    def __get__(self, obj, objtype=None):
        if obj is None:
            return self
        return functools.partial(self.__call__, obj)

    def _positional(self, args, kwargs):
        if not kwargs:
            return args
        if self._sigobj is None:
            raise TypeError("lazynp.jit: keyword arguments need an inspectable signature")
        ba = self._sigobj.bind(*args, **kwargs)
        ba.apply_defaults()
        if ba.kwargs:
            raise TypeError("lazynp.jit: **kwargs parameters are not supported")
        return ba.args

    def _key(self, args, leaves):
        static = self._static
        n = len(args)
        if static:
            st = {i % n for i in static if -n <= i < n}
            return tuple([("static", a) if i in st else argument_key(a, leaves)
                          for i, a in enumerate(args)])
        key = []
        for a in args:
            if type(a) is np.ndarray:
                leaves.append(a)
                key.append((a.shape, a.dtype))
            else:
                key.append(argument_key(a, leaves))
        return tuple(key)

    def __call__(self, *args, **kwargs):
        if self._fun is None:        # used as @jit(static_argnums=...)
            if len(args) == 1 and callable(args[0]) and not kwargs:
                self._set_fun(args[0])
                return self
            raise TypeError("lazynp.jit: no function to compile")
        if _gradient_trace_open():
            # inside grad/vjp/jvp/record(): a compiled plan reads its inputs' values and
            # returns constants, so the gradient through it would be silently zero; the
            # function's ops are recorded instead (the enclosing grad replays them)
            return self._fun(*args, **kwargs)
        if _devices.ACTIVE and _devices.any_on_device(args, tuple(kwargs.values())):
            # (device hook) device arrays: a plan of the device's launches, per signature
            from ..cuda import jit_plan
            return jit_plan.call(self, args, kwargs)
        if kwargs:
            args = self._positional(args, kwargs)
        plan, leaves = self._lookup(args)
        outs = plan._runner(leaves)
        if plan.single:
            v = outs[0]
            return ndarray._from_node(_graph.leaf(v), plan.out_scalar[0]) \
                if type(v) is np.ndarray else v
        res = wrap_outputs(outs, plan.out_scalar)
        return _symbol.tree_unflatten(plan.source.out_tree, iter(res))

    def _argname(self, i: int) -> str:
        nm = self._argnames[i] if i < len(self._argnames) else None
        return f"argument {i}" + (f" ({nm})" if nm else "")

    def _compile(self, key, args):
        reason = self._reason(key)
        n = len(args)
        static = tuple(i % n for i in self._static if -n <= i < n)
        STATS["traces"] += 1
        sym = _symbol.trace(self._fun, *args, static_argnums=static, _what="lazynp.jit")
        plan = compile_plan(sym, tile=self._tile and self._plan_memory, fuse=self._fuse,
                            plan_memory=self._plan_memory, parallel_safe=self._parallel_safe)
        self._plans[key] = plan
        self._log.append((key, reason))
        return plan

    def _reason(self, key) -> str:
        if not self._log:
            parts = [f"{self._argname(i)}: {describe(k)}" for i, k in enumerate(key)]
            return "first call: " + ("; ".join(parts) if parts else "no arguments") + \
                "; device cpu"
        prev = self._log[-1][0]
        diffs: list = []
        if len(prev) != len(key):
            diffs.append(f"number of arguments {len(prev)} -> {len(key)}")
        else:
            for i, (a, b) in enumerate(zip(prev, key)):
                diff_keys(a, b, self._argname(i), diffs)
        return "signature changed: " + "; ".join(diffs)

    # --- reports ------------------------------------------------------------------------
    def explain(self) -> str:
        """Why each plan was made or remade (one paragraph per plan): a ``str``, shown in
        Jupyter as a table with each plan's graph once :mod:`lazynp.notebook` is imported
        (:class:`lazynp.notebook.jupyter.JitExplanation`)."""
        name = getattr(self._fun, '__name__', '?')
        return _make_explanation(self._explain_text(), self._log, self._plans, name)

    def _explain_text(self) -> str:
        device = self.__dict__.get("_device_log")
        if not self._log and not device:
            return f"lazynp.jit({getattr(self._fun, '__name__', '?')}): not called yet"
        lines = [f"lazynp.jit({getattr(self._fun, '__name__', '?')}): {len(self._log)} plan(s)"]
        if device:          # (device plans: lazynp.cuda.jit_plan, loaded by their first call)
            from ..cuda import jit_plan
            lines[0] += f", {len(device)} device signature(s)"
            lines += jit_plan.explain_lines(self)
        for k, (key, reason) in enumerate(self._log):
            plan = self._plans[key]
            r = plan.memory_report()
            lines.append(f"plan {k + 1}: {reason}")
            lines.append(f"    {r['ops']} ops -> {r['steps']} steps, {r['fused_kernels']} fused "
                         f"kernel(s); internal memory {r['planned_bytes']} B planned vs "
                         f"{r['naive_bytes']} B naive in {r['num_buffers']} buffer(s)")
        return "\n".join(lines)

    def plan_for(self, *args, **kwargs) -> Plan:
        """The plan (compiled if needed) for these arguments, without running it."""
        return self._lookup(self._positional(args, kwargs))[0]

    def _lookup(self, args) -> tuple:
        """``(plan, array leaves of args)``: the plan of the arguments' signature."""
        leaves: list = []
        key = self._key(args, leaves)
        plan = self._plans.get(key)
        if plan is None:
            plan = self._compile(key, args)
        return plan, leaves

    def memory_report(self, *args, **kwargs) -> dict:
        """Internal memory of the plan for these arguments: ``naive_bytes`` (every op's
        result in its own buffer), ``planned_bytes`` (planned buffers + results allocated
        per call), ``num_buffers`` and details.  Graph outputs are not internal memory."""
        return self.plan_for(*args, **kwargs).memory_report()

    def trace(self, *args, **kwargs) -> "_symbol.Symbol":
        """The Symbol of the plan for these arguments (after the graph passes)."""
        return self.plan_for(*args, **kwargs).symbol

    @property
    def num_plans(self) -> int:
        return len(self._plans)

    def clear(self) -> None:
        """Forget every plan (CPU and device): the next call of each signature compiles."""
        self._plans.clear()
        self._log.clear()
        self.__dict__.pop("_device_plans", None)     # (lazynp.cuda.jit_plan's)
        self.__dict__.pop("_device_log", None)
