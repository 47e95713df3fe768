"""``lazynp.vmap``: a function of one example mapped over a batch axis (JAX's ``vmap``).

``vmap(f, in_axes, out_axes)(*args)`` traces ``f`` once on placeholders shaped like one
example (the mapped leaves of ``args`` without their mapped axis; unmapped leaves are
passed as they are), then records the traced graph again with a leading batch axis
through each op's batching rule (:mod:`lazynp.autograd.batching`): one batched op per
traced op, lazy like any lazynp result.  Gradients are recorded ops too, so
``vmap(grad(loss), in_axes=(None, 0, 0))`` computes per-example gradients as one batched
backward pass; ``grad``, ``jit`` and ``jacobian`` compose with ``vmap`` in either order.

Axes follow JAX: ``in_axes`` is an int, ``None`` (not mapped), or a tuple (a list is
taken as a tuple) with one entry per positional argument, each a pytree prefix of its
argument (tuples, lists, dicts of ints and ``None``); keyword arguments are mapped over
axis 0; negative axes count from the end.  ``out_axes`` likewise for the output pytree
(``None``: the output must not depend on the batch).  Errors are JAX's (inconsistent
sizes, an axis beyond an argument's rank, no mapped argument, a specification that is not
a prefix of its value).

When ``f`` cannot be traced (Python control flow on a mapped value, a NumPy fallback on
one) or takes device arrays, it runs once per example and the results are stacked;
counted in :func:`lazynp.stats` (``vmap_function_loops``), as are the ops batched by a
per-example loop (``vmap_op_loops``, ``vmap_looped_ops``).
"""
from __future__ import annotations

import functools
import inspect
from typing import Any, Callable

import numpy as np

from .. import devices
from .._base import counters as _counters
from .._numpy import namespace as lnp
from ..array.ndarray import ndarray
from ..core import graph, policy as _policy
from ..core.graph import Node, TracingError
from . import batching
from .tape import flatten, unflatten

__all__ = ["vmap"]

STATS = {"vmap_calls": 0, "vmap_function_loops": 0}
_counters.register_table(STATS)


# --- axes specifications ------------------------------------------------------------------

def _spec_leaves_ok(spec) -> bool:
    """True when every leaf of an axes specification is an int or None."""
    if spec is None or type(spec) is int:
        return True
    if isinstance(spec, (tuple, list)):
        return all(_spec_leaves_ok(s) for s in spec)
    if isinstance(spec, dict):
        return all(_spec_leaves_ok(s) for s in spec.values())
    return False


def _tree_repr(spec) -> str:
    """A readable structure of a pytree spec (:func:`lazynp.autograd.tape.flatten`)."""
    if spec is None:
        return "*"
    kind, items = spec
    if kind is dict:
        return "{" + ", ".join(f"{k!r}: {_tree_repr(s)}" for k, s in items) + "}"
    inner = ", ".join(_tree_repr(s) for s in items)
    if kind is list:
        return f"[{inner}]"
    if kind is tuple:
        return f"({inner}{',' if len(items) == 1 else ''})"
    return f"{kind.__name__}({inner})"


class _PrefixError(ValueError):
    pass


def _broadcast_axes(axes, spec, out: list) -> None:
    """Append the axis of every leaf of the pytree of structure ``spec`` to ``out``;
    ``axes`` is a prefix of that pytree (an int or None covers a whole subtree)."""
    if axes is None or type(axes) is int:
        n = [0]
        _count_leaves(spec, n)
        out.extend([axes] * n[0])
        return
    if spec is None:
        raise _PrefixError
    kind, items = spec
    if kind is dict:
        if not isinstance(axes, dict) or set(axes) != {k for k, _ in items}:
            raise _PrefixError
        for k, s in items:
            _broadcast_axes(axes[k], s, out)
        return
    if not isinstance(axes, (tuple, list)) or len(axes) != len(items) or \
            (type(axes) is not kind and not (issubclass(kind, tuple) and
                                            isinstance(axes, tuple))):
        raise _PrefixError
    for a, s in zip(axes, items):
        _broadcast_axes(a, s, out)


def _count_leaves(spec, n: list) -> None:
    if spec is None:
        n[0] += 1
        return
    for item in spec[1]:
        _count_leaves(item[1] if spec[0] is dict else item, n)


def _leaf_paths(spec, prefix: str, out: list) -> None:
    if spec is None:
        out.append(prefix)
        return
    kind, items = spec
    if kind is dict:
        for k, s in items:
            _leaf_paths(s, f"{prefix}[{k!r}]", out)
    else:
        for i, s in enumerate(items):
            _leaf_paths(s, f"{prefix}[{i}]", out)


def _type_str(x) -> str:
    """JAX's short type of a leaf: ``float64[3,4]``."""
    try:
        dt = x.dtype if hasattr(x, "dtype") else np.asarray(x).dtype
        return f"{np.dtype(dt).name}[{','.join(str(s) for s in np.shape(x))}]"
    except Exception:
        return "unknown"


def _arg_names(fun, args: tuple, kwargs: dict) -> list:
    """How JAX names each leaf in its errors: ``argument x[0] of type float64[3]``,
    ``args[1]...`` (no signature), ``kwargs['k']...``."""
    try:
        params = list(inspect.signature(fun).bind(*args, **kwargs).signature.parameters)
    except (TypeError, ValueError):
        params = None
    names = []
    for i, a in enumerate(args):
        leaves: list = []
        paths: list = []
        _leaf_paths(flatten(a, leaves), "", paths)
        head = f"argument {params[i]}" if params is not None and i < len(params) \
            else f"args[{i}]"
        names += [f"{head}{p} of type {_type_str(x)}" for p, x in zip(paths, leaves)]
    for k, v in kwargs.items():
        leaves = []
        paths = []
        _leaf_paths(flatten(v, leaves), "", paths)
        names += [f"kwargs[{k!r}]{p} of type {_type_str(x)}" for p, x in zip(paths, leaves)]
    return names


# --- the transform ------------------------------------------------------------------------

def vmap(fun: Callable, in_axes: Any = 0, out_axes: Any = 0) -> Callable:
    """Vectorize ``fun`` over a batch axis of its arguments (JAX's ``vmap``).

    Parameters
    ----------
    fun : callable
        A function of one example, written with lazynp functions; arguments and outputs
        may be pytrees (tuples, lists, dicts) of arrays.
    in_axes : int, None or tuple
        The mapped axis of each positional argument: an int (negative counts from the
        end), ``None`` (passed to every example as it is), or a tuple (a list is taken as
        one) with an entry per positional argument, each a pytree prefix of it.  Keyword
        arguments are mapped over axis 0.
    out_axes : int, None or pytree
        Where the batch axis goes in each output (a prefix of the output pytree);
        ``None``: the output does not depend on the batch (else ``ValueError``).

    Returns
    -------
    callable
        The batched function: its outputs have the batch axis at ``out_axes``.

    Raises
    ------
    TypeError
        An axes specification that is not ints and ``None`` in containers.
    ValueError
        At the call, as JAX: inconsistent sizes of the mapped axes, an axis beyond an
        argument's rank, no mapped argument, an ``in_axes`` that is not a prefix of the
        arguments, a batched output where ``out_axes`` is ``None``.

    Examples
    --------
    Per-example gradients:

    >>> per_example = lazynp.vmap(lazynp.grad(loss), in_axes=(None, 0, 0))
    >>> grads = per_example(params, X, Y)           # doctest: +SKIP
    """
    if isinstance(in_axes, list):
        in_axes = tuple(in_axes)
    if not (in_axes is None or type(in_axes) in (int, tuple)):
        raise TypeError("vmap in_axes must be an int, None, or a tuple of entries "
                        "corresponding to the positional arguments passed to the function, "
                        f"but got {in_axes}.")
    if not _spec_leaves_ok(in_axes):
        raise TypeError("vmap in_axes must be an int, None, or (nested) container with those "
                        f"types as leaves, but got {in_axes}.")
    if not _spec_leaves_ok(out_axes):
        raise TypeError("vmap out_axes must be an int, None, or (nested) container with "
                        f"those types as leaves, but got {out_axes}.")
    if not callable(fun):
        raise TypeError(f"Expected a callable value, got {fun!r}")

    @functools.wraps(fun)
    def batched(*args, **kwargs):
        return _call(fun, in_axes, out_axes, args, kwargs)
    batched.__wrapped__ = fun
    return batched


def _leaf_axes(in_axes, args: tuple, kwargs: dict) -> tuple:
    """The flat leaves of ``(args, kwargs)``, their structure and their mapped axes."""
    if isinstance(in_axes, tuple) and len(in_axes) != len(args):
        raise ValueError("vmap in_axes must be an int, None, or a tuple of entries "
                         "corresponding to the positional arguments passed to the function, "
                         f"but got len(in_axes)={len(in_axes)}, len(args)={len(args)}")
    leaves: list = []
    spec = flatten((tuple(args), dict(kwargs)), leaves)
    axes: list = []
    try:
        _broadcast_axes(in_axes, spec[1][0], axes)
    except _PrefixError:
        raise ValueError("vmap in_axes specification must be a tree prefix of the "
                         f"corresponding value, got specification {in_axes} for value tree "
                         f"{_tree_repr(spec[1][0])}.") from None
    n = [0]
    _count_leaves(spec[1][1], n)
    axes += [0] * n[0]
    return leaves, spec, axes


def _call(fun, in_axes, out_axes, args: tuple, kwargs: dict):
    leaves, spec, axes = _leaf_axes(in_axes, args, kwargs)
    # (None is an empty pytree in JAX: never mapped)
    axes = [None if x is None else a for x, a in zip(leaves, axes)]
    if not leaves or all(x is None for x in leaves):
        raise ValueError("vmap wrapped function must be passed at least one argument "
                         f"containing an array, got empty *args={args} and "
                         f"**kwargs={kwargs}")
    size = _mapped_size(fun, args, kwargs, leaves, axes)
    STATS["vmap_calls"] += 1
    if any(a is not None and devices.is_device_array(x) for x, a in zip(leaves, axes)):
        return _loop(fun, out_axes, leaves, spec, axes, size)
    mapped = []                     # (placeholder node, batched node)
    call_leaves = []
    for k, (x, a) in enumerate(zip(leaves, axes)):
        if a is None:
            call_leaves.append(x)
            continue
        arr = x if isinstance(x, ndarray) else lnp.asarray(x)
        a = a % arr.ndim
        if a:
            arr = lnp.moveaxis(arr, a, 0)
        ph = graph.placeholder(arr.shape[1:], arr.dtype, f"vmap{k}")
        mapped.append((ph, arr._node()))
        call_leaves.append(ndarray._from_node(ph))
    cargs, ckwargs = unflatten(spec, iter(call_leaves))
    unmapped = [(x._var, x._var.head) for x, a in zip(leaves, axes)
                if a is None and isinstance(x, ndarray)]
    try:
        with _Tracing():
            out = fun(*cargs, **ckwargs)
            out_leaves: list = []
            out_spec = flatten(out, out_leaves)
            out_nodes = [x._node() if isinstance(x, ndarray) else None for x in out_leaves]
    except TracingError:
        _restore(unmapped)
        return _loop(fun, out_axes, leaves, spec, axes, size)
    if _restore(unmapped):
        # the function writes into an argument passed to every example: the writes of
        # each example, in turn, are the loop's
        return _loop(fun, out_axes, leaves, spec, axes, size)
    del out, cargs, ckwargs, call_leaves
    bt = batching.Batcher(size, {id(ph): bn for ph, bn in mapped})
    # the batched graph is recorded, not run op by op: it runs as one graph when a result
    # is needed (fused kernels, pooled buffers: the batched ops are large)
    with _policy.policy("lazy"):
        bt.run([n for n in out_nodes if n is not None])
        results = []
        for x, n in zip(out_leaves, out_nodes):
            bn = bt.env.get(id(n)) if n is not None else None
            results.append(x if bn is None else batching.wrap(bn))
        batched_flags = [n is not None and id(n) in bt.env for n in out_nodes]
        return _place_outputs(out_axes, out_spec, results, batched_flags, size)


def _restore(heads: list) -> bool:
    """Put back the contents of arguments the traced function wrote into (their Vars'
    heads before the trace); True when there was one."""
    wrote = False
    for var, head in heads:
        if var.head is not head:
            var.set_head(head)
            wrote = True
    return wrote


def _mapped_size(fun, args, kwargs, leaves, axes) -> int:
    sizes = []
    for x, a in zip(leaves, axes):
        if a is None:
            sizes.append(None)
            continue
        shape = np.shape(x)
        if not -len(shape) <= a < len(shape):
            min_rank = a + 1 if a >= 0 else -a
            raise ValueError(f"vmap was requested to map its argument along axis {a}, which "
                             f"implies that its rank should be at least {min_rank}, but is "
                             f"only {len(shape)} (its shape is {shape})")
        sizes.append(shape[a])
    distinct = {s for s in sizes if s is not None}
    if not distinct:
        raise ValueError("vmap must have at least one non-None value in in_axes")
    if len(distinct) == 1:
        return distinct.pop()
    names = _arg_names(fun, args, kwargs)
    counts: dict = {}
    for s in sizes:
        if s is not None:
            counts[s] = counts.get(s, 0) + 1
    msg = ["vmap got inconsistent sizes for array axes to be mapped:\n"]
    for rank, (s, ct) in enumerate(sorted(counts.items(), key=lambda kv: -kv[1])):
        i = sizes.index(s)
        where = f"axis {axes[i]} of {names[i] if i < len(names) else f'args[{i}]'}"
        if ct == 1:
            msg.append(f"  * one axis had size {s}: {where};\n")
        elif rank == 0:
            msg.append(f"  * most axes ({ct} of them) had size {s}, e.g. {where};\n")
        else:
            msg.append(f"  * some axes ({ct} of them) had size {s}, e.g. {where};\n")
    raise ValueError("".join(msg)[:-2])


_depth = [0]        # vmap traces open


def tracing() -> bool:
    """True while a function is traced for :func:`vmap` (``lazynp.jit`` then records the
    function's ops instead of running a compiled plan on the placeholders)."""
    return _depth[0] > 0


class _Tracing:
    """Record everything (no work runs, no flush mid-trace) and keep the graph."""

    def __enter__(self):
        _depth[0] += 1
        self._keep = graph.keeping_graph().__enter__()
        self._bound = graph.counts.max_pending
        graph.counts.max_pending = 1 << 62
        return self

    def __exit__(self, *exc):
        _depth[0] -= 1
        graph.counts.max_pending = self._bound
        self._keep.__exit__(*exc)
        return False


def _out_axes_leaves(out_axes, out_spec) -> list:
    axes: list = []
    try:
        _broadcast_axes(out_axes, out_spec, axes)
    except _PrefixError:
        raise ValueError("vmap out_axes specification must be a tree prefix of the "
                         f"corresponding value, got specification {out_axes} for value tree "
                         f"{_tree_repr(out_spec)}.") from None
    return axes


def _place_outputs(out_axes, out_spec, results: list, batched: list, size: int):
    """The outputs with their batch axis moved to ``out_axes`` (an unbatched output with
    an int axis is broadcast along it)."""
    axes = _out_axes_leaves(out_axes, out_spec)
    final = []
    for x, b, a in zip(results, batched, axes):
        if x is None:                   # (an empty pytree in JAX: as it is)
            final.append(x)
            continue
        if a is None:
            if b:
                raise ValueError("vmap has mapped output but out_axes is None")
            final.append(x)
            continue
        if not b:
            x = lnp.asarray(x)
            x = lnp.array(lnp.broadcast_to(x, (size,) + x.shape))
        a = a % x.ndim if -x.ndim <= a < x.ndim else a
        if a:
            x = lnp.moveaxis(x, 0, a)
        final.append(x)
    return unflatten(out_spec, iter(final))


def _example(x, axis: int, i: int):
    """Example ``i`` of ``x`` along ``axis`` (a view; NumPy arrays stay NumPy)."""
    index = (slice(None),) * (axis % np.ndim(x)) + (i,)
    return x[index] if hasattr(x, "__getitem__") and np.ndim(x) else np.asarray(x)[index]


def _loop(fun, out_axes, leaves, spec, axes, size: int):
    """``fun`` once per example, the outputs stacked (``fun`` could not be traced)."""
    STATS["vmap_function_loops"] += 1
    outs = []
    for i in range(size):
        ex = [x if a is None else _example(x, a, i) for x, a in zip(leaves, axes)]
        cargs, ckwargs = unflatten(spec, iter(ex))
        res = fun(*cargs, **ckwargs)
        flat: list = []
        out_spec = flatten(res, flat)
        outs.append(flat)
    if size == 0:
        raise ValueError("vmap: a batch of size 0 cannot be mapped by running the function "
                         "once per example (it could not be traced)")
    axes_out = _out_axes_leaves(out_axes, out_spec)
    final = []
    for k, a in enumerate(axes_out):
        parts = [o[k] for o in outs]
        if a is None or parts[0] is None:
            final.append(parts[0])
            continue
        final.append(lnp.stack(parts, axis=a))     # (device arrays stay on their device)
    return unflatten(out_spec, iter(final))
