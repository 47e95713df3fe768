"""Why two adjacent ops do not share a fused kernel: the "not fused because ..." notes of
``lazynp.explain`` and of ``jit(f).explain()``'s pictures.

The reasons come from the fusion pass itself (``lazynp.core.fusion.fuse(..., why=)``
records them where it decides); this module turns them into one note per producer ->
consumer pair of ops that are not in one kernel, looking through views.
"""
from __future__ import annotations

from ..core import graph as _graph
from ..core.fusion import FusedGroup, fuse, reason_text
from ..ir.passes import pipeline

__all__ = ["boundaries", "symbol_notes"]

#: why a pending op does not fuse with a producer that is no longer pending (by state)
COMPUTED_BEFORE = {
    "forced": "{op} was computed by an earlier flush (its value was needed: read by "
              "Python, printed or handed to NumPy), so it is an input here",
    "NumPy fallback": "{op} ran on NumPy (a fallback): its result is an input here",
}


def boundaries(nodes: list, work: list, kernels: list, why: dict, *,
               states: list | None = None, names: list | None = None,
               default: str | None = None) -> list:
    """One dict per producer -> consumer pair of ``work``'s ops (through views) that do not
    share a kernel: ``producer``, ``consumer`` (indices into ``nodes``), ``reason`` and
    ``edge`` (the picture's edge into the consumer: from a view when it reads one).

    Parameters
    ----------
    nodes : list of lazynp.core.graph.Node
        The graph's nodes (``pipeline.to_nodes`` of a Symbol), in entry order.
    work : list of (node, inplace)
        The ops the fusion pass ran on.
    kernels : list of list of int
        Entry indices of each fused kernel.
    why : dict
        What ``fuse(work, ..., why=why)`` recorded (values: reason tuples or text).
    states, names : list, optional
        Per entry: its state (``"forced"``, ``"NumPy fallback"``... adds a note for an op
        reading such a value) and the op name to show.
    default : str, optional
        The reason of a pair the pass recorded nothing for (a flush without fusion pass).
    """
    pos = {id(g): i for i, g in enumerate(nodes)}
    in_work = {id(g) for g, _ in work}
    kernel_of = {i: k for k, g in enumerate(kernels) for i in g}
    out, seen = [], set()
    for n, _ in work:
        c = pos[id(n)]
        for a in n.args:
            if type(a) is not type(n):
                continue
            base = a
            while base.op is _graph.VIEW and base.args and type(base.args[0]) is type(n):
                base = base.args[0]
            p = pos[id(base)]
            if (p, c) in seen:
                continue
            if id(base) not in in_work:
                text = COMPUTED_BEFORE.get(states[p]) if states is not None else None
                if text is not None:
                    seen.add((p, c))
                    name = names[p] if names is not None else base.op.name
                    out.append({"producer": p, "consumer": c,
                                "reason": text.format(op=name), "edge": (pos[id(a)], c)})
                continue
            if kernel_of.get(p) is not None and kernel_of.get(p) == kernel_of.get(c):
                continue
            seen.add((p, c))
            reason = why.get((id(a), id(n)), default)
            if reason is None:
                reason = "not recorded by the fusion pass"
            elif not isinstance(reason, str):
                reason = reason_text(reason)
            out.append({"producer": p, "consumer": c, "reason": reason,
                        "edge": (pos[id(a)], c)})
    return out


def symbol_notes(sym) -> tuple[list, list]:
    """``(kernels, boundaries)`` of a Symbol as ``lazynp.jit`` compiles it: the fusion
    groups of two ops or more, and :func:`boundaries` (a reduction the pass would make a
    kernel's epilogue runs on its own in a jit plan, into a planned buffer)."""
    nodes = pipeline.to_nodes(sym)
    kernels = [g for g in pipeline.fusion(sym) if len(g) > 1]
    work = [(g, False) for g in nodes
            if g.op not in (_graph.PLACEHOLDER, _graph.LEAF, _graph.VIEW)]
    why: dict = {}
    for it in fuse(work, _graph.Node, why=why):
        if type(it) is FusedGroup and it.reduction is not None:
            # (pipeline.fusion_items splits epilogues off: the jit plans them)
            red = it.reduction
            why[(id(red.args[0]), id(red))] = ("jit-reduction", red.op.name)
    return kernels, boundaries(nodes, work, kernels, why)
