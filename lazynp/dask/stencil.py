"""Stencil writes as one ``map_overlap`` (halo exchange) instead of rechunked shifted slices.

``u[1:-1, 1:-1] = 0.25 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:])``: the
value is an elementwise expression of shifted slices of ``u`` itself.  Lowered as written,
each shifted slice is rechunked to the first one's chunks and the write splits the chunks
again (99.8 tasks per chunk for 5 steps of a 4x4-chunk grid).  :func:`try_write` lowers it
as dask users write it by hand: ``map_overlap`` of ``u`` with a halo as deep as the largest
shift, each block running the expression (the fused Numba kernel of
:func:`lazynp.dask.chunks.run_block`) on views of its halo-extended block, written into a
copy of the block where the target slice meets it.  Any other write returns None (the
general path).
"""
from __future__ import annotations

import numpy as np

from .lower import DaskNode, _pending_order, _recipe

__all__ = ["slice_starts", "try_write"]


def slice_starts(key, shape: tuple):
    """The start of each axis of ``x[key]`` when ``key`` is a basic index of slices with
    step 1 (one per axis, or fewer: the rest whole), else None."""
    key = key if type(key) is tuple else (key,)
    if len(key) > len(shape) or any(type(k) is not slice for k in key):
        return None
    starts = []
    for d, n in enumerate(shape):
        k = key[d] if d < len(key) else slice(None)
        start, stop, step = k.indices(n)
        if step != 1 or stop < start:
            return None
        starts.append(start)
    return tuple(starts)


def _core_and_halo(chunks: tuple, block_id: tuple, depth: tuple):
    """Per axis: the block's global start, its size, and the halo before it in the block
    ``map_overlap`` gives (none at the array's edges: ``boundary="none"``)."""
    out = []
    for d, b in enumerate(block_id):
        out.append((sum(chunks[d][:b]), chunks[d][b], depth[d] if b > 0 else 0))
    return out


def _stencil_block(block, recipe, offsets, target, grid, halo, block_id=None):
    """One block of the written array: the block (halo trimmed) with the target slice's
    part recomputed from views of the halo-extended block."""
    geo = _core_and_halo(grid, block_id, halo)
    core = tuple(slice(h, h + n) for _, n, h in geo)
    out = block[core].copy()
    dst, rows = [], []
    for d, (lo, n, h) in enumerate(geo):
        t0, t1 = target[d]
        a, b = max(lo, t0), min(lo + n, t1)
        if a >= b:
            return out
        dst.append(slice(a - lo, b - lo))
        rows.append((a - lo + h, b - lo + h))
    views = [block[tuple(slice(r0 + o, r1 + o) for (r0, r1), o in zip(rows, off))]
             for off in offsets]
    from .chunks import run_block
    out[tuple(dst)] = run_block(*views, recipe=recipe)
    return out


def try_write(old_arr, key, value_node: DaskNode):
    """``old_arr`` (a dask array) with ``old_arr[key] = value`` as a ``map_overlap``, when
    the value is an elementwise expression of slices of ``old_arr`` itself (each noted by
    :func:`slice_starts` in its node's ``view_of``), shifted by less than a chunk; else
    None."""
    import dask.array as da
    shape = old_arr.shape
    nd = len(shape)
    starts = slice_starts(key, shape)
    if starts is None or value_node.value is not None or not nd:
        return None
    tshape = value_node.shape
    if len(tshape) != nd:
        return None
    target = tuple((s, s + n) for s, n in zip(starts, tshape))
    if any(t1 > n for (_, t1), n in zip(target, shape)):
        return None
    if not np.can_cast(value_node.dtype, old_arr.dtype, "same_kind"):
        return None
    members = _pending_order(value_node)
    if any(m.op.kind != "elementwise" or m.shape != tshape for m in members):
        return None
    recipe, inputs = _recipe(members, None, (len(members) - 1,), True)
    offsets = []
    for a in inputs:
        view = getattr(a, "view_of", None)
        if view is None or view[0] is not old_arr or a.shape != tshape:
            return None
        offsets.append(tuple(s - t for s, t in zip(view[1], starts)))
    if not offsets:
        return None
    depth = tuple(max(abs(o[d]) for o in offsets) for d in range(nd))
    if any(dp and min(c) < dp for dp, c in zip(depth, old_arr.chunks)):
        return None
    dtype = old_arr.dtype
    return da.map_overlap(_stencil_block, old_arr, depth=depth, boundary="none",
                          trim=False, dtype=dtype, meta=np.empty((0,) * nd, dtype),
                          chunks=old_arr.chunks, recipe=recipe, offsets=tuple(offsets),
                          target=target, grid=old_arr.chunks, halo=depth)
