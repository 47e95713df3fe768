"""``lazynp.jit`` of a function of device arrays: a plan of launches, replayed per call.

The first call with a signature (the device arrays' shapes, dtypes and device; the values
of Python scalars and of ``static_argnums`` arguments) copies the array arguments into
buffers the plan owns, runs the function on them (it records on the device graph as
usual) and flushes its results while :data:`lazynp.cuda.runtime.CAPTURE` keeps each launch
of that flush: a fused kernel, a CuPy-run op, a fill, a write.  A later call records
nothing, fuses nothing and looks no kernel up: it copies its arguments into the plan's
input buffers, enqueues the kept launches in their order (one host call each: a *step*),
each waiting on the events of the steps it reads, and copies the results into new
buffers.  The plan's buffers are reused by the next call (as a CUDA graph's static inputs
and outputs), which first waits for the previous call's steps.

A function the plan cannot replay runs as it is on every call (its signature is
remembered): one that reads a value on the host (``float(x)``, printing), calls a function
run at once (``sort``, fancy indexing...), writes into an argument, reads device arrays it
did not receive as arguments (closed over), or returns something other than device arrays
(one, or a tuple or list of them).  (One that writes into an argument runs twice on its
first call: on the copies, then on the arguments.)  ``stats()``: ``device_jit_plans``,
``device_jit_replays``, ``device_jit_steps``, ``device_jit_unplanned``.
"""
from __future__ import annotations

from .._base import counters as _counters
from . import memory, runtime
from .array import DeviceArray

STATS = {"device_jit_plans": 0, "device_jit_replays": 0, "device_jit_steps": 0,
         "device_jit_unplanned": 0}
_SCALARS = (bool, int, float, complex)
_UNPLANNED = "unplanned"


class _Capture:
    """What the runtime keeps while a plan is captured."""

    __slots__ = ("steps", "opaque", "leaves")

    def __init__(self):
        self.steps: list = []       # (stream, run, waits, keep, event, nodes, inputs)
        self.opaque: list = []      # why the function cannot be replayed
        self.leaves: list = []      # device leaves made during the capture (its own)


def call(jit_obj, args: tuple, kwargs: dict):
    """``jit_obj(*args, **kwargs)`` with device array arguments (the device hook of
    :class:`lazynp.jit.jit`)."""
    if kwargs:
        args = tuple(jit_obj._positional(args, kwargs))
    n = len(args)
    static = {i % n for i in jit_obj._static if -n <= i < n}
    key = _signature(args, static)
    log = jit_obj.__dict__.setdefault("_device_log", [])
    if key is None:
        STATS["device_jit_unplanned"] += 1
        if not any(k is None for k, _, _ in log):
            log.append((None, "an argument that is not a device array, a Python scalar or a "
                              "static argument", ""))
        return jit_obj._fun(*args)
    plans = jit_obj.__dict__.setdefault("_device_plans", {})
    plan = plans.get(key)
    if plan is None:
        plan, result, why = _capture(jit_obj._fun, args, static)
        plans[key] = plan
        log.append((key, _reason(key, log, jit_obj), why))
        return result
    if plan is _UNPLANNED:
        STATS["device_jit_unplanned"] += 1
        return jit_obj._fun(*args)
    return plan.run(args)


_UNPLANNED_ARGS = "runs as it is on every call"


def explain_lines(jit_obj) -> list:
    """One paragraph per device signature met: why its plan was made, and what it replays
    per call or why it runs unplanned (:meth:`lazynp.jit.jit.explain`)."""
    lines = []
    plans = jit_obj.__dict__.get("_device_plans", {})
    for k, (key, reason, why) in enumerate(jit_obj.__dict__.get("_device_log", ())):
        lines.append(f"device plan {k + 1}: {reason}")
        plan = plans.get(key) if key is not None else None
        if isinstance(plan, _Plan):
            lines.append(f"    {len(plan.steps)} launch(es) replayed per call "
                         f"({plan.kernels} of them kernels); {len(plan.in_bufs)} argument "
                         f"copy(ies) in, {len(plan.outputs)} result copy(ies) out")
        else:
            lines.append(f"    not planned, {_UNPLANNED_ARGS}" + (f": {why}" if why else ""))
    return lines


def _describe(item) -> str:
    kind = item[0]
    if kind == "device":
        _, shape, dtype, dev = item
        return f"device array {dtype}{list(shape)} on {dev}"
    if kind == "const":
        return f"{item[1].__name__} {item[2]!r}"
    return f"static {item[1]!r}"


def _reason(key: tuple, log: list, jit_obj) -> str:
    """Why a new device plan: the first call's signature, or what changed since the last
    signature met."""
    prev = next((k for k, _, _ in reversed(log) if k is not None), None)
    if prev is None:
        parts = [f"{jit_obj._argname(i)}: {_describe(a)}" for i, a in enumerate(key)]
        return "first call: " + ("; ".join(parts) if parts else "no arguments")
    if len(prev) != len(key):
        return f"signature changed: number of arguments {len(prev)} -> {len(key)}"
    diffs = [f"{jit_obj._argname(i)}: {_describe(a)} -> {_describe(b)}"
             for i, (a, b) in enumerate(zip(prev, key)) if a != b or type(a[-1]) is not
             type(b[-1])]
    return "signature changed: " + "; ".join(diffs)


def _signature(args: tuple, static: set):
    key = []
    for i, a in enumerate(args):
        if i in static:
            try:
                hash(a)
            except TypeError:
                return None
            key.append(("static", a))
        elif isinstance(a, DeviceArray):
            key.append(("device", a.shape, a.dtype, a.device.name))
        elif type(a) in _SCALARS:
            key.append(("const", type(a), a))
        else:
            return None             # (other arguments: the function runs as it is)
    return tuple(key)


def _outputs(result):
    """The result's device arrays (a list) and how to rebuild it, or None."""
    if isinstance(result, DeviceArray):
        return [result], None
    if type(result) in (tuple, list) and result and \
            all(isinstance(r, DeviceArray) for r in result):
        return list(result), type(result)
    return None


def _copy_in(eng, dev, buf, a: DeviceArray, extra=()):
    """Enqueue ``buf[...] = a`` on the copy stream after ``a``'s producer (and ``extra``);
    returns the event after it."""
    node = a._node()
    r = runtime._root(node)
    if node.state == runtime.PENDING or r.state == runtime.PENDING:
        runtime.flush([node])
    if r.error is not None:
        raise r.error
    src = runtime.realize(node)
    stream = eng.copy

    def work():
        memory.copy_device_to_device(buf, src, stream)
    with memory.device_context(dev):
        ev = eng.launch(stream, work, [r.event] + list(extra), (src,))
    r.readers.append(ev)
    return ev


def _capture(fun, args: tuple, static: set):
    """Run ``fun`` on copies of its array arguments, keeping the launches; returns
    ``(plan or _UNPLANNED, result, why it is not planned)``."""
    dev_args = [i for i, a in enumerate(args) if i not in static and isinstance(a, DeviceArray)]
    devices = {args[i].device for i in dev_args}
    if len(devices) != 1:
        return _UNPLANNED, fun(*args), "arrays on several devices"
    dev = devices.pop()
    runtime.flush_live()                      # (work recorded before is not the plan's)
    eng = runtime.engine_for(dev)
    call_args = list(args)
    inputs = []                               # (buffer, leaf node, the array fun gets)
    for i in dev_args:
        a = args[i]
        buf = memory.empty(dev, a.shape, a.dtype)
        node = runtime.leaf(buf, dev)
        node.event = _copy_in(eng, dev, buf, a)
        call_args[i] = DeviceArray._from_node(node)
        inputs.append((buf, node, call_args[i]))
    cap = _Capture()
    kernels = runtime.STATS["device_kernels"]
    runtime.CAPTURE[0] = cap
    try:
        result = fun(*call_args)
        outs = _outputs(result)
        if outs is not None:
            runtime.flush([o._node() for o in outs[0]])
    finally:
        runtime.CAPTURE[0] = None
    if any(arr._var.head is not node for _, node, arr in inputs):
        # (an argument was written: the write must reach the caller's array)
        return _UNPLANNED, fun(*args), "it writes into an argument"
    why = list(cap.opaque)
    if outs is None:
        why.append("a result that is not device arrays")
    plan = None if why else _Plan.build(eng, dev, dev_args, inputs, cap, outs, why)
    if plan is None:
        return _UNPLANNED, result, "; ".join(dict.fromkeys(why))
    STATS["device_jit_plans"] += 1
    plan.kernels = runtime.STATS["device_kernels"] - kernels
    return plan, plan.results({"s": [st[4] for st in cap.steps],
                               "i": [node.event for _, node, _ in inputs]}), ""


class _Plan:
    """The kept launches of one signature and the buffers they use."""

    def __init__(self, eng, dev, dev_args, in_bufs, steps, outputs, nodes, rebuild):
        self.eng = eng
        self.dev = dev
        self.dev_args = dev_args        # positions of the array arguments
        self.in_bufs = in_bufs          # the plan's copies of them
        self.steps = steps              # (stream, run, deps): deps ("s"|"i"|"e", index/event)
        self.outputs = outputs          # (source buffer or view, dep)
        self.nodes = nodes              # every node of the steps (their errors)
        self.rebuild = rebuild          # None: one array; else tuple or list
        self.last: dict = {}            # stream -> the previous call's last event there
        self.kernels = 0                # (kernels, fills and writes among the steps)

    @classmethod
    def build(cls, eng, dev, dev_args, inputs, cap, outs, why):
        own = {id(st[4]): k for k, st in enumerate(cap.steps)}
        made = {id(st_node) for st in cap.steps for st_node in st[5]}
        made.update(id(n) for n in cap.leaves)
        in_of = {id(node): j for j, (_, node, _) in enumerate(inputs)}
        in_ev = {id(node.event): j for j, (_, node, _) in enumerate(inputs)}

        def dep_of(ev):
            k = own.get(id(ev))
            if k is not None:
                return ("s", k)
            j = in_ev.get(id(ev))
            if j is not None:
                return ("i", j)
            return ("e", ev)          # (a leaf of the capture's own: an upload)

        steps = []
        for stream, run, waits, keep, ev, nodes, step_inputs in cap.steps:
            for r in step_inputs:
                if id(r) not in made and id(r) not in in_of:
                    why.append("a device array it did not receive as an argument")
                    return None
            steps.append((stream, run, tuple(dep_of(w) for w in waits if w is not None)))
        outputs = []
        for o in outs[0]:
            node = o._node()
            r = runtime._root(node)
            if id(r) not in made and id(r) not in in_of:
                why.append("a result it did not make")
                return None
            dep = dep_of(r.event) if r.event is not None else None
            outputs.append((runtime.realize(node), dep))
        nodes = [n for st in cap.steps for n in st[5]]
        last = {}
        for st in cap.steps:
            last[id(st[0])] = st[4]
        plan = cls(eng, dev, dev_args, [b for b, _, _ in inputs], steps, outputs, nodes,
                   outs[1])
        plan.last = last
        return plan

    def run(self, args: tuple):
        """One call: the arguments copied in, the steps enqueued, the results copied out."""
        eng, dev = self.eng, self.dev
        barrier = list(self.last.values())      # (the previous call's steps read the buffers)
        in_ev = [_copy_in(eng, dev, buf, args[i], barrier)
                 for buf, i in zip(self.in_bufs, self.dev_args)]
        for n in self.nodes:
            n.error = None
        evs: list = []
        last = {}
        launch = eng.launch
        with memory.device_context(dev):
            for stream, run, deps in self.steps:
                waits = [evs[x] if kind == "s" else in_ev[x] if kind == "i" else x
                         for kind, x in deps]
                if id(stream) not in last:
                    waits += barrier
                ev = launch(stream, run, waits)
                evs.append(ev)
                last[id(stream)] = ev
        STATS["device_jit_replays"] += 1
        STATS["device_jit_steps"] += len(self.steps)
        if in_ev:
            last.setdefault(id(eng.copy), in_ev[-1])
        self.last = last
        return self.results({"s": evs, "i": in_ev})

    def results(self, events: dict):
        """The outputs copied into new buffers, each after the step that wrote it; records
        the copies' last event as the copy stream's in :attr:`last`."""
        eng, dev = self.eng, self.dev
        arrays = []
        nodes = self.nodes
        stream = eng.copy
        for src, dep in self.outputs:
            out = memory.empty(dev, tuple(src.shape), src.dtype)
            node = runtime.leaf(out, dev)

            def work(out=out, node=node, src=src):
                bad = next((n.error for n in nodes if n.error is not None), None)
                if bad is not None:
                    node.error = bad        # (raised by the next wait on the result)
                    return
                memory.copy_device_to_device(out, src, stream)
            waits = [] if dep is None else \
                [events[dep[0]][dep[1]] if dep[0] in events else dep[1]]
            with memory.device_context(dev):
                node.event = eng.launch(stream, work, waits, (src,))
            self.last[id(stream)] = node.event
            arrays.append(DeviceArray._from_node(node))
        if self.rebuild is None:
            return arrays[0]
        return self.rebuild(arrays)


_counters.register_table(STATS)
