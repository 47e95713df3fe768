"""The Symbol IR: a declarative lazynp graph with named inputs, as data.

A :class:`Symbol` is an immutable list of :class:`SNode` entries ``(op name, input refs,
params, shape, dtype)`` with named inputs (``placeholder`` entries), constants (``leaf``
entries) and outputs, plus the pytree structure of its inputs and outputs.  This module
holds what every layer reads: the entries (:class:`Ref`, :class:`SNode`), the op lookup
(:func:`resolve_op`), copying recorded graph nodes into entries (:func:`extract`), shape
inference for new input shapes (:meth:`Symbol.specialize`), and the JSON format
(:meth:`Symbol.tojson`, :func:`fromjson`).

The upper layers add behaviour to the class through :func:`add_member`: the user API
(:mod:`lazynp.symbol`: ``replay``, re-tracing), the pass pipeline (``optimize``,
``memory_plan``), ``lazynp.jit`` (calling a Symbol), ``lazynp.autograd`` (``grad``) and
``lazynp.notebook`` (pictures).
"""
from __future__ import annotations

import base64
import json

import numpy as _np

from ..array import calls as _calls
from ..array.indexing import _Slot
from ..array.ndarray import ndarray
from ..array.operands import broadcast_shapes
from ..core import graph as _graph
from ..core.graph import Node
from ..ops.registry import OPS, Op

__all__ = ["Symbol", "SNode", "Ref", "SymbolError", "SymbolSerializationError", "add_member",
           "extract", "fromjson", "resolve_op", "tree_flatten", "tree_unflatten"]


class SymbolError(ValueError):
    """A Symbol cannot do what was asked (bad inputs, shapes that cannot be inferred)."""


class SymbolSerializationError(SymbolError):
    """A Symbol holds a parameter that cannot be written to JSON."""


class Ref(int):
    """A reference to the output of entry ``i`` of a Symbol (distinct from int constants)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"%{int(self)}"


class SNode:
    """One entry of a Symbol: ``op(*args, **params)`` -> array of ``shape``/``dtype``."""

    __slots__ = ("op", "args", "params", "shape", "dtype")

    def __init__(self, op: str, args: tuple, params, shape: tuple, dtype):
        self.op = op
        self.args = tuple(args)
        self.params = params
        self.shape = tuple(shape)
        self.dtype = _np.dtype(dtype) if not isinstance(dtype, _np.dtype) else dtype

    def refs(self):
        return [a for a in self.args if type(a) is Ref]

    def __repr__(self) -> str:
        args = ", ".join(repr(a) if type(a) is Ref else _short(a) for a in self.args)
        return f"{self.op}({args}) -> {self.shape} {self.dtype}"


def _short(v) -> str:
    if isinstance(v, _np.ndarray):
        return f"array{v.shape}"
    r = repr(v)
    return r if len(r) < 40 else r[:37] + "..."


# --- op lookup ---------------------------------------------------------------------------

def resolve_op(name: str, kind: str | None = None) -> Op:
    """The op-table entry called ``name``; NumPy function ops (registered on first use by
    :func:`lazynp.array.calls.function_op`) are registered again from the name."""
    op = OPS.get(name)
    if op is not None:
        return op
    base = name[5:] if name.startswith("call:") else name
    fn = _np
    try:
        for part in base.split("."):
            fn = getattr(fn, part)
    except AttributeError:
        fn = getattr(_np.lib.stride_tricks, base, None)
    if fn is None or not callable(fn):
        raise SymbolError(f"lazynp.symbol: unknown op {name!r} (not in the op table and not a "
                          f"NumPy function)")
    _calls.function_op(base, fn, kind or "opaque")
    op = OPS.get(name)
    if op is None:
        raise SymbolError(f"lazynp.symbol: cannot register op {name!r}")
    return op


# --- pytrees ---------------------------------------------------------------------------------

def _is_array(x) -> bool:
    return isinstance(x, (ndarray, _np.ndarray))


def tree_flatten(obj, leaves: list):
    """Flatten arrays out of nested tuples/lists/dicts; returns a hashable structure.
    Non-array leaves (Python scalars, None, strings...) are kept in the structure."""
    t = type(obj)
    if t is tuple or t is list:
        return ("t" if t is tuple else "l", tuple(tree_flatten(x, leaves) for x in obj))
    if t is dict:
        keys = tuple(obj)
        return ("d", keys, tuple(tree_flatten(obj[k], leaves) for k in keys))
    if _is_array(obj):
        leaves.append(obj)
        return "*"
    if isinstance(obj, _np.generic):
        leaves.append(obj)
        return "*"
    try:
        hash(obj)
    except TypeError:
        raise SymbolError(f"lazynp: cannot trace an argument of type {t.__name__} "
                          f"(use arrays, Python scalars, tuples, lists or dicts)") from None
    return ("c", obj)


def tree_unflatten(spec, it):
    if spec == "*":
        return next(it)
    tag = spec[0]
    if tag == "t":
        return tuple(tree_unflatten(s, it) for s in spec[1])
    if tag == "l":
        return [tree_unflatten(s, it) for s in spec[1]]
    if tag == "d":
        return {k: tree_unflatten(s, it) for k, s in zip(spec[1], spec[2])}
    return spec[1]


# --- extracting a Symbol from recorded nodes ---------------------------------------------

def extract(out_nodes: list, inputs: list, names=None) -> tuple:
    """``(entries, output refs)``: the graph behind ``out_nodes`` (graph.Node) copied into
    SNodes.  ``inputs`` are the
    placeholder nodes in positional order (all kept, even unused); with ``names`` they may
    be any nodes (computed ones too), which become placeholders of those names."""
    index: dict = {}
    entries: list = []
    for k, p in enumerate(inputs):
        index[id(p)] = len(entries)
        dims = (p.params or {}).get("dims") if names is None else None
        params = {"name": p.params["name"] if names is None else names[k]}
        if dims is not None:
            params["dims"] = tuple(dims)
        entries.append(SNode("placeholder", (), params, p.shape, p.dtype))

    def expand(n) -> bool:
        """True when n's args are walked (computed, non-view nodes become constants)."""
        if n.op is _graph.VIEW:
            return True
        if n.op is _graph.PLACEHOLDER:
            raise SymbolError("lazynp.trace: the function reads a placeholder that is not one "
                              "of its arguments (a placeholder from another trace?)")
        if n.state != _graph.PENDING and n.error is None:
            return False
        return True

    for n, walked in _graph.post_order(out_nodes, expand, set(index)):
        if walked:
            index[id(n)] = len(entries)
            entries.append(_snode_of(n, index))
            continue
        value = _graph.materialize(n)
        if isinstance(value, _np.ndarray):
            value = _np.array(value, copy=True, order="C")
        index[id(n)] = len(entries)
        entries.append(SNode("leaf", (), {"value": value}, n.shape, n.dtype))
    return entries, [Ref(index[id(o)]) for o in out_nodes]


def _snode_of(n: Node, index: dict) -> SNode:
    args = tuple(Ref(index[id(a)]) if type(a) is Node else a for a in n.args)
    params = dict(n.params) if n.params else None
    return SNode(n.op.name, args, params, n.shape, n.dtype)


# --- JSON ----------------------------------------------------------------------------------

def _encode(v, where: str):
    t = type(v)
    if v is None or t is bool or t is str:
        return v
    if t is int:
        return v if abs(v) < (1 << 53) else {"__int__": str(v)}
    if t is float:
        if v != v or v in (float("inf"), float("-inf")):
            return {"__float__": repr(v)}
        return v
    if t is complex:
        return {"__complex__": [_encode(v.real, where), _encode(v.imag, where)]}
    if t is Ref:
        return {"__ref__": int(v)}
    if t is tuple:
        return {"__tuple__": [_encode(x, where) for x in v]}
    if t is list:
        return [_encode(x, where) for x in v]
    if t is dict:
        return {"__dict__": [[_encode(k, where), _encode(x, where)] for k, x in v.items()]}
    if t is slice:
        return {"__slice__": [_encode(v.start, where), _encode(v.stop, where),
                              _encode(v.step, where)]}
    if v is Ellipsis:
        return {"__ellipsis__": True}
    if t is _Slot:
        return {"__slot__": v.k}
    if isinstance(v, _np.dtype):
        if v.fields is not None or v.subdtype is not None:
            return {"__dtype_descr__": _encode(v.descr, where)}
        return {"__dtype__": v.str}
    if isinstance(v, type) and issubclass(v, _np.generic):
        return {"__dtype_type__": _np.dtype(v).str}
    if isinstance(v, type) and v in (int, float, complex, bool):
        return {"__pytype__": v.__name__}
    if isinstance(v, _np.ufunc):
        return {"__ufunc__": v.__name__}
    if isinstance(v, _np.ndarray):
        if v.dtype.hasobject:
            raise SymbolSerializationError(f"lazynp.symbol: {where}: object arrays cannot be "
                                           f"serialized")
        a = _np.ascontiguousarray(v)
        return {"__ndarray__": base64.b64encode(a.tobytes()).decode("ascii"),
                "dtype": _encode(a.dtype, where), "shape": list(a.shape)}
    if isinstance(v, _np.generic):
        return {"__npscalar__": _encode(_np.array(v), where)}
    raise SymbolSerializationError(
        f"lazynp.symbol: {where} holds a {t.__name__} ({_short(v)}), which cannot be written "
        f"to JSON (serializable: numbers, strings, None, tuples, lists, dicts, slices, dtypes, "
        f"ufuncs, arrays)")


def _decode(v):
    if isinstance(v, list):
        return [_decode(x) for x in v]
    if not isinstance(v, dict):
        return v
    (tag, val), *rest = v.items()
    if tag == "__int__":
        return int(val)
    if tag == "__float__":
        return float(val)
    if tag == "__complex__":
        return complex(_decode(val[0]), _decode(val[1]))
    if tag == "__ref__":
        return Ref(val)
    if tag == "__tuple__":
        return tuple(_decode(x) for x in val)
    if tag == "__dict__":
        return {_decode(k): _decode(x) for k, x in val}
    if tag == "__slice__":
        return slice(*(_decode(x) for x in val))
    if tag == "__ellipsis__":
        return Ellipsis
    if tag == "__slot__":
        return _Slot(val)
    if tag == "__dtype__":
        return _np.dtype(val)
    if tag == "__dtype_descr__":
        return _np.dtype([tuple(x) for x in _decode(val)])
    if tag == "__dtype_type__":
        return _np.dtype(val).type
    if tag == "__pytype__":
        return {"int": int, "float": float, "complex": complex, "bool": bool}[val]
    if tag == "__ufunc__":
        return getattr(_np, val)
    if tag == "__ndarray__":
        dt = _decode(v["dtype"])
        return _np.frombuffer(base64.b64decode(val), dtype=dt).reshape(v["shape"]).copy()
    if tag == "__npscalar__":
        return _decode(val)[()]
    raise SymbolSerializationError(f"lazynp.symbol: unknown JSON tag {tag!r}")


# --- the Symbol --------------------------------------------------------------------------

class Symbol:
    """A declarative graph with named inputs: its entries, inputs, outputs and pytree
    structure (see the module docstring; :mod:`lazynp.symbol` makes and calls Symbols)."""

    def __init__(self, nodes, outputs, out_tree=None, in_tree=None):
        self.nodes = tuple(nodes)
        self._outputs = tuple(Ref(o) for o in outputs)
        self._input_refs = tuple(Ref(i) for i, n in enumerate(self.nodes)
                                 if n.op == "placeholder")
        names = [self.nodes[i].params["name"] for i in self._input_refs]
        if len(set(names)) != len(names):
            raise SymbolError(f"lazynp.symbol: duplicate input names {names}")
        self._names = names
        self.out_tree = out_tree if out_tree is not None else \
            ("l", tuple("*" for _ in self._outputs))
        self.in_tree = in_tree
        self._fn = None
        self._plans: dict = {}
        self._specialized: dict = {}

    # --- inspection -------------------------------------------------------------------
    @property
    def inputs(self) -> list:
        """Input names, in positional order."""
        return list(self._names)

    @property
    def outputs(self) -> list:
        """Output names (``<op><index>_output``)."""
        return [f"{self.nodes[o].op}{int(o)}_output" for o in self._outputs]

    @property
    def output_refs(self) -> tuple:
        return self._outputs

    @property
    def input_refs(self) -> tuple:
        return self._input_refs

    def list_inputs(self) -> list:
        return self.inputs

    def list_outputs(self) -> list:
        return self.outputs

    @property
    def input_shapes(self) -> dict:
        """``{name: shape}`` with ``None`` for any-size dimensions."""
        out = {}
        for r in self._input_refs:
            n = self.nodes[r]
            out[n.params["name"]] = tuple(n.params.get("dims", n.shape))
        return out

    @property
    def input_dtypes(self) -> dict:
        return {self.nodes[r].params["name"]: self.nodes[r].dtype for r in self._input_refs}

    def __len__(self) -> int:
        return len(self.nodes)

    def __repr__(self) -> str:
        return (f"<lazynp.Symbol inputs={self.inputs} outputs={len(self._outputs)} "
                f"ops={sum(1 for n in self.nodes if n.op not in ('placeholder', 'leaf'))}>")

    def text(self) -> str:
        """A plain-text listing of the graph."""
        lines = []
        outs = {int(o): k for k, o in enumerate(self._outputs)}
        for i, n in enumerate(self.nodes):
            if n.op == "placeholder":
                s = f"%{i} = input {n.params['name']!r} {n.params.get('dims', n.shape)} {n.dtype}"
            elif n.op == "leaf":
                s = f"%{i} = const {n.shape} {n.dtype}"
            else:
                s = f"%{i} = {n!r}"
            if i in outs:
                s += f"    # output {outs[i]}"
            lines.append(s)
        return "\n".join(lines)

    # --- shapes -----------------------------------------------------------------------
    def infer_shape(self, *args, **shapes):
        """Shapes of inputs and outputs for the given input shapes (``name=shape``, or
        positionally).  Returns ``(input_shapes, output_shapes)``; raises
        :class:`SymbolError` when shapes do not fit."""
        shapes = self._named(args, shapes, "shape")
        spec = self.specialize({k: (tuple(v), None) for k, v in shapes.items()})
        ins = {spec.nodes[r].params["name"]: spec.nodes[r].shape for r in spec._input_refs}
        return ins, [spec.nodes[o].shape for o in spec._outputs]

    def infer_type(self, **dtypes):
        return ({self.nodes[r].params["name"]: self.nodes[r].dtype for r in self._input_refs},
                [self.nodes[o].dtype for o in self._outputs])

    def _named(self, args, kwargs, what):
        out = {}
        if len(args) > len(self._names):
            raise SymbolError(f"lazynp.Symbol: {len(args)} positional {what}s for "
                              f"{len(self._names)} inputs {self._names}")
        for nm, a in zip(self._names, args):
            out[nm] = a
        for k, v in kwargs.items():
            if k not in self._names:
                raise SymbolError(f"lazynp.Symbol: unknown input {k!r} (inputs: {self._names})")
            if k in out:
                raise SymbolError(f"lazynp.Symbol: input {k!r} given twice")
            out[k] = v
        return out

    def specialize(self, sig: dict) -> "Symbol":
        """This Symbol with the inputs' ``{name: (shape, dtype or None)}``; the shapes of
        every entry are inferred again.  Raises :class:`SymbolError` when they cannot be."""
        key = tuple(sorted((k, tuple(s), None if d is None else _np.dtype(d))
                           for k, (s, d) in sig.items()))
        got = self._specialized.get(key)
        if got is not None:
            return got
        changed = False
        for r in self._input_refs:
            n = self.nodes[r]
            nm = n.params["name"]
            if nm in sig:
                s, d = sig[nm]
                if tuple(s) != n.shape or (d is not None and _np.dtype(d) != n.dtype):
                    changed = True
        res = self if not changed else self._respecialize(sig)
        self._specialized[key] = res
        return res

    def _respecialize(self, sig: dict) -> "Symbol":
        """Every entry's shape inferred again for the new input shapes; when an entry (a
        view) cannot be, :meth:`_retrace` makes the Symbol again, or the error is raised."""
        try:
            return _infer(self, sig)
        except SymbolError:
            again = self._retrace(sig)
            if again is None:
                raise
            return again

    def _retrace(self, sig: dict) -> "Symbol | None":
        """This Symbol made again for the new input shapes, or None when it cannot be (here:
        never; :mod:`lazynp.symbol` installs re-tracing the traced function)."""
        return None

    # --- calling ----------------------------------------------------------------------
    def _flat_inputs(self, args, kwargs) -> list:
        structured = not kwargs and self.in_tree is not None and \
            len(args) == len(self.in_tree[1]) and \
            not (len(args) == len(self._names) and all(s == "*" for s in self.in_tree[1]))
        if not structured:
            named = self._named(args, kwargs, "argument")
            missing = [nm for nm in self._names if nm not in named]
            if missing:
                raise SymbolError(f"lazynp.Symbol: missing inputs {missing}")
            return [named[nm] for nm in self._names]
        flat: list = []
        for spec, a in zip(self.in_tree[1], args):
            if spec[0] == "c":
                continue
            leaves: list = []
            got = tree_flatten(a, leaves)
            if _shape_tree(got) != _shape_tree(spec):
                raise SymbolError("lazynp.Symbol: argument structure differs from the traced "
                                  "one")
            flat.extend(leaves)
        if len(flat) != len(self._names):
            raise SymbolError(f"lazynp.Symbol: expected {len(self._names)} arrays, got "
                              f"{len(flat)}")
        return flat

    # --- serialization ----------------------------------------------------------------
    def tojson(self, indent=None) -> str:
        """JSON text of this Symbol (params must be serializable; see the module doc)."""
        nodes = []
        for i, n in enumerate(self.nodes):
            where = f"entry %{i} ({n.op})"
            op = OPS.get(n.op)
            nodes.append({"op": n.op, "kind": op.kind if op is not None else None,
                          "args": [_encode(a, where) for a in n.args],
                          "params": _encode(n.params, where + " params"),
                          "shape": list(n.shape), "dtype": _encode(n.dtype, where)})
        doc = {"lazynp_symbol": 1, "nodes": nodes, "outputs": [int(o) for o in self._outputs],
               "out_tree": _encode(self.out_tree, "output structure"),
               "in_tree": _encode(self.in_tree, "input structure")}
        return json.dumps(doc, indent=indent)

    def save(self, path) -> None:
        """Write :meth:`tojson` to ``path``."""
        text = self.tojson()
        with open(path, "w") as f:
            f.write(text)


def add_member(name: str, value) -> None:
    """Set a method or property on :class:`Symbol`: how the layers above the IR give it
    their behaviour (calling, passes, gradients, pictures) without the IR importing them."""
    setattr(Symbol, name, value)


def _shape_tree(spec):
    if spec == "*":
        return "*"
    tag = spec[0]
    if tag in ("t", "l"):
        return (tag, tuple(_shape_tree(s) for s in spec[1]))
    if tag == "d":
        return (tag, spec[1], tuple(_shape_tree(s) for s in spec[2]))
    return ("c",)


def fromjson(text: str) -> Symbol:
    """The Symbol written by :meth:`Symbol.tojson`."""
    doc = json.loads(text)
    if doc.get("lazynp_symbol") != 1:
        raise SymbolError("lazynp.symbol.fromjson: not a lazynp Symbol document")
    nodes = []
    for e in doc["nodes"]:
        if e["op"] not in ("placeholder", "leaf"):
            resolve_op(e["op"], e.get("kind"))
        nodes.append(SNode(e["op"], tuple(_decode(a) for a in e["args"]), _decode(e["params"]),
                           tuple(e["shape"]), _decode(e["dtype"])))
    return Symbol(nodes, doc["outputs"], out_tree=_decode(doc["out_tree"]),
                  in_tree=_decode(doc["in_tree"]))


# --- shape inference on new input shapes -----------------------------------------------------

def _dummy(shape, dtype):
    return _np.broadcast_to(_np.zeros((), dtype), shape)


def _infer(sym: Symbol, sig: dict) -> Symbol:
    nodes = list(sym.nodes)
    vals: list = [None] * len(nodes)
    for i, n in enumerate(nodes):
        if n.op == "placeholder":
            nm = n.params["name"]
            s, d = sig.get(nm, (n.shape, None))
            s = tuple(int(x) for x in s)
            dims = n.params.get("dims", n.shape)
            if len(s) != len(dims) or any(a is not None and a != b for a, b in zip(dims, s)):
                raise SymbolError(f"lazynp.Symbol: input {nm!r} has shape {s}, expected "
                                  f"{tuple(dims)}")
            dt = n.dtype if d is None else _np.dtype(d)
            if dt != n.dtype:
                raise SymbolError(f"lazynp.Symbol: input {nm!r} has dtype {dt}, the Symbol "
                                  f"was built for {n.dtype} (re-trace for another dtype)")
            nodes[i] = SNode("placeholder", (), n.params, s, dt)
            vals[i] = _dummy(s, dt)
            continue
        if n.op == "leaf":
            vals[i] = n.params["value"]
            continue
        old_arg_shapes = [sym.nodes[a].shape for a in n.args if type(a) is Ref]
        new_arg_shapes = [nodes[a].shape for a in n.args if type(a) is Ref]
        if old_arg_shapes == new_arg_shapes:
            shape = n.shape
        elif n.op == "view":
            raise SymbolError(f"lazynp.Symbol: entry %{i} is a view (slice, transpose, "
                              f"reshape) recorded for shape {old_arg_shapes[0]}; it cannot be "
                              f"re-inferred for shape {new_arg_shapes[0]} (trace the function "
                              f"for this shape)")
        elif OPS[n.op].kind == "elementwise" and (n.params is None or n.op == "astype"):
            shape = broadcast_shapes(*[nodes[a].shape if type(a) is Ref else _np.shape(a)
                                       for a in n.args])
        elif OPS[n.op].kind == "write":
            shape = nodes[n.args[0]].shape
        else:
            op = resolve_op(n.op)
            args = [vals[a] if type(a) is Ref else a for a in n.args]
            try:
                with _np.errstate(all="ignore"):
                    r = op.impl(*args, **n.params) if n.params else op.impl(*args)
            except Exception as exc:
                raise SymbolError(f"lazynp.Symbol: entry %{i} ({n.op}) fails for input "
                                  f"shapes {new_arg_shapes}: {exc}") from None
            if isinstance(r, tuple):
                vals[i] = tuple(_dummy(_np.shape(x), _np.asarray(x).dtype) for x in r)
                shape = _np.shape(r[0])
            else:
                shape = _np.shape(r)
            nodes[i] = SNode(n.op, n.args, n.params, shape, n.dtype)
            if vals[i] is None:
                vals[i] = _dummy(shape, n.dtype)
            continue
        nodes[i] = SNode(n.op, n.args, n.params, shape, n.dtype)
        vals[i] = _dummy(shape, n.dtype)
    out = Symbol(nodes, sym._outputs, out_tree=sym.out_tree, in_tree=sym.in_tree)
    out._fn = sym._fn
    return out
