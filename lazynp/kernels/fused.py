"""Running a fused group: gather inputs, pick a kernel layout, allocate only live outputs.

Layout: *flat* (one 1-D loop) when every array input has the group's shape and is
C-contiguous, else *nd* (a loop nest).  In the nd layout each input is read from the flat
buffer of the C-contiguous array that owns its memory, at an offset and element strides
(broadcast dimensions: stride 0; ``x[:, 1:-1]``-style views: their own strides), with
unsigned index arithmetic: Numba then knows every load's address and LLVM vectorizes the
inner loop (a 2-D stencil of 260k elements: 420 us through Numba's generic strided arrays,
105 us so).  Strides of 0 and 1 element are compiled in, others read at run time
(:func:`stride_kinds`; part of the kernel's key): a broadcast load then has no term for the
inner loop's index and LLVM hoists it out of the loop.  Inputs whose memory is not laid
out that way (an owner that is not C-contiguous, strides that are not whole elements) are
passed as strided arrays.  A group whose kernel is not compiled yet runs node by node on
NumPy while the kernel compiles in the background.  A sum of a product of two arrays that
is a tensor contraction runs through BLAS instead (kernels/contraction.py).
"""
from __future__ import annotations

import numpy as np

from .._base import native as _native
from . import contraction, cpu, exprs, fpflags, pool

#: below this many elements a kernel runs serially: waking the parallel threads costs
#: 0.1-0.6 ms here, and one thread already streams a memory-bound kernel of 200k elements
#: as fast as two (measured after 1 ms of other work: 176 vs 174 us; 512k: 274 vs 415 us)
PARALLEL_MIN = 1 << 19
#: ... unless the group does this much work (elements x nodes): more arithmetic per element
PARALLEL_MIN_WORK = 1 << 20


def parallel_for(size: int, n_nodes: int) -> bool:
    """Whether a fused kernel of ``n_nodes`` nodes over ``size`` elements runs in parallel."""
    return size >= PARALLEL_MIN or size * n_nodes >= PARALLEL_MIN_WORK


def _prod(shape) -> int:
    p = 1
    for s in shape:
        p *= s
    return p


class _Layout:
    """Per-group numbering of inputs, constants and outputs; ``key`` is the structure.

    Scalar constants are packed into one array per dtype (``kc_<dtype>``) so a kernel is
    reused when only constant values change and is called with few arguments.
    """

    __slots__ = ("inputs", "const_arrays", "const_names", "key", "members")

    def __init__(self, group, node_type):
        members = group.members
        self.members = members
        self.inputs = []
        consts: dict = {}       # value dtype name -> list of values
        in_index: dict = {}
        member_index = {id(m): k for k, m in enumerate(members)}
        key = []
        app = key.append
        for k, m in enumerate(members):
            app(m.op.name)
            app(m.dtype)
            if _squares(m, node_type):
                app("x*x")          # (the exponent is part of the code, not a constant)
            for a in m.args[:1] if _squares(m, node_type) else m.args:
                t = type(a)
                if t is node_type:
                    j = member_index.get(id(a))
                    if j is not None and j < k:
                        app(j)
                    else:
                        i = in_index.get(id(a))
                        if i is None:
                            i = in_index[id(a)] = len(self.inputs)
                            self.inputs.append(a)
                        app(("x", i, a.dtype))
                else:
                    vd = _const_dtype(a)
                    name = _dt_name(vd)
                    lst = consts.setdefault(name, [])
                    app(("c", name, len(lst), t if t in _PYTYPES else None))
                    lst.append(a)
            app(None)
        self.key = tuple(key)
        self.const_names = sorted(consts)
        self.const_arrays = [np.array(consts[n], dtype=n) for n in self.const_names]

    def lines(self, node_type) -> list:
        """The kernel statements ``t<k> = <expression>`` (only built on a cache miss)."""
        out = []
        member_index = {id(m): k for k, m in enumerate(self.members)}
        in_index = {id(a): i for i, a in enumerate(self.inputs)}
        counters = {n: 0 for n in self.const_names}
        for k, m in enumerate(self.members):
            names, dts, keys = [], [], []
            square = _squares(m, node_type)
            for a in m.args[:1] if square else m.args:
                t = type(a)
                if t is node_type:
                    j = member_index.get(id(a))
                    if j is not None and j < k:
                        names.append(f"t{j}")
                        dts.append(self.members[j].dtype)
                    else:
                        names.append(f"v{in_index[id(a)]}")
                        dts.append(a.dtype)
                    keys.append(a.dtype)
                else:
                    vd = _const_dtype(a)
                    name = _dt_name(vd)
                    names.append(f"kc_{name}[{counters[name]}]")
                    counters[name] += 1
                    dts.append(vd)
                    keys.append(t if t in _PYTYPES else a.dtype)
            if square:
                x = exprs.cast(names[0], dts[0], m.dtype)
                out.append(f"t{k} = ({x} * {x})")
                continue
            const_exp = m.op.name == "power" and type(m.args[1]) is not node_type
            out.append(f"t{k} = {exprs.node_expr(m, names, dts, keys, const_exp)}")
        return out


#: the per-group layout and member statements, shared with the CUDA generator
Layout = _Layout


def _squares(m, node_type) -> bool:
    """``x ** 2`` with a constant 2 and a float result: computed as ``x * x`` (what NumPy's
    scalar-power fast path does; a libm ``pow`` call per element costs ~10x more)."""
    if m.op.name != "power" or m.dtype.kind != "f":
        return False
    e = m.args[1]
    return type(e) is not node_type and type(e) in _PYTYPES[1:3] + (np.float64, np.int64) \
        and e == 2


_PYTYPES = (bool, int, float, complex)
_PY_DTYPE = {bool: np.dtype(bool), int: np.dtype(np.int64), float: np.dtype(np.float64),
             complex: np.dtype(np.complex128)}


_names: dict = {}


def _dt_name(dt: np.dtype) -> str:
    n = _names.get(dt)
    if n is None:
        n = _names[dt] = dt.name
    return n


def _const_dtype(a) -> np.dtype:
    """Dtype of a constant's value inside the kernel (Python scalars: their NumPy type)."""
    d = _PY_DTYPE.get(type(a))
    return d if d is not None else a.dtype


_layouts: dict = {}


def run_group(group, node_type, value_of, stored) -> bool:
    """Run ``group`` with its compiled kernel; False when the kernel is not ready (the
    caller then runs the members on NumPy).  ``stored(member)`` says which members must be
    written (read outside the group)."""
    red = group.reduction
    red_axes = _red_axes(group) if red is not None else ()
    if red is not None and len(group.members) == 1 and \
            contraction.try_run(group, red_axes, node_type, value_of, stored):
        return True
    layout = _Layout(group, node_type)
    shape = group.shape
    vec = -1        # a matrix-vector product's epilogue: the vector's input index
    if red is not None and red.op.name == "matmul":
        x = red.args[1]
        vec = next((i for i, a in enumerate(layout.inputs) if a is x and len(x.shape) == 1),
                   len(layout.inputs))
        if vec == len(layout.inputs):
            layout.inputs.append(x)
    vals = [value_of(a) for a in layout.inputs]
    if vec >= 0 and vals[vec].ndim == 2:
        vals[vec] = vals[vec][:, 0]        # (a (k, 1) column: its k values along the rows)
    if not vals:
        return False
    ndim = len(shape)
    full_red = red is not None and len(red_axes) == ndim
    flat = (red is None or full_red) and \
        all(v.shape == shape and v.flags.c_contiguous for v in vals)
    bcast = ()
    strided = None
    if flat:
        args_in = [v.reshape(-1) for v in vals]
    else:
        strided = strided_inputs(vals, shape)
        if strided is not None:
            args_in = strided[0]
        else:
            # inputs keep their own layout; broadcast dims are indexed with 0 in the
            # kernel instead of zero strides
            args_in = [v[(None,) * (ndim - v.ndim)] if v.ndim < ndim else v for v in vals]
            bcast = tuple(tuple(v.shape[d] == 1 and shape[d] != 1 for d in range(ndim))
                          for v in args_in)
    members = group.members
    out_idx = tuple(k for k, m in enumerate(members) if stored(m))
    size = _prod(shape)
    parallel = parallel_for(size, len(members))
    order = loop_order(strided[1], ndim) if strided is not None and red is None else None
    kinds = stride_kinds(strided[1], shape) if strided is not None else None
    spec_key = (layout.key, flat, ndim, parallel, out_idx, bcast, kinds, order,
                None if red is None else (red.op.name, red_axes, red.dtype,
                                          members.index(red.args[0]), vec))
    source = _layouts.get(spec_key)
    if source is None:
        source = _render(group, layout, node_type, len(vals), out_idx, ndim, flat, parallel,
                         red_axes, bcast, kinds, order, vec)
        _layouts[spec_key] = source
    outs = [pool.empty(members[k].shape, members[k].dtype) for k in out_idx]
    args_out = [o.reshape(-1) for o in outs] if flat else outs
    extra = []
    if red is not None:
        extra = [np.empty(tuple(s for d, s in enumerate(shape) if d not in red_axes) or (1,),
                          red.dtype)]
    args = args_in + layout.const_arrays + args_out + extra
    if not flat:
        args.append(tuple(shape))
    if strided is not None:
        args.append(strided[1])
    kernel = cpu.get_kernel(source, args)
    if kernel is None:
        cpu.STATS["fused_groups_numpy"] += 1
        return False
    flags = kernel(*args)
    if fpflags.must_rerun(flags) and \
            not fpflags.maybe_from_nan_compare(flags, group.nodes(), vals):
        # NumPy would warn (or raise): the group runs on NumPy, which does so exactly
        cpu.STATS["fused_groups_fp_rerun"] += 1
        return False
    cpu.STATS["fused_groups_run"] += 1
    for k, o in zip(out_idx, outs):
        members[k].value = o
    if red is not None:
        r = extra[0]
        if red.op.name == "mean":
            n = size // max(_prod(r.shape), 1) if not full_red else size
            r = np.true_divide(r, n, dtype=red.dtype)
        r = r.reshape(red.shape).astype(red.dtype, copy=False)
        red.value = r if r.flags.c_contiguous else r.copy()
    return True


def strided_inputs(vals: list, shape: tuple):
    """``(buffers, table)`` for the nd layout's strided reads: per input, the flat buffer of
    the C-contiguous array owning its memory, and a ``uint64`` table with one row per input
    (its offset, then one stride per dimension of ``shape``, in elements; 0 on broadcast
    dimensions; a negative stride as its two's complement: the kernel's unsigned index
    arithmetic wraps to the right address).  None when an input's memory is not laid out
    that way."""
    if _strided_inputs_c is not None:
        r = _strided_inputs_c(vals, shape)
        if r is not NotImplemented:
            return r
    ndim = len(shape)
    bufs = []
    table = np.zeros((len(vals), ndim + 1), np.int64)
    for k, v in enumerate(vals):
        owner = v
        while type(owner.base) is np.ndarray:
            owner = owner.base
        item = v.dtype.itemsize
        if not owner.flags.c_contiguous or item == 0:
            return None
        if owner.dtype != v.dtype:
            # ``z.real`` / ``z.imag`` of a complex block: the block's parts as elements of
            # their own type (real, imaginary, real...), read at stride 2
            if owner.dtype.kind != "c" or v.dtype.kind != "f" or \
                    owner.dtype.itemsize != 2 * item or not owner.dtype.isnative or \
                    not v.dtype.isnative or owner.ndim == 0:
                return None
            owner = owner.view(v.dtype)
        off = _data_offset(v, owner)
        if off % item:
            return None
        row = table[k]
        row[0] = off // item
        lead = ndim - v.ndim
        for d in range(v.ndim):
            if v.shape[d] != 1 or shape[lead + d] == 1:
                st = v.strides[d]
                if st % item:
                    return None
                row[1 + lead + d] = st // item
        bufs.append(owner.reshape(-1))
    return bufs, table.view(np.uint64)


#: a stride class of :func:`stride_kinds`: known at compile time (0 or 1 element) or not
RUNTIME_STRIDE = -1


def stride_kinds(table, shape: tuple) -> tuple:
    """Per input (a row of :func:`strided_inputs`' table), per dimension of ``shape``: 0
    when its index never moves the address (a broadcast dimension, or one of extent 1),
    1 when it moves by one element, else :data:`RUNTIME_STRIDE`.  The kernel spells the
    first two out: a load whose stride along the inner loop is a run-time value -- even a
    0 or a 1 -- keeps LLVM from vectorizing that loop (a fused ``sum(axis=0)`` of a
    contiguous (2000, 1000) product took 18 ms, NumPy 6 ms), and a compile-time 0 makes
    the load loop-invariant, so it is hoisted out of the loop."""
    strides = table.view(np.int64)[:, 1:]
    return tuple(tuple(0 if shape[d] == 1 or s == 0 else 1 if s == 1 else RUNTIME_STRIDE
                       for d, s in enumerate(row.tolist())) for row in strides)


def _data_offset(a, base) -> int:
    """Byte offset of ``a``'s data from ``base``'s (the C helper when built)."""
    if _data_offset_c is not None:
        return _data_offset_c(a, base)
    return a.__array_interface__["data"][0] - base.__array_interface__["data"][0]


_data_offset_c = _native.ext.data_offset if _native.ext is not None else None
_strided_inputs_c = _native.ext.strided_inputs if _native.ext is not None else None


def loop_order(table, ndim: int):
    """The axes of an elementwise nd kernel's loop nest, outermost first, following the
    memory order most of its inputs that are not broadcast share (largest stride
    outermost; the output's C order counts half an input; a tie: the first input's), or
    None for the C order of the output.  (A kernel reading ``y.transpose(0, 3, 1, 2)`` in
    the output's order crosses a cache line per element: a 5M-element ``+ b`` took 58 ms,
    NumPy's iterator, which follows the input, 11 ms.  A convolution's ``out +=
    t.transpose(0, 3, 1, 2)`` over nine offsets, fused, reads nine transposed inputs and
    one C-ordered one: in their order 4.6M elements took ~30 ms, in the C order 100 ms.)"""
    if ndim < 2:
        return None
    strides = table.view(np.int64)[:, 1:]
    c_order = tuple(range(ndim))
    votes = {c_order: 0.5}
    first = []
    for row in strides:
        if all(row):
            order = tuple(sorted(range(ndim), key=lambda d: -abs(int(row[d]))))
            votes[order] = votes.get(order, 0) + 1
            if order not in first:
                first.append(order)
    if not first:
        return None
    best = max(first, key=lambda o: (votes[o], -first.index(o)))
    if votes[best] < votes[c_order]:
        best = c_order
    return None if best == c_order else best


class _FusedSpec(cpu.KernelSpec):
    """A kernel spec whose strided loads index with the inputs' compile-time stride
    classes (:func:`stride_kinds`): no term for a 0 stride, the bare index for a unit one."""

    def __init__(self, *args, kinds=None):
        super().__init__(*args)
        self.kinds = kinds

    def _load_compute_store(self, indent: str, idx: str) -> list:
        if not self.strided or self.kinds is None:
            return super()._load_compute_store(indent, idx)
        ivars = [i.strip() for i in idx.split(",")]
        out = []
        for k in range(self.n_in):
            terms = [f"base{k}"]
            for d, i in enumerate(ivars):
                kind = self.kinds[k][d] if d < len(self.kinds[k]) else RUNTIME_STRIDE
                if kind == 1:
                    terms.append(f"np.uint64({i})")
                elif kind == RUNTIME_STRIDE:
                    terms.append(f"np.uint64({i}) * s{k}_{d}")
            out.append(f"{indent}v{k} = x{k}[{' + '.join(terms)}]")
        out += [indent + line for line in self.lines]
        out += [f"{indent}o{k}[{idx}] = {name}" for k, name in self.out_exprs]
        return out


def _render(group, layout, node_type, n_in, out_idx, ndim, flat, parallel, red_axes,
            bcast=(), kinds=None, order=None, vec=-1) -> str:
    spec = _FusedSpec(layout.lines(node_type), n_in, len(out_idx), ndim, flat,
                      parallel, None, kinds=kinds)
    spec.bcast = list(bcast)
    spec.strided = kinds is not None
    spec.loop_order = order
    spec.const_names = [f"kc_{n}" for n in layout.const_names]
    spec.out_exprs = [(j, f"t{k}") for j, k in enumerate(out_idx)]
    red = group.reduction
    if red is not None:
        src_idx = group.members.index(red.args[0])
        acc = red.dtype
        kind = red.op.name
        if kind in ("sum", "mean", "prod", "matmul") and acc == np.float32:
            acc = np.dtype(np.float64)   # sequential float32 sums drift; NumPy sums pairwise
        vexpr = exprs.cast("{src}", red.args[0].dtype, acc) \
            if kind not in ("any", "all", "max", "min") else "{src}"
        if kind == "matmul":
            # each row of the matrix (the group's last member) times the vector, summed
            kind = "sum"
            vexpr = f"({vexpr} * {exprs.cast(f'v{vec}', red.args[1].dtype, acc)})"
            spec.partial_sums = True
        spec.reduction = (kind, (0,) if flat else red_axes, acc, vexpr)
        spec.reduction_src = src_idx
        if src_idx in out_idx and vec < 0:
            spec.red_src_out = out_idx.index(src_idx)
    return spec.render()


def _red_axes(group) -> tuple:
    red = group.reduction
    nd = len(group.shape)
    if red.op.name == "matmul":
        return (nd - 1,)
    axis = (red.params or {}).get("axis")
    if axis is None:
        return tuple(range(nd))
    if not isinstance(axis, tuple):
        axis = (axis,)
    return tuple(sorted(a % nd for a in axis))
