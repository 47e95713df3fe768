"""Autograd's part in Symbols and jit: :meth:`lazynp.Symbol.grad`, and jit's test of whether
a gradient trace is open (a jit call inside ``grad`` runs its function, whose ops the
enclosing gradient replays).  Both are installed when this module is imported (by
``lazynp/__init__.py``, after :mod:`lazynp.autograd`).
"""
from __future__ import annotations

import numpy as _np

from ..ir.symbol import Symbol, SymbolError, add_member
from ..jit import set_gradient_trace_check
from ..symbol import trace
from .api import grad
from .tape import depth
from . import vmap as _vmap


def _symbol_grad(self: Symbol, wrt=None, output: int = 0) -> Symbol:
    """A Symbol computing the gradients of output ``output`` (summed to a scalar when
    it is not one) with respect to the inputs named in ``wrt`` (default: all floating
    inputs).  Its outputs are the gradients, in ``wrt`` order."""
    if wrt is None:
        wrt = [nm for nm in self._names if self.input_dtypes[nm].kind in "fc"]
    elif isinstance(wrt, str):
        wrt = [wrt]
    wrt = list(wrt)
    for w in wrt:
        if w not in self._names:
            raise SymbolError(f"lazynp.Symbol.grad: unknown input {w!r} "
                              f"(inputs: {self._names})")
    argnums = tuple(self._names.index(w) for w in wrt)
    sym = self

    def fwd(*xs):
        y = sym.replay(*xs)[output]
        if y.ndim:
            y = y.sum()
        return y

    g = grad(fwd, argnums=argnums)
    examples = [_np.zeros(self.nodes[r].shape, self.nodes[r].dtype)
                for r in self._input_refs]
    return trace(lambda *xs: tuple(g(*xs)), *examples, names=self._names)


def _gradient_trace_open() -> bool:
    return depth() > 0 or _vmap.tracing()


add_member("grad", _symbol_grad)
set_gradient_trace_check(_gradient_trace_open)
