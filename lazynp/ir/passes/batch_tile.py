"""Batch tiling: run a row-local graph on slices of its batch, one slice after another.

MXNet's in-place and co-share heuristics cannot go below the liveness bound of a schedule:
while the second conv of a (conv, ReLU) x 2 + dense network runs, its whole input and its
whole output need memory.  When every entry of a graph is *row-local* along axis 0 of its
batched inputs (row ``i`` of each result depends only on row ``i`` of those inputs and on
the unbatched inputs), the graph can instead run on ``chunk`` rows at a time with buffers
``chunk`` rows high, which lowers that bound by ``N / chunk`` and keeps a slice's working
set in cache.  This module decides whether a Symbol is row-local (:func:`batch_rows`) and
rewrites it for ``chunk`` rows (:func:`tile`); :class:`lazynp.jit.TiledPlan` runs it.

Row-local entries (axis 0 is the batch axis of each batched entry):

* placeholders whose first dimension is the batch size ``N`` (the first output's);
* elementwise ops whose batched operands have the result's rank and whose other operands
  broadcast along axis 0 (lower rank, or a first dimension of 1);
* reductions and scans over axes that exclude 0;
* views of a batched value that keep its row stride as their axis 0 and stay inside a row
  (``sliding_window_view`` over later axes, ``reshape(N, -1)``, slices of later axes);
* ``matmul`` of a batched stack by an unbatched matrix;
* ``einsum`` whose batched operands and output start with one label that the unbatched
  operands do not use.

Anything else (a reduction over the batch, a transpose moving axis 0, an op with the batch
size in its parameters) makes the whole graph not tileable: it then runs untiled.
Entries with no batched input are computed at full size in every slice.
"""
from __future__ import annotations

import itertools
import math
from types import SimpleNamespace

from numpy.lib.array_utils import normalize_axis_tuple

from ...array.indexing import _Slot
from ...ops.registry import OPS
from ...ops.reductions import REDUCTIONS, SCANS
from ..symbol import Ref, SNode, Symbol


class NotTileable(Exception):
    pass


def _prod(shape) -> int:
    return math.prod(shape)


def _elementwise(n, args_b):
    nd = len(n.shape)
    any_b = False
    for a, b in zip(n.args, args_b):
        if b is None:
            continue            # a constant
        shape = a.shape
        if b:
            if len(shape) != nd:
                raise NotTileable
            any_b = True
        elif len(shape) == nd and shape[0] != 1:
            raise NotTileable   # an unbatched operand with its own rows
    return any_b


def _reduction(n, args_b):
    if not args_b or not args_b[0] or any(args_b[1:]):
        raise NotTileable
    p = n.params or {}
    if not set(p) <= {"axis", "keepdims", "dtype", "ddof"} or p.get("axis") is None:
        raise NotTileable
    axes = normalize_axis_tuple(p["axis"], len(n.args[0].shape))
    if 0 in axes:
        raise NotTileable
    return True


def _view(n, base, N):
    p = n.params
    shape, strides, off = p["shape"], p["strides"], p["offset"]
    bshape = base.shape
    row = _prod(bshape[1:]) * base.dtype.itemsize        # a C-contiguous base's row stride
    if not shape or shape[0] != N or strides[0] != row or off < 0:
        raise NotTileable
    extent = off + sum((s - 1) * abs(st) for s, st in zip(shape[1:], strides[1:]))
    if any(st < 0 for st in strides[1:]) or extent + p["dtype"].itemsize > row:
        raise NotTileable
    return True


def _einsum_labels(tpl):
    (args, kwargs) = tpl
    if not args or not isinstance(args[0], str) or "->" not in args[0] or "." in args[0]:
        raise NotTileable
    if set(kwargs) - {"optimize", "dtype", "casting", "order"}:
        raise NotTileable
    ins, out = args[0].replace(" ", "").split("->")
    return ins.split(","), out, args[1:]


def _einsum(n, args_b):
    labels, out, slots = _einsum_labels(n.params["tpl"])
    if len(slots) != len(labels) or not all(type(s) is _Slot for s in slots):
        raise NotTileable
    by_slot = [args_b[s.k] for s in slots]
    batch = {lab[0] for lab, b in zip(labels, by_slot) if b}
    if len(batch) != 1:
        raise NotTileable if batch else _NoBatch
    (b,) = batch
    for lab, isb in zip(labels, by_slot):
        if isb and (not lab or lab[0] != b or b in lab[1:]):
            raise NotTileable
        if not isb and b in lab:
            raise NotTileable
    if not out or out[0] != b or b in out[1:]:
        raise NotTileable
    return True


class _NoBatch(Exception):
    pass


def _matmul(n, args_b):
    (args, kwargs) = n.params["tpl"]
    if kwargs or len(args) != 2 or not all(type(s) is _Slot for s in args):
        raise NotTileable
    lb, rb = args_b[args[0].k], args_b[args[1].k]
    if not lb:
        if rb:
            raise NotTileable
        return False
    left, right = n.args[args[0].k], n.args[args[1].k]
    if rb or len(left.shape) < 2 or len(right.shape) > 2:
        raise NotTileable
    return True


def batch_rows(sym):
    """``(N, batched)``: the batch size and, per entry, whether axis 0 is its batch axis,
    when every entry of ``sym`` is row-local and every output is batched; else None.

    Placeholders whose first dimension is ``N`` are the candidates for batched inputs; a
    weight may have ``N`` rows by chance, so when the graph is not row-local with all of
    them batched, fewer are tried (any marking the rules accept is exact)."""
    outs = [int(o) for o in sym.output_refs]
    if not outs or not sym.nodes[outs[0]].shape:
        return None
    N = sym.nodes[outs[0]].shape[0]
    if N < 2:
        return None
    cands = [i for i, n in enumerate(sym.nodes)
             if n.op == "placeholder" and len(n.shape) >= 1 and n.shape[0] == N]
    tries = 0
    for r in range(len(cands)):
        for off in itertools.combinations(cands, r):
            tries += 1
            if tries > MAX_TRIES:
                return None
            batched = _mark(sym, N, set(cands) - set(off))
            if batched is not None and all(batched[o] for o in outs):
                return N, batched
    return None


MAX_TRIES = 64


def _mark(sym, N, inputs: set):
    batched: list = []
    try:
        for i, n in enumerate(sym.nodes):
            batched.append(i in inputs if n.op == "placeholder" else
                           _rule(n, batched, sym.nodes, N))
    except NotTileable:
        return None
    return batched


def _rule(n, batched, nodes, N) -> bool:
    if n.op == "leaf":
        return False
    refs = [a for a in n.args if type(a) is Ref]
    args_b = [batched[int(a)] if type(a) is Ref else None for a in n.args]
    if not any(batched[int(a)] for a in refs):
        return False                         # computed at full size in every slice
    node_args = [nodes[int(a)] if type(a) is Ref else a for a in n.args]
    v = SimpleNamespace(args=node_args, shape=n.shape, params=n.params)  # (args resolved)
    op = OPS.get(n.op)
    if n.op == "view":
        ok = _view(n, node_args[0], N)
    elif op is not None and op.kind == "elementwise":
        ok = _elementwise(v, args_b)
    elif n.op in REDUCTIONS or n.op in SCANS:
        ok = _reduction(v, args_b)
    elif n.op in ("einsum", "call:einsum") and n.params and "tpl" in n.params:
        try:
            ok = _einsum(v, [b for b in args_b if b is not None])
        except _NoBatch:
            return False
    elif n.op in ("matmul", "call:matmul") and n.params and "tpl" in n.params:
        ok = _matmul(v, [b for b in args_b if b is not None])
    else:
        raise NotTileable
    if ok and (not n.shape or n.shape[0] != N):
        raise NotTileable
    return ok


def tile(sym, batched: list, chunk: int):
    """``sym`` for ``chunk`` rows: batched entries get ``chunk`` as their first dimension
    (views keep their offset and strides: a slice of rows has the same row stride)."""
    entries = []
    for n, b in zip(sym.nodes, batched):
        if not b:
            entries.append(n)
            continue
        shape = (chunk,) + tuple(n.shape[1:])
        params = n.params
        if n.op == "view":
            params = dict(params, shape=shape)
        entries.append(SNode(n.op, n.args, params, shape, n.dtype))
    return Symbol(entries, sym.output_refs, out_tree=sym.out_tree, in_tree=sym.in_tree)


def choose_chunk(N: int, bytes_per_row: int, budget: int) -> int:
    """The largest divisor of ``N`` whose rows of intermediates fit ``budget`` bytes (at
    least 1; N itself means no tiling)."""
    want = max(1, budget // max(1, bytes_per_row))
    best = 1
    for d in range(1, int(math.isqrt(N)) + 1):
        if N % d == 0:
            for c in (d, N // d):
                if c <= want and c > best:
                    best = c
    return best
