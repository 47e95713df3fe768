"""Running a fused group: gather inputs, pick a kernel layout, allocate only live outputs.

Layout: *flat* (one 1-D loop) when every array input has the group's shape and is
C-contiguous, else *nd* (a loop nest; inputs broadcast with zero strides, views read
through their strides).  A group whose kernel is not compiled yet runs node by node on
NumPy while the kernel compiles in the background.
"""
from __future__ import annotations

import numpy as np

from . import cpu, exprs, pool

#: below this many elements a kernel runs serially (thread start-up costs more)
PARALLEL_MIN = 1 << 17


def _prod(shape) -> int:
    p = 1
    for s in shape:
        p *= s
    return p


class _Layout:
    """Per-group numbering of inputs, constants and outputs (the kernel's structure)."""

    def __init__(self, group, node_type, view_op):
        self.inputs = []          # external Nodes
        self.consts = []          # Python / NumPy scalars
        in_index: dict = {}
        member_index = {id(m): k for k, m in enumerate(group.members)}
        lines = []
        key = []
        for k, m in enumerate(group.members):
            names, dts, keys = [], [], []
            for a in m.args:
                if type(a) is node_type:
                    j = member_index.get(id(a))
                    if j is not None and j < k:
                        names.append(f"t{j}")
                        dts.append(group.members[j].dtype)
                        key.append(("t", j))
                    else:
                        i = in_index.get(id(a))
                        if i is None:
                            i = in_index[id(a)] = len(self.inputs)
                            self.inputs.append(a)
                        names.append(f"v{i}")
                        dts.append(a.dtype)
                        key.append(("x", i, a.dtype))
                    keys.append(a.dtype)
                else:
                    i = len(self.consts)
                    self.consts.append(a)
                    names.append(f"c{i}")
                    vd = _const_dtype(a)
                    dts.append(vd)
                    keys.append(type(a) if type(a) in (bool, int, float, complex) else a.dtype)
                    key.append(("c", i, vd, keys[-1]))
            expr = exprs.node_expr(m, names, dts, keys)
            lines.append(f"t{k} = {expr}")
            key.append((m.op.name, m.dtype, k))
        self.lines = lines
        self.key = tuple(key)


def _const_dtype(a) -> np.dtype:
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


_layouts: dict = {}


def run_group(group, node_type, value_of, needed) -> bool:
    """Run ``group`` with its compiled kernel; False when the kernel is not ready (the
    caller then runs the members on NumPy).  ``needed(member)`` says which members must be
    stored."""
    layout = _Layout(group, node_type, None)
    shape = group.shape
    vals = [value_of(a) for a in layout.inputs]
    ndim = len(shape)
    full_red = group.reduction is not None and len(_red_axes(group)) == ndim
    flat = all(v.shape == shape and v.flags.c_contiguous for v in vals) and \
        (group.reduction is None or full_red)
    if not vals:
        return False
    if flat:
        args_in = [v.reshape(-1) for v in vals]
    else:
        args_in = [v if v.shape == shape else np.broadcast_to(v, shape) for v in vals]
    consts = [c for c in layout.consts]
    outs_nodes = [m for m in group.members if needed(m)]
    size = _prod(shape)
    parallel = size >= PARALLEL_MIN
    red = group.reduction
    spec_key = (layout.key, flat, ndim, parallel,
                tuple(group.members.index(m) for m in outs_nodes),
                None if red is None else (red.op.name, _red_axes(group), red.dtype))
    source = _layouts.get(spec_key)
    if source is None:
        spec = cpu.KernelSpec(layout.lines, len(vals), len(consts), len(outs_nodes),
                              ndim, flat, parallel, None)
        spec.out_exprs = [(k, f"t{group.members.index(m)}") for k, m in enumerate(outs_nodes)]
        if red is not None:
            src_idx = group.members.index(red.args[0])
            acc_dt = red.dtype
            vexpr = exprs.cast(f"t{src_idx}", red.args[0].dtype, acc_dt) \
                if red.op.name not in ("any", "all", "max", "min") else f"t{src_idx}"
            spec.reduction = (red.op.name, (0,) if flat else _red_axes(group), acc_dt, vexpr)
        source = spec.render()
        _layouts[spec_key] = source
    outs = [pool.empty(m.shape, m.dtype) for m in outs_nodes]
    args_out = [o.reshape(-1) for o in outs] if flat else outs
    extra = []
    if red is not None:
        axes = _red_axes(group)
        rbuf = np.empty(tuple(s for d, s in enumerate(shape) if d not in axes) or (1,),
                        red.dtype)
        extra = [rbuf]
    args = args_in + consts + args_out + extra
    kernel = cpu.get_kernel(source, args)
    if kernel is None:
        cpu.STATS["fused_groups_numpy"] += 1
        for o in outs:
            pool.give_back(o)
        return False
    kernel(*args)
    cpu.STATS["fused_groups_run"] += 1
    for m, o in zip(outs_nodes, outs):
        m.value = o
    if red is not None:
        r = extra[0]
        if red.op.name == "mean":
            n = size // max(_prod(r.shape), 1) if _red_axes(group) else size
            r = np.true_divide(r, n, dtype=red.dtype) if red.dtype.kind in "fc" else r / n
        r = r.reshape(red.shape).astype(red.dtype, copy=False)
        red.value = r if r.flags.c_contiguous else r.copy()
    return True


def _red_axes(group) -> tuple:
    red = group.reduction
    axis = (red.params or {}).get("axis")
    nd = len(group.shape)
    if axis is None:
        return tuple(range(nd))
    if not isinstance(axis, tuple):
        axis = (axis,)
    return tuple(sorted(a % nd for a in axis))
