"""Common subexpression elimination: entries with the same op, inputs and params are one.

Two entries are the same when op name, arguments (references after rewriting, constants by
type and value), params, shape and dtype are equal.  Small constant arrays (leaves) are
merged by content.  Entries whose params cannot be compared are left alone.
"""
from __future__ import annotations

import numpy as np

from ...ops.registry import OPS
from ..symbol import Ref
from .prune import rebuild

#: constants (leaf arrays) up to this many bytes are merged by content
LEAF_BYTES = 1 << 16


def _hkey(v):
    """A hashable, type-exact key for a constant or params value (TypeError if none)."""
    t = type(v)
    if t is tuple or t is list:
        return (t.__name__,) + tuple(_hkey(x) for x in v)
    if t is dict:
        return ("dict",) + tuple((k, _hkey(x)) for k, x in v.items())
    if t is slice:
        return ("slice", _hkey(v.start), _hkey(v.stop), _hkey(v.step))
    if t is float:      # by bits: 0.0 == -0.0, but x * -0.0 is not x * 0.0
        return ("float", v.hex())
    if isinstance(v, np.ndarray):
        if v.nbytes > LEAF_BYTES or v.dtype.hasobject:
            raise TypeError("large array")
        return ("arr", v.shape, v.dtype.str, v.tobytes())
    if isinstance(v, np.generic):
        return ("npscalar", v.dtype.str, v.tobytes())
    if t.__name__ == "_Slot":
        return ("slot", v.k)
    hash(v)
    return (t, v)


def cse(sym):
    """``sym`` with duplicate entries merged (pure)."""
    seen: dict = {}
    mapping: dict = {}
    keep = []
    for i, n in enumerate(sym.nodes):
        if n.op == "placeholder":
            keep.append(i)
            continue
        args = tuple(("ref", _f(mapping, int(a))) if type(a) is Ref else a for a in n.args)
        try:
            if n.op == "leaf":
                key = ("leaf", _hkey(n.params["value"]), n.dtype.str)
            else:
                key = (n.op, tuple(x if type(x) is tuple and x and x[0] == "ref" else _hkey(x)
                                   for x in args),
                       _hkey(n.params) if n.params else None, n.shape, n.dtype.str)
        except TypeError:
            keep.append(i)
            continue
        j = seen.get(key)
        if j is None:
            seen[key] = i
            keep.append(i)
        else:
            mapping[i] = j
    if not mapping:
        return sym
    return rebuild(sym, keep, mapping)


def _f(mapping, i):
    while i in mapping:
        i = mapping[i]
    return i


def eliminate_copies(sym):
    """Drop ``copy`` entries of C-contiguous values when the graph never writes in place
    (no ``write`` ops): the copy then always equals its source (pure)."""
    if any(OPS.get(n.op) is not None and OPS[n.op].kind == "write" for n in sym.nodes):
        return sym
    outs = {int(o) for o in sym.output_refs}
    mapping = {}
    for i, n in enumerate(sym.nodes):
        if n.op != "copy" or i in outs or len(n.args) != 1 or type(n.args[0]) is not Ref:
            continue
        src = sym.nodes[n.args[0]]
        if src.op == "view" or src.shape != n.shape or src.dtype != n.dtype:
            continue
        mapping[i] = int(n.args[0])
    if not mapping:
        return sym
    return rebuild(sym, [i for i in range(len(sym.nodes)) if i not in mapping], mapping)
