"""Prune pass: drop Symbol entries no output depends on (inputs are always kept)."""
from __future__ import annotations

from ..symbol import Ref, SNode, Symbol


def rebuild(sym, keep: list, mapping: dict | None = None):
    """A new Symbol of the entries ``keep`` (old indices, topological order).  ``mapping``
    sends removed entries to the kept entry that replaces them (CSE, folding)."""
    mapping = dict(mapping or {})
    new_index = {}
    nodes = []
    for old in keep:
        n = sym.nodes[old]
        args = tuple(Ref(new_index[_follow(mapping, int(a))]) if type(a) is Ref else a
                     for a in n.args)
        new_index[old] = len(nodes)
        nodes.append(SNode(n.op, args, n.params, n.shape, n.dtype) if args != n.args else n)
    outs = [new_index[_follow(mapping, int(o))] for o in sym.output_refs]
    out = Symbol(nodes, outs, out_tree=sym.out_tree, in_tree=sym.in_tree)
    out._fn = sym._fn
    return out


def _follow(mapping: dict, i: int) -> int:
    while i in mapping:
        i = mapping[i]
    return i


def live(sym) -> set:
    """Indices of entries reachable from the outputs, plus every input."""
    alive = set(int(r) for r in sym.input_refs)
    stack = [int(o) for o in sym.output_refs]
    while stack:
        i = stack.pop()
        if i in alive and sym.nodes[i].op != "placeholder":
            continue
        alive.add(i)
        stack.extend(int(a) for a in sym.nodes[i].args if type(a) is Ref and int(a) not in alive)
    return alive


def prune(sym):
    """``sym`` without dead entries (pure: returns a new Symbol, or ``sym`` if none)."""
    alive = live(sym)
    if len(alive) == len(sym.nodes):
        return sym
    return rebuild(sym, [i for i in range(len(sym.nodes)) if i in alive])
