"""Device execution: the pending device graph, its flush, and launches on the stream engine.

A device array's values are *device nodes* (:class:`DeviceNode`): op, arguments, shape, dtype,
like the CPU graph's nodes, on one device.  A flush collects the pending nodes behind its
targets, runs the same fusion pass as the CPU (:func:`lazynp.core.fusion.fuse`), and
launches each item on the device's :class:`lazynp.engine.streams.StreamEngine`:

* fused elementwise groups and trailing reductions as Numba CUDA kernels
  (:mod:`lazynp.cuda.codegen`);
* writes (``a[i] = v``, ``a += b``) in place when nothing pending still reads the old
  version, else on a copy (copy-on-write);
* other ops (matmul, linalg, sorting, ...) with CuPy on a real GPU; under the simulator
  on the host, counted in :data:`STATS` (``device_host_fallbacks``).

Stream choice: an item continues the stream of the first input produced in this flush
(a chain stays on one stream: no event needed), otherwise takes the next compute stream
round robin (independent work overlaps).  Inputs produced on another stream are waited
for with events; an in-place write also waits for the kernels still reading the old
version (write after read).  Uploads and downloads run on the copy stream.  The host
blocks only in :func:`wait` (forcing points).  A failing item marks its nodes; the error,
with the line that recorded the op, is raised at the next wait on them.
"""
from __future__ import annotations

import math
import sys
import threading
import weakref

import numpy as np

from .._base import counters as _counters, site as _site
from ..devices import names
from ..engine import streams
from ..core.graph import PENDING, VIEW, add_site_note, pending_order
from ..ops.registry import OPS, Op, register
from ..ops.reductions import reduced_axes
from ..core import fusion
from ..kernels import fused
from . import codegen, flush_plan, memory

LAUNCHED = 1        # (after PENDING, the host graph's first state: pending_order tests it)
_PKG = _site.PACKAGE_DIR
STATS = {"device_flushes": 0, "device_kernels": 0, "device_host_fallbacks": 0,
         "device_cupy_ops": 0, "device_inplace_writes": 0, "device_copy_on_write": 0,
         "device_buffer_reuse": 0}
_lock = threading.RLock()
MAX_PENDING = 2000
#: > 0 while a gradient is taken: launched nodes keep their arguments (the backward walk)
KEEP_GRAPH = [0]
#: the capture of a device jit plan under way (:mod:`lazynp.cuda.jit_plan`), or None: each
#: launch of a flush is kept as a step; what cannot be replayed is noted in ``opaque``
CAPTURE: list = [None]


class DeviceNode:
    """One recorded value on a device."""

    __slots__ = ("op", "args", "params", "shape", "dtype", "device", "value", "state",
                 "error", "site", "errstate", "event", "readers", "pending_readers",
                 "use_count", "flush_epoch", "needed", "uses", "tree", "__weakref__")

    def __init__(self, op, args: tuple, params, shape: tuple, dtype, device):
        self.op = op
        self.args = args
        self.params = params
        self.shape = shape
        self.dtype = np.dtype(dtype)
        self.device = device
        self.value = None
        self.state = PENDING
        self.error = None
        self.site = None
        self.errstate = None         # (the fusion pass compares the errstate of members)
        self.event = None       # recorded after the kernel that wrote ``value``
        self.readers = []       # events of launched kernels that read ``value``
        # (pending nodes reading this one: id -> weak reference; a dict, as a WeakSet's
        # creation, add and discard run Python code on every record and launch)
        self.pending_readers = {}
        self.use_count = 0
        self.flush_epoch = 0
        self.needed = False
        self.uses = 0
        self.tree = None

    def __repr__(self) -> str:
        st = ("pending", "launched")[self.state]
        return f"<DeviceNode {self.op.name} {self.shape} {self.dtype} {self.device} {st}>"


class DeviceVar:
    """A device storage resource; ``head`` holds its current contents."""

    __slots__ = ("head", "__weakref__")

    def __init__(self, head: DeviceNode):
        self.head = head
        if head.state == PENDING:
            _pending_vars.append(weakref.ref(self))

    def set_head(self, node: DeviceNode) -> None:
        self.head = node
        if node.state == PENDING:
            _pending_vars.append(weakref.ref(self))


_pending_vars: list = []
_n_pending = [0]


def _user_site():
    f = sys._getframe(2)
    while f is not None and f.f_code.co_filename.startswith(_PKG):
        f = f.f_back
    return None if f is None else (f.f_code, f.f_lasti)


def record(op, args: tuple, params, shape: tuple, dtype, device) -> DeviceNode:
    """Add a node to the device's pending graph (nothing runs)."""
    n = DeviceNode(op, args, params, shape, dtype, device)
    n.site = _user_site()
    for a in args:
        if type(a) is DeviceNode:
            a.use_count += 1
            a.pending_readers[id(n)] = weakref.ref(n)
    _n_pending[0] += 1
    if _n_pending[0] >= MAX_PENDING:
        flush_live()
    return n


def pending_readers(a: DeviceNode) -> list:
    """The pending nodes that read ``a`` (those still alive)."""
    out = []
    for ref in a.pending_readers.values():
        r = ref()
        if r is not None:
            out.append(r)
    return out


def leaf(buf, device, exported: bool = False, shape=None) -> DeviceNode:
    """A node holding a device buffer that is ready (or becomes ready at ``event``)."""
    n = DeviceNode(_LEAF, (), None, tuple(buf.shape) if shape is None else tuple(shape),
              buf.dtype, device)
    n.value = buf
    n.state = LAUNCHED
    n.needed = exported
    if CAPTURE[0] is not None:
        CAPTURE[0].leaves.append(n)         # (made while a jit plan is captured: its own)
    return n


def view_node(base: DeviceNode, offset: int, shape: tuple, strides: tuple, dtype) -> DeviceNode:
    return record(VIEW, (base,), {"offset": offset, "shape": shape, "strides": strides,
                                  "dtype": np.dtype(dtype)}, shape, dtype, base.device)


# --- engines -------------------------------------------------------------------------------

_engines: dict = {}


def engine_for(dev) -> streams.StreamEngine:
    eng = _engines.get(dev.name)
    if eng is None:
        memory.check_device(dev)
        backend = streams.SimBackend() if memory.simulated() else \
            streams.CupyBackend(dev.index)
        eng = _engines[dev.name] = streams.StreamEngine(backend)
    return eng


_launch_configs: dict = {}


def _launch_config(dev) -> tuple:
    """(threads per block, blocks for a grid-stride loop) on ``dev``: tiny under the
    simulator (each simulated thread is a Python thread).  Asked once per device (the
    driver query is host time on every launch otherwise)."""
    cfg = _launch_configs.get(dev.name)
    if cfg is None:
        if memory.simulated():
            cfg = (4, 2)
        else:
            with memory.device_context(dev):
                props = memory.cuda().get_current_device()
                cfg = (256, props.MULTIPROCESSOR_COUNT * 16)
        _launch_configs[dev.name] = cfg
    return cfg


# --- flush ---------------------------------------------------------------------------------

_epoch = [0]


def _root(n: DeviceNode) -> DeviceNode:
    return n.args[0] if n.op is VIEW else n


def _live_pending_heads() -> list:
    keep, heads = [], []
    for r in _pending_vars:
        v = r()
        if v is not None and v.head.state == PENDING:
            keep.append(r)
            heads.append(v.head)
    _pending_vars[:] = keep
    return heads


def flush_live() -> None:
    heads = _live_pending_heads()
    if heads:
        flush(heads)


def flush(targets) -> None:
    """Launch the pending work behind ``targets`` (device nodes); the host does not wait."""
    with _lock:
        _epoch[0] += 1
        epoch = _epoch[0]
        order = pending_order(targets, epoch, DeviceNode)
        if not order:
            return
        STATS["device_flushes"] += 1
        _n_pending[0] = max(0, _n_pending[0] - len(order))
        for h in _live_pending_heads():
            h.needed = True
        for t in targets:
            _root(t).needed = True
        for n in order:
            n.uses = 0
        for n in order:
            for a in n.args:
                if type(a) is DeviceNode and a.flush_epoch == epoch:
                    a.uses += 1
        for n in order:
            if n.use_count > n.uses:
                n.needed = True
            if n.op is VIEW and (n.needed or n.use_count > n.uses):
                n.args[0].needed = True
        continued: set = set()
        here: set = set()
        shape = flush_plan.structure(order, DeviceNode, VIEW)
        steps = None if shape is None else flush_plan.lookup(shape[0])
        if steps is not None:
            table = shape[1]
            for step in steps:
                nodes = _step_nodes(step, table)
                with memory.device_context(nodes[0].device):
                    _launch_nodes(nodes, _replay_builder(step, nodes, table, here),
                                  continued, here)
        else:
            work = [(n, False) for n in order if n.op is not VIEW]
            items = fusion.fuse(work, DeviceNode, simd_check=False)
            steps = [] if shape is not None else None
            for it in items:
                with memory.device_context(_item_nodes(it)[0].device):
                    _launch_item(it, continued, here, steps,
                                 None if shape is None else shape[2])
            if steps is not None and len(steps) == len(items):
                flush_plan.keep(shape[0], steps)
        for n in order:
            if n.op is VIEW:
                n.state = LAUNCHED


def wait(n: DeviceNode) -> None:
    """Block the host until ``n``'s value is ready (flushing it first); raise its error."""
    if CAPTURE[0] is not None:
        CAPTURE[0].opaque.append("a wait for a value")
    if n.state == PENDING or (n.op is VIEW and _root(n).state == PENDING):
        flush([n])
    r = _root(n)
    if r.error is None and r.event is not None:
        engine_for(r.device).host_wait(r.event)
    if r.error is not None:
        raise r.error


def realize(a: DeviceNode):
    """The device buffer an argument node reads (a view realized on its base)."""
    if a.op is VIEW:
        b = a.args[0]
        p = a.params
        return memory.view(b.value, p["offset"], p["shape"], p["strides"], p["dtype"])
    return a.value


def _c_strides(shape: tuple, itemsize: int) -> tuple:
    out = []
    s = itemsize
    for d in reversed(shape):
        out.append(s)
        s *= d
    return tuple(reversed(out))


def _contiguous(a: DeviceNode) -> bool:
    if a.op is not VIEW:
        return True
    p = a.params
    want = _c_strides(p["shape"], p["dtype"].itemsize)
    return all(d == 1 or s == w for d, s, w in zip(p["shape"], p["strides"], want))


# --- launching one item ----------------------------------------------------------------------

def _item_nodes(it) -> list:
    return [it[0]] if type(it) is tuple else it.nodes()


def _inputs_of(nodes) -> list:
    ids = {id(n) for n in nodes}
    out = []
    seen = set()
    for n in nodes:
        for a in n.args:
            if type(a) is DeviceNode and id(a) not in ids:
                r = _root(a)
                if id(r) not in seen:
                    seen.add(id(r))
                    out.append(r)
    return out


def _choose_stream(eng, inputs, continued: set, epoch_nodes: set):
    for r in inputs:
        if id(r) in epoch_nodes and id(r) not in continued and r.event is not None:
            continued.add(id(r))
            return r.event.stream
    return eng.next_compute_stream()


def _launch_item(it, continued: set, here: set, steps=None, slot_of=None) -> None:
    """Launch one item of the fusion pass (a group, or a node alone).  ``steps``: when not
    None, the item's step of the flush plan is appended to it (nothing when it failed);
    ``slot_of``: id(node) -> slot (:func:`lazynp.cuda.flush_plan.structure`)."""
    def build(dev, eng, stream):
        if type(it) is not tuple:
            spec, ins = _group_spec(it, dev)
            step = ("g", spec, _slots(it.members, slot_of), _slots(ins, slot_of),
                    None if it.reduction is None else _slot(it.reduction, slot_of))
            out = _group_bind(spec, it.members, it.reduction, ins, dev, stream, here) + ((),)
        else:
            n = it[0]
            kind = n.op.kind
            if kind == "write":
                step = ("w", _slot(n, slot_of))
                out = _write_work(n, dev, eng, stream)
            elif fusion.fusible(n, simd_check=False) or (kind == "elementwise" and
                                                          _fusible_0d(n)):
                spec, ins = _group_spec(fusion.FusedGroup(n, 0), dev)
                step = ("g", spec, _slots((n,), slot_of), _slots(ins, slot_of), None)
                out = _group_bind(spec, (n,), None, ins, dev, stream, here) + ((),)
            elif kind == "reduction" and _reduction_ok(n):
                g = _reduction_group(n)
                spec, ins = _group_spec(g, dev)
                step = ("r", spec, _slot(n, slot_of), _slots(ins, slot_of))
                out = _group_bind(spec, g.members, n, ins, dev, stream, here) + ((),)
            elif kind == "creation" and n.op.name in _FILLS:
                step = ("f", _slot(n, slot_of))
                out = _fill_work(n, dev, stream) + ((),)
            else:
                step = ("b", _slot(n, slot_of))
                out = _fallback_work(n, dev, stream) + ((),)
        if steps is not None:
            steps.append(step)
        return out
    _launch_nodes(_item_nodes(it), build, continued, here)


def _slot(node, slot_of):
    return None if slot_of is None else slot_of[id(node)]


def _slots(nodes, slot_of):
    return None if slot_of is None else tuple(slot_of[id(n)] for n in nodes)


def _step_nodes(step, table) -> list:
    """The nodes a kept step launches, from this flush's ``table`` of nodes by slot."""
    kind = step[0]
    if kind == "g":
        nodes = [table[k] for k in step[2]]
        if step[4] is not None:
            nodes.append(table[step[4]])
        return nodes
    return [table[step[2] if kind == "r" else step[1]]]


def _replay_builder(step, nodes, table, here: set):
    """The work builder of a kept step, bound to this flush's nodes."""
    kind = step[0]

    def build(dev, eng, stream):
        if kind == "g":
            spec = step[1]
            red = table[step[4]] if step[4] is not None else None
            members = nodes[:-1] if red is not None else nodes
            ins = [table[k] for k in step[3]]
            return _group_bind(spec, members, red, ins, dev, stream, here) + ((),)
        n = nodes[0]
        if kind == "r":
            return _group_bind(step[1], (), n, [table[k] for k in step[3]], dev, stream,
                               here) + ((),)
        if kind == "w":
            return _write_work(n, dev, eng, stream)
        if kind == "f":
            return _fill_work(n, dev, stream) + ((),)
        return _fallback_work(n, dev, stream) + ((),)
    return build


def _launch_nodes(nodes: list, build, continued: set, here: set) -> None:
    """Launch the work ``build(dev, engine, stream) -> (work, keep, extra waits)`` makes
    for ``nodes`` (one item) on a stream chosen for it, after its inputs' events."""
    first = nodes[0]
    dev = first.device
    eng = engine_for(dev)
    inputs = _inputs_of(nodes)
    stream = _choose_stream(eng, inputs, continued, here)
    waits = [r.event for r in inputs]
    failed = next((r.error for r in inputs if r.error is not None), None)
    try:
        if failed is not None:
            raise failed
        work, keep, extra_waits = build(dev, eng, stream)
        if extra_waits:
            waits += extra_waits
    except BaseException as exc:
        _fail(nodes, exc)
        return
    # (inputs are read: their buffers are held until the work is done)
    keep = tuple(keep) + tuple(r.value for r in inputs)

    def run():
        try:
            bad = next((r.error for r in inputs if r.error is not None), None)
            if bad is not None:
                raise bad
            work()
        except BaseException as exc:      # stored; raised at the next wait on the nodes
            _fail(nodes, exc)

    ev = eng.launch(stream, run, waits, keep)
    cap = CAPTURE[0]
    if cap is not None:              # (a device jit plan is being made: keep the step)
        cap.steps.append((stream, run, tuple(waits), keep, ev, nodes, inputs))
    for n in nodes:
        n.event = ev
        n.state = LAUNCHED
        here.add(id(n))
        for a in n.args:
            if type(a) is DeviceNode:
                a.pending_readers.pop(id(n), None)
                if a.op is VIEW:
                    a.args[0].pending_readers.pop(id(a), None)
    for r in inputs:
        r.readers.append(ev)
        if len(r.readers) > 64:
            r.readers = [e for e in r.readers if not eng.backend.query(e)]
    if not KEEP_GRAPH[0]:
        for n in nodes:
            n.args = ()
            n.params = None if n.op.kind != "write" else n.params


def _fail(nodes, exc) -> None:
    add_site_note(exc, nodes[0])
    for n in nodes:
        n.error = exc
        n.state = LAUNCHED


def _fusible_0d(n: DeviceNode) -> bool:
    if n.shape != ():
        return False
    n.shape = (1,)          # (a 0-d elementwise node: asked as a 1-element one)
    try:
        return fusion.fusible(n, simd_check=False)
    finally:
        n.shape = ()


def _reduction_ok(n: DeviceNode) -> bool:
    if n.op.name not in ("sum", "prod", "mean", "max", "min", "any", "all"):
        return False
    src = n.args[0]
    if type(src) is not DeviceNode or not src.shape:
        return False
    g = fusion.FusedGroup(_copy_of(src), 0)
    return fusion._epilogue_ok(n, g)


_COPY = OPS["copy"]


def _copy_of(src: DeviceNode) -> DeviceNode:
    m = DeviceNode(_COPY, (src,), None, src.shape, src.dtype, src.device)
    return m


def _reduction_group(n: DeviceNode):
    g = fusion.FusedGroup(_copy_of(n.args[0]), 0)
    g.reduction = n
    return g


def _red_axes(red, nd: int) -> tuple:
    return reduced_axes(red.params, nd)


_sources: dict = {}


class _GroupSpec:
    """What a fused group's launch needs that does not depend on its buffers: the kernel
    layout, compiled kernels, launch grid, and how each input and output buffer is bound.
    Holds no node (a flush plan keeps it for later flushes of the same structure)."""

    __slots__ = ("shape", "size", "flat", "in_modes", "bcast", "out_idx", "out_flat",
                 "consts", "input_uses", "group_shape", "sources", "grid", "fgrid", "block",
                 "tail", "red", "M", "L", "P", "acc")


# (how an input buffer is bound: the node's own flat buffer; a flat view of the node's
# buffer; a flat view of a view's base; the node's buffer (or view) as it is; that buffer
# with leading broadcast dimensions)
_IN_SAME, _IN_FLAT, _IN_FLAT_BASE, _IN_ND, _IN_PAD = range(5)


def _group_spec(group, dev):
    """The :class:`_GroupSpec` of a fused group and its inputs (nodes read from outside)."""
    members = group.members
    shape = group.shape
    zero_d = shape == ()
    if zero_d:
        shape = (1,)
    ndim = len(shape)
    layout = fused.Layout(group, DeviceNode)
    inputs = layout.inputs
    red = group.reduction
    if red is not None:
        src_member = red.args[0] if red.args[0] in members else members[-1]
        src_idx = next(k for k, m in enumerate(members) if m is src_member)
        red_axes = _red_axes(red, ndim)
    else:
        red_axes = ()
    full_red = red is not None and len(red_axes) == ndim
    flat = (red is None or full_red) and \
        all(a.shape == group.shape and _contiguous(a) for a in inputs)
    internal: dict = {}
    for m in group.nodes():
        for a in m.args:
            if type(a) is DeviceNode:
                internal[id(a)] = internal.get(id(a), 0) + 1
    out_idx = tuple(k for k, m in enumerate(members)
                    if m.needed or m.use_count > internal.get(id(m), 0))
    size = math.prod(shape)
    in_modes = []
    bcast = []
    flat_bcast = (False,) * ndim
    for a in inputs:
        ash = tuple(a.shape)
        if flat or zero_d:
            in_modes.append(_IN_SAME if a.op is not VIEW and len(ash) == 1 else
                            _IN_FLAT if a.op is not VIEW else _IN_FLAT_BASE)
            bcast.append(flat_bcast)
            continue
        pad = ndim - len(ash)
        in_modes.append((_IN_PAD, pad) if pad > 0 else _IN_ND)
        if pad > 0:
            ash = (1,) * pad + ash
        bcast.append(tuple(ash[d] == 1 and shape[d] != 1 for d in range(ndim)))
    bcast = tuple(bcast)
    flat = flat or zero_d
    consts = codegen.const_names(layout)
    block, grid_max = _launch_config(dev)
    # (a reduction keeping the last axis: one thread per kept element, coalesced reads)
    outer = red is not None and not full_red and (ndim - 1) not in red_axes
    key = (layout.key, flat, ndim, out_idx, bcast, block,
           None if red is None else (red.op.name, red_axes, red.dtype, src_idx, outer))
    srcs = _sources.get(key)
    if srcs is None:
        lines = layout.lines(DeviceNode)
        if red is None:
            srcs = (codegen.elementwise_source(lines, consts, len(inputs), out_idx, ndim, flat,
                                               bcast), None)
        elif outer:
            acc = codegen.acc_dtype(red.op.name, members[src_idx].dtype, red.dtype)
            srcs = (codegen.outer_reduction_source(lines, consts, len(inputs), out_idx, ndim,
                                                   bcast, red.op.name, red_axes, src_idx,
                                                   members[src_idx].dtype, acc),
                    codegen.finish_source(red.op.name, acc, red.dtype))
        else:
            acc = codegen.acc_dtype(red.op.name, members[src_idx].dtype, red.dtype)
            srcs = (codegen.reduction_source(lines, consts, len(inputs), out_idx, ndim, flat,
                                             bcast, red.op.name, red_axes, src_idx,
                                             members[src_idx].dtype, acc, block),
                    codegen.finish_source(red.op.name, acc, red.dtype))
        _sources[key] = srcs
    spec = _GroupSpec()
    spec.shape = shape
    spec.group_shape = group.shape
    spec.size = size
    spec.flat = flat
    spec.in_modes = tuple(in_modes)
    spec.bcast = bcast
    spec.out_idx = out_idx
    spec.out_flat = tuple(flat and len(members[k].shape) != 1 for k in out_idx)
    spec.consts = _const_refs(layout)
    spec.input_uses = tuple(internal.get(id(a), 0) for a in inputs)
    spec.block = block
    spec.sources = srcs
    codegen.compile_source(srcs[0])           # (a source that cannot be lowered raises now)
    spec.tail = [] if flat else list(shape[1:])
    spec.red = None
    if red is None:
        spec.grid = max(1, min(-(-size // block), grid_max))
        return spec, inputs
    kept = [d for d in range(ndim) if d not in red_axes]
    M = math.prod(shape[d] for d in kept)
    L = math.prod(shape[d] for d in red_axes)
    if outer:
        # (slices of at least 8 reduced elements per thread, up to a full grid of threads)
        P = (2 if L > 1 else 1) if memory.simulated() else \
            max(1, min(-(-L // 8), grid_max * block // max(M, 1)))
    elif memory.simulated():
        P = 2 if L > block else 1
    else:
        P = 1 if M >= grid_max else max(1, min(-(-L // (block * 8)), grid_max // max(M, 1)))
    spec.acc = codegen.acc_dtype(red.op.name, members[src_idx].dtype, red.dtype)
    spec.red = (red.shape, red.dtype)
    spec.M, spec.L, spec.P = M, L, P
    spec.tail = list(shape)
    codegen.compile_source(srcs[1])
    spec.grid = max(1, min(-(-M * P // block) if outer else M * P,
                           grid_max if not memory.simulated() else 2))
    spec.fgrid = max(1, min(-(-M // block), grid_max))
    return spec, inputs


def _const_refs(layout) -> tuple:
    """Where the layout's constants come from, in kernel argument order (that of
    :func:`lazynp.cuda.codegen.const_values`): ``(member, argument, scalar type)``."""
    by_dtype: dict = {}
    for k, m in enumerate(layout.members):
        args = m.args[:1] if fused._squares(m, DeviceNode) else m.args
        for i, a in enumerate(args):
            if type(a) is not DeviceNode:
                dt = fused._const_dtype(a)
                by_dtype.setdefault(fused._dt_name(dt), []).append((k, i, dt.type))
    return tuple(r for name in sorted(by_dtype) for r in by_dtype[name])


def _group_bind(spec: _GroupSpec, members, red, inputs, dev, stream, here: set):
    """The launch closure of a fused group (elementwise, with an optional reduction) whose
    layout is ``spec``, on this flush's nodes; returns ``(work, buffers to keep)``."""
    size = spec.size
    in_bufs = []
    item = memory.view
    for a, mode in zip(inputs, spec.in_modes):
        if mode == _IN_SAME:
            buf = a.value
        elif mode == _IN_FLAT:
            buf = item(a.value, 0, (size,), (a.dtype.itemsize,), a.dtype)
        elif mode == _IN_FLAT_BASE:
            buf = item(a.args[0].value, a.params["offset"], (size,), (a.dtype.itemsize,),
                       a.dtype)
        elif mode == _IN_ND:
            buf = realize(a)
        else:
            buf = realize(a)
            pad = mode[1]
            buf = _restride(a, buf, (1,) * pad + tuple(a.shape),
                            (0,) * pad + tuple(buf.strides))
        in_bufs.append(buf)
    cvals = [t(members[k].args[i]) for k, i, t in spec.consts]
    outs = []
    reusable = _dead_inputs(members, spec, inputs, here) \
        if red is None and not KEEP_GRAPH[0] else []  # (a gradient may still read them)
    for k, as_flat in zip(spec.out_idx, spec.out_flat):
        m = members[k]
        buf = None
        for j, a in enumerate(reusable):
            if a is not None and a.dtype == m.dtype and a.shape == m.shape:
                buf = a.value           # (memory planning: a dead input's buffer)
                reusable[j] = None
                STATS["device_buffer_reuse"] += 1
                break
        if buf is None:
            buf = memory.empty(dev, m.shape, m.dtype)
        m.value = buf
        outs.append(item(buf, 0, (size,), (m.dtype.itemsize,), m.dtype) if as_flat else buf)
    # (looked up at each launch, not kept in the spec: one dict look-up)
    kernel = codegen.compile_source(spec.sources[0])
    block = spec.block
    grid = spec.grid
    arg = memory.kernel_arg
    if red is None:
        args = [arg(b) for b in in_bufs] + cvals + [arg(o) for o in outs] + [size] + spec.tail

        def work():
            if size:
                kernel[grid, block, _nb_stream(stream)](*args)
        STATS["device_kernels"] += 1
        return work, in_bufs + outs

    M, L, P = spec.M, spec.L, spec.P
    part = memory.empty(dev, (M, P), spec.acc)
    red_shape, red_dtype = spec.red
    r = memory.empty(dev, (M,), red_dtype)
    red.value = item(r, 0, red_shape, _c_strides(red_shape, red_dtype.itemsize), red_dtype)
    finish = codegen.compile_source(spec.sources[1])
    args = [arg(b) for b in in_bufs] + cvals + [arg(o) for o in outs] + \
        [arg(part), M, L, P] + spec.tail
    fgrid = spec.fgrid

    def work():
        if M:
            kernel[grid, block, _nb_stream(stream)](*args)
            finish[fgrid, block, _nb_stream(stream)](arg(part), arg(r), M, P, L)
    STATS["device_kernels"] += 2
    return work, in_bufs + outs + [part, r]


def _group_work(group, dev, stream, here: set = frozenset()):
    """The launch closure of a fused group and the buffers it keeps (no flush plan)."""
    spec, inputs = _group_spec(group, dev)
    return _group_bind(spec, group.members, group.reduction, inputs, dev, stream, here)


def _dead_inputs(members, spec: _GroupSpec, inputs, here: set) -> list:
    """Inputs of a group whose buffers an output may take (MXNet's in-place rule): made in
    this flush, of the group's shape, read by nothing but this group's members, not kept
    by an array.  Every thread reads such an element before it writes the same element."""
    out = []
    shape = spec.group_shape
    for a, uses in zip(inputs, spec.input_uses):
        if a.op is VIEW or id(a) not in here or a.needed or a.value is None or \
                a.error is not None or a.shape != shape or a.use_count != uses or a.readers:
            continue
        if any(not any(r is m for m in members) for r in pending_readers(a)):
            continue
        out.append(a)
    return out


def _restride(a, buf, shape, strides):
    return memory.view(_root(a).value, a.params["offset"] if a.op is VIEW else 0, shape,
                       strides, a.dtype)


def _nb_stream(stream):
    return 0 if memory.simulated() else stream.numba


_FILLS = {"zeros": 0, "ones": 1, "empty": None, "full": None}


def _fill_work(n: DeviceNode, dev, stream):
    buf = memory.empty(dev, n.shape, n.dtype)
    n.value = buf
    kind = n.op.name
    if kind == "empty":
        return (lambda: None), [buf]
    value = (n.params or {}).get("fill_value", _FILLS[kind])
    host = np.full((), value, dtype=n.dtype)      # NumPy's conversion of the fill value
    if memory.simulated():
        def work():
            memory.host_view(buf)[...] = host
    else:
        cp_stream = stream.cupy

        def work():
            with cp_stream:
                buf.fill(host[()])
    STATS["device_kernels"] += 1
    return work, [buf]


def _host_value(buf) -> np.ndarray:
    return memory.host_view(buf)


def _fallback_work(n: DeviceNode, dev, stream):
    """A non-elementwise op: CuPy on a real GPU (NumPy's functions dispatch to CuPy on
    CuPy arrays), the host under the simulator (counted).

    The library call is made *inside* the work, which the engine enqueues after the
    stream waits on the inputs' events: called while the work is built, CuPy would issue
    it on the stream before those waits, reading inputs not yet written.  Its result is
    copied into a buffer allocated now (later items of this flush read ``n.value``)."""
    op = n.op
    params = n.params or {}
    args = n.args
    out = memory.empty(dev, n.shape, n.dtype)
    n.value = out
    if not memory.library_arrays():
        STATS["device_host_fallbacks"] += 1

        def work():
            vals = [_host_value(realize(a)) if type(a) is DeviceNode else a for a in args]
            res = op.impl(*vals, **params)
            memory.host_view(out)[...] = np.asarray(res).astype(n.dtype, copy=False) \
                .reshape(n.shape)
        return work, [out]
    STATS["device_cupy_ops"] += 1
    cp = memory._load()["cupy"]
    vals = [realize(a) if type(a) is DeviceNode else a for a in args]

    def work():
        with stream.cupy:
            res = op.impl(*vals, **params)
            if not isinstance(res, cp.ndarray):
                raise TypeError(f"lazynp: {op.name} has no CuPy implementation on "
                                f"{dev.name}")
            cp.copyto(out, res.astype(n.dtype, copy=False).reshape(n.shape))
    return work, [out] + [v for v in vals if isinstance(v, cp.ndarray)]


def _write_work(n: DeviceNode, dev, eng, stream):
    """``old[region] = value``: in place when nothing pending reads ``old`` any more,
    else on a copy.  Returns (work, keep, extra events to wait on)."""
    old = n.args[0]
    value = n.args[1]
    p = n.params
    others = [r for r in pending_readers(old) if r is not n]
    extra = []
    if not others and old.value is not None and not (type(value) is DeviceNode and
                                                     _root(value) is old):
        buf = old.value
        extra = list(old.readers)          # write after read: wait for the readers
        STATS["device_inplace_writes"] += 1
        copy_old = False
    else:
        buf = memory.empty(dev, old.shape, old.dtype)
        copy_old = True
        STATS["device_copy_on_write"] += 1
    n.value = buf
    region = memory.view(buf, p["offset"], p["shape"], p["strides"], p["dtype"])
    old_buf = old.value
    if memory.simulated():
        def work():
            if copy_old:
                memory.host_view(buf)[...] = memory.host_view(old_buf)
            v = _host_value(realize(value)) if type(value) is DeviceNode else value
            memory.host_view(region)[...] = v
    else:
        cp_stream = stream.cupy
        cp = memory._load()["cupy"]
        vbuf = realize(value) if type(value) is DeviceNode else value

        def work():
            with cp_stream:
                if copy_old:
                    cp.copyto(buf, old_buf)
                region[...] = vbuf
    STATS["device_kernels"] += 1
    return work, [buf, region, old_buf], extra


# --- host <-> device copies (engine ops on the copy stream) ----------------------------------

def upload(host: np.ndarray, dev) -> DeviceNode:
    """A node whose buffer receives ``host`` (copied on the copy stream)."""
    host = np.asarray(host, order="C")
    eng = engine_for(dev)
    buf = memory.empty(dev, host.shape, host.dtype)
    n = leaf(buf, dev, shape=host.shape)
    stream = eng.copy

    def work():
        memory.copy_host_to_device(buf, host, stream)
    streams.STATS["gpu_copies"] += 1
    with memory.device_context(dev):
        n.event = eng.launch(stream, work, (), (buf, host))
    return n


def download(a: DeviceNode) -> np.ndarray:
    """The value of ``a`` (a node or view) on the host: a forcing point."""
    if CAPTURE[0] is not None:
        CAPTURE[0].opaque.append("a read of a value")
    if a.state == PENDING or _root(a).state == PENDING:
        flush([a])
    r = _root(a)
    if r.error is not None:
        raise r.error
    eng = engine_for(r.device)
    out = np.empty(a.shape, a.dtype)
    src = realize(a)
    stream = eng.copy
    err = []

    def work():
        try:
            if r.error is not None:
                raise r.error
            if memory.simulated():
                np.copyto(out, memory.host_view(src))
            else:
                cp = memory._load()["cupy"]
                with stream.cupy:
                    s = cp.ascontiguousarray(src)
                s.get(stream=stream.cupy, out=out)
        except BaseException as exc:
            err.append(exc)
    streams.STATS["gpu_copies"] += 1
    with memory.device_context(r.device):
        ev = eng.launch(stream, work, [r.event], (src,))
    r.readers.append(ev)
    eng.host_wait(ev)
    if r.error is not None:
        raise r.error
    if err:
        raise err[0]
    return out


# --- ordering with other libraries' streams ---------------------------------------------------

_sim_streams: dict = {}        # handle -> simulated stream (the simulator's foreign streams)


def library_stream(dev):
    """The stream other libraries' work on ``dev`` goes to when lazynp does not choose one:
    CuPy's current stream (the null stream unless the user set one).  Under the simulator a
    deferred stream stands for it (handle 1, the interface's legacy default stream), so a
    missing event after work on it gives wrong values in the tests, as on a GPU."""
    if memory.simulated():
        return sim_stream(dev, 1)
    cp = memory._load()["cupy"]
    with cp.cuda.Device(dev.index):
        cur = cp.cuda.get_current_stream()
    return streams.CupyStream(cur, None, "library")


def sim_stream(dev, handle: int):
    """Under the simulator, the deferred stream of a foreign ``handle`` (an integer, as in
    ``__cuda_array_interface__['stream']``), made on first use.  Tests put another
    library's pending writes on it."""
    key = (dev.name, handle)
    s = _sim_streams.get(key)
    if s is None:
        s = _sim_streams[key] = engine_for(dev).backend.new_stream(f"foreign{handle}")
    return s


def foreign_stream(dev, handle: int):
    """The stream named by a ``__cuda_array_interface__`` ``stream`` field: 1 the legacy
    default stream, 2 the per-thread default stream, else a ``cudaStream_t``."""
    if isinstance(handle, bool) or not isinstance(handle, (int, np.integer)) or handle == 0:
        raise ValueError(f"lazynp: invalid stream {handle!r} in __cuda_array_interface__ "
                         f"(0 is disallowed; None means no synchronization is needed)")
    if memory.simulated():
        return sim_stream(dev, int(handle))
    cp = memory._load()["cupy"]
    with cp.cuda.Device(dev.index):
        s = cp.cuda.Stream.null if handle == 1 else cp.cuda.Stream.ptds if handle == 2 \
            else cp.cuda.ExternalStream(int(handle))
    return streams.CupyStream(s, None, f"foreign{handle}")


def producer_event(dev, x):
    """An event after which another library's GPU array ``x`` is written: recorded on the
    stream its ``__cuda_array_interface__`` names, else (a CuPy array, a DLPack import) on
    CuPy's current stream; None when the interface says no synchronization is needed."""
    cai = None
    try:
        cai = x.__cuda_array_interface__
    except Exception:
        pass
    if isinstance(cai, dict) and "stream" in cai:
        handle = cai["stream"]
        if handle is None:
            return None
        stream = foreign_stream(dev, handle)
    elif memory.simulated() and cai is None:
        return None         # (a simulated Numba array: written when its copy returned)
    else:
        stream = library_stream(dev)
    return engine_for(dev).backend.record(stream)


def foreign_leaf(buf, dev, event) -> DeviceNode:
    """A node for another library's buffer, ready after ``event`` (its producer's): shared
    when C-contiguous, else copied (on the copy stream, after the event) into a
    C-contiguous buffer, as every lazynp buffer is."""
    if memory.is_c_contiguous(buf):
        n = leaf(buf, dev, exported=True)
        n.event = event
        return n
    eng = engine_for(dev)
    out = memory.empty(dev, tuple(buf.shape), buf.dtype)
    n = leaf(out, dev)
    stream = eng.copy

    def work():
        memory.copy_device_to_device(out, buf, stream)
    with memory.device_context(dev):
        n.event = eng.launch(stream, work, [event], (buf, out))
    return n


def result_leaf(dev, make, waits=(), keep=()) -> tuple:
    """``make()`` (a library call: CuPy's, returning device buffers) issued on a compute
    stream after it waits on ``waits``, and the event recorded after it; returns
    ``(result, event)``.  ``make`` runs now on the host (its result is needed at once);
    CuPy issues its work on the stream.  ``keep``: buffers held until that work is done.
    (Under the simulator, functions run at once on host copies: :func:`upload`.)"""
    eng = engine_for(dev)
    stream = eng.next_compute_stream()
    with memory.device_context(dev):
        eng.launch(stream, _nothing, list(waits))        # (the stream waits first)
        with stream.cupy:
            res = make()                                 # (issued after those waits)
        ev = eng.launch(stream, _nothing, (), tuple(keep) + (res,))
    return res, ev


def _nothing() -> None:
    pass


def order_consumer(n: DeviceNode, handle) -> None:
    """Make another library's stream (``handle``: an integer as in the interfaces, or a
    CuPy/PyTorch stream object) wait for ``n``'s value, without blocking the host."""
    if n.state == PENDING or (n.op is VIEW and _root(n).state == PENDING):
        flush([n])
    r = _root(n)
    if r.error is not None:
        raise r.error
    if r.event is None:
        return
    if not isinstance(handle, (int, np.integer)):
        ptr = getattr(handle, "ptr", None)
        if ptr is None:
            ptr = getattr(handle, "cuda_stream", None)        # (a torch.cuda.Stream)
        if not isinstance(ptr, int):
            raise TypeError(f"lazynp: a stream must be an integer handle or a CuPy/PyTorch "
                            f"stream, not {type(handle).__name__}")
        handle = ptr if ptr else 1
    stream = foreign_stream(r.device, handle)
    eng = engine_for(r.device)
    with memory.device_context(r.device):
        eng.backend.wait_event(stream, r.event)


def synchronize(dev=None) -> None:
    """Flush every pending device array and block until the device(s) finished."""
    flush_live()
    for name, eng in list(_engines.items()):
        if dev is None or names.device(dev).name == name:
            eng.synchronize()


def _leaf_impl():  # pragma: no cover - leaves never run
    raise AssertionError("a device leaf never runs")


_LEAF = OPS.get("device_leaf") or register(Op("device_leaf", "creation", _leaf_impl,
                                              raises_on_values=False))


_counters.register_table(STATS)
# (the streams count only device work, and lazynp.engine sits beside lazynp._base: the
# backend registers them)
_counters.register_table(streams.STATS)
