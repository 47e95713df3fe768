"""What a dask task runs on one chunk: a fused group of the recorded graph.

A *recipe* (made by :mod:`lazynp.dask.lower`, pickled into the dask graph) describes one
fused group: its members (op name, arguments, parameters, dtype), an optional reduction
epilogue, and which members the task returns.  :func:`run_block` rebuilds the group over
the chunk's blocks and runs it with the CPU path's fused Numba kernel
(:func:`lazynp.kernels.fused.run_group`: the same code generator and kernel cache), or, when
the kernel cannot be compiled or NumPy would warn, member by member on NumPy, as the CPU
executor does.  A reduction epilogue gives the chunk's partial result (``keepdims``): dask's
tree reduction combines the partials.
"""
from __future__ import annotations

import os

import numpy as np

from ..kernels import cpu, fused, pool
from ..ops.registry import OPS, Op
from . import fp_warnings

__all__ = ["run_block", "run_region", "partial_dtype", "finish_partial"]

#: the reductions a chunk step computes in its kernel, and the NumPy function of each
_PARTIAL = {"sum": np.sum, "prod": np.prod, "max": np.max, "min": np.min, "any": np.any,
            "all": np.all}


class ChunkNode:
    """One member of a group, or one input block, inside a task (the node type
    :func:`lazynp.kernels.fused.run_group` and :mod:`lazynp.core.fusion` read)."""

    __slots__ = ("op", "args", "params", "shape", "dtype", "value")

    def __init__(self, op, args: tuple, params, shape: tuple, dtype, value=None):
        self.op = op
        self.args = args
        self.params = params
        self.shape = shape
        self.dtype = np.dtype(dtype)
        self.value = value


class _Group:
    """A fused group over one chunk (:class:`lazynp.core.fusion.FusedGroup`'s fields)."""

    __slots__ = ("members", "shape", "reduction")

    def __init__(self, members: list, shape: tuple, reduction):
        self.members = members
        self.shape = shape
        self.reduction = reduction

    def nodes(self) -> list:
        return self.members + ([self.reduction] if self.reduction is not None else [])


_INPUT = Op("dask_chunk_input", "creation", None, raises_on_values=False)
_red_ops: dict = {}
_set_up = [False]


def _red_op(name: str) -> Op:
    op = _red_ops.get(name)
    if op is None:
        op = _red_ops[name] = Op(name, "reduction", _PARTIAL[name], raises_on_values=False)
    return op


def partial_dtype(name: str, dtype: np.dtype) -> np.dtype:
    """The dtype of a chunk's partial result of reduction ``name`` whose final dtype is
    ``dtype`` (``mean``'s partial is a sum, in float64 for float16/32 as NumPy's mean
    accumulates; complex64: complex128)."""
    if name == "mean":
        if dtype.kind == "f" and dtype.itemsize < 8:
            return np.dtype(np.float64)
        if dtype == np.complex64:
            return np.dtype(np.complex128)
    return dtype


def _worker_setup() -> None:
    """Once per process: in the embedded cluster's worker processes (one thread each, one
    Numba thread) no pooled buffers (a chunk's result leaves the task; a pool would only
    raise the worker's memory) and serial kernels (the cluster keeps the cores busy)."""
    if not _set_up[0]:
        _set_up[0] = True
        if os.environ.get("LAZYNP_DASK_WORKER") == "1":
            # (other clusters' workers: the WorkerPlugin of lazynp.dask.workers)
            pool.MAX_BYTES = 0
            fused.PARALLEL_MIN = fused.PARALLEL_MIN_WORK = 1 << 62


def run_block(*blocks, recipe: tuple):
    """Run the group ``recipe`` over one chunk's input ``blocks``.

    Parameters
    ----------
    *blocks : numpy.ndarray
        The chunk's input blocks.
    recipe : tuple
        ``(members, reduction, out_idx, fusible)``: members as ``(op_name, refs, params,
        dtype)`` where a ref is ``("x", i)`` (input block ``i``), ``("m", k)`` (member
        ``k``) or ``("c", value)`` (a scalar); ``reduction`` None or ``(name, axes,
        dtype, k)`` over member ``k`` (a keepdims partial); ``out_idx`` the members
        returned; ``fusible`` False when the members must run on NumPy.

    Returns
    -------
    numpy.ndarray or tuple
        The returned members' blocks, then the partial reduction; one array when that is
        a single value.
    """
    _worker_setup()
    with fp_warnings.task_errstate():
        return _run_block(blocks, recipe)


def _run_block(blocks, recipe: tuple):
    members_spec, red_spec, out_idx, can_fuse = recipe
    blocks = [np.asarray(b) for b in blocks]
    shape = np.broadcast_shapes(*[b.shape for b in blocks]) if blocks else ()
    inputs = [ChunkNode(_INPUT, (), None, b.shape, b.dtype, b) for b in blocks]
    members = []
    for name, refs, params, dtype in members_spec:
        args = tuple(inputs[r[1]] if r[0] == "x" else members[r[1]] if r[0] == "m" else r[1]
                     for r in refs)
        arr_shapes = [a.shape for a in args if type(a) is ChunkNode]
        members.append(ChunkNode(OPS[name], args, params,
                                 np.broadcast_shapes(*arr_shapes) if arr_shapes else shape,
                                 dtype))
    red = None
    if red_spec is not None:
        name, axes, dtype, src = red_spec
        rshape = tuple(1 if d in axes else s for d, s in enumerate(shape))
        red = ChunkNode(_red_op(name), (members[src],), {"axis": axes, "keepdims": True},
                        rshape, dtype)
    group = _Group(members, shape, red)
    out_ids = {id(members[k]) for k in out_idx}
    ok = False
    if can_fuse and blocks and all(m.shape == shape for m in members):
        # (a flag NumPy would warn about makes the group run again on NumPy, which logs it)
        ok = _run_fused(group, out_ids)
    if not ok:
        _run_numpy(members, red)
    outs = [members[k].value for k in out_idx]
    if red is not None:
        outs.append(red.value)
    return outs[0] if len(outs) == 1 else tuple(outs)


def _run_fused(group: _Group, out_ids: set) -> bool:
    def value_of(a):
        return a.value

    def stored(m):
        return id(m) in out_ids
    if fused.run_group(group, ChunkNode, value_of, stored):
        return True
    cpu.wait_compiles()           # (a kernel seen for the first time: compiled, then run)
    return fused.run_group(group, ChunkNode, value_of, stored)


def _run_numpy(members: list, red) -> None:
    for m in members:
        vals = [a.value if type(a) is ChunkNode else a for a in m.args]
        m.value = np.asarray(m.op.impl(*vals, **m.params) if m.params else m.op.impl(*vals))
    if red is not None:
        name = red.op.name
        src = red.args[0].value
        kw = {"dtype": red.dtype} if name in ("sum", "prod") else {}
        red.value = np.asarray(_PARTIAL[name](src, axis=red.params["axis"], keepdims=True,
                                              **kw), dtype=red.dtype)


def finish_partial(value: np.ndarray, name: str, count: int, dtype) -> np.ndarray:
    """A chunk's partial reduction ``value`` as the reduction's result, when the chunk holds
    every element it reduces (``mean``: the sum over ``count``; the result's dtype)."""
    if name == "mean":
        with np.errstate(all="ignore"):
            value = value / count if count else value * np.nan
    return value if value.dtype == dtype else value.astype(dtype)


def _last_uses(steps: tuple) -> dict:
    """slot -> the index of the last step that reads it."""
    last = {}
    for i, step in enumerate(steps):
        refs = (step[4],) if step[0] == "reduce" else step[2]
        for r in refs:
            if r[0] == "v":
                last[r[1]] = i
    return last


def _dead_buffer(step_refs: tuple, args: list, i: int, last: dict, outs: tuple, shape,
                 dtype, blocks: list):
    """An argument of step ``i`` that it may overwrite: a value this task made, read by no
    later step nor returned, owning C-ordered memory of the result's shape and dtype, and
    sharing none with the chunk's input blocks (never written)."""
    for r, a in zip(step_refs, args):
        if r[0] == "v" and last.get(r[1]) == i and r[1] not in outs and \
                type(a) is np.ndarray and a.base is None and a.flags.writeable and \
                a.flags.c_contiguous and a.shape == shape and a.dtype == dtype and \
                not any(np.may_share_memory(a, b) for b in blocks):
            return a
    return None


def _run_one_op_into(recipe: tuple, args: list, refs: tuple, i: int, last: dict,
                     outs: tuple, blocks: list):
    """A step of one op run on NumPy (``exp`` left to NumPy's SIMD loop): into a dead
    argument's buffer when there is one (``exp(t, out=t)``); None otherwise."""
    members, red, _, can_fuse = recipe
    if len(members) != 1 or red is not None or can_fuse:
        return None
    name, mrefs, params, dtype = members[0]
    op = OPS[name]
    if params or op.ufunc is None or op.ufunc.nout != 1 or op.impl_out is None:
        return None
    vals = [args[r[1]] if r[0] == "x" else r[1] for r in mrefs]
    shape = np.broadcast_shapes(*[np.shape(v) for v in vals])
    buf = _dead_buffer(refs, args, i, last, outs, shape, np.dtype(dtype), blocks)
    if buf is None:
        return None
    # (NumPy picks the loop from the operands, not from ``out``: the same values)
    op.ufunc(*vals, out=buf)
    return buf


def run_region(*blocks, steps: tuple, outs: tuple):
    """Run a chunk-local region (:mod:`lazynp.dask.regions`) over one chunk's ``blocks``.

    Parameters
    ----------
    *blocks : numpy.ndarray
        The chunk's blocks of the region's external inputs.
    steps : tuple
        In order: ``("group", recipe, refs, slots, finish)`` runs :func:`run_block` on the
        ``refs`` (``("x", i)``: block ``i``; ``("v", k)``: the value in slot ``k``) and
        puts its returned values in ``slots`` (``finish``: ``(name, count, dtype)`` of a
        reduction whose partial, the last value, is its result); ``("reduce", name, kw,
        dtype, ref, slot)``: NumPy's reduction ``name`` of one value.
    outs : tuple
        The slots returned.

    Returns
    -------
    numpy.ndarray or tuple
        The values of ``outs``; one array when there is one.
    """
    _worker_setup()
    with fp_warnings.task_errstate():
        return _run_region(blocks, steps, outs)


def _run_region(blocks, steps: tuple, outs: tuple):
    blocks = [np.asarray(b) for b in blocks]
    vals: dict = {}
    last = _last_uses(steps)

    def get(r):
        return blocks[r[1]] if r[0] == "x" else vals[r[1]]
    for i, step in enumerate(steps):
        if step[0] == "reduce":
            _, name, kw, dtype, ref, slot = step
            vals[slot] = finish_partial(np.asarray(getattr(np, name)(get(ref), **kw)), "",
                                        0, dtype)
            refs = (ref,)
        else:
            _, recipe, refs, slots, finish = step
            args = [get(r) for r in refs]
            res = _run_one_op_into(recipe, args, refs, i, last, outs, blocks)
            if res is None:
                res = run_block(*args, recipe=recipe)
            res = res if type(res) is tuple else (res,)
            for k, v in zip(slots, res):
                vals[k] = v
            if finish is not None:
                vals[slots[-1]] = finish_partial(vals[slots[-1]], *finish)
        for r in refs:              # (a value no later step reads is freed now)
            if r[0] == "v" and last.get(r[1]) == i and r[1] not in outs:
                vals.pop(r[1], None)
    return vals[outs[0]] if len(outs) == 1 else tuple(vals[k] for k in outs)
