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

__all__ = ["run_block", "partial_dtype"]

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
        dtype)`` over the last member (a keepdims partial); ``out_idx`` the members
        returned; ``fusible`` False when the members must run on NumPy.

    Returns
    -------
    numpy.ndarray or tuple
        The returned members' blocks, then the partial reduction; one array when that is
        a single value.
    """
    _worker_setup()
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
        name, axes, dtype = red_spec
        rshape = tuple(1 if d in axes else s for d, s in enumerate(shape))
        red = ChunkNode(_red_op(name), (members[-1],), {"axis": axes, "keepdims": True},
                        rshape, dtype)
    group = _Group(members, shape, red)
    out_ids = {id(members[k]) for k in out_idx}
    ok = False
    if can_fuse and blocks and all(m.shape == shape for m in members):
        with np.errstate(all="ignore"):
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
        src = members[-1].value
        kw = {"dtype": red.dtype} if name in ("sum", "prod") else {}
        red.value = np.asarray(_PARTIAL[name](src, axis=red.params["axis"], keepdims=True,
                                              **kw), dtype=red.dtype)
