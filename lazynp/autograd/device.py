"""Reverse mode over the device graph: ``lazynp.grad`` of functions of device arrays.

The function runs on the device arrays (recording device nodes, which keep their arguments
while a gradient is taken); the backward pass walks those nodes from the output and applies
the op table's gradient rules (:mod:`lazynp.autograd.rules`: the same one-line rules as the CPU's
autodiff, written with lazynp ops, so the backward pass is itself recorded on the device
and fused).  Gradients live on their input's device.

Covered: elementwise ufuncs (every rule of ``rules.UNARY``/``rules.BINARY``), ``copy``,
``astype``, the reductions ``sum``/``mean``/``max``/``min`` (any axes, ``keepdims``),
views (basic indexing, transposes, reshapes), ``a[i] = v`` writes and 2-D ``matmul``.
Other ops raise ``NotImplementedError`` naming the op.
"""
from __future__ import annotations

from ..cuda.array import DeviceArray, _MATMUL, _SETITEM, full
from ..core.graph import VIEW
from . import rules


def _rt():
    from ..cuda import runtime      # (loads Numba: only when a device gradient is taken)
    return runtime


def _wrap(n) -> DeviceArray:
    return DeviceArray._from_node(n)


def _topo(out):
    order, seen = [], set()
    stack = [(out, 0)]
    seen.add(id(out))
    while stack:
        n, i = stack[-1]
        while i < len(n.args):
            a = n.args[i]
            i += 1
            if type(a) is type(out) and id(a) not in seen:
                seen.add(id(a))
                stack[-1] = (n, i)
                stack.append((a, 0))
                break
        else:
            stack.pop()
            order.append(n)
    return order


def _zeros(shape, dtype, dev) -> DeviceArray:
    return full(tuple(shape), 0, dtype, dev)


def _fit(g, a) -> DeviceArray:
    """``g`` summed over the dimensions ``a`` was broadcast along, in ``a``'s dtype."""
    shape = a.shape
    if g.shape != shape:
        lead = len(g.shape) - len(shape)
        if lead:
            g = g.sum(axis=tuple(range(lead)))
        axes = tuple(d for d, s in enumerate(shape) if s == 1 and g.shape[d] != 1)
        if axes:
            g = g.sum(axis=axes, keepdims=True)
    if g.dtype != a.dtype and a.dtype.kind in "fc":
        g = g.astype(a.dtype)
    return g


def _kept(g, x_shape, params):
    """A reduction's cotangent with its reduced axes back (size 1)."""
    axis = (params or {}).get("axis")
    nd = len(x_shape)
    axes = tuple(range(nd)) if axis is None else \
        tuple(sorted(a % nd for a in (axis if isinstance(axis, tuple) else (axis,))))
    if not (params or {}).get("keepdims"):
        g = g.reshape(tuple(1 if d in axes else s for d, s in enumerate(x_shape)))
    return g, axes


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
    if op is _MATMUL:
        x, y = xs
        if x.ndim != 2 or y.ndim != 2:
            raise NotImplementedError("lazynp.grad on device arrays: matmul of 2-D arrays only")
        return [g @ y.T if need[0] else None, x.T @ g if need[1] else None]
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
    raise NotImplementedError(f"lazynp.grad on device arrays: no gradient rule for op "
                              f"{name!r}")


def value_and_grad(fun, argnums=0, has_aux: bool = False):
    """``(fun(*args), gradient)`` for device array arguments ``argnums``."""
    single = isinstance(argnums, int)
    nums = (argnums,) if single else tuple(argnums)

    def wrapped(*args, **kwargs):
        rt = _rt()
        args = list(args)
        inputs = {}
        for i in nums:
            a = args[i]
            if not isinstance(a, DeviceArray):
                raise TypeError(f"lazynp.grad: argument {i} is not a device array (the others "
                                f"are: every differentiated argument must be on the device)")
            node = a._node()
            args[i] = _wrap(node)
            inputs[i] = node
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
    vg = value_and_grad(fun, argnums, has_aux)

    def wrapped(*args, **kwargs):
        v, g = vg(*args, **kwargs)
        return (g, v[1]) if has_aux else g
    return wrapped


def _backward(out, inputs: dict) -> dict:
    order = _topo(out)
    targets = {id(n) for n in inputs.values()}
    depends = set(targets)
    for n in order:
        if any(type(a) is type(n) and id(a) in depends for a in n.args):
            depends.add(id(n))
    cot = {id(out): full((), 1.0, out.dtype, out.device)}
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
