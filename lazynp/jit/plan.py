"""Compiled plans of :class:`lazynp.jit`: a Symbol after the graph passes, run as a flat list
of steps over slots whose internal buffers are planned once.

A plan is the Symbol after prune / CSE / constant folding, with elementwise chains fused
into one Numba kernel each (:mod:`lazynp.core.fusion`, :mod:`lazynp.kernels.fused`) and
its internal buffers planned by MXNet's inplace + co-share heuristics
(:mod:`lazynp.ir.passes.memory_plan`).  Buffers are allocated once, when the plan is built,
and reused on every call; kernels, ufuncs, reductions, ``matmul``/``dot``/``einsum`` write
into them with ``out=``.  Other ops allocate their result on each call (counted as such in
:meth:`lazynp.jit.memory_report`).  A row-local graph over a large batch runs in slices of
it (:class:`TiledPlan`).  Calling a Symbol on arrays (``sym(x=...)``, installed here) runs
such a plan, one per input signature.
"""
from __future__ import annotations

import warnings

import numpy as np

from .._base import split as _split
from ..core import graph as _graph
from .. import symbol as _symbol
from ..array.calls import _fill_deep
from ..array.indexing import _Slot
from ..core.graph import Node
from ..core.graph import own_result as _graph_own
from ..kernels import cpu as _cpu
from ..kernels import fpflags as _fpflags
from ..kernels import fused as _fused
from ..array.ndarray import ndarray
from ..ir.passes import batch_tile as _tile
from ..ir.passes import memory_plan as _mp
from ..ir.passes import pipeline as _pipeline
from ..ir.symbol import add_member as _add_symbol_member

__all__ = ["Plan", "TiledPlan", "compile_plan", "run_symbol", "prepare_leaf", "wrap_outputs"]

STATS = {"traces": 0, "plans": 0, "calls": 0}


class _FPRerun(Exception):
    """A fused kernel raised a floating-point flag the current np.errstate does not ignore."""

# ops that can write their result into a given buffer, and how
# (``np.sum(a, ...)`` of a NumPy array is ``np.add.reduce(a, ...)``, and so on: the ufunc's
# own method skips ``fromnumeric``'s Python wrapper, ~2 us a step)
_REDUCE_OUT = {"sum": np.add.reduce, "prod": np.multiply.reduce, "max": np.maximum.reduce,
               "min": np.minimum.reduce, "mean": np.mean, "any": np.any, "all": np.all}
_CONTRACT_OUT = {"matmul": np.matmul, "dot": np.dot, "einsum": np.einsum}


def _prod(shape) -> int:
    p = 1
    for s in shape:
        p *= s
    return p


def _c_contiguous(node) -> bool:
    if node.op is not _graph.VIEW:
        return True
    p = node.params
    shape, strides, item = p["shape"], p["strides"], p["dtype"].itemsize
    expect = item
    for s, st in zip(reversed(shape), reversed(strides)):
        if s != 1 and st != expect:
            return False
        expect *= s
    return True


def _args_getter(args, slot_of):
    """env -> list of argument values (slots for nodes, constants as they are)."""
    spec = [(True, slot_of[id(a)]) if type(a) is Node else (False, a) for a in args]
    if all(isnode for isnode, _ in spec):
        slots = [s for _, s in spec]
        if len(slots) == 1:
            s0 = slots[0]
            return lambda env: [env[s0]]
        if len(slots) == 2:
            s0, s1 = slots
            return lambda env: [env[s0], env[s1]]
        return lambda env: [env[s] for s in slots]
    return lambda env: [env[v] if isnode else v for isnode, v in spec]


def _flat_template(tpl, args, slot_of):
    """``(slots, kwargs)`` when a recorded call's template (``lazynp.array.calls``) is its
    node arguments in order (``slots``: theirs) and keywords that are plain constants;
    else None."""
    pos, kw = tpl
    if type(pos) is not tuple or type(kw) is not dict or len(pos) != len(args) or \
            any(type(a) is not Node for a in args):
        return None
    for k, p in enumerate(pos):
        if type(p) is not _Slot or p.k != k:
            return None
    for v in kw.values():
        if not isinstance(v, (int, float, str, type(None))):
            return None
    return [slot_of[id(a)] for a in args], kw


def _own(out, vals, node):
    """A NumPy result with the node's dtype/shape that shares memory with no input."""
    return _graph_own(out, node.shape, node.dtype, vals)


def _owned(out, vals, node):
    """``out`` when it already is such a result (the common case, checked cheaply), else
    :func:`_own` of it."""
    if type(out) is not np.ndarray or out.dtype != node.dtype or out.shape != node.shape \
            or out.base is not None:
        return _own(out, vals, node)
    return out


class Plan:
    """A compiled plan for one signature: steps over slots, buffers allocated once."""

    def __init__(self, sym: "_symbol.Symbol", fuse: bool = True, plan_memory: bool = True,
                 parallel_safe: bool = True, passes=None):
        self.source = sym
        sym = _pipeline.optimize(sym, passes)
        self.symbol = sym
        nodes = _pipeline.to_nodes(sym)
        self.nodes = nodes
        slot_of = {id(g): i for i, g in enumerate(nodes)}
        self.slot_of = slot_of
        n = len(nodes)
        outs = [int(o) for o in sym.output_refs]
        out_set = set(outs)
        if fuse:
            items = _pipeline.fusion_items(sym, nodes, single_kernels=plan_memory)
        else:
            items = [(g, False) for g in nodes if g.op not in (_graph.PLACEHOLDER, _graph.LEAF,
                                                                _graph.VIEW)]
        # readers of each node outside its own item
        item_of = {}
        for k, it in enumerate(items):
            for m in ([it[0]] if type(it) is tuple else it.members):
                item_of[id(m)] = k
        outside_readers: dict = {}
        for g in nodes:
            for a in g.args:
                if type(a) is Node and (item_of.get(id(g), -1) != item_of.get(id(a), -2)):
                    outside_readers[id(a)] = outside_readers.get(id(a), 0) + 1
        # values for the memory planner (index = slot)
        values = []
        for i, g in enumerate(nodes):
            nb = g.dtype.itemsize * _prod(g.shape)
            if g.op is _graph.PLACEHOLDER or g.op is _graph.LEAF:
                values.append(_mp.Value(nb, g.dtype.itemsize, "external", name=g.op.name))
            elif g.op is _graph.VIEW:
                values.append(_mp.Value(nb, g.dtype.itemsize, "alias", base=slot_of[id(g.args[0])],
                                        is_output=i in out_set, name="view"))
            else:
                values.append(_mp.Value(nb, g.dtype.itemsize, "none", is_output=i in out_set,
                                        name=g.op.name))
        steps_desc = []
        builders = []
        n_kernels = 0
        for it in items:
            if type(it) is tuple:
                g = it[0]
                i = slot_of[id(g)]
                can_out = self._can_write_into(g)
                values[i].kind = "fresh" if (i in out_set or not can_out or not plan_memory) \
                    else "planned"
                ins = [slot_of[id(a)] for a in g.args if type(a) is Node]
                inpl = []
                if g.op.kind == "write" or (g.op.ufunc is not None and g.params is None):
                    allowed = range(len(ins)) if g.op.kind != "write" else (0,)
                    pos = 0
                    for j, a in enumerate(g.args):
                        if type(a) is Node:
                            if pos in allowed and a.shape == g.shape and \
                                    a.op is not _graph.VIEW:
                                inpl.append((pos, 0))
                            pos += 1
                steps_desc.append(_mp.Step(ins, [i], inpl, g.op.name))
                builders.append(("single", g))
            else:
                members = it.members
                stored = []
                for m in members:
                    i = slot_of[id(m)]
                    if i in out_set or outside_readers.get(id(m), 0):
                        values[i].kind = "fresh" if (i in out_set or not plan_memory) \
                            else "planned"
                        stored.append(m)
                layout = _fused._Layout(it, Node)
                ins = [slot_of[id(a)] for a in layout.inputs]
                outs_i = [slot_of[id(m)] for m in stored]
                inpl = []
                for p, a in enumerate(layout.inputs):
                    if a.shape == it.shape and a.op is not _graph.VIEW:
                        for q, m in enumerate(stored):
                            if m.dtype.itemsize == a.dtype.itemsize:
                                inpl.append((p, q))
                steps_desc.append(_mp.Step(ins, outs_i, inpl, "fused"))
                builders.append(("group", it, layout, stored))
                n_kernels += 1
        internal = [v for i, v in enumerate(values) if v.kind in ("planned", "fresh")
                    and not v.is_output]
        naive = sum(g.dtype.itemsize * _prod(g.shape) for i, g in enumerate(nodes)
                    if g.op not in (_graph.PLACEHOLDER, _graph.LEAF, _graph.VIEW)
                    and i not in out_set)
        for v in values:
            if v.kind == "none":
                v.kind = "external"     # fused away: never stored
                v.nbytes = 0
        mplan = _mp.plan(values, steps_desc, parallel_safe=parallel_safe)
        self.mplan = mplan
        # allocate the planned buffers once
        blocks = [np.empty(max(sz, 1), np.uint8) for sz in mplan.storage_bytes]
        env0: list = [None] * n
        for i, g in enumerate(nodes):
            if g.op is _graph.LEAF:
                env0[i] = g.value
            sid = mplan.storage_of.get(i)
            if sid is not None:
                env0[i] = blocks[sid][:values[i].nbytes].view(g.dtype).reshape(g.shape)
        self.blocks = blocks
        steps = []
        # views whose base is fixed (planned buffer or constant) are made once
        static = set(i for i, g in enumerate(nodes) if env0[i] is not None)
        self._static = static
        for i, g in enumerate(nodes):
            if g.op is _graph.VIEW and slot_of[id(g.args[0])] in static and \
                    values[slot_of[id(g.args[0])]].kind != "fresh":
                b = env0[slot_of[id(g.args[0])]]
                p = g.params
                env0[i] = np.ndarray(p["shape"], p["dtype"], buffer=b, offset=p["offset"],
                                     strides=p["strides"])
                static.add(i)
        view_steps_done = set(static)
        n_single = 0
        numpy_before_kernel = False     # (a NumPy op may warn before a kernel's rerun)
        for b in builders:
            # views read by this step that are not static: realized just before it
            reads = b[1].args if b[0] == "single" else b[2].inputs
            for a in reads:
                if type(a) is Node and a.op is _graph.VIEW and slot_of[id(a)] not in \
                        view_steps_done:
                    steps.append(self._view_step(a))
                    view_steps_done.add(slot_of[id(a)])
            if b[0] == "single":
                steps.append(self._single_step(b[1], values, env0))
            else:
                steps.append(self._group_step(b[1], b[2], b[3], values, env0))
            n_single += b[0] == "single"
            if b[0] != "single" and n_single:
                numpy_before_kernel = True
        for o in outs:
            g = nodes[o]
            if g.op is _graph.VIEW and o not in view_steps_done:
                steps.append(self._view_step(g))
                view_steps_done.add(o)
        self.steps = steps
        self.env0 = env0
        self.in_slots = [int(r) for r in sym.input_refs]
        # inputs read through views must be C-contiguous (views are byte geometries)
        self.contig_slots = sorted({slot_of[id(g.args[0])] for g in nodes
                                    if g.op is _graph.VIEW and
                                    nodes[slot_of[id(g.args[0])]].op is _graph.PLACEHOLDER})
        # outputs: copy those that are not fresh arrays of their own
        self.out_slots = outs
        self.out_copy = [values[o].kind != "fresh" for o in outs]
        self.out_scalar = [nodes[o].shape == () for o in outs]
        self.single = sym.out_tree == "*"
        self.n_kernels = n_kernels
        self._fast = self._make_runner()
        self._options = dict(plan_memory=plan_memory, parallel_safe=parallel_safe,
                             passes=passes)
        self._numpy_plan = None
        self._catch_first = numpy_before_kernel
        self._runner = self._run_checked if n_kernels else self._fast
        unplanned = sum(v.nbytes for v in internal if v.kind == "fresh")
        self._report = {
            "naive_bytes": naive,
            "planned_bytes": sum(mplan.storage_bytes) + unplanned,
            "num_buffers": mplan.num_buffers,
            "buffer_bytes": sum(mplan.storage_bytes),
            # what any plan of this schedule needs (passes/memory_plan.py lower_bound)
            "lower_bound_bytes": mplan.lower_bound_bytes - mplan.fresh_bytes + unplanned,
            "unplanned_bytes": unplanned,
            "output_bytes": sum(values[o].nbytes for o in set(outs)),
            "inplace": len(mplan.inplace),
            "fused_kernels": n_kernels,
            "steps": len(steps),
            "ops": sum(1 for g in nodes if g.op not in (_graph.PLACEHOLDER, _graph.LEAF,
                                                        _graph.VIEW)),
        }
        self._report["ratio"] = (self._report["planned_bytes"] / naive) if naive else 1.0

    # --- step builders ------------------------------------------------------------------
    @staticmethod
    def _can_write_into(g) -> bool:
        op = g.op
        if op.kind == "write":
            return True
        if op.ufunc is not None and g.params is None and op.ufunc.nout == 1 and g.shape != ():
            return True
        if op.name in ("astype", "copy") and g.shape != ():
            return True
        if op.name in _REDUCE_OUT and op.kind == "reduction" and len(g.args) == 1 and \
                set(g.params or {}) <= {"axis", "keepdims", "dtype"}:
            return True
        if op.name in _CONTRACT_OUT and g.params and "tpl" in g.params and g.shape != ():
            k = g.params["tpl"][1]
            return isinstance(k, dict) and "out" not in k
        return False

    def _view_step(self, g):
        i = self.slot_of[id(g)]
        b = self.slot_of[id(g.args[0])]
        p = g.params
        shape, dtype, off, strides = p["shape"], p["dtype"], p["offset"], p["strides"]
        nda = np.ndarray

        def view(env):
            base = env[b]
            if not base.flags.c_contiguous:
                # (a NumPy op may return its operand's layout: views are C byte geometries)
                base = env[b] = np.ascontiguousarray(base)
            env[i] = nda(shape, dtype, buffer=base, offset=off, strides=strides)
        return view

    def _single_step(self, g, values, env0):
        i = self.slot_of[id(g)]
        op = g.op
        get = _args_getter(g.args, self.slot_of)
        planned = values[i].kind == "planned"
        shape, dtype = g.shape, g.dtype
        params = g.params or {}
        empty = np.empty
        if op.kind == "write":
            src = self.slot_of[id(g.args[0])]
            sid_in = self.mplan.storage_of.get(src)
            inplace = planned and sid_in is not None and \
                self.mplan.storage_of.get(i) == sid_in
            impl = op.impl

            def write(env):
                vals = get(env)
                if inplace:
                    buf = vals[0]
                elif planned:
                    buf = env0[i]
                    np.copyto(buf, vals[0])
                else:
                    buf = np.array(vals[0], copy=True)
                vals[0] = buf
                impl(*vals, **params)
                env[i] = buf
            return write
        if not self._can_write_into(g) or not planned:
            if not planned and self._can_write_into(g) and op.ufunc is not None and \
                    g.params is None and g.shape != () and all(type(a) is Node for a in g.args):
                uf = op.ufunc
                if _split.enabled and _prod(shape) >= _split.SPLIT_MIN_COSTLY:
                    into = _split.into

                    def ufunc_fresh_split(env):
                        out = empty(shape, dtype)
                        into(uf, tuple(get(env)), out)
                        env[i] = out
                    return ufunc_fresh_split
                if len(g.args) == 2:
                    s0, s1 = (self.slot_of[id(a)] for a in g.args)

                    def ufunc2_fresh(env):
                        env[i] = uf(env[s0], env[s1], out=empty(shape, dtype))
                    return ufunc2_fresh

                def ufunc_fresh(env):
                    env[i] = uf(*get(env), out=empty(shape, dtype))
                return ufunc_fresh
            impl = op.impl
            red = _REDUCE_OUT.get(op.name) if op.kind == "reduction" and len(g.args) == 1 \
                and type(g.args[0]) is Node and set(params) <= {"axis", "keepdims", "dtype"} \
                else None
            if isinstance(red, type(np.add.reduce)):      # (a ufunc's own reduce method)
                s0 = self.slot_of[id(g.args[0])]
                kw = {"axis": None}       # (NumPy's default; the ufunc method's is 0)
                kw.update(params)

                def generic_reduce(env):
                    a0 = env[s0]
                    env[i] = _owned(red(a0, **kw), [a0], g)
                return generic_reduce
            fn = getattr(impl, "numpy_function", None)
            flat = _flat_template(params["tpl"], g.args, self.slot_of) if fn is not None and \
                set(params) == {"tpl"} else None
            if flat is not None and len(flat[0]) == 2 and not flat[1]:
                (s0, s1), _kw = flat

                def generic_call2(env):
                    a0, a1 = env[s0], env[s1]
                    env[i] = _owned(fn(a0, a1), [a0, a1], g)
                return generic_call2

            def generic(env):
                vals = get(env)
                out = impl(*vals, **params) if params else impl(*vals)
                env[i] = out if isinstance(out, tuple) else _owned(out, vals, g)
            return generic
        buf = env0[i]
        if op.ufunc is not None:
            uf = op.ufunc
            if _split.enabled and _prod(shape) >= _split.SPLIT_MIN_COSTLY:
                into = _split.into     # (large work on two threads, NumPy's result)

                def ufunc_split(env):
                    into(uf, tuple(get(env)), buf)
                return ufunc_split
            if len(g.args) == 2 and all(type(a) is Node for a in g.args):
                s0, s1 = (self.slot_of[id(a)] for a in g.args)

                def ufunc2(env):
                    uf(env[s0], env[s1], out=buf)
                return ufunc2

            def ufunc_(env):
                uf(*get(env), out=buf)
            return ufunc_
        if op.name in ("astype", "copy"):
            s0 = self.slot_of[id(g.args[0])]

            def copy_(env):
                np.copyto(buf, env[s0], casting="unsafe")
            return copy_
        if op.name in _REDUCE_OUT:
            fn = _REDUCE_OUT[op.name]
            s0 = self.slot_of[id(g.args[0])]
            kw = {"axis": None}     # (NumPy's default; a ufunc's reduce method's is 0)
            kw.update(params)

            def reduce_(env):
                fn(env[s0], out=buf, **kw)
            return reduce_
        fn = _CONTRACT_OUT[op.name]
        tpl = params["tpl"]
        flat = _flat_template(tpl, g.args, self.slot_of)
        if flat is not None:
            (s0, s1), kw = flat
            if not kw:
                def contract2(env):
                    fn(env[s0], env[s1], out=buf)
                return contract2

        def contract(env):
            a, k = _fill_deep(tpl, get(env))
            fn(*a, out=buf, **k)
        return contract

    def _group_step(self, group, layout, stored, values, env0):
        slot_of = self.slot_of
        shape = group.shape
        members = group.members
        ins = layout.inputs
        in_slots = [slot_of[id(a)] for a in ins]
        flat = all(a.shape == shape and _c_contiguous(a) for a in ins)
        out_idx = tuple(members.index(m) for m in stored)
        ndim = len(shape)
        parallel = _fused.parallel_for(_prod(shape), len(members))
        source = _fused._render(group, layout, Node, len(ins), out_idx, ndim, flat, parallel, ())
        consts = list(layout.const_arrays)
        out_slots = [slot_of[id(m)] for m in stored]
        fresh = [values[s].kind == "fresh" for s in out_slots]
        # sample arguments give the kernel's types; compile now (this is jit)
        sample_in = [np.zeros(a.shape, a.dtype) for a in ins]
        if flat:
            sample_in = [s.reshape(-1) for s in sample_in]
        sample_out = [np.zeros(shape, m.dtype) for m in stored]
        if flat:
            sample_out = [s.reshape(-1) for s in sample_out]
        kernel = _cpu.get_kernel(source, sample_in + consts + sample_out, block=True)
        if kernel is None:
            return self._group_numpy(group, stored, values, env0)
        bcast = [a.shape != shape for a in ins]
        if flat and ndim == 1:
            flat = False      # 1-D: the arrays are already flat (no reshape per call)
        static_outs = [None if fr else (env0[s].reshape(-1) if flat else env0[s])
                       for fr, s in zip(fresh, out_slots)]
        # generated Python for the call: no per-call list building or loops
        ns = {"kernel": kernel, "empty": np.empty, "bt": np.broadcast_to, "shape": shape}
        lines = ["def run(env):"]
        call = []
        for k, (s, b) in enumerate(zip(in_slots, bcast)):
            if b:
                call.append(f"bt(env[{s}], shape)")
            elif flat:
                call.append(f"env[{s}].reshape(-1)")
            else:
                call.append(f"env[{s}]")
        for j, c in enumerate(consts):
            ns[f"c{j}"] = c
            call.append(f"c{j}")
        for k, s in enumerate(out_slots):
            if fresh[k]:
                ns[f"dt{k}"] = stored[k].dtype
                lines.append(f"    o{k} = empty(shape, dt{k})")
                call.append(f"o{k}.reshape(-1)" if flat else f"o{k}")
            else:
                ns[f"so{k}"] = static_outs[k]
                call.append(f"so{k}")
        lines.append(f"    flags = kernel({', '.join(call)})")
        ns.update(must_rerun=_fpflags.must_rerun, from_nan=_fpflags.maybe_from_nan_compare,
                  FPRerun=_FPRerun, nodes=group.nodes())
        lines.append("    if flags and must_rerun(flags) and not from_nan(flags, nodes, "
                     f"[{', '.join(f'env[{s}]' for s in in_slots)}]):")
        lines.append("        raise FPRerun")
        for k, s in enumerate(out_slots):
            if fresh[k]:
                lines.append(f"    env[{s}] = o{k}")
        exec(compile("\n".join(lines) + "\n", "<lazynp.jit fused step>", "exec"), ns)
        return ns["run"]

    def _group_numpy(self, group, stored, values, env0):
        """Fallback when the kernel cannot be compiled: members one by one on NumPy."""
        slot_of = self.slot_of
        plan = []
        for m in group.members:
            plan.append((slot_of[id(m)], m.op.impl, _args_getter(m.args, slot_of), m.params,
                         m))
        stored_slots = {slot_of[id(m)]: values[slot_of[id(m)]].kind for m in stored}

        def run(env):
            for i, impl, get, params, m in plan:
                vals = get(env)
                out = impl(*vals, **params) if params else impl(*vals)
                out = _own(out, vals, m)
                kind = stored_slots.get(i)
                if kind == "planned":
                    np.copyto(env0[i], out)
                    out = env0[i]
                env[i] = out
        return run

    # --- running --------------------------------------------------------------------------
    def _make_runner(self):
        """Generate the per-call function: inputs into slots, steps, outputs out."""
        ns = {"env0": self.env0, "np": np, "array": np.array}
        lines = ["def run(leaves):", "    env = env0.copy()"]
        if self.in_slots:
            lhs = ", ".join(f"env[{s}]" for s in self.in_slots)
            lines.append(f"    {lhs}, = leaves")
        for s in self.contig_slots:
            lines.append(f"    if not env[{s}].flags.c_contiguous:")
            lines.append(f"        env[{s}] = np.ascontiguousarray(env[{s}])")
        for k, step in enumerate(self.steps):
            ns[f"s{k}"] = step
            lines.append(f"    s{k}(env)")
        outs = [f"array(env[{s}], copy=True)" if cp else f"env[{s}]"
                for s, cp in zip(self.out_slots, self.out_copy)]
        lines.append(f"    return [{', '.join(outs)}]")
        exec(compile("\n".join(lines) + "\n", "<lazynp.jit plan>", "exec"), ns)
        return ns["run"]

    def run(self, leaves: list) -> list:
        """Run on NumPy arrays (one per input, in order); returns NumPy arrays that share
        no memory with the plan's buffers."""
        return self._runner(leaves)

    def _run_checked(self, leaves: list) -> list:
        """The fused plan; when a kernel raised a floating-point flag NumPy would warn (or
        raise) about, the call runs again on the unfused plan, whose NumPy ops warn exactly
        as NumPy does (the plan's inputs are never written, so they are intact)."""
        if not self._catch_first:
            try:
                return self._fast(leaves)
            except _FPRerun:
                return self._rerun(leaves)
        # (NumPy-run steps before the flagged kernel warn in the first run too: those
        # warnings are given only when no rerun follows)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                out = self._fast(leaves)
            except _FPRerun:
                out = None
        if out is not None:
            for w in caught:
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
            return out
        return self._rerun(leaves)

    def _rerun(self, leaves: list) -> list:
        _cpu.STATS["fused_groups_fp_rerun"] += 1
        if self._numpy_plan is None:
            self._numpy_plan = Plan(self.source, fuse=False, **self._options)
        return self._numpy_plan.run(leaves)

    def memory_report(self) -> dict:
        return dict(self._report)


#: A row-local graph (passes/batch_tile.py) whose intermediates take at least this many
#: bytes runs in slices of its batch, sized so that twice its largest intermediate's rows
#: (a lower bound of a slice's live memory) take at most ``TILE_BYTES``: a slice's working
#: set stays in cache, and graphs whose intermediates are all small are not sliced at all.
TILE_MIN_BYTES = 1 << 20
TILE_BYTES = 1 << 20
MAX_TILES = 16


def _naive_bytes(sym) -> int:
    """Every op's result in its own buffer (outputs, inputs, constants and views excluded)."""
    outs = {int(o) for o in sym.output_refs}
    return sum(n.dtype.itemsize * _prod(n.shape) for i, n in enumerate(sym.nodes)
               if n.op not in ("placeholder", "leaf", "view") and i not in outs)


class TiledPlan:
    """A plan for a row-local graph that runs it ``chunk`` rows of its batch at a time: one
    plan compiled for ``chunk`` rows (its buffers allocated once) writes each output's
    rows.  Same interface as :class:`Plan`."""

    def __init__(self, sym, N: int, batched: list, chunk: int, naive: int, optimized, **kw):
        self.source = sym
        self.N, self.chunk = N, chunk
        self.inner = Plan(_tile.tile(sym, batched, chunk), **kw)
        self._options = kw
        self._untiled = None
        self.symbol = optimized                       # (the inner plan's has chunk rows)
        self.in_batched = [batched[int(r)] for r in sym.input_refs]
        outs = [int(o) for o in sym.output_refs]
        self.out_specs = [(sym.nodes[o].shape, sym.nodes[o].dtype) for o in outs]
        self.out_scalar = [False] * len(outs)       # (batched outputs have a batch axis)
        self.single = sym.out_tree == "*"
        self._runner = self.run
        r = dict(self.inner.memory_report())
        r.update(naive_bytes=naive, batch_tiles=N // chunk, tile_rows=chunk,
                 ratio=r["planned_bytes"] / naive if naive else 1.0)
        self._report = r

    def run(self, leaves: list) -> list:
        outs = [np.empty(shape, dtype) for shape, dtype in self.out_specs]
        run = self.inner._runner
        c = self.chunk
        batched = self.in_batched
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for i in range(0, self.N, c):
                res = run([x[i:i + c] if b else x for x, b in zip(leaves, batched)])
                for o, v in zip(outs, res):
                    o[i:i + c] = v
        if caught:
            # each slice warns again, and two ops with one message look alike: the call
            # runs untiled, whose ops warn once each, as NumPy's do
            if self._untiled is None:
                self._untiled = Plan(self.source, **self._options)
            return self._untiled.run(leaves)
        return outs

    def memory_report(self) -> dict:
        return dict(self._report)


def _tiling(sym):
    """``(N, batched, chunk, naive, optimized sym)`` when ``sym`` should run in slices of
    its batch."""
    rows = _tile.batch_rows(sym)
    if rows is None:
        return None
    N, batched = rows
    opt = _pipeline.optimize(sym)
    naive = _naive_bytes(opt)
    if naive < TILE_MIN_BYTES:
        return None
    largest = max((n.dtype.itemsize * _prod(n.shape) for n in opt.nodes
                   if n.op not in ("placeholder", "leaf", "view")), default=0)
    chunk = _tile.choose_chunk(N, 2 * largest // N, TILE_BYTES)
    if chunk >= N or N // chunk > MAX_TILES:
        return None         # (not needed, or so many slices that their calls would cost more)
    return N, batched, chunk, naive, opt


def compile_plan(sym, tile: bool = True, **kw):
    """A :class:`Plan` for ``sym``, or a :class:`TiledPlan` when it is row-local along a
    batch and large enough (``tile=False``: never tiled)."""
    STATS["plans"] += 1
    t = _tiling(sym) if tile else None
    if t is not None:
        return TiledPlan(sym, *t, **kw)
    return Plan(sym, **kw)


def prepare_leaf(x) -> np.ndarray:
    """The C-contiguous NumPy value a plan reads for the argument ``x``."""
    if type(x) is np.ndarray:
        return x if x.flags.c_contiguous else np.ascontiguousarray(x)
    if isinstance(x, ndarray):
        v = x._value()
        return v if v.flags.c_contiguous else np.ascontiguousarray(v)
    return np.ascontiguousarray(x)


def wrap_outputs(vals: list, scalars: list) -> list:
    """A plan's NumPy results as lazynp arrays (``scalars``: which are 0-d results)."""
    leaf = _graph.leaf
    from_node = ndarray._from_node
    return [from_node(leaf(v), sc) if type(v) is np.ndarray else v
            for v, sc in zip(vals, scalars)]


def run_symbol(sym, flat: list):
    """Call a Symbol on arrays: one plan per input shapes/dtypes, kept on the Symbol."""
    leaves = [prepare_leaf(x) for x in flat]
    key = tuple((v.shape, v.dtype) for v in leaves)
    plan = sym._plans.get(key)
    if plan is None:
        names = sym.inputs
        spec = sym.specialize({nm: (v.shape, v.dtype) for nm, v in zip(names, leaves)})
        plan = compile_plan(spec)
        sym._plans[key] = plan
    outs = wrap_outputs(plan.run(leaves), plan.out_scalar)
    return _symbol.tree_unflatten(sym.out_tree, iter(outs))


def _call_symbol(self, *args, **kwargs):
    """Run the Symbol on arrays.  Returns lazynp arrays in the traced output structure.
    Called on pending lazy arrays (inside a trace), replays its ops lazily instead."""
    flat = self._flat_inputs(args, kwargs)
    if any(isinstance(x, ndarray) and x._node().state == _graph.PENDING for x in flat):
        outs = self.replay(*flat)
        return _symbol.tree_unflatten(self.out_tree, iter(outs))
    return run_symbol(self, flat)


_add_symbol_member("__call__", _call_symbol)
