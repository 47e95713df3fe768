"""Small elementwise flushes as one cached kernel, keyed by a structure hashed while recording.

A flush of a few thousand elements is too small for the fusion pass to pay off: planning a
100-node graph in Python costs more than NumPy's 100 calls.  So the structure is built
incrementally instead.  When an elementwise ufunc node is recorded, :func:`structure` interns
``(op, dtype, argument structures)`` into a small integer; a pending argument contributes its
own structure id (its expression is inlined), a computed array contributes its dtype (it is a
kernel input), a Python scalar its type (its value is a kernel constant).  The node keeps
``fx = (structure id, inputs, float constants, int constants, tree size, generation)``, each
tuple the concatenation of its arguments' tuples, so at flush time the kernel, its inputs and
its constants are known without walking the graph.

The tree is a tree: a pending value read twice is computed twice (sizes are capped, so a DAG
with much sharing is left to the ordinary flush).  A kernel also reports whether every float
intermediate stayed finite; when one did not, its result is discarded and the flush runs on
NumPy, which raises the exact warnings (overflow, divide by zero, invalid value).
"""
from __future__ import annotations

import numpy as np

from . import cpu, exprs

#: trees above this many nodes are left to the ordinary flush
MAX_TREE = 256

_F64 = np.dtype(np.float64)
_I64 = np.dtype(np.int64)
_EMPTY_F = np.empty(0, _F64)
_EMPTY_I = np.empty(0, _I64)

structure_ids: dict = {}      # structure key -> id, or None when the node cannot be a tree kernel
_plans: dict = {}    # id -> [source, compiled dispatcher or None]
STATS = {"tree_kernels_run": 0, "tree_kernels_rejected": 0}


def structure(key: tuple, node) -> int | None:
    """The id of structure ``key`` for ``node``, or None when such a node cannot be part of a
    tree kernel.  The decision is made once per key.

    ``key`` is ``(op, *argument keys)``: an int >= 0 (an inlined argument's structure),
    ``("t", id, input remap)`` (the same, its inputs renumbered), a dtype (a new input), a
    negative int ``~k`` (input ``k`` again), ``float`` or ``int`` (a constant).  The node's
    dtype follows from the op and the argument dtypes (NumPy's type resolution)."""
    sid = structure_ids.get(key, -1)
    if sid != -1:
        return sid
    if len(structure_ids) > 100_000:       # programs that build ever new structures: start over
        structure_ids.clear()              # (cleared in place: the recorder holds a reference)
        _plans.clear()
    sid = None
    dts = [_value_dtype(a) for a in node.args]
    if node.dtype in exprs.SUPPORTED and node.dtype.kind != "c" and \
            all(d in exprs.SUPPORTED and d.kind != "c" for d in dts):
        names = [f"a{i}" for i in range(len(dts))]
        keys = [type(a) if type(a) in (float, int) else a.dtype for a in node.args]
        try:
            ok = exprs.node_expr(node, names, dts, keys, _const_exponent(node)) is not None
        except Exception:
            ok = False
        if ok:
            sid = _next_id[0]
            _next_id[0] += 1
    structure_ids[key] = sid
    return sid


_next_id = [0]


def merge_inputs(ins: tuple, more: tuple) -> tuple:
    """``ins`` extended by the inputs of ``more`` it lacks, and where each of ``more`` landed."""
    remap = []
    for x in more:
        if x in ins:
            remap.append(ins.index(x))
        else:
            remap.append(len(ins))
            ins += (x,)
    return ins, tuple(remap)


def _value_dtype(a) -> np.dtype:
    t = type(a)
    if t is float:
        return _F64
    if t is int:
        return _I64
    return a.dtype


def _const_exponent(node) -> bool:
    return node.op.name == "power" and type(node.args[1]) in (float, int)


def run(target, pending_state: int, fx=None) -> bool:
    """Compute ``target`` with its tree kernel (``fx``: its tree structure, read once by the
    caller: a node computed meanwhile drops it); False when it cannot run now (no kernel yet,
    the arguments do not fit, or a float intermediate was not finite)."""
    if fx is None:
        fx = target.fx
        if fx is None:
            return False
    sid, ins, kf, ki = fx[:4]
    plan = _plans.get(sid)
    vals = []
    for x in ins:
        v = x.value
        if v.ndim != 1:
            v = v.reshape(-1)
        if not v.flags.writeable:
            return False
        vals.append(v)
    out = np.empty(vals[0].shape[0], target.dtype)
    args = vals + [np.array(kf, _F64) if kf else _EMPTY_F,
                   np.array(ki, _I64) if ki else _EMPTY_I, out]
    if plan is None:
        plan = _plans[sid] = [_render(target, pending_state, len(ins)), None]
    kernel = plan[1]
    if kernel is None:
        kernel = plan[1] = cpu.get_kernel(plan[0], args)
        if kernel is None:
            return False
    if not kernel(*args):
        STATS["tree_kernels_rejected"] += 1
        return False
    STATS["tree_kernels_run"] += 1
    target.value = out if target.shape == out.shape else out.reshape(target.shape)
    return True


def _render(target, pending_state: int, n_in: int) -> str:
    """Kernel source for ``target``'s tree; operands are numbered in the order the recording
    concatenated them (depth first, arguments left to right)."""
    lines: list = []
    checks: list = []
    counters = {"f": 0, "i": 0, "t": 0}
    # inputs are numbered by identity: trees of one structure share their pattern of repeats
    index = {id(x): k for k, x in enumerate(target.fx[1])}
    loaded: set = set()

    def emit(node) -> tuple:
        names, dts, keys = [], [], []
        for a in node.args:
            t = type(a)
            if t is float:
                names.append(f"kcf[{counters['f']}]")
                counters["f"] += 1
                dts.append(_F64)
                keys.append(float)
            elif t is int:
                names.append(f"kci[{counters['i']}]")
                counters["i"] += 1
                dts.append(_I64)
                keys.append(int)
            elif a.state == pending_state:
                name, dt = emit(a)
                names.append(name)
                dts.append(dt)
                keys.append(dt)
            else:
                k = index[id(a)]
                if k not in loaded:
                    loaded.add(k)
                    lines.append(f"v{k} = x{k}[i]")
                names.append(f"v{k}")
                dts.append(a.dtype)
                keys.append(a.dtype)
        k = counters["t"]
        counters["t"] += 1
        lines.append(f"t{k} = {exprs.node_expr(node, names, dts, keys, _const_exponent(node))}")
        if node.dtype.kind == "f":
            checks.append(f"(t{k} - t{k})")
        return f"t{k}", node.dtype

    result, _ = emit(target)
    params = [f"x{k}" for k in range(n_in)] + ["kcf", "kci", "o0"]
    src = ["import numpy as np", "from numba import njit", ""]
    if any("_fexp(" in line for line in lines):
        src.append(cpu._PRELUDE_EXP)
    src += ["@njit(nogil=True, cache=True, error_model='numpy')",
            f"def kernel({', '.join(params)}):",
            "    bad = 0",
            "    for i in range(o0.shape[0]):"]
    src += ["        " + line for line in lines]
    if checks:
        # an integer OR keeps the loop vectorizable (a float accumulator would not)
        src.append(f"        bad |= np.int64(({' + '.join(checks)}) != 0.0)")
    src += [f"        o0[i] = {result}", "    return bad == 0", ""]
    return "\n".join(src)
