"""Constant folding: entries whose inputs are all constants are computed once, at compile
time, and become constants (leaves); not those that warn or raise (they run at call time).  Creation ops (zeros, ones, full...) with no inputs
are folded when their result is small (``MAX_BYTES``), so a plan does not store big
constant arrays it could make on the fly."""
from __future__ import annotations

import warnings

import numpy as np

from ..symbol import Ref, SNode, Symbol, resolve_op
from .prune import prune

#: results larger than this stay computed at run time
MAX_BYTES = 1 << 20


def constant_fold(sym, max_bytes: int = MAX_BYTES):
    """``sym`` with constant subgraphs replaced by leaves (pure)."""
    nodes = list(sym.nodes)
    changed = False
    for i, n in enumerate(nodes):
        if n.op in ("placeholder", "leaf"):
            continue
        refs = [a for a in n.args if type(a) is Ref]
        if any(nodes[a].op != "leaf" for a in refs):
            continue
        nbytes = n.dtype.itemsize * int(np.prod(n.shape))
        if nbytes > max_bytes:
            continue
        op = resolve_op(n.op)
        vals = [nodes[a].params["value"] if type(a) is Ref else a for a in n.args]
        if op.kind == "write" and vals:
            vals[0] = np.array(vals[0], copy=True)
        try:
            # (an entry that warns is left to run at call time, warning on each call as
            # NumPy does: errors and warnings raise here and skip the fold)
            with np.errstate(all="raise"), warnings.catch_warnings():
                warnings.simplefilter("error")
                if n.op == "view":
                    p = n.params
                    base = np.ascontiguousarray(vals[0])
                    out = np.ndarray(p["shape"], p["dtype"], buffer=base, offset=p["offset"],
                                     strides=p["strides"])
                else:
                    out = op.impl(*vals, **n.params) if n.params else op.impl(*vals)
        except Exception:
            continue      # raised again at run time, where the user expects it
        if isinstance(out, tuple):
            value = tuple(np.array(x, copy=True) for x in out)
        else:
            value = np.array(out, dtype=n.dtype, copy=True, order="C").reshape(n.shape)
        nodes[i] = SNode("leaf", (), {"value": value}, n.shape, n.dtype)
        changed = True
    if not changed:
        return sym
    out = Symbol(nodes, sym.output_refs, out_tree=sym.out_tree, in_tree=sym.in_tree)
    out._fn = sym._fn
    return prune(out)
