"""The pass pipeline: pure graph -> graph functions applied in order.

``optimize(sym)`` runs prune, CSE and constant folding (then prune again); the jit compiler
then groups elementwise entries with :func:`fusion_items` (the flush-time fusion pass of
:mod:`lazynp.core.fusion`, reused) and plans memory (:mod:`lazynp.ir.passes.memory_plan`).
This module gives :class:`lazynp.Symbol` its ``optimize()`` and ``memory_plan()`` methods.
"""
from __future__ import annotations

from ...core import graph
from ...core.fusion import FusedGroup, fuse, fusible
from ..symbol import Ref, add_member, resolve_op
from . import memory_plan as _memory_plan
from .constant_fold import constant_fold
from .cse import cse, eliminate_copies
from .prune import prune

PASSES = {"prune": prune, "cse": cse, "constant_fold": constant_fold,
          "eliminate_copies": eliminate_copies}
DEFAULT = ("prune", "cse", "constant_fold", "eliminate_copies", "cse", "prune")


def optimize(sym, passes=None):
    """Apply ``passes`` (names or functions; default :data:`DEFAULT`) to a Symbol."""
    for p in (DEFAULT if passes is None else passes):
        fn = PASSES[p] if isinstance(p, str) else p
        sym = fn(sym)
    return sym


def to_nodes(sym) -> list:
    """``lazynp.core.graph.Node`` objects mirroring the Symbol's entries (never recorded, never
    run by the engine: the shape the fusion pass and the kernel generator read)."""
    nodes: list = []
    for n in sym.nodes:
        if n.op == "placeholder":
            g = graph.Node(graph.PLACEHOLDER, (), n.params, n.shape, n.dtype)
        elif n.op == "leaf":
            g = graph.Node(graph.LEAF, (), None, n.shape, n.dtype)
            g.value = n.params["value"]
        else:
            args = tuple(nodes[a] if type(a) is Ref else a for a in n.args)
            g = graph.Node(resolve_op(n.op), args, n.params, n.shape, n.dtype)
        nodes.append(g)
    return nodes


def fusion_items(sym, nodes=None, single_kernels: bool = False) -> list:
    """Fusion pass on a Symbol: a work list (topological) of single entries ``(node, False)``
    and ``FusedGroup`` s (of ``to_nodes(sym)`` nodes).  Reduction epilogues are split off
    (the jit writes reductions into planned buffers itself)."""
    if nodes is None:
        nodes = to_nodes(sym)
    work = [(g, False) for g in nodes
            if g.op is not graph.PLACEHOLDER and g.op is not graph.LEAF and g.op is not graph.VIEW]
    split = []
    for it in fuse(work, graph.Node):
        if type(it) is FusedGroup and it.reduction is not None:
            red = it.reduction
            it.reduction = None
            split.append((it.members[0], False) if len(it.members) == 1 else it)
            split.append((red, False))
        else:
            split.append(it)
    items = []
    for it in split:
        if type(it) is tuple and single_kernels and it[0].op.ufunc is None and \
                it[0].op.name not in ("astype", "copy") and fusible(it[0]):
            it = FusedGroup(it[0], 0)   # where, clip...: a kernel writing a planned buffer
        items.append(it)
    return items


def fusion(sym) -> list:
    """The fusion groups of a Symbol as lists of entry indices (singletons for unfused)."""
    nodes = to_nodes(sym)
    index = {id(g): i for i, g in enumerate(nodes)}
    out = []
    for it in fusion_items(sym, nodes):
        if type(it) is tuple:
            out.append([index[id(it[0])]])
        else:
            out.append([index[id(m)] for m in it.members])
    return out


# --- the pass methods of lazynp.Symbol --------------------------------------------------------

def _optimize_method(self, passes=None):
    """The Symbol after the graph passes (default: prune, CSE, constant folding)."""
    return optimize(self, passes)


def _memory_plan_method(self, **kw):
    """MXNet's memory plan (inplace + co-share) of this Symbol's entries."""
    return _memory_plan.plan_symbol(self, **kw)


add_member("optimize", _optimize_method)
add_member("memory_plan", _memory_plan_method)
