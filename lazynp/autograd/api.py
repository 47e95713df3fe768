"""The differentiation API over the tape (:mod:`lazynp.autograd.tape`).

Functional API (autograd/JAX style): :func:`grad`, :func:`value_and_grad`, :func:`vjp`,
:func:`jvp`, :func:`jacobian`, :func:`hessian`, :func:`elementwise_grad`; arguments and
outputs may be pytrees (tuples, lists, dicts).  Imperative API (MXNet style):
``x.attach_grad()``, ``with lazynp.autograd.record(): ...``, ``y.backward()``, ``x.grad``,
``lazynp.autograd.pause()``.  autograd's helpers: :func:`hessian_vector_product`,
:func:`make_hvp`, :func:`make_vjp`, :func:`make_jvp`, :func:`tensor_jacobian_product`.

Calling the same ``grad``/``value_and_grad`` function again with a forward graph of the same
structure runs a plan compiled for that structure instead of recording the backward pass
again (:mod:`lazynp.autograd.replay`).

``jvp`` is computed as the transpose of a VJP (the VJP is linear in its cotangent, so its
own VJP applied to the tangent gives ``J @ t``).

NumPy in, NumPy out: ``grad``, ``value_and_grad``, ``jacobian``, ``hessian``,
``elementwise_grad``, ``hessian_vector_product`` and the ``make_*`` functions called with no
lazynp array outside any transform return NumPy arrays (0-d results as NumPy scalars), as
autograd does, so that SciPy's compiled optimizers take them (``jac=lazynp.grad(f)``).
"""
from __future__ import annotations

import functools
import weakref

import numpy as np

from .. import devices
from ..core import graph
from .._numpy import namespace as lnp
from ..array.ndarray import ndarray, add_member
from . import replay as _replay
from .errors import ChunkedClosure as _ChunkedClosure
from .tape import (AutogradError, Trace, Tape, arrays_in, backward_pass, depth, flatten,
                   fresh_input, stop_gradient, unflatten, RECORD_TRACES, add_pause, paused)

__all__ = ["grad", "value_and_grad", "vjp", "jvp", "jacobian", "hessian", "elementwise_grad",
           "record", "pause", "backward", "is_recording", "is_training", "mark_variables",
           "hessian_vector_product", "hessian_tensor_product", "tensor_jacobian_product",
           "vector_jacobian_product", "make_vjp", "make_jvp", "make_hvp"]


def _zeros_like(x):
    x = lnp.asarray(x)
    return lnp.zeros(x.shape, x.dtype if x.dtype.kind == "f" else x.dtype)


def _as_cot(c, like):
    if c is None:
        return _zeros_like(like)
    return c


def _argnums_tuple(argnums):
    return (argnums,) if isinstance(argnums, int) else tuple(argnums)


def _check_differentiable(leaf, k, who: str) -> None:
    """Raise ``TypeError`` naming argument ``k`` when ``leaf`` is not a float or complex
    value: autograd raises "Can't differentiate w.r.t. type int" (JAX: "grad requires
    real- or complex-valued inputs"); a zero gradient would be silently wrong."""
    dt = getattr(leaf, "dtype", None)
    if not isinstance(dt, np.dtype):
        try:
            dt = np.asarray(leaf).dtype
        except Exception:
            dt = np.dtype(object)
    if dt.kind in "fc":
        return
    kind = type(leaf).__name__ if np.ndim(leaf) == 0 and not hasattr(leaf, "dtype") \
        else f"{type(leaf).__name__} of dtype {dt}"
    raise TypeError(
        f"{who}: Can't differentiate w.r.t. type {kind} (argument {k}): only float and "
        f"complex inputs have a gradient (as autograd and JAX); pass a float value, e.g. "
        f"x.astype(float) or 2.0 for 2")


def _prepare(args, argnums, trace, who="lazynp.grad"):
    """Replace the differentiated arguments by fresh inputs; returns (args, specs, nodes).
    A differentiated argument that is not float or complex raises ``TypeError``."""
    args = list(args)
    specs, nodes, originals = [], [], []
    for k in argnums:
        leaves = []
        spec = flatten(args[k], leaves)
        new, ns = [], []
        for leaf in leaves:
            if type(leaf) is not ndarray or leaf.dtype.kind not in "fc":
                _check_differentiable(leaf, k, who)
            a, n = fresh_input(leaf, trace)
            new.append(a)
            ns.append(n)
        args[k] = unflatten(spec, iter(new))
        specs.append(spec)
        nodes.append(ns)
        originals.append(new)
    return args, specs, nodes, originals


def _grads_out(grads, specs, nodes_per_arg, originals, single):
    res = []
    it = iter(grads)
    for spec, ns, orig in zip(specs, nodes_per_arg, originals):
        vals = [_as_cot(next(it), o) for o, _n in zip(orig, ns)]
        res.append(unflatten(spec, iter(vals)))
    return res[0] if single else tuple(res)


def _cpu_defaults(call):
    """``call()``; inside a ``default_device`` block, in a ``default_device("cpu")`` one:
    the arguments are CPU arrays (a device argument took the device hook), so the tape and
    the arrays the transform makes (seeds, tangents, basis vectors) stay on the CPU."""
    if _default_not_cpu():
        with devices.default_device("cpu"):
            return call()
    return call()


def _default_not_cpu() -> bool:
    return bool(devices.DEFAULTS_OPEN) and devices.get_default_device().kind != "cpu"


def _refuse_chunked_result(out, who: str) -> None:
    """Raise :class:`_ChunkedClosure` when the function of CPU arguments returned a chunked
    (dask) array: the CPU tape cannot follow the chunked data it read from a closure."""
    if getattr(getattr(out, "_device", None), "kind", None) == "dask":
        raise _ChunkedClosure(who, out._n.client)


def _chunked_retry(e: _ChunkedClosure):
    """The module of the chunked path to retry a transform with; raises ``e`` inside
    another transform's recording (the retry would read the outer traced arguments as
    constants: a silently zero derivative)."""
    if depth() > 0:
        raise e
    from . import dask_forward
    return dask_forward


def _scalar_out(out):
    _refuse_chunked_result(out, "lazynp.grad")
    out = lnp.asarray(out)
    if out.size != 1:
        raise TypeError(f"lazynp.grad: the function must return a scalar, not an array of "
                        f"shape {out.shape} (use vjp, jacobian or elementwise_grad)")
    if out.dtype.kind not in "fc":
        raise TypeError(f"lazynp.grad: the function returned a value of dtype {out.dtype}, "
                        f"which has no gradient (as autograd and JAX: grad needs a real "
                        f"float output); differentiate the float computation it is made of")
    if out.dtype.kind == "c":
        raise TypeError("lazynp.grad: the function must return a real scalar, not a complex "
                        "one (as autograd: differentiate its real part, abs or the like, or "
                        "use vjp/jacobian)")
    return out


def _argnum_alias(argnums, argnum):
    """autograd spells ``argnums`` ``argnum``: accept either (not both)."""
    if argnum is None:
        return argnums
    if argnums != 0 and argnums != argnum:
        raise TypeError("give argnums or its alias argnum, not both")
    return argnum


# --- NumPy in, NumPy out (SciPy and friends) ---------------------------------------------------

def _plain_call(args, kwargs) -> bool:
    """True when a transform is called with no lazynp array (NumPy arrays, Python
    numbers) and no transform is open: it then returns NumPy values, as autograd does, so
    that SciPy's compiled code (``scipy.optimize``'s ``jac=``, ``hessp=``) can use them."""
    if graph.shared.keep_graph:
        return False
    for _a in arrays_in((args, tuple(kwargs.values()) if kwargs else ())):
        return False
    return True


def _to_numpy(obj):
    """``obj`` with its lazynp arrays computed as NumPy arrays (0-d ones as NumPy scalars,
    as autograd gives them)."""
    if isinstance(obj, ndarray):
        v = np.asarray(obj)
        return v[()] if v.ndim == 0 else v
    if isinstance(obj, tuple):
        vals = [_to_numpy(x) for x in obj]
        return type(obj)(*vals) if hasattr(obj, "_fields") else tuple(vals)
    if isinstance(obj, list):
        return [_to_numpy(x) for x in obj]
    if isinstance(obj, dict):
        return {k: _to_numpy(v) for k, v in obj.items()}
    return obj


def _numpy_io(fn):
    """``fn`` (a transformed function) returning NumPy values when called with no lazynp
    array outside any transform (:func:`_plain_call`)."""
    @functools.wraps(fn)
    def wrapped(*args, **kwargs):
        out = fn(*args, **kwargs)
        if _plain_call(args, kwargs):
            return _to_numpy(out)
        return out
    return wrapped


def value_and_grad(fun, argnums=0, has_aux=False, _want_value=True, *, argnum=None):
    """``fun``'s value and gradient w.r.t. the arguments ``argnums`` (lazy arrays;
    ``argnum`` is accepted as autograd's name for it).

    ``fun`` must return a scalar (or ``(scalar, aux)`` with ``has_aux=True``).  Returns
    ``(value, grad)`` or ``((value, aux), grad)``; the gradient has the structure of the
    argument (a tuple over ``argnums`` when it is a tuple).
    """
    argnums = _argnum_alias(argnums, argnum)
    single = isinstance(argnums, int)
    nums = _argnums_tuple(argnums)

    replay = _shared_replay(fun, (nums, has_aux, _want_value))

    def call(args, kwargs, watch: list):
        use_replay = _replay.enabled() and not has_aux and depth() == 0
        flushes = graph.STATS["flushes"]
        with Trace() as tr:
            new_args, specs, nodes, originals = _prepare(args, nums, tr)
            res = fun(*new_args, **kwargs)
            if has_aux:
                res, aux = res
            out = _scalar_out(res)
            onode = out._node()
            tape = tr.capture()
            flat_nodes = [n for ns in nodes for n in ns]
            entry = None
            if use_replay and out is res and graph.STATS["flushes"] == flushes and \
                    not tape.poison:
                entry, key, externals, readers = _replay_entry(replay, onode, tape,
                                                               flat_nodes)
            grads = None
            if entry is not None and entry.plan is None and entry.count >= _replay.COMPILE_AT:
                grads = backward_pass([onode], [lnp.ones(out.shape, out.dtype)], flat_nodes, tape)
                if not _compile_plan(entry, flushes, [out] if _want_value else [], grads,
                                     externals):
                    entry = None
            replayed = entry is not None and bool(entry.plan)
            if replayed:
                recorded = tr.recorded()
            elif grads is None:
                grads = backward_pass([onode], [lnp.ones(out.shape, out.dtype)], flat_nodes, tape)
        if replayed:
            # (outside the trace: reading the inputs must not mark them as kept for a
            # backward pass, which would stop in-place updates of them)
            ran = _run_plan(entry, externals, replay, key)
            if ran is None:
                if grads is None:      # (else the compiling call recorded them already)
                    with Trace():
                        grads = backward_pass([onode], [lnp.ones(out.shape, out.dtype)],
                                          flat_nodes, tape)
            else:
                # (a backward pass recorded while compiling reads more than the forward
                # tape's readers: abandon() finds them again)
                tape_only = grads is None
                values, grads = ran
                # (grad drops the value: the forward graph must not outlive the call)
                res = _replay.deliver(res, onode, values[0]) if values else None
                watch.extend(_replay.abandon(recorded, readers if tape_only else None))
        g = _grads_out(grads, specs, nodes, originals, single)
        return ((res, aux) if has_aux else res), g

    def wrapped(*args, **kwargs):
        if devices.ACTIVE and devices.any_on_device(args):        # (device hook)
            from .device import value_and_grad as on_device
            return on_device(fun, argnums, has_aux, want_value=_want_value)(*args, **kwargs)
        watch: list = []
        try:
            if devices.DEFAULTS_OPEN:
                # CPU arguments inside a default_device block: the tape, its seed and the
                # backward pass's arrays stay on the CPU
                with devices.default_device("cpu"):
                    r = call(args, kwargs, watch)
            else:
                r = call(args, kwargs, watch)
        except _ChunkedClosure as e:
            # (chunked data from a closure: the chunked path, the arguments put on the
            # cluster as one-chunk arrays)
            fwd = _chunked_retry(e)
            return fwd.dask_grad.value_and_grad(fun, argnums, has_aux, _want_value,
                                                e.client)(*args, **kwargs)
        if watch:       # call's frame is gone: the trace's nodes nobody kept are dead now
            _replay.release_dead(watch)
        return r
    wrapped.__name__ = f"value_and_grad({getattr(fun, '__name__', 'f')})"
    return _numpy_io(wrapped) if _want_value else wrapped


_GRAD_REPLAYS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _shared_replay(fun, variant):
    """The replay plans of ``grad``/``value_and_grad`` functions of ``fun`` (one table per
    ``variant``: argnums, has_aux, whether the value is an output), shared by every
    ``grad(fun)`` made: ``scipy.optimize.minimize(f, x0, jac=grad(f))`` called again does
    not compile its plan again.  A plan depends only on the forward structure it is keyed
    by, so sharing it is exact."""
    try:
        tables = _GRAD_REPLAYS.get(fun)
        if tables is None:
            tables = _GRAD_REPLAYS[fun] = {}
    except TypeError:           # (not weakly referenceable)
        return _replay.GradReplay()
    replay = tables.get(variant)
    if replay is None:
        replay = tables[variant] = _replay.GradReplay()
    return replay


def _replay_entry(replay, onode, tape, flat_nodes):
    """``(entry, key, externals, readers)`` of this call's forward structure in ``replay``
    (``entry`` None when the structure cannot be keyed exactly; ``readers`` for
    :func:`lazynp.autograd.replay.abandon`); ``onode``: the output node, or a list of them."""
    outs = onode if isinstance(onode, list) else [onode]
    try:
        key, externals, readers = _replay.structure(outs, tape.nodes, flat_nodes)
    except _replay.Uncacheable:
        _replay.STATS["uncacheable"] += 1
        return None, None, None, None
    return replay.lookup(key), key, externals, readers


def _compile_plan(entry, flushes: int, outs, grads, externals) -> bool:
    """Compile ``entry``'s replay plan from the pass just recorded; False when something
    ran while it was recorded (its values would be baked into the plan as constants: the
    next call tries again).  An op the plan compiler does not take keeps the call eager."""
    if graph.STATS["flushes"] != flushes:
        _replay.STATS["uncacheable"] += 1
        return False
    try:
        _replay.compile_entry(entry, outs, grads, externals)
    except Exception:
        _replay.STATS["failures"] += 1
        entry.plan = False
    return True


def _run_plan(entry, externals, replay, key):
    """``(values, grads)`` of ``entry``'s compiled plan on this call's inputs, or None when
    it failed (the entry is dropped; the recorded pass raises the error at its line)."""
    try:
        result = _replay.run_entry(entry, externals)
    except Exception:
        _replay.STATS["failures"] += 1
        replay.drop(key)
        return None
    _replay.STATS["hits"] += 1
    return result


def grad(fun, argnums=0, has_aux=False, *, argnum=None):
    """The gradient of real scalar-valued ``fun`` w.r.t. argument(s) ``argnums`` (lazy;
    ``argnum`` is autograd's name for it).  Complex inputs get autograd's gradient
    ``df/dx - i df/dy``; a complex output raises TypeError.

    >>> import lazynp as np
    >>> np.grad(lambda x: np.sum(np.tanh(x)))(np.ones(3))    # doctest: +SKIP
    """
    argnums = _argnum_alias(argnums, argnum)
    vg = value_and_grad(fun, argnums, has_aux, _want_value=False)

    def wrapped(*args, **kwargs):
        (v, g) = vg(*args, **kwargs)
        if has_aux:
            return g, v[1]
        return g
    wrapped.__name__ = f"grad({getattr(fun, '__name__', 'f')})"
    return _numpy_io(wrapped)


_VJP_REPLAYS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _replay_of(table, fun):
    """``fun``'s replay plans in ``table`` (None when ``fun`` cannot be weakly keyed)."""
    try:
        replay = table.get(fun)
        if replay is None:
            replay = table[fun] = _replay.GradReplay()
        return replay
    except TypeError:
        return None


def vjp(fun, *primals, has_aux=False, _replayable=True, _who="lazynp.vjp"):
    """``(fun(*primals), vjp_fn)``; ``vjp_fn(cotangent)`` returns a tuple with one cotangent
    per primal (pytrees like the primals).  The backward pass runs when vjp_fn is called.
    Calls of the same ``fun`` whose forward graph has the structure of an earlier call run
    a compiled forward + backward plan in ``vjp_fn`` (:mod:`lazynp.autograd.replay`), unless
    something was computed between ``vjp`` and ``vjp_fn`` the first time."""
    if devices.ACTIVE and devices.any_on_device(primals):        # (device hook)
        if has_aux:
            raise NotImplementedError("lazynp.vjp(has_aux=True) on device arrays")
        from .device import vjp as on_device
        return on_device(fun, *primals)
    if _who == "lazynp.vjp" and not has_aux:
        try:
            return _vjp_cpu(fun, primals, _replayable, _who)
        except _ChunkedClosure as e:
            return _chunked_retry(e).dask_grad.vjp(fun, *primals, client=e.client)
    return _vjp_cpu(fun, primals, _replayable, _who, has_aux)


def _vjp_cpu(fun, primals, _replayable, _who, has_aux=False):
    if _default_not_cpu():
        # (CPU arguments inside a default_device block: the tape and vjp_fn's arrays stay
        # on the CPU, as grad's)
        with devices.default_device("cpu"):
            r = _vjp_cpu(fun, primals, _replayable, _who, has_aux)
        pull = r[1]

        def vjp_fn_on_cpu(cotangent):
            with devices.default_device("cpu"):
                return pull(cotangent)
        return (r[0], vjp_fn_on_cpu) + tuple(r[2:])
    flushes = graph.STATS["flushes"]
    replay = _replay_of(_VJP_REPLAYS, fun) if (_replayable and _replay.enabled() and
                                                 depth() == 0 and not has_aux) else None
    entry = key = externals = None
    with Trace() as tr:
        new_args, specs, nodes, originals = _prepare(primals, range(len(primals)), tr,
                                                     "lazynp.vjp")
        res = fun(*new_args)
        if has_aux:
            res, aux = res
        out_leaves = []
        flatten(res, out_leaves)
        for o in out_leaves:
            _refuse_chunked_result(o, _who)
        out_arrays = [lnp.asarray(o) for o in out_leaves]
        out_nodes = [o._node() for o in out_arrays]
        tape = tr.capture(protect=True)
        if replay is not None and graph.STATS["flushes"] == flushes and not tape.poison \
                and not tape.leaks and all(sp is None for sp in specs) and out_nodes:
            entry, key, externals, _readers = _replay_entry(replay, out_nodes, tape,
                                                            [n for ns in nodes for n in ns])
    flat_nodes = [n for ns in nodes for n in ns]

    def vjp_fn(cotangent):
        leaves = []
        flatten(cotangent, leaves)
        if len(leaves) != len(out_nodes):
            raise ValueError("vjp: the cotangent must have the structure of the output")
        cots = [lnp.asarray(c) for c in leaves]
        plan_ok = entry is not None and all(
            c.shape == o.shape for c, o in zip(cots, out_arrays))
        if plan_ok:
            cots = [c.astype(o.dtype) if c.dtype != o.dtype and o.dtype.kind in "fc" else c
                    for c, o in zip(cots, out_arrays)]
        if plan_ok and entry.plan:
            ran = _run_plan(entry, externals + [c._node() for c in cots], replay, key)
            if ran is not None:
                return _grads_out(ran[1], specs, nodes, originals, False)
        with Trace():
            grads = backward_pass(out_nodes, cots, flat_nodes, tape)
            if plan_ok and entry.plan is None and entry.count >= _replay.COMPILE_AT:
                _compile_plan(entry, flushes, [], grads,
                              externals + [c._node() for c in cots])
        return _grads_out(grads, specs, nodes, originals, False)
    if has_aux:
        return res, vjp_fn, aux
    return res, vjp_fn


_JVP_REPLAYS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def jvp(fun, primals, tangents):
    """``(fun(*primals), J @ tangents)`` (forward mode, as the transpose of a VJP).  Calls
    of the same ``fun`` whose forward graph has the structure of an earlier call run a
    compiled plan (:mod:`lazynp.autograd.replay`)."""
    primals = tuple(primals)
    tangents = tuple(tangents)
    if devices.ACTIVE and devices.any_on_device(primals):        # (device hook)
        from .device import jvp as on_device
        return on_device(fun, primals, tangents)
    try:
        return _cpu_defaults(lambda: _jvp_on_cpu(fun, primals, tangents))
    except _ChunkedClosure as e:
        return _chunked_retry(e).jvp(fun, primals, tangents, client=e.client)


def _jvp_on_cpu(fun, primals: tuple, tangents: tuple):
    if _replay.enabled() and depth() == 0 and len(primals) == len(tangents) and \
            not any(isinstance(p, (list, tuple, dict)) for p in primals + tangents):
        replay = _replay_of(_JVP_REPLAYS, fun)
        if replay is not None:
            watch: list = []
            r = _jvp_replayed(replay, fun, primals, tangents, watch)
            if watch:
                _replay.release_dead(watch)
            if r is not None:
                return r
    with Trace() as tr:
        out, fn = vjp(fun, *primals, _who="lazynp.jvp")
        out_leaves = []
        out_spec = flatten(out, out_leaves)
        us = []
        for o in out_leaves:
            o = lnp.asarray(o)
            u, n = fresh_input(lnp.zeros(o.shape, o.dtype if o.dtype.kind in "fc" else float),
                               tr)
            us.append((u, n))
        gs = fn(unflatten(out_spec, iter([u for u, _ in us])))
        g_leaves, t_leaves = [], []
        flatten(gs, g_leaves)
        flatten(tangents, t_leaves)
        if len(g_leaves) != len(t_leaves):
            raise ValueError("jvp: tangents must have the structure of primals")
        s = None
        for gl, tl in zip(g_leaves, t_leaves):
            term = lnp.sum(lnp.asarray(gl) * lnp.asarray(tl))
            s = term if s is None else s + term
        tape = tr.capture()
        if s is None:
            res = [None] * len(us)
        else:
            res = backward_pass([s._node()], [lnp.ones((), s.dtype)], [n for _, n in us], tape)
    vals = [_as_cot(r, u) for r, (u, _) in zip(res, us)]
    return out, unflatten(out_spec, iter(vals))


def _jvp_replayed(replay, fun, primals, tangents, watch):
    """``(out, tangent_out)`` through the replay (None: take the eager path)."""
    flushes = graph.STATS["flushes"]
    with Trace() as tr:
        new_args, _specs, nodes, originals = _prepare(primals, range(len(primals)), tr,
                                                      "lazynp.jvp")
        xs = [o for orig in originals for o in orig]
        ts = [lnp.asarray(t) for t in tangents]
        if any(t.shape != x.shape for t, x in zip(ts, xs)):
            return None
        ts = [t.astype(x.dtype) if t.dtype != x.dtype and x.dtype.kind in "fc" else t
              for t, x in zip(ts, xs)]
        res = fun(*new_args)
        if not isinstance(res, ndarray):
            return None
        out = res
        onode = out._node()
        tape = tr.capture()
        flat_nodes = [n for ns in nodes for n in ns]
        entry = None
        if graph.STATS["flushes"] == flushes and not tape.poison and not tape.leaks:
            entry, key, externals, readers = _replay_entry(replay, onode, tape, flat_nodes)
            if entry is not None:
                externals = externals + [t._node() for t in ts]
        if entry is not None and entry.plan:
            recorded = tr.recorded()
        else:
            u, un = fresh_input(lnp.zeros(out.shape, out.dtype if out.dtype.kind in "fc"
                                     else float), tr)
            gs = backward_pass([onode], [u], flat_nodes, tape)
            s = None
            for gl, t in zip(gs, ts):
                if gl is not None:
                    term = lnp.sum(lnp.asarray(gl) * t)
                    s = term if s is None else s + term
            if s is None:
                tout = _zeros_like(u)
            else:
                tape2 = tr.capture()
                tout = _as_cot(backward_pass([s._node()], [lnp.ones((), s.dtype)], [un],
                                         tape2)[0], u)
            if entry is not None and entry.plan is None and \
                    entry.count >= _replay.COMPILE_AT:
                _compile_plan(entry, flushes, [out], [tout], externals)
            return out, tout
    ran = _run_plan(entry, externals, replay, key)
    if ran is None:
        return None
    values, touts = ran
    out = _replay.deliver(out, onode, values[0])
    watch.extend(_replay.abandon(recorded, readers))
    return out, touts[0]


def _partial(fun, args, nums):
    """``fun`` as a function of the arguments at positions ``nums`` only."""
    def part(*diff):
        full = list(args)
        for k, v in zip(nums, diff):
            full[k] = v
        return fun(*full)
    return part


def elementwise_grad(fun, argnums=0, *, argnum=None):
    """Sum of the gradients of ``fun``'s outputs (a VJP with a cotangent of ones): the
    derivative of elementwise functions."""
    argnums = _argnum_alias(argnums, argnum)
    nums = _argnums_tuple(argnums)
    single = isinstance(argnums, int)

    def wrapped(*args):
        if devices.ACTIVE and devices.any_on_device(args):        # (device hook)
            from .device import elementwise_grad as on_device
            return on_device(fun, args, nums, single)
        try:
            return _cpu_defaults(lambda: on_cpu(args))
        except _ChunkedClosure as e:
            return _chunked_retry(e).elementwise_grad(fun, args, nums, single, client=e.client)

    def on_cpu(args):
        out, fn = vjp(_partial(fun, args, nums), *[args[k] for k in nums], _replayable=False,
                      _who="lazynp.elementwise_grad")
        leaves = []
        spec = flatten(out, leaves)
        ones = [lnp.ones(lnp.asarray(o).shape, lnp.asarray(o).dtype) for o in leaves]
        g = fn(unflatten(spec, iter(ones)))
        return g[0] if single else g
    return _numpy_io(wrapped)


def jacobian(fun, argnums=0, *, argnum=None):
    """The Jacobian of ``fun`` w.r.t. argument ``argnums``: shape ``out.shape + x.shape``
    (one VJP per output element, all recorded lazily and run together).  Like ``grad``, a
    call whose forward graph has the structure of an earlier one runs a compiled plan
    instead of recording the backward passes again (:mod:`lazynp.autograd.replay`)."""
    argnums = _argnum_alias(argnums, argnum)
    nums = _argnums_tuple(argnums)
    single = isinstance(argnums, int)
    replay = _replay.GradReplay()

    def eager(args):
        out, fn = vjp(_partial(fun, args, nums), *[args[k] for k in nums], _replayable=False,
                      _who="lazynp.jacobian")
        out = lnp.asarray(out)
        m = out.size
        rows = []
        for i in range(m):
            e = np.zeros(m, out.dtype if out.dtype.kind == "f" else np.float64)
            e[i] = 1.0
            rows.append(fn(lnp.asarray(e.reshape(out.shape))))
        res = []
        for k in range(len(nums)):
            x = lnp.asarray(args[nums[k]])
            if m == 0:
                res.append(lnp.zeros(out.shape + x.shape, x.dtype))
                continue
            st = lnp.stack([lnp.asarray(r[k]) for r in rows])
            res.append(lnp.reshape(st, out.shape + x.shape))
        return res[0] if single else tuple(res)

    def wrapped(*args):
        if devices.ACTIVE and devices.any_on_device(args):        # (device hook)
            from .device import jacobian as on_device
            return on_device(fun, args, nums, single)
        try:
            return _cpu_defaults(lambda: on_cpu(args))
        except _ChunkedClosure as e:
            return _chunked_retry(e).jacobian(fun, args, nums, single, client=e.client)

    def on_cpu(args):
        if not (_replay.enabled() and depth() == 0) or \
                any(isinstance(args[k], (list, tuple, dict)) for k in nums):
            return eager(args)
        watch: list = []
        res = _jacobian_replayed(replay, fun, args, nums, watch)
        if watch:
            _replay.release_dead(watch)
        if res is None:
            return eager(args)
        return res[0] if single else tuple(res)
    return _numpy_io(wrapped)


def _jacobian_blocks(out, onode, tape, flat_nodes, xs):
    """The Jacobian blocks (one per input node) by one recorded VJP per output element."""
    m = out.size
    rows = []
    for i in range(m):
        e = np.zeros(m, out.dtype if out.dtype.kind in "fc" else np.float64)
        e[i] = 1.0
        rows.append(backward_pass([onode], [lnp.asarray(e.reshape(out.shape))], flat_nodes, tape))
    blocks = []
    for k, x in enumerate(xs):
        if m == 0:
            blocks.append(lnp.zeros(out.shape + x.shape, x.dtype))
            continue
        st = lnp.stack([_as_cot(r[k], x) for r in rows])
        blocks.append(lnp.reshape(st, out.shape + x.shape))
    return blocks


def _jacobian_replayed(replay, fun, args, nums, watch):
    """Blocks of the Jacobian through the replay (None: take the eager path)."""
    flushes = graph.STATS["flushes"]
    with Trace() as tr:
        new_args, _specs, nodes, originals = _prepare(args, nums, tr, "lazynp.jacobian")
        res = fun(*new_args)
        if not isinstance(res, ndarray) and not np.isscalar(res):
            return None
        out = lnp.asarray(res)
        onode = out._node()
        tape = tr.capture()
        flat_nodes = [n for ns in nodes for n in ns]
        xs = [o for orig in originals for o in orig]
        entry = None
        if graph.STATS["flushes"] == flushes and not tape.poison and not tape.leaks:
            entry, key, externals, readers = _replay_entry(replay, onode, tape, flat_nodes)
        if entry is not None and entry.plan:
            recorded = tr.recorded()
        else:
            blocks = _jacobian_blocks(out, onode, tape, flat_nodes, xs)
            if entry is not None and entry.plan is None and \
                    entry.count >= _replay.COMPILE_AT:
                _compile_plan(entry, flushes, [], blocks, externals)
            return blocks
    ran = _run_plan(entry, externals, replay, key)
    if ran is None:
        return None
    blocks = ran[1]
    watch.extend(_replay.abandon(recorded, readers))
    return blocks


def hessian(fun, argnums=0, *, argnum=None):
    """The Hessian of scalar ``fun``: ``jacobian(grad(fun))``."""
    argnums = _argnum_alias(argnums, argnum)
    return jacobian(grad(fun, argnums), argnums)


# --- autograd's helpers: Hessian-vector products, make_vjp / make_jvp / make_hvp ----------------

def _unary(fun, args, kwargs, argnum):
    """``(f, x)``: ``fun`` as a function of its argument(s) ``argnum`` alone, and its value
    there (a tuple for several), as autograd's ``unary_to_nary`` does."""
    nums = _argnums_tuple(argnum)

    def f(x):
        full = list(args)
        if isinstance(argnum, int):
            full[argnum] = x
        else:
            for k, v in zip(nums, x):
                full[k] = v
        return fun(*full, **kwargs)
    x = args[argnum] if isinstance(argnum, int) else tuple(args[k] for k in nums)
    return f, x


def hessian_tensor_product(fun, argnum=0):
    """autograd's ``hessian_tensor_product``: a function of ``(*args, tensor, **kwargs)``
    returning the Hessian of scalar ``fun`` w.r.t. argument ``argnum`` contracted with
    ``tensor`` over the argument's dimensions (``H @ v`` for a vector argument), computed
    as the gradient of ``<grad fun, tensor>`` (no Hessian is formed).

    Examples
    --------
    >>> import lazynp as np
    >>> hvp = np.hessian_vector_product(lambda x: np.sum(x ** 3))
    >>> hvp(np.array([1.0, 2.0]), np.array([1.0, 1.0]))      # 6 x * v
    array([ 6., 12.])
    """
    fun_grad = grad(fun, argnum)

    def vector_dot_grad(*args, **kwargs):
        args, vector = args[:-1], args[-1]
        return lnp.tensordot(fun_grad(*args, **kwargs), vector, np.ndim(vector))
    inner = grad(vector_dot_grad, argnum)

    def hvp(*args, **kwargs):
        return inner(*args, **kwargs)
    hvp.__name__ = f"hessian_vector_product({getattr(fun, '__name__', 'f')})"
    return _numpy_io(hvp)


hessian_vector_product = hessian_tensor_product


def tensor_jacobian_product(fun, argnum=0):
    """autograd's ``tensor_jacobian_product``: a function of ``(*args, tensor, **kwargs)``
    returning ``tensor`` contracted with the Jacobian of ``fun`` over the output's
    dimensions (``v @ J``)."""
    def vector_dot_fun(*args, **kwargs):
        args, vector = args[:-1], args[-1]
        return lnp.tensordot(vector, fun(*args, **kwargs), axes=np.ndim(vector))
    # (a jacobian, as autograd's: the tensor may cover only the leading output dimensions)
    return jacobian(vector_dot_fun, argnum)


vector_jacobian_product = tensor_jacobian_product


def make_vjp(fun, argnum=0):
    """autograd's ``make_vjp``: ``make_vjp(fun, argnum)(*args, **kwargs)`` returns
    ``(vjp_fn, ans)``; ``vjp_fn(g)`` is the cotangent of argument ``argnum`` (a tuple for
    a tuple of argnums).  The forward pass runs once; each ``vjp_fn`` call runs a backward
    pass."""
    def maker(*args, **kwargs):
        f, x = _unary(fun, args, kwargs, argnum)
        ans, pull = vjp(f, x)
        plain = _plain_call(args, kwargs)

        def vjp_fn(g):
            r = pull(g)[0]
            return _to_numpy(r) if plain and _plain_call((g,), {}) else r
        return vjp_fn, (_to_numpy(ans) if plain else ans)
    return maker


def make_jvp(fun, argnum=0):
    """autograd's ``make_jvp``: ``make_jvp(fun, argnum)(*args, **kwargs)`` returns
    ``jvp_fn``; ``jvp_fn(v)`` is ``(ans, J @ v)`` for a tangent ``v`` like argument
    ``argnum``."""
    def maker(*args, **kwargs):
        f, x = _unary(fun, args, kwargs, argnum)
        plain = _plain_call(args, kwargs)

        def jvp_fn(v):
            out = jvp(f, (x,), (v,))
            return _to_numpy(out) if plain and _plain_call((v,), {}) else out
        return jvp_fn
    return maker


def make_hvp(fun, argnum=0):
    """autograd's ``make_hvp``: ``make_hvp(fun, argnum)(*args, **kwargs)`` returns
    ``(hvp_fn, grad_value)``; ``hvp_fn(v)`` is the Hessian-vector product ``H @ v`` at that
    point (the gradient is computed once; each product is one more backward pass)."""
    def maker(*args, **kwargs):
        f, x = _unary(fun, args, kwargs, argnum)
        g, pull = vjp(grad(f), x)
        plain = _plain_call(args, kwargs)

        def hvp_fn(v):
            r = pull(v)[0]
            return _to_numpy(r) if plain and _plain_call((v,), {}) else r
        return hvp_fn, (_to_numpy(g) if plain else g)
    return maker




# --- imperative API (MXNet style) --------------------------------------------------------------

_ATTACHED: dict = {}     # id(array) -> [weakref, input node, grad_req, grad]
_IMPERATIVE = _replay.GradReplay()   # replay plans of backward() (keyed by structure)
_TAPES: list = []


def _attached_entry(arr):
    e = _ATTACHED.get(id(arr))
    if e is not None and e[0]() is arr:
        return e
    return None


def _forget(key):
    def cb(_ref):
        _ATTACHED.pop(key, None)
    return cb


def _attach_grad(self, grad_req="write", stype=None):
    """Mark this array as a variable: ``backward()`` stores its gradient in ``self.grad``."""
    if grad_req not in ("write", "add", "null"):
        raise ValueError(f"grad_req must be 'write', 'add' or 'null', not {grad_req!r}")
    if self._geom is not None:
        raise ValueError("attach_grad: cannot attach a gradient to a view; attach it to a copy")
    key = id(self)
    _ATTACHED[key] = [weakref.ref(self, _forget(key)), self._var.head, grad_req,
                      lnp.zeros(self.shape, self.dtype)]
    for tr in RECORD_TRACES:
        tr.add_input(self._var.head)


def mark_variables(variables, gradients=None, grad_reqs="write"):
    """MXNet's ``autograd.mark_variables``: attach gradients to several arrays."""
    for i, v in enumerate(variables):
        req = grad_reqs if isinstance(grad_reqs, str) else grad_reqs[i]
        _attach_grad(v, req)
        if gradients is not None:
            _ATTACHED[id(v)][3] = gradients[i]


def _grad_prop(self):
    e = _attached_entry(self)
    return None if e is None else e[3]


class record:
    """``with lazynp.autograd.record(): ...``: operations inside are recorded for
    :meth:`backward`.  Attached arrays (``attach_grad``) are the variables."""

    def __init__(self, train_mode=True):
        self.train_mode = train_mode

    def __enter__(self):
        self._tr = Trace().__enter__()
        for e in list(_ATTACHED.values()):
            arr = e[0]()
            if arr is not None:
                e[1] = arr._var.head      # the variable's current version
                self._tr.add_input(e[1])
        RECORD_TRACES.append(self._tr)
        return self

    def __exit__(self, *exc):
        RECORD_TRACES.pop()
        tape = self._tr.capture(protect=True)
        _TAPES.append(tape)
        self._tr.__exit__(*exc)
        return False


class pause:
    """``with lazynp.autograd.pause(): ...`` inside :class:`record`: not recorded."""

    def __init__(self, train_mode=False):
        self.train_mode = train_mode

    def __enter__(self):
        add_pause(1)
        return self

    def __exit__(self, *exc):
        add_pause(-1)
        return False


def is_recording() -> bool:
    return bool(RECORD_TRACES) and not paused()


def is_training() -> bool:
    return bool(RECORD_TRACES)


def backward(heads, head_grads=None, retain_graph=False, train_mode=True):
    """Gradients of ``heads`` w.r.t. the attached variables, written into ``x.grad``."""
    if isinstance(heads, ndarray):
        heads = [heads]
        head_grads = [head_grads] if head_grads is not None else None
    if not _TAPES:
        raise AutogradError("backward: nothing was recorded (use `with "
                            "lazynp.autograd.record():`)")
    watch: list = []
    entries, grads = _backward_imperative(heads, head_grads, retain_graph, watch)
    if not retain_graph:
        _TAPES.clear()
    if watch:       # the recorded nodes a plan replaced, that nobody kept, are dead now
        _replay.release_dead(watch)
    for e, g in zip(entries, grads):
        arr = e[0]()
        if arr is None:             # (collected meanwhile)
            continue
        if g is None:
            g = lnp.zeros(arr.shape, arr.dtype)
        buf = e[3]
        if isinstance(buf, ndarray) and buf.shape == arr.shape:
            # MXNet's x.grad is one buffer (mark_variables may have given it)
            if e[2] == "add":
                buf += g
            else:
                buf[...] = g
        else:
            e[3] = (buf + g) if e[2] == "add" else g


def _backward_imperative(heads, head_grads, retain_graph, watch: list):
    """``(entries, grads)`` for :func:`backward`: a replay plan when the recorded graph's
    structure was seen before (its heads then hold the plan's values), else the recorded
    backward pass."""
    tape = Tape({}, {})
    for t in _TAPES:
        tape.merge(t)
    entries = [e for e in _ATTACHED.values() if e[0]() is not None and e[2] != "null"]
    grads = None
    flushes = graph.STATS["flushes"]
    with Trace():
        outs = [h._node() for h in heads]
        inputs = [e[1] for e in entries]
        entry = None
        if _replay.enabled() and head_grads is None and not retain_graph and not tape.poison \
                and depth() == 1:
            entry, key, externals, readers = _replay_entry(_IMPERATIVE, outs, tape, inputs)
        if entry is not None and entry.plan:
            ran = _run_plan(entry, externals, _IMPERATIVE, key)
            if ran is not None:
                values, grads = ran
                for h, o, v in zip(heads, outs, values):
                    _replay.deliver(h, o, v)      # (reading the loss does not run it again)
                watch.extend(_replay.abandon([tape.nodes[k][0] for k in tape.nodes], readers))
        if grads is None:
            cots = [lnp.ones(h.shape, h.dtype) if head_grads is None or head_grads[i] is None
                    else lnp.asarray(head_grads[i]) for i, h in enumerate(heads)]
            grads = backward_pass(outs, cots, inputs, tape)
            if entry is not None and entry.plan is None and \
                    entry.count >= _replay.COMPILE_AT:
                _compile_plan(entry, flushes, list(heads), grads, externals)
    return entries, grads


def _backward_method(self, out_grad=None, retain_graph=False, train_mode=True):
    """Compute the gradients of this array w.r.t. the attached variables (``x.grad``)."""
    backward([self], None if out_grad is None else [out_grad], retain_graph, train_mode)


def _install_methods():
    add_member("attach_grad", _attach_grad)
    add_member("grad", property(_grad_prop))
    add_member("backward", _backward_method)
    add_member("detach", lambda self: stop_gradient(self))


_install_methods()
