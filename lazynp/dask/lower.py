"""Lowering: the pending graph over chunked arrays becomes one dask graph.

Chunked arrays record their elementwise ops and reductions as :class:`DaskNode` s; every
other op (matmul, indexing, concatenate, linalg...) is built at once with dask.array's own
function on the lowered inputs (dask is lazy itself: nothing runs until a read).  When a
pending node is needed as a dask array (:func:`lower`), the pending nodes behind it go
through the CPU path's fusion pass (:func:`lazynp.core.fusion.fuse`) and each item becomes
dask collections:

* a fused group: one ``dask.array.blockwise`` task per chunk running
  :func:`lazynp.dask.chunks.run_block` (the fused Numba kernel), inputs broadcast by dask's
  block alignment; several returned members: one tuple-valued task per chunk, split by
  ``getitem`` tasks;
* a group closed by a reduction (sum, prod, mean, max, min, any, all): the same task
  returns the chunk's partial (reduced axes kept, size 1), then dask's tree reduction
  (``dask.array.sum``/``max``/...) combines the partials; ``mean`` divides the sum by the
  count;
* a reduction on its own (std, var, argmax, argmin, a ``dtype=``...): dask.array's.

A lowered node keeps its dask array (``value``): lowering it again reuses it.
"""
from __future__ import annotations

import math
import operator

import numpy as np

from ..core import fusion
from ..ops.reductions import reduced_axes
from . import chunks, fp_warnings, persist, regions

__all__ = ["DaskNode", "lower", "leaf", "TAPING"]

#: open gradient recordings (:mod:`lazynp.autograd.dask_grad`): while above 0, a node built
#: with a dask.array function notes its ``origin`` (the op and its inputs) for the backward pass
TAPING = [0]
#: while a gradient is recorded: the differentiated inputs' nodes (by id), and the function
#: that raises for a read of a value computed from them (set by lazynp.autograd.dask_grad)
TAPE_INPUTS: dict = {}
ON_TRACED_READ: list = [None]


def depends_on_tape_inputs(node: "DaskNode") -> bool:
    """True when ``node`` is computed from a differentiated input of the open recording."""
    if not TAPE_INPUTS:
        return False
    stack, seen = [node], set()
    while stack:
        n = stack.pop()
        if id(n) in seen:
            continue
        seen.add(id(n))
        if id(n) in TAPE_INPUTS:
            return True
        stack.extend(a for a in (n.origin[1] if n.origin is not None else n.args)
                     if type(a) is DaskNode)
    return False

_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


class DaskNode:
    """One recorded value of a chunked array: pending (``value`` None) or lowered
    (``value``: a ``dask.array.Array``); ``host``: its NumPy value once a read gathered
    it, for small values (:mod:`lazynp.dask.reads`); ``view_of``: for a slice with steps
    of 1, the sliced dask array and the slice's starts (:mod:`lazynp.dask.stencil`);
    ``origin``: while a gradient is
    recorded (:data:`TAPING`), ``(name, input nodes or values, params)`` of a node built with
    a dask.array function (its own ``args`` are empty)."""

    __slots__ = ("op", "args", "params", "shape", "dtype", "value", "client", "errstate",
                 "host", "origin", "view_of", "__weakref__")

    def __init__(self, op, args: tuple, params, shape: tuple, dtype, client=None):
        self.op = op
        self.args = args
        self.params = params
        self.shape = tuple(shape)
        self.dtype = np.dtype(dtype)
        self.value = None
        self.client = client
        self.errstate = None
        self.host = None            # (a small value once read: kept on this side)
        self.origin = None
        self.view_of = None         # (dask array, starts) of a slice x[a:b, c:d] of it

    def __repr__(self) -> str:
        st = "pending" if self.value is None else "lowered"
        return f"<DaskNode {self.op.name} {self.shape} {self.dtype} {st}>"


class _Leaf:
    """The op of a node that holds a dask array."""

    name = "dask_leaf"
    kind = "creation"


_LEAF = _Leaf()


def leaf(arr, client=None) -> DaskNode:
    """A lowered node holding the dask array ``arr`` (persisted when its graph is large:
    :mod:`lazynp.dask.persist`)."""
    arr = persist.maybe_persist(arr, client)
    n = DaskNode(_LEAF, (), None, arr.shape, arr.dtype, client)
    n.value = arr
    return n


def _pending_order(target: DaskNode) -> list:
    """The pending nodes behind ``target``, producers first."""
    order, seen, stack = [], set(), [(target, False)]
    while stack:
        n, done = stack.pop()
        if done:
            order.append(n)
            continue
        if id(n) in seen:
            continue
        seen.add(id(n))
        stack.append((n, True))
        for a in reversed(n.args):
            if type(a) is DaskNode and a.value is None and id(a) not in seen:
                stack.append((a, False))
    return order


def lower(target: DaskNode):
    """The dask array of ``target``, lowering the pending nodes behind it."""
    if target.value is not None:
        return target.value
    order = _pending_order(target)
    # (the CPU path's rules: a math function NumPy runs with SIMD loops, exp on a large
    # array, stays NumPy's -- in a fused loop its scalar form costs several times more)
    items = fusion.fuse([(n, False) for n in order], DaskNode, simd_check=True)
    # which nodes later items (or the caller) read: only those leave their task
    read = {id(target)}
    for it in items:
        nodes = it.nodes() if type(it) is fusion.FusedGroup else [it[0]]
        inside = {id(n) for n in nodes}
        for n in nodes:
            for a in n.args:
                if type(a) is DaskNode and id(a) not in inside:
                    read.add(id(a))
    # (runs of chunk-local items, a row softmax on row chunks: one task per chunk)
    readers = regions.readers(items, DaskNode)
    region = None
    for k, it in enumerate(items):
        if region is not None and region.add(k, it, DaskNode, _recipe, lower, read):
            continue
        _close(region, readers, target, read)
        region = regions.first_region(it, DaskNode, lower)
        if region is not None and not region.add(k, it, DaskNode, _recipe, lower, read):
            region = None
        if region is None:
            _lower_item(it, read)
    _close(region, readers, target, read)
    return target.value


def _lower_item(it, read: set) -> None:
    """Lower one item of the fusion pass on its own."""
    if type(it) is fusion.FusedGroup:
        _lower_group(it.members, it.reduction, read)
    else:
        n = it[0]
        if n.op.kind == "reduction":
            n.value = _dask_reduction(n, lower(n.args[0]))
        else:
            # (one op: a kernel saves no temporary; NumPy's loop, as the CPU path)
            _lower_group([n], None, read | {id(n)}, fusible=False)


def _close(region, readers: dict, target: DaskNode, read: set) -> None:
    """Lower ``region``: one task per chunk for two items or more, else its item alone."""
    if region is None:
        return
    if len(region.items) == 1:
        _lower_item(region.items[0][1], read)
        return
    ks = {k for k, _ in region.items}
    outputs = {id(target)} | {i for i, rs in readers.items() if rs - ks}
    regions.emit(region, outputs)


def _recipe(members: list, red, out_idx: tuple, can_fuse: bool):
    """(recipe, the group's external input nodes) for :func:`chunks.run_block`."""
    index = {id(m): k for k, m in enumerate(members)}
    inputs, in_index, specs = [], {}, []
    for m in members:
        refs = []
        for a in m.args:
            if type(a) is DaskNode:
                k = index.get(id(a))
                if k is not None:
                    refs.append(("m", k))
                    continue
                i = in_index.get(id(a))
                if i is None:
                    i = in_index[id(a)] = len(inputs)
                    inputs.append(a)
                refs.append(("x", i))
            else:
                refs.append(("c", a))
        specs.append((m.op.name, tuple(refs), m.params, m.dtype))
    red_spec = None
    if red is not None:
        nd = len(members[-1].shape)
        # (the reduced member need not be the last: ``x == 0`` summed, beside
        # ``where(x == 0, 1, x)``, is one group whose last member is the where)
        red_spec = (_partial_name(red), _axes(red, nd),
                    chunks.partial_dtype(red.op.name, red.dtype),
                    next(k for k, m in enumerate(members) if m is red.args[0]))
    return (tuple(specs), red_spec, out_idx, can_fuse), inputs


def _partial_name(red) -> str:
    return "sum" if red.op.name == "mean" else red.op.name


def _axes(red, nd: int) -> tuple:
    return reduced_axes(red.params, nd)


def _lower_group(members: list, red, read: set, fusible: bool = True) -> None:
    """Lower one fused group (its returned members and reduction get ``value``)."""
    import dask.array as da
    out_idx = tuple(k for k, m in enumerate(members) if id(m) in read)
    recipe, inputs = _recipe(members, red, out_idx, fusible)
    shape = members[-1].shape
    nd = len(shape)
    out_ind = _LETTERS[:nd]
    pairs = []
    for arr in _aligned([lower(a) for a in inputs], shape):
        pairs += [arr, out_ind[nd - arr.ndim:]]
    n_out = len(out_idx) + (red is not None)
    if n_out == 1 and red is None:
        m = members[out_idx[0]]
        m.value = da.blockwise(chunks.run_block, out_ind, *pairs, recipe=recipe,
                               dtype=m.dtype, meta=np.empty((0,) * nd, m.dtype),
                               token=f"lazynp-{m.op.name}")
        return
    if n_out == 1:
        axes = recipe[1][1]
        part = da.blockwise(chunks.run_block, out_ind, *pairs, recipe=recipe,
                            dtype=recipe[1][2], meta=np.empty((0,) * nd, recipe[1][2]),
                            adjust_chunks={out_ind[d]: 1 for d in axes},
                            token=f"lazynp-{red.op.name}-chunk")
        red.value = _combine(red, part, axes)
        return
    base = da.blockwise(chunks.run_block, out_ind, *pairs, recipe=recipe,
                        dtype=object, meta=np.empty((0,) * nd, object),
                        token="lazynp-fused")
    for j, k in enumerate(out_idx):
        m = members[k]
        m.value = base.map_blocks(operator.getitem, j, dtype=m.dtype,
                                  meta=np.empty((0,) * nd, m.dtype))
    if red is not None:
        axes = recipe[1][1]
        pdt = recipe[1][2]
        ch = tuple((1,) * len(c) if d in axes else c for d, c in enumerate(base.chunks))
        part = base.map_blocks(operator.getitem, len(out_idx), dtype=pdt, chunks=ch,
                               meta=np.empty((0,) * nd, pdt))
        red.value = _combine(red, part, axes)


def _aligned(arrays: list, shape: tuple) -> list:
    """``arrays`` (a group's inputs, broadcasting to ``shape``) with the chunks of the first
    one along each axis they span in full.  (dask's own alignment cuts every chunk where
    any input has a boundary: a stencil's shifted slices, ``u[2:] + u[:-2]``, would split
    each chunk in three, and again at every time step.)"""
    nd = len(shape)
    target: dict = {}
    for arr in arrays:
        lead = nd - arr.ndim
        for d in range(arr.ndim):
            if arr.shape[d] == shape[lead + d] and arr.shape[d] != 1:
                target.setdefault(lead + d, arr.chunks[d])
    out = []
    for arr in arrays:
        lead = nd - arr.ndim
        want = {d: target[lead + d] for d in range(arr.ndim)
                if lead + d in target and arr.shape[d] == shape[lead + d] and
                arr.shape[d] != 1 and arr.chunks[d] != target[lead + d]}
        out.append(arr.rechunk(want) if want else arr)
    return out


def within_chunks(arr, axes: tuple) -> bool:
    """True when each of ``axes`` of the dask array ``arr`` is one chunk: a reduction over
    them needs no tree (each output block comes from one input block)."""
    return all(len(arr.chunks[d]) == 1 for d in axes)


def _drop_axes(arr, axes: tuple):
    """``arr`` without its ``axes`` (each of size 1), block by block (a blockwise layer:
    dask's graph optimization fuses it with its neighbours)."""
    if not axes:
        return arr
    return arr.map_blocks(np.squeeze, axis=axes, drop_axis=axes, dtype=arr.dtype,
                          meta=np.empty((0,) * (arr.ndim - len(axes)), arr.dtype))


#: the partials one aggregation task of a tree reduction may hold at once (bytes)
FAN_IN_BYTES = 32 << 20
#: the most partials one aggregation task combines
MAX_FAN_IN = 64


def _fan_in(part) -> int:
    """How many of the partials ``part``'s blocks one aggregation task combines: as many as
    fit :data:`FAN_IN_BYTES` (at most :data:`MAX_FAN_IN`, at least dask's 4).  A partial is
    one chunk's reduced block -- a scalar for a full reduction -- so a tree over scalars is
    one level (``sum(a*b + c)`` over 10 chunks: 11 tasks, not dask's default of 14)."""
    block = part.dtype.itemsize * math.prod(max(c, default=1) for c in part.chunks)
    return int(max(4, min(MAX_FAN_IN, FAN_IN_BYTES // max(block, 1))))


def _combine(red, part, axes: tuple):
    """The tree reduction of the chunks' partials ``part`` (reduced axes of size 1 per
    chunk) into ``red``'s result.  When the reduced axes are one chunk each, a partial is
    already its output block: no tree, only blockwise steps, which dask fuses with the
    task that made the partial and with the tasks that read the result (a row softmax on
    row chunks: one task per chunk)."""
    import dask.array as da
    name = red.op.name
    keep = bool((red.params or {}).get("keepdims"))
    if within_chunks(part, axes):
        out = part if keep else _drop_axes(part, axes)
        if name == "mean":
            count = math.prod(red.args[0].shape[d] for d in axes)
            with np.errstate(all="ignore"):
                out = out / count if count else out * np.nan
        return out.astype(red.dtype) if out.dtype != red.dtype else out
    fn = {"sum": da.sum, "mean": da.sum, "prod": da.prod, "max": da.max, "min": da.min,
          "any": da.any, "all": da.all}[name]
    kw = {"dtype": part.dtype} if name in ("sum", "mean", "prod") else {}
    out = fn(part, axis=axes, keepdims=keep, split_every=_fan_in(part), **kw)
    if name == "mean":
        count = math.prod(red.args[0].shape[d] for d in axes)
        with np.errstate(all="ignore"):
            out = out / count if count else out * np.nan
    if out.dtype != red.dtype:
        out = out.astype(red.dtype)
    return out


_DASK_REDUCTIONS = frozenset("""sum prod mean std var max min amax amin any all argmax argmin
    nansum nanprod nanmean nanstd nanvar nanmax nanmin nanargmax nanargmin cumsum cumprod
    nancumsum nancumprod""".split())


def _dask_reduction(n: DaskNode, x):
    """A reduction node on its own: dask.array's function of the same name."""
    import dask.array as da
    name = n.op.name
    if name not in _DASK_REDUCTIONS:
        raise NotImplementedError(f"lazynp: {name} is not implemented on chunked (dask) "
                                  f"arrays")
    kw = dict(n.params or {})
    if name in _BLOCK_REDUCTIONS:
        axes = reduced_axes(n.params, x.ndim)
        if within_chunks(x, axes):
            return _block_reduction(n, x, axes, kw)
    fn = getattr(da, {"amax": "max", "amin": "min"}.get(name, name))
    if name in ("argmax", "argmin", "nanargmax", "nanargmin") and kw.get("axis") is None:
        keep = kw.pop("keepdims", False)
        kw.pop("axis", None)
        out = fn(x.ravel(), axis=0)
        if keep:
            out = out.reshape((1,) * x.ndim)
    else:
        out = fn(x, **kw)
    if out.dtype != n.dtype:
        out = out.astype(n.dtype)
    if out.shape != n.shape:
        out = out.reshape(n.shape)
    return out


#: the reductions :func:`_block_reduction` computes with NumPy's function on each block
_BLOCK_REDUCTIONS = frozenset("""sum prod mean std var max min amax amin any all argmax
    argmin nansum nanprod nanmean nanstd nanvar nanmax nanmin nanargmax
    nanargmin""".split())


def _reduce_block(block, name: str, kw: dict, dtype):
    with fp_warnings.task_errstate():
        out = np.asarray(getattr(np, name)(block, **kw))
    return out if out.dtype == dtype else out.astype(dtype)


def _block_reduction(n: DaskNode, x, axes: tuple, kw: dict):
    """A reduction whose reduced ``axes`` are one chunk each: NumPy's own function on each
    block (a blockwise layer, fused by dask with its neighbours; NumPy's values, as the
    block holds every element each output reduces)."""
    keep = bool(kw.get("keepdims"))
    chunks = tuple((1,) if d in axes else c for d, c in enumerate(x.chunks)
                   if keep or d not in axes)
    if n.op.name in ("argmax", "argmin", "nanargmax", "nanargmin") and \
            kw.get("axis") is None:
        # (NumPy's flat index: the block is the whole array, as every axis is one chunk)
        chunks = (((1,),) * x.ndim) if keep else ()
    out = x.map_blocks(_reduce_block, n.op.name, kw, n.dtype, chunks=chunks,
                       drop_axis=() if keep else axes, dtype=n.dtype,
                       meta=np.empty((0,) * len(chunks), n.dtype),
                       token=f"lazynp-{n.op.name}-block")
    return out.reshape(n.shape) if out.shape != n.shape else out
