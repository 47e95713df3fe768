"""Fusion pass: group elementwise nodes into maximal fusible groups.

A pure function from a flush's work list (topological order) to a new work list whose items
are single nodes or :class:`FusedGroup` s.  A group holds elementwise nodes sharing one
iteration shape; inputs may broadcast.  A node joins the group of one of its producers only
when all its other in-flush inputs come from items that run before that group starts, so a
path between two members never leaves the group.  A trailing reduction (sum, prod, mean,
max, min, any, all over any axes, keepdims) may close a group as its epilogue.
"""
from __future__ import annotations

import math

import numpy as np

from ..kernels import exprs
from ..ops.elementwise import numpy_simd

_PY = (bool, int, float, complex)
_EPILOGUES = {"sum", "prod", "mean", "max", "min", "any", "all"}
#: a longer chain is split: compile time and code size grow with the kernel
MAX_MEMBERS = 96
#: from this many elements a math function with a SIMD NumPy loop runs on NumPy, unfused
SIMD_MIN_SIZE = 1024
#: the ops on complex values a CPU kernel computes with NumPy's bits (componentwise, each
#: part one correctly rounded operation); NumPy's complex multiply, square and absolute
#: use fused multiply-adds in their SIMD loops (a kernel's ``a * b`` of 1M complex128
#: values differed in 26% of them), so those run on NumPy
EXACT_COMPLEX = frozenset({"add", "subtract", "negative", "positive", "conjugate", "equal",
                           "not_equal", "astype"})
_fusible_cache: dict = {}


class FusedGroup:
    """Elementwise members with one iteration shape, plus an optional reduction epilogue."""

    __slots__ = ("members", "shape", "start", "reduction", "member_ids", "engine_var", "removed")

    def __init__(self, first, start: int):
        self.members = [first]
        self.member_ids = {id(first)}
        self.shape = first.shape
        self.start = start
        self.reduction = None
        self.engine_var = None
        self.removed = False

    def add(self, node) -> None:
        self.members.append(node)
        self.member_ids.add(id(node))

    def nodes(self) -> list:
        return self.members + ([self.reduction] if self.reduction is not None else [])

    def __repr__(self) -> str:
        ops = " ".join(m.op.name for m in self.members)
        red = f" -> {self.reduction.op.name}" if self.reduction is not None else ""
        return f"<FusedGroup {self.shape} [{ops}]{red}>"


def _key(a):
    t = type(a)
    if t in _PY:
        return t
    return a.dtype


def _value_dtype(a):
    t = type(a)
    if t is bool:
        return np.dtype(bool)
    if t is int:
        return np.dtype(np.int64)
    if t is float:
        return np.dtype(np.float64)
    if t is complex:
        return np.dtype(np.complex128)
    return a.dtype


def fusible(node, simd_check: bool = True) -> bool:
    """True when ``node`` is an elementwise node the kernel generator can express exactly.
    ``simd_check``: leave a unary math function with a SIMD NumPy loop to NumPy on large
    arrays (a CPU heuristic; off for the CUDA generator)."""
    op = node.op
    if op.kind != "elementwise" or not node.shape:
        return False
    params = node.params
    if params is not None and op.name != "astype":
        return False
    if simd_check and op.ufunc is not None and op.ufunc.nin == 1 and \
            numpy_simd(op, node.dtype) and math.prod(node.shape) >= SIMD_MIN_SIZE:
        return False
    if simd_check and op.name not in EXACT_COMPLEX and (
            node.dtype.kind == "c" or
            any(getattr(a, "dtype", None) is not None and a.dtype.kind == "c" or
                type(a) is complex for a in node.args)):
        return False
    ck = [op, node.dtype, params["dtype"] if params is not None else None]
    for a in node.args:
        t = type(a)
        if t is float or t is bool or t is complex:
            ck.append(t)
        elif t is int:
            if not (-(1 << 63) <= a < (1 << 63)):
                return False
            ck.append(t)
        elif a is None:
            return False
        else:
            ck.append(a.dtype)
    ck = tuple(ck)
    if int in ck[3:] and not exprs.python_ints_fit(node):
        return False
    ok = _fusible_cache.get(ck)
    if ok is None:
        args = node.args
        keys = list(ck[3:])
        try:
            names = [f"a{i}" for i in range(len(args))]
            ok = exprs.node_expr(node, names, [_value_dtype(a) for a in args], keys) \
                is not None
        except Exception:
            ok = False
        _fusible_cache[ck] = ok
    return ok


def _epilogue_ok(red, group: FusedGroup) -> bool:
    if red.op.name not in _EPILOGUES or red.op.kind != "reduction":
        return False
    p = red.params or {}
    if set(p) - {"axis", "keepdims"}:
        return False
    if len(red.args) != 1 or red.dtype not in exprs.SUPPORTED:
        return False
    src = red.args[0]
    if red.op.name in ("max", "min") and src.dtype.kind not in "iuf":
        return False
    if red.op.name in ("sum", "prod", "mean") and red.dtype.kind not in "iufc":
        return False
    return src.shape == group.shape


def fuse(work: list, node_type, simd_check: bool = True) -> list:
    """Rewrite ``work`` (a list of ``(node, inplace)``) into items with fused groups
    (``simd_check``: see :func:`fusible`)."""
    items: list = []
    group_of: dict = {}      # id(member) -> group
    index_of: dict = {}      # id(node) -> item index (single nodes and groups)
    position = None
    for n, inplace in work:
        if not inplace and n.op.kind == "reduction" and len(n.args) == 1:
            src = n.args[0]
            g = group_of.get(id(src)) if type(src) is node_type else None
            if g is not None and g.reduction is None and _epilogue_ok(n, g) and \
                    g.members[-1] is src:
                g.reduction = n
                index_of[id(n)] = g.start
                continue
        if inplace or not fusible(n, simd_check):
            index_of[id(n)] = len(items)
            items.append((n, inplace))
            continue
        cands = []
        for a in n.args:
            if type(a) is not node_type:
                continue
            g = group_of.get(id(a))
            if g is not None and g.shape == n.shape and g not in cands:
                cands.append(g)
        if len(cands) > 1:
            cands.sort(key=lambda g: g.start)
        target = None
        if len(cands) > 1 and cands[0].reduction is None and \
                sum(len(g.members) for g in cands) < MAX_MEMBERS:
            # n joins producers from several groups: merge them into the earliest if legal
            g0 = cands[0]
            for h in cands[1:]:
                if h.reduction is None and _can_merge(h, g0, index_of, node_type):
                    for m in h.members:
                        g0.add(m)
                        group_of[id(m)] = g0
                        index_of[id(m)] = g0.start
                    items[h.start] = None
                    h.removed = True
            if position is None:
                position = {id(w): i for i, (w, _) in enumerate(work)}
            g0.members.sort(key=lambda m: position[id(m)])
        for g in cands:
            if not g.removed and len(g.members) < MAX_MEMBERS and \
                    _can_join(n, g, group_of, index_of, node_type):
                target = g
                break
        if target is None:
            target = FusedGroup(n, len(items))
            items.append(target)
        else:
            target.add(n)
        group_of[id(n)] = target
        index_of[id(n)] = target.start
    # a group of one node without epilogue runs as a plain node
    out = []
    for it in items:
        if it is None:
            continue
        if type(it) is FusedGroup and len(it.members) == 1 and it.reduction is None:
            out.append((it.members[0], False))
        else:
            out.append(it)
    return out


def _can_merge(h: FusedGroup, g: FusedGroup, index_of, node_type) -> bool:
    """Can group ``h`` (started later) run inside ``g``: every input of its members is in
    ``g`` or ``h``, or produced before ``g`` starts."""
    if h.members[0].errstate is not g.members[0].errstate:
        return False
    for m in h.members:
        for a in m.args:
            if type(a) is not node_type or id(a) in g.member_ids or id(a) in h.member_ids:
                continue
            idx = index_of.get(id(a))
            if idx is not None and idx >= g.start:
                return False
            if a.op.name == "view":
                b = a.args[0]
                if id(b) in g.member_ids or id(b) in h.member_ids:
                    return False
                idx = index_of.get(id(b))
                if idx is not None and idx >= g.start:
                    return False
    return True


def _can_join(n, g: FusedGroup, group_of, index_of, node_type) -> bool:
    if n.errstate is not g.members[0].errstate:
        return False
    for a in n.args:
        if type(a) is not node_type:
            continue
        if id(a) in g.member_ids:
            continue
        if g.reduction is not None and a is g.reduction:
            return False
        idx = index_of.get(id(a))
        if idx is not None and idx >= g.start:
            return False
        if a.op.name == "view":
            b = a.args[0]
            if id(b) in g.member_ids:
                return False
            idx = index_of.get(id(b))
            if idx is not None and idx >= g.start:
                return False
    return True
