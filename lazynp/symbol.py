"""Symbols: declarative lazynp graphs with named inputs (MXNet's Symbol, built by tracing).

``lazynp.trace(f, *example_args)`` runs ``f`` on *placeholders* (pytrees of arrays: tuples,
lists, dicts; Python scalars are constants baked into the graph) and returns a
:class:`Symbol`: an immutable list of ``(op name, input refs, params, shape, dtype)``
entries copied out of the recorded nodes.  Symbols can also be built declaratively::

    x = lazynp.symbol.var("x", shape=(None, 3), dtype="float32")
    y = lazynp.exp(x) * 2
    sym = lazynp.symbol.build(y)          # or lazynp.symbol.Group([y, ...])

A Symbol can be inspected (``inputs``, ``outputs``, ``infer_shape``, ``to_dot``,
``_repr_svg_``/``_repr_html_``), saved (``tojson``/``fromjson``, ``save``/``load``),
optimized (``optimize()``: the pass pipeline of :mod:`lazynp.ir.passes.pipeline`),
differentiated (``grad``) and called on arrays (``sym(x=...)`` or positionally); a call
compiles a memory-planned plan per input signature (:mod:`lazynp.jit`).

Inside a trace (when called on lazy, pending arrays), calling a Symbol replays its ops
lazily, so Symbols compose.

The Symbol's data (entries, JSON, shape inference) is :mod:`lazynp.ir.symbol`; this module
makes Symbols from functions and arrays and gives them ``replay`` and re-tracing.
"""
from __future__ import annotations

import inspect
import traceback

import numpy as _np

from ._base.site import in_package
from ._numpy.namespace import asarray
from .array.ndarray import ndarray
from .core import graph as _graph
from .core.graph import Node, TracingError
from .ir.symbol import (Ref, SNode, Symbol, SymbolError, SymbolSerializationError,  # noqa: F401
                        add_member, extract, fromjson, resolve_op, tree_flatten,
                        tree_unflatten)

__all__ = ["Symbol", "trace", "var", "build", "Group", "fromjson", "load",
           "SymbolError", "SymbolSerializationError"]

#: stand-in size recorded for a ``None`` (any size) dimension of :func:`var`
STANDIN = 2


def _leaf_names(spec, prefix: str, out: list) -> None:
    if spec == "*":
        out.append(prefix)
        return
    tag = spec[0]
    if tag in ("t", "l"):
        for i, s in enumerate(spec[1]):
            _leaf_names(s, f"{prefix}.{i}", out)
    elif tag == "d":
        for k, s in zip(spec[1], spec[2]):
            _leaf_names(s, f"{prefix}.{k}", out)


class _Tracing:
    """Raise the pending-graph bound (no flush mid-trace) and keep the recorded graph."""

    def __enter__(self):
        self._keep = _graph.keeping_graph().__enter__()
        self._bound = _graph.counts.max_pending
        _graph.counts.max_pending = 1 << 62
        return self

    def __exit__(self, *exc):
        _graph.counts.max_pending = self._bound
        self._keep.__exit__(*exc)
        return False


def _user_line(exc: BaseException) -> str:
    """The innermost traceback frame outside lazynp (the user's line)."""
    best = None
    for fs in traceback.extract_tb(exc.__traceback__):
        if not in_package(fs.filename) and "/numpy/" not in fs.filename:
            best = fs
    if best is None:
        return "<unknown line>"
    line = f'File "{best.filename}", line {best.lineno}, in {best.name}'
    if best.line:
        line += f"\n    {best.line.strip()}"
    return line


def tracing_error(exc: BaseException, what: str = "lazynp.trace") -> TracingError:
    """A clear error for Python control flow (or NumPy fallback) on traced array values."""
    msg = (f"{what}: an array value was needed while tracing, at\n  {_user_line(exc)}\n"
           f"Traced arguments are placeholders without values: Python control flow "
           f"(`if`, `while`, `bool()`, `float()`, `.item()`) or a NumPy fallback on them cannot "
           f"be traced.  Fix: compute the branch with lazynp.where(...), or mark the argument "
           f"static (lazynp.jit(f, static_argnums=...)), or call the function without jit.")
    return TracingError(msg)


def _placeholder_array(shape, dtype, name: str, dims=None) -> ndarray:
    node = _graph.placeholder(tuple(shape), dtype, name)
    if dims is not None:
        node.params["dims"] = tuple(dims)
    return ndarray._from_node(node)


def _arg_names(f, nargs: int) -> list:
    names = []
    try:
        params = list(inspect.signature(f).parameters.values())
    except (TypeError, ValueError):
        params = []
    for i in range(nargs):
        if i < len(params) and params[i].kind in (params[i].POSITIONAL_ONLY,
                                                   params[i].POSITIONAL_OR_KEYWORD):
            names.append(params[i].name)
        else:
            names.append(f"arg{i}")
    return names


def trace(f, *example_args, static_argnums=(), names=None, _what="lazynp.trace"):
    """Trace ``f`` on placeholders shaped like ``example_args`` and return a :class:`Symbol`.

    Array leaves of the arguments (lazynp or NumPy arrays, NumPy scalars) become named
    inputs; other leaves (Python scalars, strings, None) and ``static_argnums`` arguments are
    constants.  Raises :class:`lazynp.core.graph.TracingError` naming the line when ``f`` needs
    an array value (Python control flow on arrays).
    """
    if isinstance(static_argnums, int):
        static_argnums = (static_argnums,)
    static = {i % max(len(example_args), 1) for i in static_argnums}
    argnames = list(names) if names is not None else _arg_names(f, len(example_args))
    specs, in_names, ph_nodes, call_args = [], [], [], []
    for i, a in enumerate(example_args):
        if i in static:
            specs.append(("c", a))
            call_args.append(a)
            continue
        leaves: list = []
        spec = tree_flatten(a, leaves)
        specs.append(spec)
        lnames: list = []
        _leaf_names(spec, argnames[i], lnames)
        phs = []
        for nm, leaf in zip(lnames, leaves):
            arr = _placeholder_array(_np.shape(leaf), leaf.dtype, nm)
            ph_nodes.append(arr._node())
            in_names.append(nm)
            phs.append(arr)
        call_args.append(tree_unflatten(spec, iter(phs)))
    with _Tracing():
        try:
            result = f(*call_args)
        except TracingError as exc:
            raise tracing_error(exc, _what) from None
        out_leaves: list = []
        out_spec = tree_flatten(result, out_leaves)
        out_nodes = []
        for x in out_leaves:
            if isinstance(x, ndarray):
                out_nodes.append(x._node())
            else:
                out_nodes.append(_graph.leaf(_np.array(x, copy=True)))
        entries, outs = extract(out_nodes, ph_nodes)
    sym = Symbol(entries, outs, out_tree=out_spec, in_tree=("t", tuple(specs)))
    sym._fn = (f, tuple(static), argnames)
    return sym


def var(name: str, shape=None, dtype="float64") -> ndarray:
    """A named symbolic input for building a Symbol declaratively.  ``None`` in ``shape``
    means any size (resolved by :meth:`Symbol.infer_shape` and at call time).  Apply
    lazynp functions to it, then :func:`build` the Symbol from the results."""
    if shape is None:
        raise SymbolError("lazynp.symbol.var needs a shape (use None for any size)")
    if isinstance(shape, int):
        shape = (shape,)
    dims = tuple(None if s is None else int(s) for s in shape)
    concrete = tuple(STANDIN if s is None else s for s in dims)
    arr = _placeholder_array(concrete, dtype, name, dims if None in dims else None)
    _ph_counter[0] += 1
    arr._node().params["seq"] = _ph_counter[0]
    return arr


def build(outputs) -> "Symbol":
    """A Symbol from lazy arrays computed from :func:`var` inputs (a pytree of them)."""
    leaves: list = []
    spec = tree_flatten(outputs, leaves)
    out_nodes = [x._node() if isinstance(x, ndarray) else _graph.leaf(_np.asarray(x))
                 for x in leaves]
    # find the placeholders behind the outputs, in the order they were created
    found: dict = {}
    seen: set = set()
    stack = list(out_nodes)
    while stack:
        n = stack.pop()
        if id(n) in seen:
            continue
        seen.add(id(n))
        if n.op is _graph.PLACEHOLDER:
            found[id(n)] = n
            continue
        if n.op is not _graph.VIEW and n.state != _graph.PENDING and n.error is None:
            continue
        stack.extend(a for a in n.args if type(a) is Node)
    phs = sorted(found.values(), key=lambda n: _graph_order(n))
    names = [p.params["name"] for p in phs]
    if len(set(names)) != len(names):
        raise SymbolError(f"lazynp.symbol.build: two inputs share a name: {names}")
    with _Tracing():
        entries, outs = extract(out_nodes, phs)
    return Symbol(entries, outs, out_tree=spec)


_ph_counter = [0]


def _graph_order(n) -> int:
    """Creation order of a :func:`var` placeholder (inputs are listed in that order)."""
    return n.params.get("seq", 0)


Group = build


def load(path) -> Symbol:
    """Read a Symbol written by :meth:`Symbol.save`."""
    with open(path) as f:
        return fromjson(f.read())


# --- methods the user API gives the Symbol ------------------------------------------------

def _replay(self, *inputs) -> list:
    """Record this Symbol's ops lazily on ``inputs`` (lazy arrays); returns the lazy
    outputs (flat).  Shapes are re-inferred when inputs differ from the recording."""
    arrs = [x if isinstance(x, ndarray) else asarray(x) for x in inputs]
    sym = self.specialize({nm: (a.shape, a.dtype) for nm, a in zip(self._names, arrs)})
    vals: list = [None] * len(sym.nodes)
    for r, a in zip(sym._input_refs, arrs):
        vals[r] = a._node()
    for i, n in enumerate(sym.nodes):
        if n.op == "placeholder":
            continue
        if n.op == "leaf":
            v = n.params["value"]
            vals[i] = _graph.leaf(v, exported=True) if isinstance(v, _np.ndarray) else \
                _graph.leaf(_np.asarray(v), exported=True)
            continue
        args = tuple(vals[a] if type(a) is Ref else a for a in n.args)
        if n.op == "view":
            p = n.params
            vals[i] = _graph.view_node(args[0], p["offset"], p["shape"], p["strides"],
                                       p["dtype"])
        else:
            vals[i] = _graph.record(resolve_op(n.op), args, dict(n.params) if n.params
                                    else n.params, n.shape, n.dtype)
    return [ndarray._from_node(vals[o]) for o in sym._outputs]


def _retrace(sym: Symbol, sig: dict) -> "Symbol | None":
    """``sym`` traced again for the input shapes of ``sig`` (its shapes could not be
    re-inferred); None when it was not traced from a function (or has static arguments)."""
    if sym._fn is None:
        return None
    f, static, argnames = sym._fn
    if static or sym.in_tree is None:
        return None
    examples = []
    for r in sym._input_refs:
        n = sym.nodes[r]
        s, d = sig.get(n.params["name"], (n.shape, None))
        examples.append(_np.zeros(s, n.dtype if d is None else d))
    it = iter(examples)
    args = [tree_unflatten(spec, it) for spec in sym.in_tree[1]]
    return trace(f, *args, names=argnames)


add_member("replay", _replay)
add_member("_retrace", _retrace)
