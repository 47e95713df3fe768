"""Reverse mode over the device graph: ``lazynp.grad`` of functions of device arrays.

The function runs on the device arrays (recording device nodes, which keep their arguments
while a gradient is taken); the backward pass walks those nodes from the output and applies
the op table's gradient rules (:mod:`lazynp.autograd.rules`: the same one-line rules as the CPU's
autodiff, written with lazynp ops, so the backward pass is itself recorded on the device
and fused).  Gradients live on their input's device.

Covered: elementwise ufuncs (every rule of ``rules.UNARY``/``rules.BINARY``), ``copy``,
``astype``, the reductions ``sum``/``mean``/``max``/``min`` (any axes, ``keepdims``),
views (basic indexing, transposes, reshapes), ``a[i] = v`` writes, ``std``/``var`` and
``matmul`` of 1-D and 2-D arrays.  Other ops raise ``NotImplementedError`` naming the op.

The other transforms (:func:`vjp`, :func:`elementwise_grad`, :func:`jacobian`,
:func:`jvp`; ``hessian`` is ``jacobian(grad)``) are built on the same reverse pass: each
records the function once and walks it backward once per cotangent while the graph is
kept.  ``jvp`` is the Jacobian contracted with the tangents (no forward mode: one
backward pass per output element).
"""
from __future__ import annotations

import numpy as np

from ..cuda.array import AT_ONCE, DeviceArray, _MATMUL, _SETITEM, full
from ..core.graph import VIEW
from . import rules
from .array_rules import _fit, _kept, _matmul_cotangents, _std_var_cotangent, post_order


def _rt():
    from ..cuda import runtime      # (loads Numba: only when a device gradient is taken)
    return runtime


def _wrap(n) -> DeviceArray:
    return DeviceArray._from_node(n)


def _zeros(shape, dtype, dev) -> DeviceArray:
    return full(tuple(shape), 0, dtype, dev)


def _arg_cotangents(n, g, need):
    """Cotangents of ``n``'s arguments (None: zero or not needed)."""
    op = n.op
    args = n.args
    dev = n.device
    name = op.name
    xs = [_wrap(a) if type(a) is type(n) else a for a in args]
    if op.ufunc is not None and op.kind == "elementwise":
        return rules._elementwise(op.ufunc.__name__, g, _wrap(n), xs)
    if name == "copy":
        return [g]
    if name == "astype":
        return [g]
    if op is VIEW:
        base = args[0]
        z = _zeros(base.shape, n.dtype, dev)
        p = n.params
        z._view(p["offset"], p["shape"], p["strides"], p["dtype"])[...] = g
        return [z]
    if name in ("sum", "mean", "max", "min") and op.kind == "reduction":
        x = xs[0]
        gk, axes = _kept(g, x.shape, n.params)
        if name in ("sum", "mean"):
            if name == "mean":
                cnt = 1
                for d in axes:
                    cnt *= x.shape[d]
                gk = gk / cnt
            return [_zeros(x.shape, g.dtype, dev) + gk]
        ans, _ = _kept(_wrap(n), x.shape, n.params)
        mask = x == ans
        return [mask * (gk / mask.sum(axis=axes, keepdims=True))]
    if name in ("std", "var") and op.kind == "reduction":
        return [_std_var_cotangent(name, xs[0], _wrap(n), g, n.params)]
    if op is _MATMUL:
        return _matmul_cotangents(xs[0], xs[1], g, need)
    if op is _SETITEM:
        p = n.params
        region = (p["offset"], p["shape"], p["strides"], p["dtype"])
        g_old = g.copy() if need[0] else None
        if g_old is not None:
            g_old._view(*region)[...] = 0
        g_val = None
        if need[1]:
            g_val = g._view(*region).copy()
        return [g_old, g_val]
    if op is AT_ONCE:
        name = n.params["name"]
    raise NotImplementedError(f"lazynp.grad on device arrays: no gradient rule for op "
                              f"{name!r}")


def value_and_grad(fun, argnums=0, has_aux: bool = False, want_value: bool = True):
    """``(fun(*args), gradient)`` for device array arguments ``argnums`` (``want_value``
    False: the caller drops the value, so a chunked one is not computed)."""
    single = isinstance(argnums, int)
    nums = (argnums,) if single else tuple(argnums)

    def wrapped(*args, **kwargs):
        from . import dask_grad
        if dask_grad.any_chunked(args):
            return dask_grad.value_and_grad(fun, argnums, has_aux, want_value)(*args, **kwargs)
        rt = _rt()
        args, inputs = _device_inputs(args, nums, "lazynp.grad")
        rt.KEEP_GRAPH[0] += 1
        try:
            res = fun(*args, **kwargs)
            out = res[0] if has_aux else res
            if not isinstance(out, DeviceArray) or out.shape != ():
                raise TypeError("lazynp.grad: the function must return a scalar device array")
            if out.dtype.kind not in "f":
                raise TypeError(f"lazynp.grad: the output must be real floating point, not "
                                f"{out.dtype}")
            grads = _backward(out._node(), inputs)
        finally:
            rt.KEEP_GRAPH[0] -= 1
        g = [grads[i] for i in nums]
        return res, (g[0] if single else tuple(g))
    return wrapped


def grad(fun, argnums=0, has_aux: bool = False):
    """The gradient of scalar ``fun`` w.r.t. device array argument(s) ``argnums``."""
    vg = value_and_grad(fun, argnums, has_aux, want_value=False)

    def wrapped(*args, **kwargs):
        v, g = vg(*args, **kwargs)
        return (g, v[1]) if has_aux else g
    return wrapped


def _backward(out, inputs: dict, seed=None) -> dict:
    """Cotangents of ``inputs`` (argument position -> node) for the cotangent ``seed`` of
    ``out`` (None: 1 for a scalar)."""
    order = post_order(out)
    targets = {id(n) for n in inputs.values()}
    depends = set(targets)
    for n in order:
        if any(type(a) is type(n) and id(a) in depends for a in n.args):
            depends.add(id(n))
    cot = {id(out): full((), 1.0, out.dtype, out.device) if seed is None else seed}
    for n in reversed(order):
        g = cot.get(id(n))
        if g is None or id(n) in targets or not n.args:
            continue
        need = [type(a) is type(n) and id(a) in depends for a in n.args]
        if not any(need):
            continue
        gs = _arg_cotangents(n, g, need)
        for a, ga, nd in zip(n.args, gs, need):
            if ga is None or not nd:
                continue
            ga = _fit(ga, a)
            prev = cot.get(id(a))
            cot[id(a)] = ga if prev is None else prev + ga
    out_grads = {}
    for i, node in inputs.items():
        g = cot.get(id(node))
        out_grads[i] = g if g is not None else _zeros(node.shape, node.dtype, node.device)
    return out_grads


# --- vjp, elementwise_grad, jacobian, jvp (one recording, one backward pass per cotangent) ----

def _refuse_chunked(args, who: str) -> None:
    """Chunked (dask) arguments in ``elementwise_grad``/``jacobian``/``jvp`` (``grad``,
    ``value_and_grad`` and ``vjp`` take them: :mod:`lazynp.autograd.dask_grad`): raise
    naming ``who``."""
    for i, a in enumerate(args):
        if getattr(getattr(a, "_device", None), "kind", None) == "dask":
            raise NotImplementedError(
                f"{who}: argument {i} is a chunked (dask) array: {who} of functions of "
                f"chunked arrays is not implemented (grad, value_and_grad and vjp are); "
                f"gather it with x.to_device('cpu') where it fits in memory")


def _device_inputs(args, nums, who: str):
    _refuse_chunked(args, who)
    args = list(args)
    inputs = {}
    for i in nums:
        a = args[i]
        if not isinstance(a, DeviceArray):
            raise TypeError(f"{who}: argument {i} is not a device array (the others are: "
                            f"every differentiated argument must be on the device)")
        if a.dtype.kind not in "f":
            raise TypeError(f"{who}: argument {i} must be real floating point, not {a.dtype}")
        node = a._node()
        args[i] = _wrap(node)
        inputs[i] = node
    return args, inputs


def _output(res, who: str) -> DeviceArray:
    if not isinstance(res, DeviceArray):
        raise NotImplementedError(f"{who}: on device arrays the function must return one "
                                  f"device array (not {type(res).__name__})")
    if res.dtype.kind not in "f":
        raise TypeError(f"{who}: the output must be real floating point, not {res.dtype}")
    return res


def _as_cotangent(c, out: DeviceArray, who: str) -> DeviceArray:
    from ..cuda.array import asarray as to_device
    c = c if isinstance(c, DeviceArray) and c.device == out.device else \
        to_device(c, out.device)
    if c.shape != out.shape:
        raise ValueError(f"{who}: the cotangent has shape {c.shape}, the output {out.shape}")
    return c.astype(out.dtype) if c.dtype != out.dtype else c


def pullbacks(fun, args, nums, cotangents, who: str):
    """``(fun(*args), [grads per cotangent])``: ``fun`` recorded once, one backward pass per
    cotangent (``cotangents(out)`` yields them); grads are dicts by argument position."""
    rt = _rt()
    args, inputs = _device_inputs(args, nums, who)
    rt.KEEP_GRAPH[0] += 1
    try:
        out = _output(fun(*args), who)
        onode = out._node()
        results = [_backward(onode, inputs, _as_cotangent(c, out, who))
                   for c in cotangents(out)]
    finally:
        rt.KEEP_GRAPH[0] -= 1
    return out, results


def vjp(fun, *primals):
    """``(fun(*primals), vjp_fn)`` on device arrays; ``vjp_fn(cotangent)`` records ``fun``
    again and walks it backward (the graph is not kept alive between the two calls)."""
    from . import dask_grad
    if dask_grad.any_chunked(primals):
        return dask_grad.vjp(fun, *primals)
    nums = tuple(range(len(primals)))
    out, _ = pullbacks(fun, primals, nums, lambda o: (), "lazynp.vjp")

    def vjp_fn(cotangent):
        _, (g,) = pullbacks(fun, primals, nums, lambda o: (cotangent,), "lazynp.vjp")
        return tuple(g[i] for i in nums)
    return out, vjp_fn


def elementwise_grad(fun, args, nums, single: bool):
    """The VJP of ``fun`` at ``args`` with a cotangent of ones."""
    from . import dask_grad
    if dask_grad.any_chunked(args):
        from . import dask_forward
        return dask_forward.elementwise_grad(fun, args, nums, single)
    _, (g,) = pullbacks(fun, args, nums, lambda o: (full(o.shape, 1, o.dtype, o.device),),
                        "lazynp.elementwise_grad")
    return g[nums[0]] if single else tuple(g[i] for i in nums)


def _basis(out):
    from ..cuda.array import asarray as to_device
    m = 1
    for d in out.shape:
        m *= d
    for i in range(m):
        e = np.zeros(m, out.dtype)
        e[i] = 1
        yield to_device(e.reshape(out.shape), out.device)


def jacobian(fun, args, nums, single: bool):
    """``out.shape + x.shape`` blocks, one backward pass per output element."""
    from . import dask_grad
    if dask_grad.any_chunked(args):
        from . import dask_forward
        return dask_forward.jacobian(fun, args, nums, single)
    from ..cuda.array import call_at_once
    out, rows = pullbacks(fun, args, nums, _basis, "lazynp.jacobian")
    blocks = []
    for i in nums:
        x = args[i]
        if not rows:
            blocks.append(_zeros(out.shape + x.shape, x.dtype, x.device))
            continue
        st = call_at_once("stack", np.stack, ([r[i] for r in rows],), {})
        blocks.append(st.reshape(out.shape + x.shape))
    return blocks[0] if single else tuple(blocks)


def jvp(fun, primals, tangents):
    """``(fun(*primals), J @ tangents)``: the Jacobian contracted with the tangents."""
    from . import dask_grad
    if dask_grad.any_chunked(primals):
        from . import dask_forward
        return dask_forward.jvp(fun, primals, tangents)
    primals, tangents = tuple(primals), tuple(tangents)
    if len(primals) != len(tangents):
        raise ValueError("jvp: tangents must have the structure of primals")
    nums = tuple(range(len(primals)))
    out, rows = pullbacks(fun, primals, nums, _basis, "lazynp.jvp")
    from ..cuda.array import asarray as to_device
    ts = [t if isinstance(t, DeviceArray) else to_device(t, out.device) for t in tangents]
    for t, p in zip(ts, primals):
        if t.shape != p.shape:
            raise ValueError(f"jvp: a tangent has shape {t.shape}, its primal {p.shape}")
    vals = []
    for r in rows:
        s = None
        for i in nums:
            term = (r[i] * ts[i]).sum()
            s = term if s is None else s + term
        vals.append(s)
    if not vals:
        return out, _zeros(out.shape, out.dtype, out.device)
    from ..cuda.array import call_at_once
    return out, call_at_once("stack", np.stack, (vals,), {}).reshape(out.shape)
