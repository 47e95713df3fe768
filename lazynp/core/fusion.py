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
from .nodes import root

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
    return why_not_fusible(node, simd_check) is None


def why_not_fusible(node, simd_check: bool = True):
    """None when :func:`fusible`, else the reason: a tuple whose first item names the
    check that failed (:func:`reason_text` words it)."""
    op = node.op
    if op.kind != "elementwise":
        return ("kind", op.name, op.kind)
    if not node.shape:
        return ("0-d", op.name)
    params = node.params
    if params is not None and op.name != "astype":
        return ("params", op.name, tuple(sorted(params)))
    if simd_check and op.ufunc is not None and op.ufunc.nin == 1 and \
            numpy_simd(op, node.dtype) and math.prod(node.shape) >= SIMD_MIN_SIZE:
        return ("simd", op.name, math.prod(node.shape))
    if simd_check and op.name not in EXACT_COMPLEX and (
            node.dtype.kind == "c" or
            any(getattr(a, "dtype", None) is not None and a.dtype.kind == "c" or
                type(a) is complex for a in node.args)):
        return ("complex", op.name)
    ck = [op, node.dtype, params["dtype"] if params is not None else None]
    for a in node.args:
        t = type(a)
        if t is float or t is bool or t is complex:
            ck.append(t)
        elif t is int:
            if not (-(1 << 63) <= a < (1 << 63)):
                return ("big-int", op.name)
            ck.append(t)
        elif a is None:
            return ("none-arg", op.name)
        else:
            ck.append(a.dtype)
    ck = tuple(ck)
    if int in ck[3:] and not exprs.python_ints_fit(node):
        return ("int-fit", op.name)
    reason = _fusible_cache.get(ck, False)
    if reason is False:
        args = node.args
        keys = list(ck[3:])
        try:
            names = [f"a{i}" for i in range(len(args))]
            ok = exprs.node_expr(node, names, [_value_dtype(a) for a in args], keys) \
                is not None
        except Exception:
            ok = False
        reason = None if ok else ("no-expr", op.name, str(node.dtype))
        _fusible_cache[ck] = reason
    return reason


def reason_text(reason) -> str:
    """Words for a reason recorded by :func:`fuse` (``why``) or :func:`why_not_fusible`."""
    code, rest = reason[0], reason[1:]
    if code == "producer":
        return reason_text(rest[0])
    if code == "consumer":
        return reason_text(rest[0])
    texts = {
        "kind": lambda name, kind: f"{name} is a {kind} op: it runs on its own, not in a "
                                   f"fused kernel",
        "0-d": lambda name: f"{name} gives a 0-d value (computed on its own)",
        "params": lambda name, keys: f"{name} has parameters ({', '.join(keys)}) the kernel "
                                     f"generator does not take",
        "simd": lambda name, size: f"{name} on {size:,} elements runs faster on NumPy's SIMD "
                                   f"loop than in a kernel (from {SIMD_MIN_SIZE:,} elements)",
        "complex": lambda name: f"{name} on complex values runs on NumPy (its SIMD loops "
                                f"round differently)",
        "big-int": lambda name: f"{name} reads a Python int beyond 64 bits",
        "none-arg": lambda name: f"{name} has a None argument",
        "int-fit": lambda name: f"{name} reads a Python int its dtype cannot hold",
        "no-expr": lambda name, dtype: f"no kernel expression for {name} giving {dtype}",
        "inplace": lambda name: f"{name} writes in place into an existing array (runs on "
                                f"its own)",
        "shape": lambda a, b: f"different shapes ({_shape_text(a)} vs {_shape_text(b)}): a "
                              f"kernel loops over one shape",
        "size": lambda n: f"the kernel already holds {n} ops (the size limit)",
        "errstate": lambda: "recorded under different numpy.errstate settings",
        "after-reduction": lambda name: f"a reduction ({name}) ends its kernel: its result "
                                        f"is complete only after the whole loop",
        "reads-reduction": lambda name: f"it also reads {name}, the reduction that ends "
                                        f"that kernel (complete only after its whole loop)",
        "order": lambda name: f"it also reads {name}, which runs after the kernel starts",
        "view": lambda name: f"it reads a view of {name}, a value the kernel writes",
        "reduction-busy": lambda name: f"the kernel already ends with a reduction ({name})",
        "reduction-not-last": lambda name: "a reduction closes a kernel only when it reads "
                                           "the kernel's last op",
        "reduction-kind": lambda name: f"{name} cannot close a kernel (only sum, prod, "
                                       f"mean, max, min, any, all over axes)",
        "reduction-shape": lambda name: f"{name} reads a value of another shape than the "
                                        f"kernel's",
        "reduction-dtype": lambda name: f"{name} with this dtype cannot close a kernel",
        "through-view": lambda name: f"it reads {name} through a view (a slice, reshape "
                                     f"or transpose): a kernel reads its own values only "
                                     f"element by element",
        "jit-reduction": lambda name: f"a jit plan runs a reduction ({name}) on its own, "
                                      f"into a planned buffer",
    }
    fn = texts.get(code)
    return fn(*rest) if fn is not None else " ".join(map(str, reason))


def _shape_text(shape) -> str:
    return "x".join(map(str, shape)) if len(shape) else "scalar"


def _epilogue_ok(red, group: FusedGroup) -> bool:
    return _epilogue_problem(red, group) is None


def _epilogue_problem(red, group: FusedGroup):
    """None when the reduction ``red`` can close ``group``, else the reason."""
    name = red.op.name
    if name not in _EPILOGUES or red.op.kind != "reduction":
        return ("reduction-kind", name)
    p = red.params or {}
    if set(p) - {"axis", "keepdims"}:
        return ("reduction-kind", name)
    if len(red.args) != 1 or red.dtype not in exprs.SUPPORTED:
        return ("reduction-dtype", name)
    src = red.args[0]
    if name in ("max", "min") and src.dtype.kind not in "iuf":
        return ("reduction-dtype", name)
    if name in ("sum", "prod", "mean") and red.dtype.kind not in "iufc":
        return ("reduction-dtype", name)
    if src.shape != group.shape:
        return ("reduction-shape", name)
    return None


def matvec_operands(op, args: tuple, shape: tuple, dtype, node_type) -> bool:
    """Can a node of ``op`` on ``args`` (result ``shape`` and ``dtype``) close the group of
    its matrix: is it a matrix-vector product, ``matmul`` of a 2-D elementwise node and a
    vector (``(k,)`` or ``(k, 1)``), all three of one real floating dtype?  Its kernel then
    sums each row of the group's last member times the vector
    (:func:`lazynp.kernels.fused.run_group`): the matrix is never written to memory and
    read back by BLAS (``alpha * A @ x``: NumPy reads ``A``, writes the scaled copy and
    reads that again; the kernel reads ``A`` once)."""
    if op.name != "matmul" or op.kind != "contraction" or len(args) != 2:
        return False
    a, x = args
    if type(a) is not node_type or type(x) is not node_type or len(a.shape) != 2 or \
            a.op.kind != "elementwise":
        return False
    dt = a.dtype
    if dt not in _MATVEC_DTYPES or x.dtype != dt or dtype != dt:
        return False
    k = a.shape[1]
    if x.shape == (k,):
        return shape == a.shape[:1]
    return x.shape == (k, 1) and shape == (a.shape[0], 1)


_MATVEC_DTYPES = (np.dtype(np.float64), np.dtype(np.float32))


def fuse(work: list, node_type, simd_check: bool = True, why: dict | None = None,
         matvec: bool = False) -> list:
    """Rewrite ``work`` (a list of ``(node, inplace)``) into items with fused groups
    (``simd_check``: see :func:`fusible`).  With ``matvec`` (the CPU kernels), a
    matrix-vector product closes its matrix's group (:func:`matvec_operands`).

    ``why``: a dict that receives, for each producer -> consumer edge of ``work`` that the
    pass leaves between two items, ``(id(producer), id(consumer)) -> reason`` (a tuple for
    :func:`reason_text`), recorded where the pass decides (``lazynp.explain``)."""
    items: list = []
    group_of: dict = {}      # id(member) -> group
    index_of: dict = {}      # id(node) -> item index (single nodes and groups)
    alone: dict = {}         # (with why) id(node) -> why it runs on its own
    position = None
    for n, inplace in work:
        if matvec and not inplace and n.op.kind == "contraction" and \
                matvec_operands(n.op, n.args, n.shape, n.dtype, node_type):
            src = n.args[0]
            g = group_of.get(id(src))
            if g is not None and g.reduction is None and g.members[-1] is src and \
                    index_of.get(id(root(n.args[1])), -1) < g.start:
                # (the vector is computed before the group runs: an input of its kernel)
                g.reduction = n
                index_of[id(n)] = g.start
                continue
        if not inplace and n.op.kind == "reduction" and len(n.args) == 1:
            src = n.args[0]
            g = group_of.get(id(src)) if type(src) is node_type else None
            if g is not None and g.reduction is None and _epilogue_ok(n, g) and \
                    g.members[-1] is src:
                g.reduction = n
                index_of[id(n)] = g.start
                continue
            if why is not None and g is not None:
                why[(id(src), id(n))] = (
                    ("reduction-busy", g.reduction.op.name) if g.reduction is not None else
                    _epilogue_problem(n, g) or ("reduction-not-last", n.op.name))
        if inplace or not fusible(n, simd_check):
            index_of[id(n)] = len(items)
            items.append((n, inplace))
            if why is not None:
                alone[id(n)] = ("inplace", n.op.name) if inplace else \
                    why_not_fusible(n, simd_check)
                _record_args(why, n, node_type, ("consumer", alone[id(n)]), alone)
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
        unmerged: dict = {}
        if len(cands) > 1 and cands[0].reduction is None and \
                sum(len(g.members) for g in cands) < MAX_MEMBERS:
            # n joins producers from several groups: merge them into the earliest if legal
            g0 = cands[0]
            for h in cands[1:]:
                problem = ("after-reduction", h.reduction.op.name) \
                    if h.reduction is not None else \
                    _merge_problem(h, g0, index_of, node_type)
                if problem is None:
                    for m in h.members:
                        g0.add(m)
                        group_of[id(m)] = g0
                        index_of[id(m)] = g0.start
                    items[h.start] = None
                    h.removed = True
                elif why is not None:
                    unmerged[id(h)] = problem
            if position is None:
                position = {id(w): i for i, (w, _) in enumerate(work)}
            g0.members.sort(key=lambda m: position[id(m)])
        refused: dict = {}
        for g in cands:
            if g.removed:
                continue
            problem = ("size", MAX_MEMBERS) if len(g.members) >= MAX_MEMBERS else \
                _join_problem(n, g, group_of, index_of, node_type)
            if problem is None:
                target = g
                break
            refused[id(g)] = problem
        if target is None:
            target = FusedGroup(n, len(items))
            items.append(target)
        else:
            target.add(n)
        group_of[id(n)] = target
        index_of[id(n)] = target.start
        if why is not None:
            _record_joins(why, n, target, group_of, alone, refused, unmerged, node_type)
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


def _record_args(why: dict, n, node_type, reason, alone: dict) -> None:
    """``n`` runs on its own for ``reason``; a reduction reading a producer that runs on
    its own as well is told by the producer's reason (it could have closed its kernel)."""
    for a in n.args:
        if type(a) is node_type:
            if n.op.kind == "reduction" and id(a) in alone:
                why.setdefault((id(a), id(n)), ("producer", alone[id(a)]))
            else:
                why.setdefault((id(a), id(n)), reason)


def _record_joins(why: dict, n, target: FusedGroup, group_of, alone, refused, unmerged,
                  node_type) -> None:
    """Why ``n`` (now in ``target``) is not in the item of each of its producers."""
    for a in n.args:
        if type(a) is not node_type or (id(a), id(n)) in why:
            continue
        g = group_of.get(id(a))
        if g is target:
            continue
        if g is None:
            if id(a) in alone:
                why[(id(a), id(n))] = ("producer", alone[id(a)])
            elif a.op.kind == "reduction":
                # (a reduction that closed another group: its value is complete only
                # after that group's loop)
                why[(id(a), id(n))] = ("after-reduction", a.op.name)
            elif a.op.name == "view" and a.args and type(a.args[0]) is node_type:
                why[(id(a), id(n))] = ("through-view", a.args[0].op.name)
            continue
        if g.shape != n.shape:
            why[(id(a), id(n))] = ("shape", g.shape, n.shape)
        else:
            reason = refused.get(id(g)) or unmerged.get(id(g)) or \
                _join_problem(n, g, group_of, {}, node_type) or ("order", a.op.name)
            if reason[0] == "after-reduction" and g.reduction is not a:
                reason = ("reads-reduction", reason[1])
            why[(id(a), id(n))] = reason


def _can_merge(h: FusedGroup, g: FusedGroup, index_of, node_type) -> bool:
    """Can group ``h`` (started later) run inside ``g``: every input of its members is in
    ``g`` or ``h``, or produced before ``g`` starts."""
    return _merge_problem(h, g, index_of, node_type) is None


def _merge_problem(h: FusedGroup, g: FusedGroup, index_of, node_type):
    """None when group ``h`` can run inside ``g`` (see :func:`_can_merge`), else why not."""
    if h.members[0].errstate is not g.members[0].errstate:
        return ("errstate",)
    for m in h.members:
        for a in m.args:
            if type(a) is not node_type or id(a) in g.member_ids or id(a) in h.member_ids:
                continue
            idx = index_of.get(id(a))
            if idx is not None and idx >= g.start:
                return ("order", a.op.name)
            if a.op.name == "view":
                b = a.args[0]
                if id(b) in g.member_ids or id(b) in h.member_ids:
                    return ("view", b.op.name)
                idx = index_of.get(id(b))
                if idx is not None and idx >= g.start:
                    return ("order", b.op.name)
    return None


def _can_join(n, g: FusedGroup, group_of, index_of, node_type) -> bool:
    return _join_problem(n, g, group_of, index_of, node_type) is None


def _join_problem(n, g: FusedGroup, group_of, index_of, node_type):
    """None when ``n`` can join group ``g``, else why not."""
    if n.errstate is not g.members[0].errstate:
        return ("errstate",)
    for a in n.args:
        if type(a) is not node_type:
            continue
        if id(a) in g.member_ids:
            continue
        if g.reduction is not None and a is g.reduction:
            return ("after-reduction", a.op.name)
        idx = index_of.get(id(a))
        if idx is not None and idx >= g.start:
            return ("order", a.op.name)
        if a.op.name == "view":
            b = a.args[0]
            if id(b) in g.member_ids:
                return ("view", b.op.name)
            idx = index_of.get(id(b))
            if idx is not None and idx >= g.start:
                return ("order", b.op.name)
    return None
