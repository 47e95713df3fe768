"""Backward helpers shared by the device arrays' reverse modes (:mod:`lazynp.autograd.device`
for CUDA arrays, :mod:`lazynp.autograd.dask_grad` for chunked arrays): written with the
arrays' own methods (``sum``, ``reshape``, ``@``...), so the backward pass runs on the
arrays' device."""
from __future__ import annotations


def _args_of(n) -> tuple:
    return n.args


def post_order(out, inputs_of=_args_of) -> list:
    """The nodes ``out`` depends on through ``inputs_of`` (those of ``out``'s own type),
    each after its inputs, ``out`` last: the order a reverse mode walks backwards."""
    kind = type(out)
    order, seen, stack = [], {id(out)}, [(out, 0)]
    while stack:
        n, i = stack[-1]
        ins = inputs_of(n)
        while i < len(ins):
            a = ins[i]
            i += 1
            if type(a) is kind and id(a) not in seen:
                seen.add(id(a))
                stack[-1] = (n, i)
                stack.append((a, 0))
                break
        else:
            stack.pop()
            order.append(n)
    return order


def _fit(g, a):
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


def _std_var_cotangent(name: str, x, ans, g, params):
    """``d var / dx = 2 (x - mean) / (N - ddof)``; ``d std = d var / (2 std)``."""
    if x.dtype.kind not in "f":
        raise NotImplementedError(f"lazynp.grad on device arrays: {name} of {x.dtype} values")
    gk, axes = _kept(g, x.shape, params)
    cnt = 1
    for d in axes:
        cnt *= x.shape[d]
    ddof = (params or {}).get("ddof", 0)
    centered = x - x.mean(axis=axes, keepdims=True)
    dvar = centered * (2.0 / (cnt - ddof))
    if name == "var":
        return dvar * gk
    std, _ = _kept(ans, x.shape, params)
    return dvar * (gk / (2.0 * std))


def _matmul_cotangents(x, y, g, need):
    """Cotangents of ``x @ y`` for 1-D and 2-D operands (NumPy's promotion of a 1-D
    operand to a row or a column, undone on the way back)."""
    if x.ndim not in (1, 2) or y.ndim not in (1, 2):
        raise NotImplementedError("lazynp.grad on device arrays: matmul of 1-D and 2-D "
                                  "arrays only (not stacks of matrices)")
    x2 = x.reshape(1, -1) if x.ndim == 1 else x
    y2 = y.reshape(-1, 1) if y.ndim == 1 else y
    g2 = g.reshape(x2.shape[0], y2.shape[1])
    gx = (g2 @ y2.T).reshape(x.shape) if need[0] else None
    gy = (x2.T @ g2).reshape(y.shape) if need[1] else None
    return [gx, gy]
