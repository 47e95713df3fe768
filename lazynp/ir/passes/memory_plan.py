"""Memory planning (MXNet's PlanMemory): inplace + co-share with colouring.

The planner works on a small description of a schedule, so it serves both Symbols (one
op per step) and compiled jit plans (fused kernels with several outputs per step):

* :class:`Value` -- one array: ``nbytes``, ``itemsize`` and a ``kind``:
  ``"planned"`` (needs a buffer the plan may share), ``"fresh"`` (allocated on every call:
  results handed to the caller, or ops that cannot write into a given buffer),
  ``"external"`` (inputs and constants: not internal memory), ``"alias"`` (a view of
  ``base``: reading it reads the base's buffer).
* :class:`Step` -- runs in order, reads ``inputs`` (value ids), writes ``outputs``;
  ``inplace`` lists ``(input position, output position)`` pairs the op allows.

Algorithm (the paper's appendix): (1) a reference count per storage = number of steps
reading it (+1 for graph outputs); (2) walk the steps in order: an output takes an input's
storage in place when the op allows it, the storage has no other pending reader, it is not
an alias read, and sizes and item sizes match; other outputs (largest first) take a block
from a free pool keyed by size (first ``[size, size*range)``, then ``[size/range, size)``,
growing the block), else a new storage; after the step each input storage's count drops and
at zero the block returns to the pool; unused outputs are released at once.  (3) The whole
simulation runs for several match ranges and the plan with the fewest bytes is kept.
*Co-share colouring*: the heaviest path (by bytes) is coloured, then the next heaviest among
the rest, ``num_colors`` times; remaining steps get one more colour; a freed block is reused
only by a step of the same colour.  With ``parallel_safe`` a block is also only reused by a
step that depends on every earlier user of the block, so steps that could run in parallel
never share a buffer.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ...ops.registry import OPS
from ..symbol import Ref

MATCH_RANGES = (1, 2, 4, 8, 16)


@dataclass
class Value:
    nbytes: int
    itemsize: int = 1
    kind: str = "planned"          # planned | fresh | external | alias
    base: int | None = None        # for aliases: the value viewed
    is_output: bool = False
    name: str = ""


@dataclass
class Step:
    inputs: list
    outputs: list
    inplace: list = field(default_factory=list)   # (input position, output position)
    name: str = ""


@dataclass
class MemoryPlan:
    storage_of: dict               # value id -> storage id (planned values only)
    storage_bytes: list            # storage id -> bytes
    inplace: list                  # (step index, input value, output value)
    naive_bytes: int
    planned_bytes: int
    fresh_bytes: int
    match_range: int
    colors: list
    lower_bound_bytes: int = 0

    @property
    def num_buffers(self) -> int:
        return len(self.storage_bytes)

    def report(self) -> dict:
        return {"naive_bytes": self.naive_bytes, "planned_bytes": self.planned_bytes,
                "num_buffers": self.num_buffers, "buffer_bytes": sum(self.storage_bytes),
                "fresh_bytes": self.fresh_bytes, "inplace": len(self.inplace),
                "match_range": self.match_range,
                "lower_bound_bytes": self.lower_bound_bytes,
                "ratio": self.planned_bytes / self.naive_bytes if self.naive_bytes else 1.0}


def _root(values, v: int) -> int:
    while values[v].kind == "alias":
        v = values[v].base
    return v


def _producers(steps) -> dict:
    """Value -> index of the step that writes it."""
    return {o: s for s, st in enumerate(steps) for o in st.outputs}


def color_steps(values, steps, num_colors: int) -> list:
    """MXNet's colouring: repeatedly take the heaviest path (bytes written) among uncoloured
    steps and give it a new colour; the rest get colour ``num_colors``."""
    n = len(steps)
    producer = _producers(steps)
    preds = []
    for st in steps:
        ps = set()
        for i in st.inputs:
            r = i
            while True:
                p = producer.get(r)
                if p is not None:
                    ps.add(p)
                if values[r].kind == "alias":
                    r = values[r].base
                else:
                    break
        preds.append(ps)
    weight = [sum(values[o].nbytes for o in st.outputs) for st in steps]
    color = [-1] * n
    for c in range(num_colors):
        best = [0] * n
        back = [-1] * n
        top, arg = -1, -1
        for s in range(n):
            if color[s] != -1:
                continue
            b, bk = 0, -1
            for p in preds[s]:
                if color[p] == -1 and best[p] > b:
                    b, bk = best[p], p
            best[s] = b + weight[s]
            back[s] = bk
            if best[s] > top:
                top, arg = best[s], s
        if arg < 0:
            break
        while arg >= 0:
            color[arg] = c
            arg = back[arg]
    return [num_colors if c == -1 else c for c in color]


def _ancestors(values, steps) -> list:
    """Bitmask of steps each step (transitively) depends on."""
    producer = _producers(steps)
    anc = []
    for st in steps:
        m = 0
        for i in st.inputs:
            r = i
            while True:
                p = producer.get(r)
                if p is not None:
                    m |= anc[p] | (1 << p)
                if values[r].kind == "alias":
                    r = values[r].base
                else:
                    break
        anc.append(m)
    return anc


def plan(values: list, steps: list, match_ranges=MATCH_RANGES, num_colors: int = 1,
         parallel_safe: bool = True, allow_inplace: bool = True) -> MemoryPlan:
    """Plan storage for ``values`` written by ``steps`` (see the module docstring)."""
    naive = sum(v.nbytes for v in values if v.kind in ("planned", "fresh"))
    fresh = sum(v.nbytes for v in values if v.kind == "fresh")
    colors = color_steps(values, steps, num_colors)
    anc = _ancestors(values, steps) if parallel_safe else None
    best = None
    for rng in match_ranges:
        p = _simulate(values, steps, rng, colors, anc, allow_inplace)
        if best is None or sum(p[1]) < sum(best[1]):
            best = p + (rng,)
    storage_of, sizes, inplace, rng = best
    return MemoryPlan(storage_of, sizes, inplace, naive, sum(sizes) + fresh, fresh, rng, colors,
                      lower_bound(values, steps, allow_inplace) + fresh)


def lower_bound(values, steps, allow_inplace: bool = True) -> int:
    """Bytes of planned storage any plan of this schedule needs (no recomputation): while
    step ``s`` runs, every planned value written before it and read by it or later is live,
    and so are its outputs, except one that may take the buffer of an input read for the
    last time.  The maximum over the steps."""
    last = {}
    for s, st in enumerate(steps):
        for i in st.inputs:
            last[_root(values, i)] = s
    for v, val in enumerate(values):
        if val.is_output:
            last[_root(values, v)] = len(steps)
    producer = _producers(steps)
    bound = 0
    for s, st in enumerate(steps):
        live = sum(values[v].nbytes for v, p in producer.items()
                   if p < s and values[v].kind == "planned" and last.get(v, -1) >= s)
        outs = 0
        for k, o in enumerate(st.outputs):
            if values[o].kind != "planned":
                continue
            reuse = allow_inplace and any(
                op_ == k and values[st.inputs[ip]].kind == "planned" and
                last.get(st.inputs[ip]) == s and
                values[st.inputs[ip]].nbytes == values[o].nbytes
                for ip, op_ in st.inplace)
            outs += 0 if reuse else values[o].nbytes
        bound = max(bound, live + outs)
    return bound


def _simulate(values, steps, rng, colors, anc, allow_inplace):
    # reference counts per root value (storage owner): distinct reading steps (+1 output)
    count = {}
    for st in steps:
        for r in {_root(values, i) for i in st.inputs}:
            count[r] = count.get(r, 0) + 1
    for v, val in enumerate(values):
        if val.is_output:
            r = _root(values, v)
            count[r] = count.get(r, 0) + 1
    storage_of: dict = {}
    sizes: list = []
    users: list = []           # storage id -> bitmask of steps that used it
    scolor: list = []
    sref: dict = {}            # storage id -> pending readers
    free: list = []            # storage ids in the pool
    inplace_log = []
    for s, st in enumerate(steps):
        taken = set()
        c = colors[s]
        outs = sorted(st.outputs, key=lambda o: -values[o].nbytes)
        for o in outs:
            val = values[o]
            if val.kind != "planned":
                continue
            sid = None
            if allow_inplace:
                for ip, op_ in st.inplace:
                    if st.outputs[op_] != o:
                        continue
                    a = st.inputs[ip]
                    av = values[a]
                    if av.kind != "planned" or a not in storage_of:
                        continue
                    cand = storage_of[a]
                    if cand in taken or sref.get(cand, 0) != 1:
                        continue
                    if av.nbytes != val.nbytes or av.itemsize != val.itemsize:
                        continue
                    # the input must not also be read through an alias in this step
                    if any(values[i].kind == "alias" and _root(values, i) == a
                           for i in st.inputs):
                        continue
                    sid = cand
                    inplace_log.append((s, a, o))
                    sref[sid] = sref[sid] + count.get(o, 0)
                    break
            if sid is None:
                sid = _request(free, sizes, scolor, users, val.nbytes, rng, c,
                               anc[s] if anc is not None else None)
                if sid is None:
                    sid = len(sizes)
                    sizes.append(val.nbytes)
                    scolor.append(c)
                    users.append(0)
                sref[sid] = count.get(o, 0)
            taken.add(sid)
            storage_of[o] = sid
            users[sid] |= 1 << s
        # release inputs whose last reader this was
        for r in {_root(values, i) for i in st.inputs}:
            sid = storage_of.get(r)
            if sid is None:
                continue
            users[sid] |= 1 << s
            sref[sid] -= 1
            if sref[sid] == 0:
                free.append(sid)
        for o in st.outputs:
            sid = storage_of.get(o)
            if sid is not None and sref.get(sid) == 0 and sid not in free:
                free.append(sid)
    return storage_of, sizes, inplace_log


def _request(free, sizes, scolor, users, nbytes, rng, color, anc):
    def ok(sid):
        if scolor[sid] != color:
            return False
        return anc is None or (users[sid] & ~anc) == 0
    best = None
    for sid in free:       # [size, size*range): the smallest that fits
        b = sizes[sid]
        if nbytes <= b < nbytes * rng or (rng == 1 and b == nbytes):
            if ok(sid) and (best is None or b < sizes[best]):
                best = sid
    if best is None:       # [size/range, size): the largest, grown to size
        for sid in free:
            b = sizes[sid]
            if nbytes / rng <= b < nbytes and ok(sid) and (best is None or b > sizes[best]):
                best = sid
        if best is not None:
            sizes[best] = nbytes
    if best is not None:
        free.remove(best)
    return best


# --- Symbols ------------------------------------------------------------------------------

def describe_symbol(sym, outputs_fresh: bool = False):
    """``(values, steps)`` for a Symbol: one step per op entry."""
    values, steps = [], []
    outs = {int(o) for o in sym.output_refs}
    for i, n in enumerate(sym.nodes):
        nbytes = n.dtype.itemsize * int(np.prod(n.shape))
        if n.op in ("placeholder", "leaf"):
            values.append(Value(nbytes, n.dtype.itemsize, "external", name=n.op))
            continue
        if n.op == "view":
            values.append(Value(nbytes, n.dtype.itemsize, "alias", base=int(n.args[0]),
                                is_output=i in outs, name="view"))
            continue
        kind = "fresh" if outputs_fresh and i in outs else "planned"
        values.append(Value(nbytes, n.dtype.itemsize, kind, is_output=i in outs, name=n.op))
        ins = [int(a) for a in n.args if type(a) is Ref]
        op = OPS.get(n.op)
        pos = {}
        k = 0
        for j, a in enumerate(n.args):
            if type(a) is Ref:
                pos[j] = k
                k += 1
        inpl = [(pos[j], 0) for j in (op.inplace if op is not None else ()) if j in pos]
        steps.append(Step(ins, [i], inpl, n.op))
    # view entries are not steps: give them no storage of their own
    return values, steps


def plan_symbol(sym, **kw) -> MemoryPlan:
    """The memory plan of a Symbol (one op per step, no fusion)."""
    values, steps = describe_symbol(sym, kw.pop("outputs_fresh", False))
    return plan(values, steps, **kw)
