"""Functions with their own gradient rule: :class:`custom_vjp`, :class:`custom_jvp` (JAX's
spelling) and :func:`primitive` + :func:`defvjp` (HIPS autograd's spelling).

How it works.  Called outside any differentiation, a custom function is just its Python
function.  Called while ``grad``/``vjp``/``jvp``/``jacobian``/``record()`` trace it, the
forward computation runs on *detached* copies of the lazy arguments (``stop_gradient``: no
gradient flows through its internals, and NumPy code inside it is allowed), and its
results pass through one ``ad.custom`` node whose arguments are those results followed by
the traced lazy arguments.  The node is an identity on its first arguments; its VJP rule
calls the user's rule.  Rules are written with lazynp ops, so the gradients they build are
lazy graphs that an enclosing trace differentiates again (``grad(grad(f))``, ``hessian``):

* ``custom_vjp``: when the backward pass runs inside an enclosing trace, ``fwd`` is run
  again on the traced arguments so that the residuals carry their own derivatives;
* ``custom_jvp``: the VJP is the transpose of the (linear in the tangents) JVP rule,
  computed by differentiating the rule w.r.t. fresh tangent inputs;
* ``primitive``: the VJP makers get the traced ``ans`` and arguments, as in autograd.

A graph holding a custom node is never replayed by :mod:`lazynp.autograd.replay` (the node's
parameters hold the rule, a Python object with no value identity): every call records its
backward pass again, so a rule reading changing global state is never stale.
"""
from __future__ import annotations

import functools
import inspect

import numpy as np

from ..core import graph
from .._numpy import namespace as lnp
from .._numpy.ufunc import TUPLE_GET
from ..array.ndarray import ndarray
from ..ops.registry import Op, register
from . import tape
from .rules import STOP, as_array, op_rule

__all__ = ["custom_vjp", "custom_jvp", "primitive", "defvjp"]


def _custom_impl(*vals, n, call):
    # (copies: the result must never share a buffer with a residual written in place later)
    if n == 1:
        return np.array(vals[0], copy=True)
    return tuple(np.array(v, copy=True) for v in vals[:n])


CUSTOM = register(Op("ad.custom", "opaque", _custom_impl, raises_on_values=False))


def _tracing() -> bool:
    return tape.depth() > 0


def _is_lazy_float(x) -> bool:
    return isinstance(x, ndarray) and x.dtype.kind in "fc"


def _positional(fun, args, kwargs, name):
    """``args`` with ``kwargs`` bound to their positions in ``fun``'s signature."""
    if not kwargs:
        return tuple(args)
    try:
        ba = inspect.signature(fun).bind(*args, **kwargs)
    except (TypeError, ValueError) as e:
        raise TypeError(f"{name}: {e}") from None
    ba.apply_defaults()
    if ba.kwargs:
        raise TypeError(f"{name}: keyword-only arguments are not supported; pass them "
                        f"positionally (and list them in nondiff_argnums if not arrays)")
    return tuple(ba.args)


class _Call:
    """One call of a custom function on traced arguments (the ``ad.custom`` node's
    parameter): where its lazy leaves are, and how to rebuild its arguments."""

    __slots__ = ("owner", "args", "diff_pos", "spec", "leaves", "lazy_idx", "out_spec",
                 "res", "outs", "inputs")

    def rebuild(self, lazy_values):
        """The call's arguments with the lazy leaves replaced by ``lazy_values``."""
        leaves = list(self.leaves)
        for i, v in zip(self.lazy_idx, lazy_values):
            leaves[i] = v
        diff = tape.unflatten(self.spec, iter(leaves))
        args = list(self.args)
        for p, v in zip(self.diff_pos, diff):
            args[p] = v
        return args


def _detached(x) -> bool:
    return x._geom is None and x._var.head.op is STOP


def _split(args, diff_pos):
    """``(spec, leaves, lazy_idx)`` of the arguments at ``diff_pos`` (a pytree)."""
    leaves: list = []
    spec = tape.flatten(tuple(args[p] for p in diff_pos), leaves)
    lazy_idx = [i for i, x in enumerate(leaves) if _is_lazy_float(x)]
    return spec, leaves, lazy_idx


def _start(owner, args, diff_pos):
    """A :class:`_Call` with detached arguments, or None when no argument is traced."""
    spec, leaves, lazy_idx = _split(args, diff_pos)
    stop = tape.stop_gradient
    if not lazy_idx or all(_detached(leaves[i]) for i in lazy_idx):
        # (no traced argument; or ``fwd`` calling the function itself on its detached
        # arguments, JAX's idiom: the plain function)
        return None, None
    call = _Call()
    call.owner = owner
    call.args = args
    call.diff_pos = diff_pos
    call.spec = spec
    call.leaves = leaves
    call.lazy_idx = lazy_idx
    call.res = None
    detached = call.rebuild([stop(leaves[i]) for i in lazy_idx])
    # (the call, a parameter of the graph's node, keeps no lazy array alive: a pending
    # array held there, e.g. one traced by jit, would be computed by a later flush)
    lazy = set(lazy_idx)
    call.inputs = [leaves[i]._node() for i in lazy_idx]
    call.leaves = [None if i in lazy else x for i, x in enumerate(leaves)]
    call.args = tuple(None if p in diff_pos else a for p, a in enumerate(args))
    return call, detached


def _hold(tree):
    """``tree`` with its lazy arrays replaced by their nodes (see :func:`_start`)."""
    leaves: list = []
    spec = tape.flatten(tree, leaves)
    return spec, [x._node() if isinstance(x, ndarray) else x for x in leaves], \
        [isinstance(x, ndarray) for x in leaves]


def _unhold(held):
    spec, leaves, lazy = held
    return tape.unflatten(spec, iter([as_array(x) if k else x for x, k in zip(leaves, lazy)]))


def _bind(call, out):
    """Pass the forward results ``out`` (a pytree) through one ``ad.custom`` node."""
    leaves: list = []
    call.out_spec = tape.flatten(out, leaves)
    outs = [x if isinstance(x, ndarray) else lnp.asarray(x) for x in leaves]
    call.outs = [(o.shape, o.dtype) for o in outs]
    if not outs:
        return out
    n = len(outs)
    args = tuple(o._node() for o in outs) + tuple(call.inputs)
    params = {"n": n, "call": call}
    node = graph.record(CUSTOM, args, params, outs[0].shape, outs[0].dtype)
    if n == 1:
        res = [ndarray._from_node(node, outs[0]._scalar)]
    else:
        res = [ndarray._from_node(graph.record(TUPLE_GET, (node, i), None, o.shape, o.dtype),
                                  o._scalar) for i, o in enumerate(outs)]
    return tape.unflatten(call.out_spec, iter(res))


def _out_cotangents(call, n, g):
    """The output cotangents as a pytree like the result (zeros where none arrived)."""
    gs = [g] if n == 1 else [g[i] for i in range(n)]
    gs = [lnp.zeros(sh, dt) if c is None else c for c, (sh, dt) in zip(gs, call.outs)]
    return gs


@op_rule("ad.custom")
def _custom_rule(g, node, args, params, need):
    """VJP rule of ``ad.custom``: no cotangent for the forward results (their internals
    are detached), the user's rule for the traced arguments."""
    call = params["call"]
    n = params["n"]
    gs = _out_cotangents(call, n, g)
    xs = [as_array(a) for a in args[n:]]
    cots = call.owner._vjp(call, node, xs, gs)
    return [None] * n + list(cots)


def _align(call, cots, name):
    """Cotangent leaves for ``call``'s lazy leaves from ``cots`` (one entry per
    differentiated argument, each a pytree like it; None means zero)."""
    if not isinstance(cots, (tuple, list)) or len(cots) != len(call.diff_pos):
        raise TypeError(f"{name}: the backward rule must return a tuple with one cotangent "
                        f"per differentiable argument ({len(call.diff_pos)}), got "
                        f"{type(cots).__name__}"
                        + (f" of length {len(cots)}" if isinstance(cots, (tuple, list))
                           else ""))
    leaves: list = []
    _kind, items = call.spec
    for (sub, c) in zip(items, cots):
        count = _leaves_of(sub)
        if c is None:
            leaves.extend([None] * count)
            continue
        cl: list = []
        tape.flatten(c, cl)
        if len(cl) != count:
            raise TypeError(f"{name}: a cotangent returned by the backward rule does not have "
                            f"the structure of its argument ({len(cl)} leaves for {count})")
        leaves.extend(cl)
    return [leaves[i] for i in call.lazy_idx]


def _leaves_of(spec) -> int:
    if spec is None:
        return 1
    kind, items = spec
    if kind is dict:
        return sum(_leaves_of(s) for _k, s in items)
    return sum(_leaves_of(s) for s in items)


def _check_cot(c, x, name):
    if c is None:
        return None
    c = lnp.asarray(c)
    if c.shape != x.shape:
        try:
            np.broadcast_shapes(c.shape, x.shape)
        except ValueError:
            raise ValueError(f"{name}: the backward rule returned a cotangent of shape "
                             f"{c.shape} for an argument of shape {x.shape}") from None
    return c


class _CustomRule:
    """What ``custom_vjp`` and ``custom_jvp`` share: the wrapped function, its
    non-differentiated arguments, method binding and the start of a call."""

    _kind = "custom"

    def __init__(self, fun, nondiff_argnums=()):
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.nondiff_argnums = tuple(sorted(nondiff_argnums))

    def __get__(self, obj, objtype=None):
        if obj is None:
            return self
        return functools.partial(self, obj)

    def _begin(self, args, kwargs, rule, how):
        """The positional arguments, and the recorded call with the detached arguments
        (None, None outside a differentiation or when nothing is traced)."""
        name = f"{self._kind}({getattr(self.fun, '__name__', 'f')})"
        args = _positional(self.fun, args, kwargs, name)
        if rule is None:
            raise AttributeError(f"{name}: no rule defined (call {how} first)")
        if not _tracing():
            return args, name, None, None
        diff_pos = [i for i in range(len(args)) if i not in self.nondiff_argnums]
        call, detached = _start(self, args, diff_pos)
        return args, name, call, detached


class custom_vjp(_CustomRule):
    """A function with a hand-written reverse-mode rule (JAX's ``jax.custom_vjp``).

    ``f = custom_vjp(fun)`` then ``f.defvjp(fwd, bwd)``:

    * ``fwd(*args) -> (out, residuals)`` computes the result and whatever the backward
      rule needs (any pytree of arrays and Python values);
    * ``bwd(residuals, g) -> tuple`` gets the cotangent ``g`` of the result (a pytree like
      ``out``) and returns one cotangent per argument (a pytree like the argument, or
      ``None`` for zero).

    With ``nondiff_argnums``, those arguments are not differentiated and are passed first
    to ``bwd``: ``bwd(*nondiff_args, residuals, g)`` (its tuple then omits them).  Outside
    a differentiation ``f(*args)`` is ``fun(*args)``.  Rules written with lazynp ops are
    differentiated again by enclosing transforms (``grad(grad(f))``, ``hessian``), and
    work under ``jit``.

    Examples
    --------
    >>> import lazynp as np
    >>> @np.custom_vjp
    ... def safe_log1pexp(x):
    ...     return np.log1p(np.exp(x))
    >>> def fwd(x):
    ...     return safe_log1pexp(x), x
    >>> def bwd(x, g):
    ...     return (g / (1.0 + np.exp(-x)),)
    >>> safe_log1pexp.defvjp(fwd, bwd)
    >>> float(np.grad(safe_log1pexp)(0.0))
    0.5
    """

    _kind = "custom_vjp"

    def __init__(self, fun, nondiff_argnums=()):
        super().__init__(fun, nondiff_argnums)
        self.fwd = None
        self.bwd = None

    def defvjp(self, fwd, bwd) -> None:
        """Set the forward rule ``fwd(*args) -> (out, residuals)`` and the backward rule
        ``bwd(*nondiff_args, residuals, g) -> tuple of cotangents``."""
        self.fwd = fwd
        self.bwd = bwd

    def __call__(self, *args, **kwargs):
        args, name, call, detached = self._begin(args, kwargs, self.fwd, ".defvjp(fwd, bwd)")
        if call is None:
            return self.fun(*args)
        out, res = _fwd_pair(self.fwd(*detached), name)
        call.res = _hold(res)
        return _bind(call, out)

    def _vjp(self, call, node, xs, gs):
        name = f"custom_vjp({getattr(self.fun, '__name__', 'f')})"
        if tape.depth() > 1:
            # an enclosing trace differentiates this backward pass: residuals computed from
            # the traced arguments carry their own derivatives
            _out, res = _fwd_pair(self.fwd(*call.rebuild(xs)), name)
        else:
            res = _unhold(call.res)
        g = tape.unflatten(call.out_spec, iter(gs))
        nondiff = [call.args[i] for i in self.nondiff_argnums]
        cots = self.bwd(*nondiff, res, g)
        cl = _align(call, tuple(cots) if isinstance(cots, list) else cots, name)
        return [_check_cot(c, x, name) for c, x in zip(cl, xs)]


def _fwd_pair(r, name):
    if not isinstance(r, tuple) or len(r) != 2:
        raise TypeError(f"{name}: fwd must return a pair (output, residuals)")
    return r


class custom_jvp(_CustomRule):
    """A function with a hand-written forward-mode rule (JAX's ``jax.custom_jvp``).

    ``f = custom_jvp(fun)`` then ``f.defjvp(rule)`` with
    ``rule(primals, tangents) -> (out, tangent_out)``, ``primals`` and ``tangents`` tuples
    like the arguments; ``tangent_out`` must be linear in ``tangents`` and written with
    lazynp ops.  Reverse mode (``grad``, ``vjp``...) uses its transpose, obtained by
    differentiating the rule w.r.t. the tangents.  With ``nondiff_argnums`` the rule is
    ``rule(*nondiff_args, primals, tangents)``.

    Examples
    --------
    >>> import lazynp as np
    >>> @np.custom_jvp
    ... def softplus(x):
    ...     return np.logaddexp(x, 0.0)
    >>> @softplus.defjvp
    ... def softplus_jvp(primals, tangents):
    ...     (x,), (t,) = primals, tangents
    ...     return softplus(x), t / (1.0 + np.exp(-x))
    >>> float(np.grad(softplus)(0.0))
    0.5
    """

    _kind = "custom_jvp"

    def __init__(self, fun, nondiff_argnums=()):
        super().__init__(fun, nondiff_argnums)
        self.jvp_rule = None

    def defjvp(self, rule):
        """Set ``rule(*nondiff_args, primals, tangents) -> (out, tangent_out)``; returns
        ``rule`` (so it can be used as a decorator)."""
        self.jvp_rule = rule
        return rule

    def __call__(self, *args, **kwargs):
        args, name, call, detached = self._begin(args, kwargs, self.jvp_rule, ".defjvp(rule)")
        if call is None:
            return self.fun(*args)
        return _bind(call, self.fun(*detached))

    def _vjp(self, call, node, xs, gs):
        with tape.Trace() as tr:
            ts, tnodes = [], []
            for x in xs:
                t, tn = tape.fresh_input(lnp.zeros(x.shape, x.dtype), tr)
                ts.append(t)
                tnodes.append(tn)
            primals = call.rebuild(xs)
            tleaves = list(call.leaves)
            for i, x in enumerate(tleaves):       # (zero tangents for the constants)
                if isinstance(x, ndarray):
                    if x.dtype.kind in "fc":
                        tleaves[i] = lnp.zeros(x.shape, x.dtype)
                elif isinstance(x, (np.ndarray, float, complex, np.generic)) and \
                        np.asarray(x).dtype.kind in "fc":
                    tleaves[i] = lnp.zeros(np.shape(x), np.asarray(x).dtype)
            for i, t in zip(call.lazy_idx, ts):
                tleaves[i] = t
            tdiff = tape.unflatten(call.spec, iter(tleaves))
            tangents = list(primals)
            for p, v in zip(call.diff_pos, tdiff):
                tangents[p] = v
            nondiff = [call.args[i] for i in self.nondiff_argnums]
            r = self.jvp_rule(*nondiff, tuple(primals[p] for p in call.diff_pos),
                              tuple(tangents[p] for p in call.diff_pos))
            if not isinstance(r, tuple) or len(r) != 2:
                raise TypeError(f"custom_jvp({getattr(self.fun, '__name__', 'f')}): the rule "
                                f"must return a pair (out, tangent_out)")
            touts: list = []
            tape.flatten(r[1], touts)
            if len(touts) != len(gs):
                raise TypeError(f"custom_jvp({getattr(self.fun, '__name__', 'f')}): "
                                f"tangent_out does not have the structure of the output")
            touts = [lnp.asarray(t) for t in touts]
            captured = tr.capture()
            cots = tape.backward_pass([t._node() for t in touts], gs, tnodes, captured)
        return cots


class _Primitive:
    """A function whose gradient is given by VJP makers (autograd's ``primitive``)."""

    def __init__(self, fun):
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.makers: dict = {}

    def defvjp(self, *makers, argnums=None) -> None:
        """``maker(ans, *args, **kwargs) -> (g -> cotangent of args[argnum])``, one per
        argument (``argnums``: which ones; default 0, 1, ...); None: not differentiable."""
        nums = range(len(makers)) if argnums is None else argnums
        for k, m in zip(nums, makers):
            self.makers[k] = m

    def __call__(self, *args, **kwargs):
        if not _tracing() or not any(_is_lazy_float(a) for a in args):
            return self.fun(*args, **kwargs)
        call, detached = _start(self, args, list(range(len(args))))
        call.res = _hold(kwargs)
        return _bind(call, self.fun(*detached, **kwargs))

    def _vjp(self, call, node, xs, gs):
        name = getattr(self.fun, "__name__", "f")
        args = call.rebuild(xs)
        n = len(call.outs)
        ans = as_array(node) if n == 1 else tuple(gs)     # (multi-output: not traced)
        g = gs[0] if n == 1 else tape.unflatten(call.out_spec, iter(gs))
        cots = []
        for i, x in zip(call.lazy_idx, xs):
            maker = self.makers.get(i)
            if maker is None:
                raise tape.NoGradientRule(f"lazynp.autograd: the VJP of {name} w.r.t. "
                                          f"argument {i} is not defined (primitive.defvjp)")
            cots.append(_check_cot(maker(ans, *args, **_unhold(call.res))(g), x, name))
        return cots


def primitive(fun) -> _Primitive:
    """autograd's ``primitive``: ``fun`` with gradients given by :func:`defvjp`.

    Examples
    --------
    >>> import lazynp as np
    >>> from lazynp.autograd import primitive, defvjp
    >>> @primitive
    ... def logsumexp(x):
    ...     m = np.max(x)
    ...     return m + np.log(np.sum(np.exp(x - m)))
    >>> defvjp(logsumexp, lambda ans, x: lambda g: g * np.exp(x - ans))
    """
    return _Primitive(fun)


def defvjp(fun: _Primitive, *makers, argnums=None) -> None:
    """autograd's ``defvjp(fun, maker0, maker1, ...)`` for a :func:`primitive`."""
    if not isinstance(fun, _Primitive):
        raise TypeError("defvjp: the function must be wrapped by lazynp.autograd.primitive")
    fun.defvjp(*makers, argnums=argnums)

