"""Reverse mode over chunked (dask) arrays: a data-parallel gradient over a chunked data set.

``lazynp.grad(loss)(w, X, y)`` with ``X``, ``y`` chunked and ``w`` a plain array: ``w`` is
put on the cluster as a one-chunk array (broadcast to the chunks, as dask broadcasts a
NumPy operand), ``loss`` runs on chunked arrays while :data:`lazynp.dask.lower.TAPING` is
set, and the backward pass walks the chunked arrays' nodes from the output: the recorded
nodes (elementwise ufuncs, ``where``, ``copy``/``astype``, the reductions) through their op,
the nodes dask.array built (``matmul``/``dot``, transposes, reshapes, basic indexing,
``rechunk``) through the ``origin`` they noted.  The cotangents are chunked arrays too: the
backward pass is itself lowered to dask (``X.T @ g`` is dask's tree contraction over the
row chunks) and nothing is gathered but the results.

A plain argument's gradient (a parameter: small) is computed in one ``client.compute``
with the value and returned as a CPU array; a chunked argument's gradient stays a chunked
array.  An op with no rule here on the path from a differentiated argument raises
``NotImplementedError`` naming it (never a silent zero).
"""
from __future__ import annotations

import numpy as np

from ..array.ndarray import ndarray
from ..core.graph import leaf
from ..dask import array as dask_array, lower
from ..dask.array import DaskArray
from ..dask.lower import DaskNode
from ..ops.registry import OPS
from . import rules
from .errors import ChunkedClosure, traced_value_error
from .array_rules import _fit, _kept, _matmul_cotangents, _std_var_cotangent, post_order

__all__ = ["any_chunked", "value_and_grad", "vjp"]


def any_chunked(args) -> bool:
    """True when an argument is a chunked (dask) array."""
    return any(isinstance(a, DaskArray) for a in args)


def _wrap(n: DaskNode) -> DaskArray:
    return DaskArray._from_node(n)


def _inputs_of(n: DaskNode) -> tuple:
    return n.origin[1] if n.origin is not None else n.args


def _no_rule(name: str):
    return NotImplementedError(
        f"lazynp.grad on chunked (dask) arrays: no gradient rule for {name!r} (covered: "
        f"elementwise ufuncs, where, copy, astype, sum, mean, prod, max, min, std, var, "
        f"cumsum, sort, matmul, dot, transposes, reshapes, basic indexing, indexing by one "
        f"host integer or boolean array, a[i] = v, rechunk); gather the data with "
        f"x.to_device('cpu') where it fits in memory")


def refuse_nested(who: str) -> None:
    """Raise when a forward-mode transform over chunked arrays (``jvp``, ``jacobian``,
    ``elementwise_grad``) is called inside another's recording: its tangents are built
    with dask.array steps the outer transform has no rules for.  (A reverse pass nested in
    another, ``hessian`` = ``jacobian(grad)``, is recorded: :func:`nested`.)"""
    if lower.TAPING[0]:
        raise NotImplementedError(
            f"{who} inside another transform over chunked (dask) arrays is not "
            f"implemented; lazynp.grad, lazynp.value_and_grad and lazynp.vjp nest (a "
            f"hessian is a jacobian of a grad), and each transform works on its own")


def refuse_cpu_trace(args, who: str) -> None:
    """Inside a transform of CPU arguments (its tape open: ``jvp(lambda w: grad(loss)(w,
    X), ...)`` with ``w`` plain), a reverse pass over chunked data would read the traced
    ``w`` as a constant, and the outer derivative would silently miss it: raise the
    exception the outer transform answers by taking the chunked path itself."""
    from .tape import depth
    if depth() > 0:
        raise ChunkedClosure(who, next(
            (a._n.client for a in args if isinstance(a, DaskArray)), None))


def nested() -> bool:
    """True inside another transform's recording: the backward pass is itself recorded
    (its dask.array steps note their ``origin``) and nothing is gathered, so that the outer
    transform differentiates it (a Hessian: ``jacobian(grad(loss))``)."""
    return lower.TAPING[0] > 0


def _note_linear(out: DaskArray, name: str, g: DaskArray, params=None) -> DaskArray:
    """While recorded (:func:`nested`): note that the linear backward step ``name`` made
    ``out`` from the cotangent ``g`` (an outer pass raises naming it where it has no rule,
    rather than take ``out`` for a constant)."""
    if lower.TAPING[0]:
        out._n.origin = (name, (g._n,), params)
    return out


def _chunked(v, like: DaskNode) -> DaskArray:
    """``v`` (a node, a chunked array or a host value) as a chunked array."""
    if type(v) is DaskNode:
        return _wrap(v)
    if isinstance(v, DaskArray):
        return v
    if isinstance(v, ndarray):
        v = v._value()
    return _constant(np.asarray(v), like.client)


def _constant(v: np.ndarray, client) -> DaskArray:
    """A host value as a one-chunk array under a fresh key: dask names ``from_array`` by
    the value, and the same key in two computes whose graphs dask optimized differently
    makes the scheduler warn ("different run_spec")."""
    import dask.array as da
    return dask_array._wrap(da.from_array(v, chunks=-1, name=False), client)


def _spread(g: DaskArray, x: DaskNode) -> DaskArray:
    """``g`` broadcast to ``x``'s shape in ``x``'s chunks (no values of ``x`` read)."""
    import dask.array as da
    arr = da.broadcast_to(g._dask(), x.shape, chunks=lower.lower(x).chunks)
    return _note_linear(dask_array._wrap(arr, x.client), "broadcast_to", g)


def _getitem_cotangent(g: DaskArray, x: DaskNode, key) -> DaskArray:
    """``x[key]``'s transpose: ``g`` put at ``key`` in zeros of ``x``'s shape."""
    import dask.array as da
    params0, g0 = key, g
    parts = key if type(key) is tuple else (key,)
    if any(k is None for k in parts):
        # (the new axes of ``x[..., None]`` are g's: drop them, index without them)
        used = sum(1 for k in parts if k is not None and k is not Ellipsis)
        new, out_axis = [], 0
        for k in parts:
            if k is None:
                new.append(out_axis)
            if k is Ellipsis:
                out_axis += len(x.shape) - used
            elif k is None or isinstance(k, slice):
                out_axis += 1
        g = g.squeeze(axis=tuple(new))
        key = tuple(k for k in parts if k is not None)
    z = da.zeros(x.shape, dtype=g.dtype, chunks=lower.lower(x).chunks)
    z[key] = g._dask()
    return _note_linear(dask_array._wrap(z, x.client), "getitem's cotangent", g0, (params0, x))


def _origin_cotangents(n: DaskNode, g: DaskArray, need: list) -> list:
    name, ins, params = n.origin
    if name in ("matmul", "dot"):
        x, y = (_chunked(v, n) for v in ins)
        if name == "dot" and (x.ndim == 0 or y.ndim == 0):
            raise _no_rule("dot of a 0-d operand")
        if x.ndim == 2 and y.ndim == 1:
            # (X @ w: g @ X contracts over the row chunks with no transpose or reshape tasks)
            return [g[:, None] * y if need[0] else None, g @ x if need[1] else None]
        return _matmul_cotangents(x, y, g, need)
    x = ins[0]
    if name == "transpose":
        inv = None if params is None else tuple(int(i) for i in np.argsort(
            [a % len(x.shape) for a in params]))
        return [g.transpose(inv) if inv is not None else g.transpose()]
    if name == "swapaxes":
        return [g.swapaxes(*params)]
    if name == "reshape":
        return [g.reshape(x.shape)]
    if name == "getitem's cotangent":
        # (the transpose of putting g at key: reading key back, in g's shape)
        key = params[0]
        parts = key if type(key) is tuple else (key,)
        return [g[tuple(k for k in parts if k is not None)].reshape(x.shape)]
    if name in ("rechunk", "broadcast_to"):
        return [g]          # (broadcast_to: summed back to its input's shape by _fit)
    if name == "getitem":
        return [_getitem_cotangent(g, x, params)]
    if name == "getitem (advanced)":
        return [_take_cotangent(g, x, ins[1])]
    if name in ("lazynp.stack", "lazynp.concatenate"):
        return joined_parts(g, n, ins, params, name)
    if name == "lazynp.cumsum":
        return [_cumsum_cotangent(g, x, params)]
    if name == "lazynp.sort":
        return [_sort_cotangent(g, x, params)]
    if name == "setitem":
        return _setitem_cotangents(g, ins, params, need)
    raise _no_rule(name)


def join_axis(n: DaskNode, ins: tuple, params, name: str) -> int:
    """The axis ``stack``/``concatenate`` joined ``ins`` along; raises naming ``name`` when
    not every joined array is chunked (``ins`` then misses the host ones)."""
    p = dict(params or {})
    axis = p.get("axis", 0)
    if axis is None or p.get("out") is not None or any(type(a) is not DaskNode for a in ins):
        raise _no_rule(f"{name} with these arguments")
    axis %= len(n.shape)
    sizes = [1 if name == "lazynp.stack" else a.shape[axis] for a in ins]
    if sum(sizes) != n.shape[axis]:
        raise _no_rule(f"{name} of chunked and host arrays together")
    return axis


def joined_parts(g: DaskArray, n: DaskNode, ins: tuple, params, name: str) -> list:
    """``stack``/``concatenate``: each input's cotangent is its slice of ``g``."""
    axis = join_axis(n, ins, params, name)
    parts, start = [], 0
    for a in ins:
        k = 1 if name == "lazynp.stack" else a.shape[axis]
        sl = g[(slice(None),) * axis + (slice(start, start + k),)]
        parts.append(sl.reshape(a.shape) if name == "lazynp.stack" else sl)
        start += k
    return parts


def _flip(a, axis: int):
    return a[(slice(None),) * axis + (slice(None, None, -1),)]


def _cumsum_cotangent(g: DaskArray, x: DaskNode, params) -> DaskArray:
    """``cumsum``'s transpose: the reversed cumulative sum of ``g`` along the axis."""
    import dask.array as da
    axis = (params or {}).get("axis")
    gd = g._dask()
    if axis is None:
        out = _flip(da.cumsum(_flip(gd, 0), axis=0), 0).reshape(x.shape)
    else:
        axis %= len(x.shape)
        out = _flip(da.cumsum(_flip(gd, axis), axis=axis), axis)
    return _note_linear(dask_array._wrap(out, x.client), "cumsum's cotangent", g)


def _unsort_block(x, g, axis: int, kind):
    """One block of a sort's cotangent: ``g`` put back where ``sort`` took each value."""
    perm = np.argsort(x, axis=axis, kind=kind)
    out = np.empty_like(g)
    np.put_along_axis(out, perm, g, axis=axis)
    return out


def _sort_axis(x, params):
    """``(x, axis)`` of a sort: the flattened array for ``axis=None``."""
    axis = (params or {}).get("axis", -1)
    if axis is None:
        return x.reshape(-1), 0
    return x, axis % max(len(x.shape), 1)


def sort_blocks(fn, x: DaskArray, t: DaskArray, params, client) -> DaskArray:
    """``fn(x_block, t_block, axis, kind)`` over blocks holding the whole sorted axis (as
    the sort's own blocks do): the permutation of a sort applied to (or undone on) ``t``."""
    import dask.array as da
    x, axis = _sort_axis(x, params)
    xd = x._dask().rechunk({axis: -1})
    td = t._dask().reshape(xd.shape).rechunk(xd.chunks)
    out = da.map_blocks(fn, xd, td, axis=axis, kind=(params or {}).get("kind"),
                        dtype=td.dtype, meta=np.empty((0,) * xd.ndim, td.dtype))
    return _note_linear(dask_array._wrap(out, client), "sort's permutation", t)


def _sort_cotangent(g: DaskArray, x: DaskNode, params) -> DaskArray:
    out = sort_blocks(_unsort_block, _wrap(x), g, params, x.client)
    return out if out.shape == x.shape else out.reshape(x.shape)


def one_array_key(key, shape: tuple, what: str):
    """``(axis, idx)`` of an index that is one host integer (or 1-D boolean) array on one
    axis, the other entries full slices; raises naming ``what`` for other keys."""
    if isinstance(key, DaskNode) or isinstance(key, DaskArray):
        raise _no_rule(f"{what} by a chunked index array")
    parts = key if type(key) is tuple else (key,)
    arrays = [k for k, v in enumerate(parts) if not (isinstance(v, slice) and
                                                     v == slice(None))]
    if len(arrays) != 1 or any(v is Ellipsis for v in parts):
        raise _no_rule(f"{what} with this key")
    axis = arrays[0]
    v = parts[axis]
    v = v._value() if isinstance(v, ndarray) else v
    if not isinstance(v, (np.ndarray, list)):
        raise _no_rule(f"{what} with this key")
    idx = np.asarray(v)
    if idx.dtype == bool:
        if idx.ndim != 1:
            raise _no_rule(f"{what} by a boolean mask of several axes")
        idx = np.flatnonzero(idx)
    if idx.ndim != 1 or idx.dtype.kind not in "iu":
        raise _no_rule(f"{what} with this key")
    return axis, idx % shape[axis] if len(idx) else idx.astype(np.intp)


def _take_cotangent(g: DaskArray, x: DaskNode, key) -> DaskArray:
    """``x[idx]``'s transpose: ``g`` added at ``idx`` (a repeated index adds each time: in
    rounds, each round's indices distinct, as dask's writes do not add)."""
    import dask.array as da
    axis, idx = one_array_key(key, x.shape, "getitem (advanced)")
    head = (slice(None),) * axis
    z = da.zeros(x.shape, dtype=g.dtype, chunks=lower.lower(x).chunks)
    gd = g._dask()
    remaining = np.arange(len(idx))
    while len(remaining):
        _, first = np.unique(idx[remaining], return_index=True)
        sel = remaining[first]
        dst = head + (idx[sel],)
        z[dst] = z[dst] + gd[head + (sel,)]
        remaining = np.delete(remaining, first)
    return _note_linear(dask_array._wrap(z, x.client), "indexing's cotangent", g)


def _setitem_cotangents(g: DaskArray, ins: tuple, key, need: list) -> list:
    """``a[key] = v``: ``a``'s cotangent is ``g`` with ``key`` zeroed, ``v``'s is
    ``g[key]`` (summed where ``v`` was broadcast)."""
    basic = dask_array._basic_key(key)
    if not basic:
        axis, idx = one_array_key(key, g.shape, "setitem")
        if len(np.unique(idx)) != len(idx):
            # (NumPy keeps the last write of a repeated index: the others get nothing)
            raise _no_rule("setitem with a repeated index")
    g_old = None
    if need[0]:
        g_old = g.copy()
        g_old[key] = np.zeros((), g.dtype)
    g_val = g[key] if need[1] else None
    return [g_old, g_val]


def _reduction_cotangent(n: DaskNode, g: DaskArray, xs: list):
    name = n.op.name
    x = xs[0]
    gk, axes = _kept(g, x.shape, n.params)
    if name in ("sum", "mean"):
        if name == "mean":
            cnt = 1
            for d in axes:
                cnt *= x.shape[d]
            gk = gk / cnt
        return [gk]         # (spread to x's shape where a consumer needs it: _backward)
    if name in ("max", "min"):
        ans, _ = _kept(_wrap(n), x.shape, n.params)
        mask = x == ans
        return [mask * (gk / mask.sum(axis=axes, keepdims=True))]
    if name in ("std", "var"):
        return [_std_var_cotangent(name, x, _wrap(n), g, n.params)]
    if name == "prod":
        return [gk * prod_of_others(x, axes)]
    raise _no_rule(name)


def prod_of_others(x: DaskArray, axes: tuple) -> DaskArray:
    """For each reduced value, the product of the other values it is reduced with (``prod``'s
    derivative): ``prod / x`` where no value is 0; at the one zero the product of the
    others; 0 where two or more are."""
    zero = x == 0
    nz = zero.astype(np.int64).sum(axis=axes, keepdims=True)
    safe = dask_array.where(zero, np.ones((), x.dtype)[()], x)
    pnz = safe.prod(axis=axes, keepdims=True)
    return dask_array.where(nz == 0, pnz / safe,
                            dask_array.where(zero & (nz == 1), pnz, np.zeros((), x.dtype)[()]))


def _arg_cotangents(n: DaskNode, g: DaskArray, need: list) -> list:
    """Cotangents of ``n``'s inputs (None: zero or not needed)."""
    if n.origin is not None:
        return _origin_cotangents(n, g, need)
    op = n.op
    xs = [_wrap(a) if type(a) is DaskNode else a for a in n.args]
    if op.ufunc is not None and op.kind == "elementwise":
        parts = rules.BINARY_PARTS.get(op.ufunc.__name__) if len(xs) == 2 else None
        if parts is not None:       # (only the parts needed: chunked arrays are not _node's)
            return [parts[k](g, _wrap(n), xs[0], xs[1]) if need[k] else None for k in (0, 1)]
        return rules._elementwise(op.ufunc.__name__, g, _wrap(n), xs)
    if op is OPS["copy"] or op is OPS["astype"]:
        return [g]
    if op is OPS["where"]:
        zero = np.zeros((), g.dtype)[()]
        return [None, dask_array.where(xs[0], g, zero) if need[1] else None,
                dask_array.where(xs[0], zero, g) if need[2] else None]
    if op.kind == "reduction":
        return _reduction_cotangent(n, g, xs)
    raise _no_rule(op.name)


def _backward(out: DaskNode, inputs: dict, seed: DaskArray) -> dict:
    """Cotangents (chunked arrays) of ``inputs`` (argument position -> node) for the
    cotangent ``seed`` of ``out``."""
    order = post_order(out, _inputs_of)
    targets = {id(n) for n in inputs.values()}
    depends = set(targets)
    for n in order:
        if any(type(a) is DaskNode and id(a) in depends for a in _inputs_of(n)):
            depends.add(id(n))
    cot = {id(out): seed}
    for n in reversed(order):
        g = cot.pop(id(n), None) if id(n) not in targets else None
        if g is None:
            continue
        ins = _inputs_of(n)
        # (comparisons, masks, indices: no cotangent flows into a non-float value)
        need = [type(a) is DaskNode and id(a) in depends and a.dtype.kind in "fc"
                for a in ins]
        if not any(need):
            continue
        if g.shape != n.shape and (n.origin is not None or n.op.kind != "elementwise"):
            # (a cotangent kept small -- a sum's, broadcast -- is spread only where an op
            # needs its full shape: elementwise rules broadcast it inside their fused task)
            g = _spread(g, n)
        gs = _arg_cotangents(n, g, need)
        for a, ga, nd in zip(ins, gs, need):
            if ga is None or not nd:
                continue
            ga = _fit(ga, a)
            prev = cot.get(id(a))
            cot[id(a)] = ga if prev is None else prev + ga
    out_grads = {}
    for i, node in inputs.items():
        g = cot.get(id(node))
        if g is None:
            g = _constant(np.zeros((), node.dtype), node.client)
        out_grads[i] = g if g.shape == node.shape else _spread(g, node)
    return out_grads


def _inputs(args, nums, who: str, client=None):
    """``(args, inputs)``: the differentiated arguments as chunked arrays (a plain one put
    on the cluster in one chunk), each its own node; ``client``: the cluster's when no
    argument is chunked (the function reads chunked data from a closure)."""
    client = next((a._n.client for a in args if isinstance(a, DaskArray)), client)
    args = list(args)
    inputs = {}
    for i in nums:
        a = args[i]
        if isinstance(a, DaskArray):
            x = a.copy()            # (its own node: the same array passed twice is two inputs)
        else:
            v = a._value() if isinstance(a, ndarray) else np.asarray(a)
            x = _constant(v, client)
        if x.dtype.kind not in "f":
            raise TypeError(f"{who}: argument {i} must be real floating point, not {x.dtype}")
        args[i] = x
        inputs[i] = x._n
        lower.TAPE_INPUTS[id(x._n)] = x._n
    return args, inputs


def _open() -> None:
    lower.TAPING[0] += 1
    lower.ON_TRACED_READ[0] = _traced_read


def _close(inputs: dict) -> None:
    lower.TAPING[0] -= 1
    for n in inputs.values():
        lower.TAPE_INPUTS.pop(id(n), None)
    if not lower.TAPING[0]:
        lower.TAPE_INPUTS.clear()


def _traced_read(name: str):
    raise traced_value_error(name)


def _output(res, who: str) -> DaskArray:
    if not isinstance(res, DaskArray):
        raise NotImplementedError(f"{who}: on chunked (dask) arrays the function must return "
                                  f"one chunked array (not {type(res).__name__})")
    if res.dtype.kind not in "f":
        raise TypeError(f"{who}: the output must be real floating point, not {res.dtype}")
    return res


def _results(out: DaskArray, grads: dict, plain: set, want_value: bool):
    """Compute the value (where wanted) and the plain arguments' gradients in one
    ``client.compute``; chunked arguments' gradients stay chunked."""
    if nested():
        return dict(grads)          # (recorded for the outer transform: stays chunked)
    todo = [(i, g) for i, g in grads.items() if i in plain]
    arrs = [g._dask() for _, g in todo]
    if want_value and out._n.host is None:
        arrs.append(out._dask())
    res = dict(grads)
    if arrs:
        client = out.client
        vals = client.gather(client.compute(arrs))
        if want_value and out._n.host is None:
            out._n.host = np.asarray(vals.pop(), out.dtype)
        for (i, g), v in zip(todo, vals):
            res[i] = ndarray._from_node(leaf(np.asarray(v, g.dtype)))
    return res


def _plain(args, nums) -> set:
    return {i for i in nums if not isinstance(args[i], DaskArray)}


def value_and_grad(fun, argnums=0, has_aux: bool = False, want_value: bool = True,
                   client=None):
    """``(fun(*args), gradient)`` where an argument is a chunked array, or ``fun`` reads
    one from a closure (``client``: its cluster's; see the module); ``want_value`` False
    (``grad``): the value is left uncomputed, not gathered with the gradients."""
    single = isinstance(argnums, int)
    nums = (argnums,) if single else tuple(argnums)

    def wrapped(*args, **kwargs):
        refuse_cpu_trace(args, "lazynp.grad")
        _open()
        inputs: dict = {}
        try:
            args2, inputs = _inputs(args, nums, "lazynp.grad", client)
            res = fun(*args2, **kwargs)
        finally:
            _close(inputs)
        out = res[0] if has_aux else res
        if not isinstance(out, DaskArray) or out.shape != ():
            raise TypeError("lazynp.grad: the function must return a scalar chunked array "
                            "when an argument is chunked")
        _output(out, "lazynp.grad")
        seed = _constant(np.ones((), out.dtype), out._n.client)
        grads = _results(out, _backward(out._n, inputs, seed), _plain(args, nums), want_value)
        g = [grads[i] for i in nums]
        return res, (g[0] if single else tuple(g))
    return wrapped


def vjp(fun, *primals, client=None):
    """``(fun(*primals), vjp_fn)`` where a primal is chunked; ``vjp_fn(cotangent)`` walks
    the recorded function backward (the recording is kept by ``vjp_fn``)."""
    nums = tuple(range(len(primals)))
    refuse_cpu_trace(primals, "lazynp.vjp")
    _open()
    inputs: dict = {}
    try:
        args, inputs = _inputs(primals, nums, "lazynp.vjp", client)
        out = _output(fun(*args), "lazynp.vjp")
    finally:
        _close(inputs)
    plain = _plain(primals, nums)

    def vjp_fn(cotangent):
        c = cotangent if isinstance(cotangent, DaskArray) else \
            _chunked(cotangent, out._n)
        if c.shape != out.shape:
            raise ValueError(f"lazynp.vjp: the cotangent has shape {c.shape}, the output "
                             f"{out.shape}")
        if c.dtype != out.dtype:
            c = c.astype(out.dtype)
        grads = _results(out, _backward(out._n, inputs, c), plain, False)
        return tuple(grads[i] for i in nums)
    return out, vjp_fn
