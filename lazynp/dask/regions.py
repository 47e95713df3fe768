"""Chunk-local regions: consecutive lowered items that one task per chunk can run.

After the fusion pass (:func:`lazynp.dask.lower.lower`) a flush is a list of items: fused
groups, single elementwise ops, reductions.  Items that share one iteration shape and one
chunking, whose reductions keep their dimensions and reduce only axes that are one chunk
each, need nothing from other chunks: a row softmax on row chunks (max, subtract, exp, sum,
divide) is such a run.  :func:`plan` groups those runs into :class:`Region` s; each region
with more than one item becomes one ``blockwise`` task per chunk running
:func:`lazynp.dask.chunks.run_region`, which runs the items in order on the chunk's blocks
and writes a temporary that no later item reads into its last reader's result (``exp(t,
out=t)``): fewer tasks than one per item, and fewer chunk-sized temporaries.
"""
from __future__ import annotations

import operator

import numpy as np

from ..core import fusion
from ..ops.reductions import reduced_axes
from . import chunks

__all__ = ["Region", "plan"]

_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def _item_nodes(it) -> list:
    return it.nodes() if type(it) is fusion.FusedGroup else [it[0]]


def readers(items: list, node_type) -> dict:
    """id(node) -> the indices of the items that read it (its own item excluded)."""
    out: dict = {}
    for k, it in enumerate(items):
        nodes = _item_nodes(it)
        inside = {id(n) for n in nodes}
        for n in nodes:
            for a in n.args:
                if type(a) is node_type and id(a) not in inside:
                    out.setdefault(id(a), set()).add(k)
    return out


class Region:
    """A run of chunk-local items over one iteration ``shape`` and ``chunks``."""

    def __init__(self, shape: tuple, chunks_: tuple):
        self.shape = shape
        self.chunks = chunks_
        self.items: list = []          # (index, item)
        self.steps: list = []          # what run_region runs (see chunks.run_region)
        self.slots: dict = {}          # id(node) -> its value's slot in the task
        self.slot_nodes: list = []     # slot -> node
        self.inputs: list = []         # external dask arrays (aligned to the chunks)
        self.input_ids: dict = {}      # id(node) -> index in inputs

    # --- building --------------------------------------------------------------------
    def _ref(self, a, lower):
        """The task's reference to argument ``a`` of an item: a slot or an input block."""
        k = self.slots.get(id(a))
        if k is not None:
            return ("v", k)
        i = self.input_ids.get(id(a))
        if i is None:
            arr = _aligned_to(lower(a), self.shape, self.chunks)
            if arr is None:
                return None
            i = self.input_ids[id(a)] = len(self.inputs)
            self.inputs.append(arr)
        return ("x", i)

    def _slot(self, node) -> int:
        self.slots[id(node)] = len(self.slot_nodes)
        self.slot_nodes.append(node)
        return self.slots[id(node)]

    def add(self, k: int, it, node_type, recipe_of, lower, read: set) -> bool:
        """Add item ``it`` (index ``k``) when it is chunk-local here; False otherwise.
        ``read``: the nodes read outside their own item (a fused group returns those)."""
        n_inputs = len(self.inputs)
        step = _step_of(self, it, node_type, recipe_of, lower, read)
        if step is None:
            # (inputs taken for a step that did not fit are dropped: no needless transfer)
            for arr_id in [i for i, j in self.input_ids.items() if j >= n_inputs]:
                del self.input_ids[arr_id]
            del self.inputs[n_inputs:]
            return False
        self.steps.append(step)
        self.items.append((k, it))
        return True


def _aligned_to(arr, shape: tuple, chunks_: tuple):
    """``arr`` (broadcasting to ``shape``) with ``chunks_`` on each axis it spans, or None
    when it does not broadcast to ``shape``."""
    nd = len(shape)
    lead = nd - arr.ndim
    if lead < 0:
        return None
    want = {}
    for d in range(arr.ndim):
        s = arr.shape[d]
        if s == shape[lead + d] and s != 1:
            if arr.chunks[d] != chunks_[lead + d]:
                want[d] = chunks_[lead + d]
        elif s != 1:
            return None
    return arr.rechunk(want) if want else arr


def _iteration_shape(it) -> tuple:
    if type(it) is fusion.FusedGroup:
        return tuple(it.shape)
    n = it[0]
    return tuple(n.args[0].shape) if n.op.kind == "reduction" else tuple(n.shape)


def _local_reduction(red, shape: tuple, chunks_: tuple) -> bool:
    """True when ``red`` keeps its dimensions and reduces axes that are one chunk each."""
    if not (red.params or {}).get("keepdims"):
        return False
    return all(len(chunks_[d]) == 1 for d in reduced_axes(red.params, len(shape)))


def _step_of(region: Region, it, node_type, recipe_of, lower, read: set):
    """The step that runs item ``it`` in ``region``'s task, its values given slots; None
    when the item is not chunk-local there."""
    if _iteration_shape(it) != region.shape:
        return None
    if type(it) is fusion.FusedGroup:
        members, red = it.members, it.reduction
        if red is not None and not _local_reduction(red, region.shape, region.chunks):
            return None
    else:
        n = it[0]
        if n.op.kind == "reduction":
            if n.op.name not in _BLOCK_REDUCTIONS or \
                    not _local_reduction(n, region.shape, region.chunks) or \
                    type(n.args[0]) is not node_type:
                return None
            ref = region._ref(n.args[0], lower)
            if ref is None:
                return None
            return ("reduce", n.op.name, dict(n.params or {}), n.dtype, ref,
                    region._slot(n))
        if n.op.kind != "elementwise":
            return None
        members, red = [n], None
    out_idx = tuple(k for k, m in enumerate(members) if id(m) in read)
    if not out_idx and red is None:
        return None
    recipe, inputs = recipe_of(members, red, out_idx, type(it) is fusion.FusedGroup)
    refs = []
    for a in inputs:
        ref = region._ref(a, lower)
        if ref is None:
            return None
        refs.append(ref)
    outs = tuple(region._slot(members[k]) for k in out_idx)
    finish = None
    if red is not None:
        outs += (region._slot(red),)
        count = int(np.prod([region.shape[d] for d in
                             reduced_axes(red.params, len(region.shape))]))
        finish = (red.op.name, count, red.dtype)
    return ("group", recipe, tuple(refs), outs, finish)


#: the reductions a region runs with NumPy's function on the chunk's block
_BLOCK_REDUCTIONS = frozenset("sum prod mean std var max min amax amin any all nansum "
                              "nanprod nanmean nanstd nanvar nanmax nanmin".split())


def first_region(it, node_type, lower):
    """A new region whose iteration shape and chunking are ``it``'s (from its inputs
    that span each axis in full), or None when they cannot be told."""
    shape = _iteration_shape(it)
    if not shape:
        return None
    nd = len(shape)
    target: dict = {}
    inside = {id(n) for n in _item_nodes(it)}
    for n in _item_nodes(it):
        for a in n.args:
            if type(a) is not node_type or id(a) in inside:
                continue
            arr = lower(a)
            lead = nd - arr.ndim
            for d in range(arr.ndim):
                if lead >= 0 and arr.shape[d] == shape[lead + d] and arr.shape[d] != 1:
                    target.setdefault(lead + d, arr.chunks[d])
    if any(d not in target and shape[d] != 1 for d in range(nd)):
        return None
    return Region(shape, tuple(target.get(d, (1,)) for d in range(nd)))


def emit(region: Region, outputs: set) -> None:
    """Lower ``region`` (two items or more) to one task per chunk; the nodes in
    ``outputs`` (read after it) get their ``value``."""
    import dask.array as da
    out_slots = tuple(k for k, n in enumerate(region.slot_nodes) if id(n) in outputs)
    shape = region.shape
    nd = len(shape)
    out_ind = _LETTERS[:nd]
    pairs = []
    for arr in region.inputs:
        pairs += [arr, out_ind[nd - arr.ndim:]]
    steps = tuple(region.steps)
    if not out_slots:
        return
    if len(out_slots) == 1:
        node = region.slot_nodes[out_slots[0]]
        node.value = da.blockwise(
            chunks.run_region, out_ind, *pairs, steps=steps, outs=out_slots,
            dtype=node.dtype, meta=np.empty((0,) * nd, node.dtype),
            adjust_chunks={out_ind[d]: 1 for d in range(nd)
                           if node.shape[d] == 1 and shape[d] != 1},
            token="lazynp-region")
        return
    base = da.blockwise(chunks.run_region, out_ind, *pairs, steps=steps, outs=out_slots,
                        dtype=object, meta=np.empty((0,) * nd, object),
                        token="lazynp-region")
    for j, k in enumerate(out_slots):
        node = region.slot_nodes[k]
        ch = tuple((1,) * len(c) if node.shape[d] == 1 and shape[d] != 1 else c
                   for d, c in enumerate(base.chunks))
        node.value = base.map_blocks(operator.getitem, j, dtype=node.dtype, chunks=ch,
                                     meta=np.empty((0,) * nd, node.dtype))
