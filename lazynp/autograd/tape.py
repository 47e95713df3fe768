"""The tape: what an open autograd trace records, and the backward pass over it.

While a function is traced (:class:`Trace`), every node recorded (and every view node) is
put on the tape: the trace watches the recorder through
:func:`lazynp.core.graph.install_tape` and NumPy's computations on forced values through
:func:`lazynp._numpy.fallback.watch`; nothing is patched.  The graph keeps its args/params
(:func:`lazynp.core.graph.keeping_graph`), and when something forces a flush mid-trace the
recorded nodes are marked ``exported`` so their values survive for the backward pass and are
never overwritten in place.  :func:`backward_pass` walks the tape from the outputs to the
inputs in reverse topological order and applies the rule table of
:mod:`lazynp.autograd.rules`.

A NumPy fallback (a function with no lazy implementation) whose input depends on a
differentiated input cannot be differentiated: the backward pass raises
:class:`AutogradError` naming the function, never a silent zero.
"""
from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from .. import devices
from ..core import graph
from ..core.graph import Node
from .._numpy import fallback, namespace as lnp
from .._numpy.ufunc import TUPLE_GET
from ..array.ndarray import ndarray
from . import rules, rules_more  # noqa: F401  (rules_more registers its rules)
from .errors import (AutogradError, NoGradientRule, TracedValueError,  # noqa: F401
                     traced_value_error)


# --- tracing: the tape and what the trace watches ------------------------------------------

_RECORDED: list = []     # nodes recorded while any trace is open (the tape)
_marked = 0              # _RECORDED[:_marked] have been protected at a flush
_depth = 0               # traces open
_paused = 0              # pause() blocks open
_INPUT_IDS: dict = {}    # id(node) -> node, inputs of open traces (fallback dependency check)
_POISON: dict = {}       # id(leaf node) -> (node, function name): fallback results on the path
_LEAKS: list = []        # (function name, NumPy value): differentiated values forced to Python
#: the traces of the open ``record()`` blocks (MXNet style), innermost last
RECORD_TRACES: list = []


def depth() -> int:
    """How many traces are open (0: nothing is differentiated)."""
    return _depth


def paused() -> bool:
    """True inside ``pause()``: operations are not recorded."""
    return bool(_paused)


def add_pause(delta: int) -> None:
    """Open (``1``) or close (``-1``) one ``pause()`` block."""
    global _paused
    _paused += delta
    if _depth:
        graph.pause_tape(bool(_paused))


def _root(n):
    return n.args[0] if n.op is graph.VIEW else n


def arrays_in(obj) -> Iterator[ndarray]:
    """The lazynp arrays inside ``obj`` (nested lists, tuples and dict values)."""
    if isinstance(obj, ndarray):
        yield obj
    elif isinstance(obj, (list, tuple)):
        for x in obj:
            yield from arrays_in(x)
    elif isinstance(obj, dict):
        for x in obj.values():
            yield from arrays_in(x)


def _lazy_leaves(obj, out):
    out.extend(a._node() for a in arrays_in(obj))
    return out


def depends_on_inputs(obj) -> bool:
    """True when a lazy array in ``obj`` is computed from an input of an open trace
    (through anything but ``stop_gradient``), or from a NumPy fallback's result on one
    (a poisoned leaf: ``float(np.unique(x)[0])`` is a value of ``x`` too)."""
    if not _INPUT_IDS:
        return False
    stack = _lazy_leaves(obj, [])
    seen = set()
    while stack:
        n = stack.pop()
        if id(n) in seen:
            continue
        seen.add(id(n))
        if id(n) in _INPUT_IDS:
            return True
        p = _POISON.get(id(n))
        if p is not None and p[0] is n:
            return True
        if n.op is rules.STOP:
            continue
        for a in n.args:
            if type(a) is Node:
                stack.append(a)
    return False


def _taint(res, name):
    """Mark NumPy's result ``res`` of a computation on differentiated values: its lazy
    arrays poison the backward pass, its NumPy values are noted as leaked."""
    for n in _lazy_leaves(res, []):
        if n.dtype.kind in "fc":
            _POISON[id(_root(n))] = (_root(n), name)
    for v in _plain_leaves(res, []):
        _LEAKS.append((name, np.asarray(v).ravel()))


def _plain_leaves(obj, out):
    """NumPy (not lazynp) float/complex values in a result."""
    if isinstance(obj, (np.ndarray, np.generic, float, complex)) and \
            not isinstance(obj, ndarray) and np.asarray(obj).dtype.kind in "fc" and \
            np.asarray(obj).size <= 1 << 16:
        out.append(obj)
    elif isinstance(obj, (list, tuple)) and not isinstance(obj, ndarray):
        for x in obj:
            _plain_leaves(x, out)
    return out


def _heads(obj, out):
    """``{id(array): (array, its Var's head)}`` of the lazy arrays in ``obj``."""
    for a in arrays_in(obj):
        out[id(a)] = (a, a._var.head)
    return out


class _Watcher:
    """What the open traces watch (installed by the outermost one): the recorder
    (:func:`lazynp.core.graph.install_tape`) and NumPy's computations on forced values
    (:func:`lazynp._numpy.fallback.watch`)."""

    nodes = _RECORDED

    def flushing(self, targets) -> None:
        """Before a flush: the pending nodes on the tape keep their values for the
        backward pass."""
        global _marked
        pending = graph.PENDING
        for n in _RECORDED[_marked:]:
            if n.state == pending:
                n.exported = True
                for a in n.args:
                    if type(a) is Node and a.state == pending:
                        _root(a).exported = True
        _marked = len(_RECORDED)

    def leaf_made(self, node) -> None:
        """A new leaf holding a value that left lazynp from a differentiated array
        (:meth:`value_taken`) poisons the backward pass."""
        value = node.value
        if _LEAKS and value.dtype.kind in "fc" and 0 < value.size <= 1 << 16:
            for name, v in _LEAKS:
                if np.isin(value, v).any():
                    _POISON[id(node)] = (node, name + "()")
                    break

    def array_read(self, arr, name="numpy.asarray"):
        """``numpy.asarray(x)`` (``x.__array__()``) of a value that depends on a
        differentiated input: NumPy would compute on it without a gradient (JAX raises
        here too)."""
        if _depth and not _paused and arr.dtype.kind in "fc" and depends_on_inputs(arr):
            if RECORD_TRACES:
                # MXNet-style record(): reading values (logging) is common; data built from
                # them that reaches a head raises at backward() instead
                _LEAKS.append((name, np.asarray(arr._value()).ravel()))
                return
            raise AutogradError(
                f"lazynp.autograd: {name}() of an array that depends on a differentiated "
                f"input (a NumPy computation on it would carry no gradient); use lazynp "
                f"functions, or lazynp.autograd.stop_gradient(x) to use its value as a "
                f"constant")

    def value_taken(self, arr, name, value) -> None:
        """``arr``'s value left lazynp as Python/NumPy data (``float(x)``, ``x.tolist()``,
        ``math.exp(x)``, ``operator.index(x)``...).  Inside ``grad``/``vjp``/``jvp``/
        ``jacobian``... this raises :class:`TracedValueError` (autograd's and JAX's rule:
        the value would be a constant with no gradient).  Inside MXNet-style ``record()``
        reading a value (logging) is common: it is remembered instead, and data built from
        it that reaches a head raises at ``backward()``."""
        if _depth and arr.dtype.kind in "fc" and depends_on_inputs(arr):
            if RECORD_TRACES:
                _LEAKS.append((name, np.asarray(value).ravel()))
                return
            raise traced_value_error(name)

    def forced(self, name, args, res) -> None:
        if depends_on_inputs(args):
            _taint(res, name)

    def numpy_call_starts(self, args, kwargs):
        return _heads((args, kwargs), {})

    def numpy_call_ended(self, before, name, args, kwargs, res) -> None:
        if depends_on_inputs((args, kwargs)):
            _taint(res, "numpy." + name)
            for arr, head in before.values():       # written back into an argument (put...)
                if arr._var.head is not head and arr.dtype.kind in "fc":
                    _POISON[id(arr._var.head)] = (arr._var.head, "numpy." + name)


_WATCHER = _Watcher()


def _install():
    graph.install_tape(_WATCHER, bool(_paused))
    fallback.watch(_WATCHER)


def _uninstall():
    graph.remove_tape()
    fallback.watch(None)


class Trace:
    """Open a trace: keep the graph, put recorded nodes on the tape (nestable)."""

    def __enter__(self):
        global _depth
        self._kg = graph.keeping_graph()
        self._kg.__enter__()
        if _depth == 0:
            _install()
        _depth += 1
        self.start = len(_RECORDED)
        self.inputs = []
        return self

    def recorded(self) -> list:
        """The nodes recorded since this trace opened."""
        return _RECORDED[self.start:]

    def add_input(self, node: Node) -> None:
        self.inputs.append(node)
        _INPUT_IDS[id(node)] = node

    def capture(self, protect: bool = False) -> "Tape":
        """The tape of this trace: {id(node): (node, args, params)}.  ``protect``: the
        backward pass runs later, so pending nodes must keep their values."""
        nodes = _RECORDED[self.start:]
        tape = {}
        for n in nodes:
            tape[id(n)] = (n, n.args, n.params)
            if protect and n.state == graph.PENDING:
                n.exported = True
                for a in n.args:
                    if type(a) is Node:
                        _root(a).exported = True
        return Tape(tape, dict(_POISON), [name for name, _ in _LEAKS])

    def __exit__(self, *exc):
        global _depth, _marked
        _depth -= 1
        for n in self.inputs:
            _INPUT_IDS.pop(id(n), None)
        if _depth == 0:
            _uninstall()
            _RECORDED.clear()
            _marked = 0
            _POISON.clear()
            _LEAKS.clear()
        self._kg.__exit__(*exc)
        return False


class Tape:
    """A trace's captured tape: ``nodes`` ``{id(node): (node, args, params)}``, the
    ``poison`` of NumPy fallbacks on the differentiated path, the ``leaks`` of values
    taken out of lazynp."""

    __slots__ = ("nodes", "poison", "leaks")

    def __init__(self, nodes, poison, leaks=()):
        self.nodes = nodes
        self.poison = poison
        self.leaks = list(leaks)

    def merge(self, other):
        self.nodes.update(other.nodes)
        self.poison.update(other.poison)
        self.leaks.extend(other.leaks)


# --- the backward pass ------------------------------------------------------------------------

def _diff_dtype(dt) -> bool:
    return dt.kind in "fc"


def _fit(c, shape, dtype):
    """Sum ``c`` over broadcast dimensions down to ``shape`` and cast it to ``dtype``."""
    if not isinstance(c, ndarray):
        c = lnp.asarray(c)
    if c.shape != tuple(shape):
        nd = len(shape)
        if c.ndim > nd:
            c = lnp.sum(c, axis=tuple(range(c.ndim - nd)))
        if c.ndim == nd:
            axes = tuple(i for i, s in enumerate(shape) if s == 1 and c.shape[i] != 1)
            if axes:
                c = lnp.sum(c, axis=axes, keepdims=True)
        if c.ndim < nd:
            c = lnp.reshape(c, (1,) * (nd - c.ndim) + c.shape)
        if c.shape != tuple(shape):
            c = lnp.broadcast_to(c, shape)
    if c.dtype != dtype:
        if dtype.kind not in "fc":
            return None
        if c.dtype.kind == "c" and dtype.kind == "f":
            c = lnp.real(c)          # a real input: the real part (autograd's convention)
        c = c.astype(dtype)
    return c


def backward_pass(outs: list, cots: list, inputs: list, tape: Tape) -> list:
    """Cotangents of ``inputs`` (nodes) given output nodes and their cotangents."""
    T = tape.nodes
    input_ids = {id(n) for n in inputs}
    active: dict = {}
    order = []
    # iterative DFS (post-order) over the tape
    for o in outs:
        if id(o) in active:
            continue
        stack = [(o, 0)]
        active[id(o)] = None      # visiting
        while stack:
            node, i = stack[-1]
            ent = T.get(id(node))
            args = ent[1] if (ent is not None and id(node) not in input_ids) else ()
            pushed = False
            while i < len(args):
                a = args[i]
                i += 1
                if type(a) is Node and id(a) not in active:
                    stack[-1] = (node, i)
                    active[id(a)] = None
                    stack.append((a, 0))
                    pushed = True
                    break
            if pushed:
                continue
            stack.pop()
            nid = id(node)
            p = tape.poison.get(nid)
            if p is not None and p[0] is node and nid not in input_ids:
                raise AutogradError(_poison_message(p[1]))
            if nid in input_ids:
                act = True
            elif ent is None:
                act = False
            else:
                act = _diff_dtype(node.dtype) and any(
                    type(a) is Node and active.get(id(a)) for a in args)
            active[nid] = act
            order.append(node)
    ct: dict = {}

    def acc(node, c):
        k = id(node)
        prev = ct.get(k)
        ct[k] = c if prev is None else prev + c

    if tape.leaks and not any(active.get(id(o)) for o in outs):
        raise AutogradError(
            f"lazynp.autograd: the differentiated output does not depend on the inputs "
            f"through lazynp operations, but {tape.leaks[0]}() took a differentiated value "
            f"out of lazynp: its gradient would be silently zero")
    for o, c in zip(outs, cots):
        if c is not None and active.get(id(o)):
            acc(o, _fit(c, o.shape, o.dtype))
    for node in reversed(order):
        nid = id(node)
        if nid in input_ids or not active.get(nid):
            continue
        g = ct.pop(nid, None)
        if g is None:
            continue
        _, args, params = T[nid]
        if node.op is TUPLE_GET:
            multi = args[0]
            m = ct.get(id(multi))
            if m is None:
                m = ct[id(multi)] = rules.Multi()
            i = args[1]
            m.parts[i] = g if m.parts.get(i) is None else m.parts[i] + g
            continue
        need = [type(a) is Node and bool(active.get(id(a))) for a in args]
        if not any(need):
            continue
        try:
            res = rules.vjp(node, args, params, g, need)
        except NotImplementedError as e:
            if isinstance(e, AutogradError):
                raise
            raise NoGradientRule(str(e)) from e
        for a, c, nd in zip(args, res, need):
            if nd and c is not None:
                c = _fit(c, a.shape, a.dtype)
                if c is not None:
                    acc(a, c)
    return [ct.get(id(n)) for n in inputs]


def _poison_message(name):
    if name.endswith("()"):
        return (f"lazynp.autograd: data built from {name} of a differentiated value reaches "
                f"the output: its gradient would be silently wrong (keep the computation in "
                f"lazynp arrays)")
    return (f"lazynp.autograd: {name} has no lazy implementation (it ran as a NumPy "
            f"fallback on a value that depends on a differentiated input), so it cannot be "
            f"differentiated")


# --- pytrees and inputs -------------------------------------------------------------------------

def flatten(tree, leaves: list):
    """The structure of pytree ``tree`` (tuples, lists, namedtuples, dicts); its leaves are
    appended to ``leaves``.  :func:`unflatten` builds the tree back."""
    if isinstance(tree, (tuple, list)) and not isinstance(tree, ndarray):
        return (type(tree), [flatten(t, leaves) for t in tree])
    if isinstance(tree, dict):
        return (dict, [(k, flatten(v, leaves)) for k, v in tree.items()])
    leaves.append(tree)
    return None


def unflatten(spec, it):
    """The pytree of structure ``spec`` (:func:`flatten`) with leaves taken from ``it``."""
    if spec is None:
        return next(it)
    kind, items = spec
    if kind is dict:
        return {k: unflatten(s, it) for k, s in items}
    vals = [unflatten(s, it) for s in items]
    if kind in (tuple, list):
        return kind(vals)
    try:
        return kind(*vals)   # namedtuple
    except TypeError:
        return kind(vals)


def fresh_input(x, trace: Trace) -> tuple:
    """A new lazynp array (a node of its own) holding ``x``: a differentiation input."""
    if type(x) is ndarray and not devices.ACTIVE and not devices.DEFAULTS_OPEN:
        # (what ``lazynp.array(x, copy=True)`` records, without its checks)
        a = ndarray._from_node(graph.record(lnp._COPY, (x._node(),), None, x.shape, x.dtype))
    else:
        a = lnp.array(x, copy=True) if isinstance(x, ndarray) else lnp.array(x)
    node = a._var.head if a._geom is None else a._node()
    trace.add_input(node)
    return a, node


def stop_gradient(x) -> ndarray:
    """``x``'s value, with no gradient flowing through it."""
    x = lnp.asarray(x)
    return ndarray._from_node(graph.record(rules.STOP, (x._node(),), None, x.shape, x.dtype))
