"""Forward mode and Jacobians over chunked (dask) arrays: ``jvp``, ``jacobian`` and
``elementwise_grad`` of functions whose arguments are chunked.

:func:`jvp` records the function once on the chunked arrays (as :mod:`dask_grad` does for
``grad``) and pushes the tangents forward through the recorded nodes, producers first,
with one forward rule per op: the tangent of each node is itself a chunked array, built
with the same lazynp ops, so its elementwise steps fuse into per-chunk tasks at the read,
and nothing is gathered.  The rules:

* elementwise ufuncs: the reverse rule of each operand applied to that operand's
  tangent (an elementwise op's Jacobian is diagonal, so its transpose is itself);
* linear ops (copy, astype, transposes, reshapes, indexing, ``rechunk``, ``cumsum``,
  ``sum``/``mean``): the op itself on the tangent; ``matmul``/``dot``: the product rule;
* ``where``, ``max``/``min`` (ties share the tangent evenly, as the reverse rule),
  ``std``/``var``, ``prod`` (zeros among the reduced values included), ``sort`` (the
  tangent follows the values' permutation), ``a[i] = v`` writes, ``stack`` and
  ``concatenate`` of chunked arrays;
* the linear steps of a recorded backward pass (``grad`` inside ``jvp``: a
  Hessian-vector product): ``broadcast_to``, ``getitem``'s cotangent.

An op with no rule on the path from a differentiated argument raises
``NotImplementedError`` naming it, never a silent zero.

:func:`jacobian` picks the cheaper mode: one reverse pass per output element when the
output is the smaller (a loss vector of a few parameters' model), one forward pass per
input element otherwise; both are capped at :data:`MAX_PASSES` passes (a Jacobian of a
large chunked output by a large chunked input would be a huge dense array: it raises,
naming ``jvp``/``vjp`` as the way to its products).
"""
from __future__ import annotations

import os

import numpy as np

from ..array.ndarray import ndarray
from ..core.graph import leaf
from ..dask import array as dask_array
from ..dask.array import DaskArray
from ..dask.lower import DaskNode
from ..ops.registry import OPS
from . import dask_grad, rules
from .array_rules import _kept, post_order

__all__ = ["jvp", "jacobian", "elementwise_grad", "MAX_PASSES"]

#: the most passes (one per output or input element) a Jacobian over chunked arrays takes
MAX_PASSES = int(os.environ.get("LAZYNP_DASK_JACOBIAN_MAX_PASSES", "1024"))

_wrap = dask_grad._wrap
_inputs_of = dask_grad._inputs_of


def _no_rule(name: str, who: str):
    return NotImplementedError(
        f"{who} on chunked (dask) arrays: no forward (tangent) rule for {name!r} (covered: "
        f"elementwise ufuncs, where, copy, astype, sum, mean, prod, max, min, std, var, "
        f"cumsum, sort, matmul, dot, transposes, reshapes, indexing, a[i] = v, rechunk); "
        f"gather the data with x.to_device('cpu') where it fits in memory")


def _as_shape(t: DaskArray, n: DaskNode) -> DaskArray:
    """``t`` broadcast to ``n``'s shape (a tangent kept small by a broadcast operand)."""
    return t if t.shape == n.shape else dask_grad._spread(t, n)


def _reduced(t: DaskArray, n: DaskNode, name: str) -> DaskArray:
    """The reduction ``name`` of ``t`` with ``n``'s reduction parameters."""
    p = dict(n.params or {})
    axis = p.pop("axis", None)
    keep = p.pop("keepdims", False)
    p.pop("dtype", None)
    return dask_array.reduce(name, t, axis=axis, keepdims=keep, kw=p or None)


def _to_out(v: DaskArray, n: DaskNode) -> DaskArray:
    """A keepdims reduction ``v`` in ``n``'s shape (``keepdims`` or not)."""
    return v if v.shape == n.shape else v.reshape(n.shape)


def _reduction_tangent(n: DaskNode, x: DaskArray, t: DaskArray, who: str) -> DaskArray:
    name = n.op.name
    if name in ("sum", "mean"):
        return _reduced(_as_shape(t, n.args[0]), n, name)
    ans, axes = _kept(_wrap(n), x.shape, n.params)
    if name in ("max", "min"):
        mask = x == ans
        share = (mask * t).sum(axis=axes, keepdims=True) / mask.sum(axis=axes, keepdims=True)
        return _to_out(share, n)
    if name in ("std", "var"):
        cnt = 1
        for d in axes:
            cnt *= x.shape[d]
        ddof = (n.params or {}).get("ddof", 0)
        centered = x - x.mean(axis=axes, keepdims=True)
        dvar = (centered * t).sum(axis=axes, keepdims=True) * (2.0 / (cnt - ddof))
        return _to_out(dvar if name == "var" else dvar / (2.0 * ans), n)
    if name == "prod":
        others = dask_grad.prod_of_others(x, axes)
        return _to_out((t * others).sum(axis=axes, keepdims=True), n)
    raise _no_rule(name, who)


def _elementwise_tangent(n: DaskNode, xs: list, ts: list, who: str):
    """``sum_k d n / d x_k * t_k``: each operand's reverse rule with its tangent as the
    cotangent (the op's Jacobian is diagonal)."""
    name = n.op.ufunc.__name__
    ans = _wrap(n)
    out = None
    for k, t in enumerate(ts):
        if t is None:
            continue
        if len(xs) == 2 and name in rules.BINARY_PARTS:
            part = rules.BINARY_PARTS[name][k](t, ans, xs[0], xs[1])
        else:
            try:
                part = rules._elementwise(name, t, ans, xs)[k]
            except NotImplementedError:
                raise _no_rule(name, who) from None
        if part is None:            # (piecewise constant: floor, sign, comparisons...)
            continue
        out = part if out is None else out + part
    return out


def _sort_block(x, t, axis: int, kind):
    """One block of a sort's tangent: ``t`` permuted as ``sort`` permutes ``x``."""
    return np.take_along_axis(t, np.argsort(x, axis=axis, kind=kind), axis=axis)


def _origin_tangent(n: DaskNode, tangent: dict, who: str):
    name, ins, params = n.origin

    def t_of(v):
        return tangent.get(id(v)) if type(v) is DaskNode else None

    if name in ("matmul", "dot"):
        x, y = (dask_grad._chunked(v, n) for v in ins)
        tx, ty = (t_of(v) for v in ins)
        fn = dask_array.matmul if name == "matmul" else (lambda a, b: a.dot(b))
        parts = ([fn(tx, y)] if tx is not None else []) + ([fn(x, ty)] if ty is not None
                                                            else [])
        return parts[0] if len(parts) == 1 else parts[0] + parts[1]
    if name in ("lazynp.stack", "lazynp.concatenate"):
        axis = dask_grad.join_axis(n, ins, params, name)
        ts = [t_of(a) for a in ins]
        ts = [_as_shape(t, a) if t is not None else
              dask_grad._spread(dask_grad._constant(np.zeros((), n.dtype), n.client), a)
              for t, a in zip(ts, ins)]
        fn = np.stack if name == "lazynp.stack" else np.concatenate
        return dask_array.call_at_once(name[len("lazynp."):], fn, (ts,), {"axis": axis})
    if name == "setitem":
        old, value = ins
        t_old, t_val = t_of(old), t_of(value)
        base = _as_shape(t_old, old) if t_old is not None else \
            dask_grad._constant(np.zeros((), n.dtype), n.client)
        base = _as_shape(base, old) if base.shape != old.shape else base
        base = base.copy()
        base[params] = t_val if t_val is not None else np.zeros((), n.dtype)
        return base
    t = t_of(ins[0])
    if t is None:
        return None
    t = _as_shape(t, ins[0])
    if name == "transpose":
        return t.transpose(params) if params is not None else t.transpose()
    if name == "swapaxes":
        return t.swapaxes(*params)
    if name == "reshape":
        return t.reshape(n.shape)
    if name == "rechunk":
        return t
    if name == "broadcast_to":
        return _as_shape(t, n)
    if name == "getitem's cotangent":
        key, x = params
        return dask_grad._getitem_cotangent(t, x, key)
    if name == "getitem":
        return t[params]
    if name == "getitem (advanced)":
        key = ins[1]
        return t[_wrap(key) if type(key) is DaskNode else key]
    if name == "lazynp.cumsum":
        return dask_array.call_at_once("cumsum", np.cumsum, (t,), dict(params or {}))
    if name == "lazynp.sort":
        return dask_grad.sort_blocks(_sort_block, _wrap(ins[0]), t, params, n.client)
    raise _no_rule(name, who)


def _node_tangent(n: DaskNode, tangent: dict, who: str):
    """The tangent of node ``n`` from its inputs' (None: zero)."""
    if n.origin is not None:
        return _origin_tangent(n, tangent, who)
    op = n.op
    ts = [tangent.get(id(a)) if type(a) is DaskNode else None for a in n.args]
    if all(t is None for t in ts):
        return None
    xs = [_wrap(a) if type(a) is DaskNode else a for a in n.args]
    if op.ufunc is not None and op.kind == "elementwise":
        return _elementwise_tangent(n, xs, ts, who)
    if op is OPS["copy"]:
        return ts[0]
    if op is OPS["astype"]:
        return ts[0].astype(n.dtype) if n.dtype.kind in "fc" else None
    if op is OPS["where"]:
        zero = np.zeros((), n.dtype)[()]
        return dask_array.where(xs[0], zero if ts[1] is None else ts[1],
                                zero if ts[2] is None else ts[2])
    if op.kind == "reduction":
        if n.op.name in ("argmax", "argmin", "any", "all"):
            return None
        return _reduction_tangent(n, xs[0], ts[0], who)
    raise _no_rule(op.name, who)


def forward(out: DaskNode, seeds: dict, who: str) -> DaskArray:
    """The tangent of ``out`` for the tangents ``seeds`` (input node id -> chunked array)."""
    order = post_order(out, _inputs_of)
    tangent = dict(seeds)
    for n in order:
        if id(n) in tangent:
            continue
        if not any(type(a) is DaskNode and id(a) in tangent for a in _inputs_of(n)):
            continue
        if n.dtype.kind not in "fc":        # (comparisons, argmax, integer casts: no tangent)
            continue
        t = _node_tangent(n, tangent, who)
        if t is not None:
            t = _as_shape(t, n)
            tangent[id(n)] = t.astype(n.dtype) if t.dtype != n.dtype else t
    t = tangent.get(id(out))
    if t is None:
        return dask_grad._spread(dask_grad._constant(np.zeros((), out.dtype), out.client), out)
    return t


def _record(fun, args, nums, who: str, client=None):
    """``(args, inputs, out)``: ``fun`` recorded once on chunked copies of ``args[nums]``
    (``client``: the cluster's when no argument is chunked)."""
    dask_grad.refuse_cpu_trace(args, who)
    dask_grad.refuse_nested(who)
    dask_grad._open()
    inputs: dict = {}
    try:
        args2, inputs = dask_grad._inputs(args, nums, who, client)
        out = dask_grad._output(fun(*args2), who)
    finally:
        dask_grad._close(inputs)
    return args2, inputs, out


def _tangent_array(t, like: DaskNode, who: str) -> DaskArray:
    c = t if isinstance(t, DaskArray) else dask_grad._chunked(t, like)
    if c.shape != like.shape:
        raise ValueError(f"{who}: a tangent has shape {c.shape}, its primal {like.shape}")
    return c.astype(like.dtype) if c.dtype != like.dtype else c


def jvp(fun, primals, tangents, client=None):
    """``(fun(*primals), J @ tangents)`` where a primal is chunked: one forward pass; both
    results are chunked arrays (nothing is computed until a read)."""
    primals, tangents = tuple(primals), tuple(tangents)
    if len(primals) != len(tangents):
        raise ValueError("jvp: tangents must have the structure of primals")
    nums = tuple(range(len(primals)))
    _, inputs, out = _record(fun, primals, nums, "lazynp.jvp", client)
    seeds = {id(inputs[i]): _tangent_array(tangents[i], inputs[i], "lazynp.jvp")
             for i in nums}
    return out, forward(out._n, seeds, "lazynp.jvp")


def elementwise_grad(fun, args, nums, single: bool, client=None):
    """The VJP of ``fun`` with a cotangent of ones (:func:`dask_grad.vjp`)."""
    _, inputs, out = _record(fun, args, nums, "lazynp.elementwise_grad", client)
    seed = dask_grad._constant(np.ones((), out.dtype), out.client)
    grads = dask_grad._results(out, dask_grad._backward(out._n, inputs, seed),
                               dask_grad._plain(args, nums), False)
    return grads[nums[0]] if single else tuple(grads[i] for i in nums)


def _one_hot(size: int, i: int, shape: tuple, dtype, client) -> DaskArray:
    e = np.zeros(size, dtype)
    e[i] = 1
    return dask_grad._constant(e.reshape(shape), client)


def jacobian(fun, args, nums, single: bool, client=None):
    """Blocks ``out.shape + x.shape`` of the Jacobian of ``fun`` where an argument is
    chunked: by reverse passes when the output has fewer elements than the differentiated
    arguments together (a plain argument's block is then gathered, as ``grad``'s), else by
    forward passes (chunked blocks).

    Raises
    ------
    NotImplementedError
        When it would take more than :data:`MAX_PASSES` passes.
    """
    who = "lazynp.jacobian"
    _, inputs, out = _record(fun, args, nums, who, client)
    m = int(np.prod(out.shape, dtype=np.int64))
    sizes = {i: int(np.prod(inputs[i].shape, dtype=np.int64)) for i in nums}
    n_in = sum(sizes.values())
    if min(m, n_in) > MAX_PASSES:
        raise NotImplementedError(
            f"{who} on chunked (dask) arrays: the Jacobian of a {m}-element output by "
            f"{n_in} input elements takes {min(m, n_in)} passes over the chunks (at most "
            f"{MAX_PASSES}, LAZYNP_DASK_JACOBIAN_MAX_PASSES) and is a dense "
            f"{m}x{n_in} array; use lazynp.jvp or lazynp.vjp for its products")
    import dask.array as da
    if m <= n_in:
        rows = [dask_grad._backward(out._n, inputs,
                                    _one_hot(m, k, out.shape, out.dtype, out.client))
                for k in range(m)]
        blocks = _stacked(rows, nums, inputs, out, dask_grad._plain(args, nums))
    else:
        blocks = {}
        for i in nums:
            node = inputs[i]
            cols = []
            for k in range(sizes[i]):
                seeds = {id(node): _one_hot(sizes[i], k, node.shape, node.dtype,
                                            node.client)}
                cols.append(forward(out._n, seeds, who)._dask())
            arr = da.stack(cols, axis=-1) if cols else \
                da.zeros(out.shape + (0,), dtype=out.dtype)
            blocks[i] = dask_array._wrap(arr.reshape(out.shape + node.shape), out.client)
    return blocks[nums[0]] if single else tuple(blocks[i] for i in nums)


def _stacked(rows: list, nums, inputs: dict, out: DaskArray, plain: set) -> dict:
    """Each argument's rows (one cotangent per output element) as its Jacobian block; the
    plain arguments' blocks computed together in one ``client.compute``."""
    import dask.array as da
    blocks, todo = {}, []
    for i in nums:
        node = inputs[i]
        arr = da.stack([r[i]._dask() for r in rows]) if rows else \
            da.zeros((0,) + node.shape, dtype=node.dtype)
        arr = arr.reshape(out.shape + node.shape)
        if i in plain:
            todo.append((i, arr))
        else:
            blocks[i] = dask_array._wrap(arr, out.client)
    if todo:
        client = out.client
        vals = client.gather(client.compute([a for _, a in todo]))
        for (i, a), v in zip(todo, vals):
            blocks[i] = ndarray._from_node(leaf(np.asarray(v, a.dtype)))
    return blocks
