"""Small elementwise flushes as one cached kernel, keyed by a structure hashed while recording.

A flush of a few thousand elements is too small for the fusion pass to pay off: planning a
100-node graph in Python costs more than NumPy's 100 calls.  So the structure is built
incrementally instead.  When an elementwise ufunc node is recorded, :func:`structure` interns
``(op, dtype, argument structures)`` into a small integer; a pending argument contributes its
own structure id (its expression is inlined), a computed array contributes its dtype (it is a
kernel input), a Python scalar its type (its value is a kernel constant).  The node keeps
``tree = (structure id, inputs, float constants, int constants, tree size, generation)``, each
tuple the concatenation of its arguments' tuples, so at flush time the kernel, its inputs and
its constants are known without walking the graph.

A pending value read twice is computed once.  The recorder marks a structure ``"dup"`` when
it inlines a pending node that something else reads too (:data:`may_share`); such a tree's
flush walks it (:func:`dag`) to find which reads repeat a node computed earlier in the loop,
and its kernel source is keyed by that pattern as well as by the structure (two trees of one
structure, one reading a node twice and one reading two equal-looking nodes with other
constants, must not share a source).  Sizes still count repeats (``MAX_TREE``), so a
recurrence such as Horner's rule (``dp = dp * x + p; p = p * x + a``) flushes every few
steps instead of growing without bound.  A kernel also returns the floating-point
exception flags it raised (kernels/fpflags.py): when one was, its result is discarded and the
flush runs on NumPy, which raises the exact warnings (overflow, divide by zero, invalid
value).  Infinities and NaNs that raise no flag (``inf + 1``, a NaN input) keep the kernel.

The same kernels serve medium work (lazynp.core.policy.decide): strided views of a grid are read
through a table of offsets and strides, inputs may broadcast, the result may be written into
an assigned region, and pending nodes the program holds are written by the same loop.
"""
from __future__ import annotations

import numpy as np

from .._base import counters as _counters, native as _native
from . import cpu, exprs, fpflags, fused

#: trees above this many nodes are left to the ordinary flush
MAX_TREE = 256

#: A node's ``tree``, its tree-kernel structure (set by the recorder,
#: :func:`lazynp.core.trees.tree_structure`), is the tuple ``(structure id, input nodes,
#: float constants, int constants, size in nodes, generation)``; these name its fields.
TREE_ID, TREE_INPUTS, TREE_FLOATS, TREE_INTS, TREE_SIZE, TREE_GENERATION = range(6)


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
        with_libm.clear()
        may_share.clear()
        _plans.clear()
        _nd_sources.clear()
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
            inlined = _inlined_sids(key)
            if node.op.calls_libm and "sq" not in key or \
                    any(c in with_libm for c in inlined):
                with_libm.add(sid)
            if key[-1] == "dup" or any(c in may_share for c in inlined):
                may_share.add(sid)
    structure_ids[key] = sid
    return sid


#: structure ids of trees in which a pending node may be read twice (see the module's
#: docstring): their flushes find the repeats (:func:`dag`)
may_share: set = set()

#: structure ids of trees with a libm math function (``Op.calls_libm``: exp, tanh, sin...):
#: NumPy's loops may give other bits, so from medium sizes they are left to the fusion pass,
#: which leaves its SIMD functions to NumPy (passes/fusion.py)
with_libm: set = set()


def _inlined_sids(key: tuple) -> list:
    """The structure ids of the pending arguments a structure key inlines (``k >= 0`` or
    ``("t", k, remap)``; a negative int is a repeated input)."""
    return [k[1] if type(k) is tuple else k for k in key[1:]
            if type(k) is int and k >= 0 or type(k) is tuple and k[0] == "t"]


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


def broadcasts(s: tuple, shape: tuple) -> bool:
    """An input of shape ``s`` broadcasts to ``shape`` (it is read at stride 0 there)."""
    if len(s) > len(shape):
        return False
    return all(a == 1 or a == b for a, b in zip(s[::-1], shape[::-1]))


def squares(e, dtype) -> bool:
    """``x ** e`` (a scalar exponent) is NumPy's square: the kernel computes ``x * x``
    (NumPy's scalar-power fast path; other exponents are no tree: NumPy runs them)."""
    return type(e) in _CONSTANTS and e == 2 and dtype.kind == "f"


def run(target, tree=None, value_of=None, out=None, store=(), vals=None,
        walked=None) -> bool | None:
    """Compute ``target`` with its tree kernel (``tree``: its tree structure, read once by the
    caller: a node computed meanwhile drops it; ``value_of``: an input node's NumPy value,
    views realized); None when its kernel is not ready (compiling, or it cannot be
    compiled), False when it cannot run for another reason (the arguments do not fit, or a
    floating-point flag NumPy would warn about was raised).  ``out``: a NumPy array of ``target``'s shape
    and dtype to write the result into (that none of the inputs overlaps is the caller's
    to ensure); by default a new array.  ``store``: pending nodes inside the tree whose
    values are wanted too (arrays the program still holds): the kernel writes them as well
    and sets their ``value``.  ``vals``: the inputs' values when the caller has them;
    ``walked``: the tree's :func:`dag` when the caller has it (a walk is 20-50 us in a tree
    of 30 ops).

    Inputs that are all C-contiguous and writeable run in one flat loop; others (views
    with strides: a stencil's shifted slices of a grid) in one loop per dimension."""
    if tree is None:
        tree = target.tree
        if tree is None:
            return False
    sid, ins, kf, ki = tree[:TREE_SIZE]
    order = sig = None
    if sid in may_share:
        order, sig = dag(target, ins) if walked is None else walked
    if vals is None:
        vals = [x.value for x in ins] if value_of is None else [value_of(x) for x in ins]
    shape = target.shape
    flat = out is None or out.flags.c_contiguous
    for v in vals:
        if not v.flags.c_contiguous or not v.flags.writeable or v.shape != shape:
            flat = False
            break
    consts = [_constants(kf, _F64) if kf else _EMPTY_F, _constants(ki, _I64) if ki else _EMPTY_I]
    if out is None:
        out = np.empty(shape, target.dtype)
    extra = [np.empty(shape, m.dtype) for m in store]
    # (without repeated nodes, the walk's order is the dag's)
    pos = _positions(target, ins, store, walked[0] if order is None and walked else order) \
        if store else ()
    if flat:
        args = [v.reshape(-1) for v in vals] + consts + [o.reshape(-1) for o in [out] + extra]
        pkey = (sid, pos, sig) if pos or sig is not None else sid
        plan = _plans.get(pkey)
        if plan is None:
            plan = [_render(target, len(ins), 0, store_at=pos, sig=sig), None]
            _plans[pkey] = plan
        kernel = plan[1]
        if kernel is None:
            kernel = plan[1] = cpu.get_kernel(plan[0], args)
    else:
        ndim = len(shape)
        table = fused.strided_inputs(vals + [out] + extra, shape)
        if table is not None:
            bufs = table[0]
            args = bufs[:len(vals)] + consts + bufs[len(vals):] + [shape, table[1]]
        elif any(v.shape != shape for v in vals):
            return False        # (a broadcast input is read through the table only)
        else:
            args = vals + consts + [out] + extra
        # each operand's innermost stride as a class: 0 (broadcast), 1 (contiguous rows) or
        # any; the kernel spells the first two out, so its inner loop vectorizes
        inner = _stride_classes(table[1], ndim) if table is not None and ndim else ""
        key = (sid, ndim, table is not None, pos, inner, sig)
        source = _nd_sources.get(key)
        if source is None:
            source = _nd_sources[key] = _render(target, len(ins), ndim, table is not None,
                                                pos, inner, sig)
        # (views come in several layouts, each its own compiled signature)
        kernel = cpu.get_kernel(source, args)
    if kernel is None:
        return None             # (not ready yet: the caller may run the ops one by one)
    flags = kernel(*args)
    if flags and not fpflags.maybe_from_nan_compare(
            flags, order if order is not None else walk(target, ins), vals):
        # a floating-point condition NumPy warns about (trees are recorded under NumPy's
        # default errstate): NumPy reruns the work, for its exact warnings
        STATS["tree_kernels_rejected"] += 1
        return False
    STATS["tree_kernels_run"] += 1
    target.value = out
    for m, o in zip(store, extra):
        m.value = o
    return True


def walk(target, ins) -> list:
    """The tree's nodes in the order its kernel computes them (post-order, arguments left
    to right; a pending node read twice is computed twice): inputs are not walked."""
    return _post_order(target, ins, False)[0]


def dag(target, ins) -> tuple:
    """``(order, sig)``: the tree's distinct pending nodes in the order its kernel computes
    them when each is computed once (post-order, arguments left to right), and where reads
    repeat one: ``((read, k), ...)``, the ``read``-th pending argument met in that walk
    (counted from 1, repeats included) being node ``order[k]`` again.  With the structure
    id, ``sig`` fixes the kernel's source (:func:`_render`)."""
    return _post_order(target, ins, True)


def _post_order_py(target, ins, once: bool) -> tuple:
    """:func:`walk` (``once`` False: repeats walked again) and :func:`dag`.  (Iterative: a
    recursive closure would be a reference cycle holding the nodes.)"""
    index = {id(x) for x in ins}
    done: dict = {}
    order = []
    sig = []
    reads = 0
    stack = [(target, 0)]
    while stack:
        node, i = stack.pop()
        args = node.args
        while i < len(args):
            a = args[i]
            i += 1
            if type(a) not in _CONSTANTS and id(a) not in index:
                reads += 1
                k = done.get(id(a)) if once else None
                if k is not None:
                    sig.append((reads, k))
                    continue
                stack.append((node, i))
                stack.append((a, 0))
                break
        else:
            done[id(node)] = len(order)
            order.append(node)
    return order, tuple(sig)


#: :func:`walk` and :func:`dag`'s walk (the C helper when built)
_post_order = _native.ext.post_order if _native.ext is not None else _post_order_py


def _positions(target, ins, store, order=None) -> tuple:
    """Where each of ``store`` is first computed in :func:`walk`'s order (``order``: the
    kernel's order when it computes each node once, :func:`dag`)."""
    first = {}
    for k, node in enumerate(walk(target, ins) if order is None else order):
        first.setdefault(id(node), k)
    return tuple(first[id(m)] for m in store)


_CONSTANTS = (float, int, np.float64)
#: (structure id, ndim, strided, stored positions, inner stride classes) -> kernel source
#: with one loop per dimension
_nd_sources: dict = {}


_STRIDE_CLASS = {0: "z", 1: "u"}


#: per dtype character, a tree's constants (a tuple) -> them as a kernel argument
_constant_arrays: dict = {_F64.char: {}, _I64.char: {}}


def _constants(values: tuple, dtype) -> np.ndarray:
    """``values`` as an array for a kernel, which only reads it (a loop's statement passes
    the same constants each time: made once).  Equal tuples hold the same numbers but for
    zeros (``-0.0 == 0.0``): those are made each time."""
    cache = _constant_arrays[dtype.char]
    a = cache.get(values)
    if a is None:
        a = np.array(values, dtype)
        if 0 not in values:
            if len(cache) > 4096:
                cache.clear()
            cache[values] = a
    return a


def _stride_classes(table, column: int) -> str:
    """Per row of a ``fused.strided_inputs`` table, the class of its stride in ``column``
    (``z`` 0, ``u`` 1, ``s`` other; the C helper when built)."""
    if _native.ext is not None:
        return _native.ext.stride_classes(table, column)
    return "".join(_STRIDE_CLASS.get(int(x), "s") for x in table.view(np.int64)[:, column])


def _render(target, n_in: int, ndim: int, strided: bool = False, store_at: tuple = (),
            inner: str = "", sig: tuple | None = None) -> str:
    """Kernel source for ``target``'s tree; operands are numbered in the order the recording
    concatenated them (depth first, arguments left to right).  ``ndim`` 0: one flat loop
    over C-contiguous inputs; else one loop per dimension: ``strided``, inputs and output
    as flat buffers with a table ``xs`` of offsets and strides (row ``n_in``: the output's;
    unsigned: no negative-index test, so the inner loop vectorizes), else arrays of any
    strides indexed by position.  ``store_at``: the positions (:func:`walk`) of nodes
    whose values are written too, to outputs ``o1``, ``o2``... (table rows after ``o0``'s).
    ``inner``: per table row, its innermost stride's class (``z`` 0, ``u`` 1, ``s`` other).
    ``sig``: the reads that repeat a node computed before (:func:`dag`): they take its
    temporary, and the constants of its subtree are skipped."""
    lines: list = []
    counters = {"f": 0, "i": 0, "t": 0, "reads": 0}
    repeats = dict(sig) if sig else {}
    # inputs are numbered by identity: trees of one structure share their pattern of repeats
    index = {id(x): k for k, x in enumerate(target.tree[TREE_INPUTS])}
    loaded: set = set()
    stores: list = []

    def at(k: int) -> str:
        if ndim == 0:
            return "i"
        if strided:
            terms = [f"u{d} * s{k}_{d}" for d in range(ndim - 1)]
            c = inner[k] if inner else "s"
            if c == "u":
                terms.append(f"u{ndim - 1}")
            elif c == "s":
                terms.append(f"u{ndim - 1} * s{k}_{ndim - 1}")
            return " + ".join([f"b{k}"] + terms)
        return ", ".join(f"i{d}" for d in range(ndim))

    def emit(node) -> tuple:
        names, dts, keys = [], [], []
        square = node.op.name == "power" and type(node.args[1]) in _CONSTANTS
        for a in node.args[:1] if square else node.args:
            t = type(a)
            if t is float or t is np.float64:
                names.append(f"kcf[{counters['f']}]")
                counters["f"] += 1
                dts.append(_F64)
                keys.append(float if t is float else _F64)
            elif t is int:
                names.append(f"kci[{counters['i']}]")
                counters["i"] += 1
                dts.append(_I64)
                keys.append(int)
            elif id(a) not in index:          # (a pending node: inlined)
                counters["reads"] += 1
                k = repeats.get(counters["reads"])
                if k is not None:             # (computed before: its temporary)
                    counters["f"] += len(a.tree[TREE_FLOATS])
                    counters["i"] += len(a.tree[TREE_INTS])
                    names.append(f"t{k}")
                    dts.append(a.dtype)
                    keys.append(a.dtype)
                    continue
                name, dt = emit(a)
                names.append(name)
                dts.append(dt)
                keys.append(dt)
            else:
                k = index[id(a)]
                if k not in loaded:
                    loaded.add(k)
                    lines.append(f"v{k} = x{k}[{at(k)}]")
                names.append(f"v{k}")
                dts.append(a.dtype)
                keys.append(a.dtype)
        k = counters["t"]
        counters["t"] += 1
        if square:
            x = exprs.cast(names[0], dts[0], node.dtype)
            lines.append(f"t{k} = ({x} * {x})")
        else:
            lines.append(f"t{k} = {exprs.node_expr(node, names, dts, keys, False)}")
        if k in store_at:
            j = store_at.index(k) + 1
            stores.append(f"o{j}[{at(n_in + j)}] = t{k}")
        return f"t{k}", node.dtype

    result, _ = emit(target)
    emit = None     # (the recursive closure is a reference cycle holding the nodes)
    n_out = 1 + len(store_at)
    params = [f"x{k}" for k in range(n_in)] + ["kcf", "kci"] + [f"o{j}" for j in range(n_out)]
    if strided:
        params += ["shp", "xs"]
    src = ["import numpy as np", "from numba import njit",
           "from lazynp.kernels.fpflags import fp_clear, fp_test", ""]
    if any("_fexp(" in line for line in lines):
        src.append(cpu._PRELUDE_EXP)
    src += ["@njit(nogil=True, cache=True, error_model='numpy')",
            f"def kernel({', '.join(params)}):",
            "    fp_clear()"]
    if strided:
        for k in range(n_in + n_out):
            src.append(f"    b{k} = xs[{k}, 0]")
            src += [f"    s{k}_{d} = xs[{k}, {d + 1}]" for d in range(ndim)]
    if ndim == 0:
        src.append("    for i in range(o0.shape[0]):")
    else:
        for d in range(ndim):
            pad = "    " * (d + 1)
            src.append(pad + f"for i{d} in range(" +
                       (f"shp[{d}]" if strided else f"o0.shape[{d}]") + "):")
            if strided:
                src.append(pad + f"    u{d} = np.uint64(i{d})")
    pad = "    " * (max(ndim, 1) + 1)
    src += [pad + line for line in lines]
    src += [pad + line for line in stores]
    src += [pad + f"o0[{at(n_in)}] = {result}", "    return fp_test()", ""]
    return "\n".join(src)


_counters.register_table(STATS)
