"""The gradient rule table: one VJP rule per op name, written with lazynp ops.

Rules build lazy graphs (so gradients fuse, run on the engine and can be differentiated
again).  A rule gets the output cotangent ``g`` (a lazynp array), the op's answer ``ans``
(the node wrapped as a lazynp array: its value is computed, or computed in the same flush)
and the op's arguments wrapped as lazynp arrays (constants stay as they are).  It returns one
cotangent per argument (``None``: no gradient, i.e. zero); the caller sums over broadcast
dimensions (:func:`fit`) and casts to the argument's dtype, so elementwise rules may return
broadcast-shaped cotangents.

Conventions (documented once here and in the rule docstrings):

* ``maximum``/``minimum``/``fmax``/``fmin``: on ties the gradient is split evenly between the
  two arguments (as HIPS autograd and JAX do); ``max``/``min``/``ptp`` reductions split the
  gradient evenly among all tied maxima.
* ``clip``: ``a`` gets the gradient where ``a_min <= a <= a_max`` (bounds included), ``a_min``
  where ``a < a_min`` and ``a_max`` where ``a > a_max``.
* ``abs``/``sign``-like kinks use ``sign(x)`` (0 at 0); piecewise-constant functions
  (``floor``, ``ceil``, ``rint``, ``trunc``, ``sign``, ``round``, ``floor_divide``,
  comparisons...) have zero gradient.
* ``prod``/``cumprod`` use ``ans / x`` (like autograd): inputs containing exact zeros give
  non-finite gradients.
* ``eigh``/``eigvalsh``/``cholesky`` read one triangle of their input (NumPy's ``UPLO``); the
  gradient is the exact derivative w.r.t. the raw input, so it lives in that triangle
  (off-diagonal entries carry both symmetric contributions).
* ``a[idx] = v`` with repeated advanced indices sends the cotangent of each written element to
  every ``v`` entry aimed at it (NumPy does not define which write wins).
* Complex inputs: for a real ``f`` of ``z = x + iy`` the gradient is ``df/dx - i df/dy``
  (autograd's and JAX's); ``var``/``std``/``cov`` conjugate ``z - mean``, holomorphic
  functions' rules carry no conjugation.
* Degenerate points take autograd's values: ``std`` over one element has gradient 0 (it is 0
  nearby), ``x ** 0`` has gradient 0 at ``x == 0``; ``std`` of a constant array of more
  elements is NaN (not differentiable), as autograd and JAX.
* Eigenvectors of ``eig``/complex ``eigh`` and complex singular vectors have arbitrary
  phases: their rules are the gauge-fixed adjoints, behind a lazy check that the
  differentiated function does not depend on the phases (``PhaseDependentGradient``
  otherwise, when the gradient is computed).

Helper ops registered here (``ad.*``) are the transposes needed by the rules (scatter-add
through a view geometry or an index, zeroing a written region) and have rules themselves,
so higher-order derivatives work.
"""
from __future__ import annotations

import math

import numpy as np
from numpy.lib.array_utils import normalize_axis_tuple

from .. import fft as lazy_fft, linalg as lazy_linalg
from .._numpy import namespace as lnp
from .._numpy.ufunc import TUPLE_GET
from ..array.calls import _fill_deep, lazy_call
from ..array.indexing import _Slot, _fill
from ..array.ndarray import ndarray
from ..core import graph
from ..core.graph import Node
from ..ops.registry import Op, register
from .errors import PhaseDependentGradient

# --- helper ops ------------------------------------------------------------------------------


def _target(buf, geom):
    if geom is None:
        return buf
    return graph.buffer_view(np.ascontiguousarray(buf), *geom)


def _overlaps(shape, strides, itemsize) -> bool:
    """True unless the geometry provably maps distinct indices to distinct elements."""
    dims = sorted((abs(st), n) for n, st in zip(shape, strides) if n > 1)
    extent = itemsize
    for st, n in dims:
        if st < extent:
            return True
        extent = st * (n - 1) + extent
    return False


def _region_get_impl(x, *idx, geom, index):
    t = _target(x, geom)
    if index is not None:
        t = t[_fill(index, idx)]
    return np.array(t, copy=True, order="C")


def _region_add_impl(g, *idx, shape, dtype, geom, index):
    z = np.zeros(shape, dtype)
    t = _target(z, geom)
    if index is None:
        if geom is not None and _overlaps(geom[1], geom[2], np.dtype(geom[3]).itemsize):
            np.add.at(t, Ellipsis, g)
        else:
            t += g
    else:
        ix = _fill(index, idx)
        if ix is Ellipsis:
            if geom is not None and _overlaps(geom[1], geom[2], np.dtype(geom[3]).itemsize):
                np.add.at(t, Ellipsis, g)
            else:
                t[...] += g
        else:
            np.add.at(t, ix, g)
    return z


def _region_zero_impl(g, *idx, geom, index):
    c = np.array(g, copy=True, order="C")
    t = c if geom is None else graph.buffer_view(c, *geom)
    if index is None:
        t[...] = 0
    else:
        t[_fill(index, idx)] = 0
    return c


def _tal_add_impl(g, idx, *, shape, dtype, axis):
    z = np.zeros(shape, dtype)
    if axis is None:
        np.add.at(z.reshape(-1), idx, g)
        return z
    nd = len(shape)
    ax = axis % nd
    fancy = []
    for d in range(nd):
        if d == ax:
            fancy.append(idx)
        else:
            sh = [1] * nd
            sh[d] = idx.shape[d]
            fancy.append(np.arange(idx.shape[d]).reshape(sh))
    np.add.at(z, tuple(fancy), g)
    return z


REGION_GET = register(Op("ad.region_get", "index", _region_get_impl))
REGION_ADD = register(Op("ad.region_add", "index", _region_add_impl))
REGION_ZERO = register(Op("ad.region_zero", "index", _region_zero_impl))
TAL_ADD = register(Op("ad.take_along_axis_add", "index", _tal_add_impl))
STOP = register(Op("ad.stop_gradient", "opaque", lambda x: np.array(x, copy=True)))


def as_array(a):
    """A node argument as a lazynp array (constants pass through)."""
    if type(a) is not Node:
        return a
    if a.op is graph.VIEW:
        # a proper view handle on the base (a Var whose head is a view node would be read
        # as a contiguous base by further view functions)
        base = ndarray._from_node(a.args[0])
        p = a.params
        sh = np.ndarray(p["shape"], p["dtype"], buffer=base._get_shadow(), offset=p["offset"],
                        strides=p["strides"])
        return base._view_of(sh)
    return ndarray._from_node(a)


def region_get(x, idx_args, geom, index, shape, dtype):
    """``view(x, geom)[index]`` as a fresh array (lazy)."""
    x = lnp.asarray(x)
    n = graph.record(REGION_GET, (x._node(),) + tuple(idx_args), {"geom": geom, "index": index},
                     tuple(shape), np.dtype(dtype))
    return ndarray._from_node(n)


def region_add(g, idx_args, geom, index, shape, dtype):
    """zeros(shape) with ``g`` added into ``view(., geom)[index]`` (lazy scatter-add)."""
    g = lnp.asarray(g)
    n = graph.record(REGION_ADD, (g._node(),) + tuple(idx_args),
                     {"shape": tuple(shape), "dtype": np.dtype(dtype), "geom": geom,
                      "index": index}, tuple(shape), np.dtype(dtype))
    return ndarray._from_node(n)


def region_zero(g, idx_args, geom, index):
    g = lnp.asarray(g)
    n = graph.record(REGION_ZERO, (g._node(),) + tuple(idx_args), {"geom": geom, "index": index},
                     g.shape, g.dtype)
    return ndarray._from_node(n)


def _region_shape(shape, dtype, geom, index, idx_nodes):
    base = np.broadcast_to(np.zeros((), dtype), shape if geom is None else tuple(geom[1]))
    if index is None:
        return base.shape
    vals = [np.zeros(n.shape, np.intp) for n in idx_nodes]
    return base[_fill(index, vals)].shape


# --- rule tables -------------------------------------------------------------------------------

RULES: dict = {}        # op name -> rule(g, ans, args, params, node, need) -> list
CALL_RULES: dict = {}   # lazy_call function name -> rule(g, ans, A, K, node) -> cot pytree of A
UNARY: dict = {}        # ufunc name -> f(g, ans, x)
BINARY: dict = {}       # ufunc name -> f(g, ans, x, y) -> (gx, gy)
BINARY_PARTS: dict = {}  # ufunc name -> (gx(g, ans, x, y), gy(g, ans, x, y)): _binary_parts
ZERO = object()
#: a call rule's cotangent for an argument it cannot differentiate: an error when that
#: argument depends on a differentiated input, else no gradient
NO_GRADIENT = type("NoGradient", (), {"__repr__": lambda self: "NO_GRADIENT"})()


def _unary(names, fn):
    for n in names.split():
        UNARY[n] = fn


def _binary(names, fn):
    for n in names.split():
        BINARY[n] = fn


def _binary_parts(names, grad_x, grad_y):
    """A binary rule given as two parts, the cotangents of x and of y: the backward pass
    records only the one it needs when the other operand's is not needed."""
    def rule(g, ans, x, y):
        return (None if _is_const(x) else grad_x(g, ans, x, y),
                None if _is_const(y) else grad_y(g, ans, x, y))
    for n in names.split():
        BINARY_PARTS[n] = (grad_x, grad_y)
        BINARY[n] = rule


_LN2, _LN10 = math.log(2.0), math.log(10.0)


# elementwise math (one line each, like autograd's numpy_vjps)
_unary("negative", lambda g, ans, x: -g)
_unary("positive", lambda g, ans, x: g)
_unary("conjugate", lambda g, ans, x: lnp.conjugate(g))


def _abs_rule(g, ans, x):
    """``abs``: ``sign(x)`` for real ``x``; ``conj(x) / |x|`` (0 at 0) for complex ``x``
    (autograd's and JAX's convention for real functions of complex inputs)."""
    if getattr(x, "dtype", np.dtype(float)).kind == "c":
        return g * lnp.conjugate(x) / lnp.where(ans == 0, 1.0, ans)
    return g * lnp.sign(x)


_unary("absolute fabs", _abs_rule)
_unary("reciprocal", lambda g, ans, x: -g * ans * ans)
_unary("exp", lambda g, ans, x: g * ans)
_unary("exp2", lambda g, ans, x: g * ans * _LN2)
_unary("expm1", lambda g, ans, x: g * (ans + 1.0))
_unary("log", lambda g, ans, x: g / x)
_unary("log2", lambda g, ans, x: g / (x * _LN2))
_unary("log10", lambda g, ans, x: g / (x * _LN10))
_unary("log1p", lambda g, ans, x: g / (x + 1.0))
_unary("sqrt", lambda g, ans, x: g * 0.5 / ans)
_unary("cbrt", lambda g, ans, x: g / (3.0 * ans * ans))
_unary("square", lambda g, ans, x: g * 2.0 * x)
_unary("sin", lambda g, ans, x: g * lnp.cos(x))
_unary("cos", lambda g, ans, x: -g * lnp.sin(x))
_unary("tan", lambda g, ans, x: g * (1.0 + ans * ans))
_unary("arcsin", lambda g, ans, x: g / lnp.sqrt(1.0 - x * x))
_unary("arccos", lambda g, ans, x: -g / lnp.sqrt(1.0 - x * x))
_unary("arctan", lambda g, ans, x: g / (1.0 + x * x))
_unary("sinh", lambda g, ans, x: g * lnp.cosh(x))
_unary("cosh", lambda g, ans, x: g * lnp.sinh(x))
_unary("tanh", lambda g, ans, x: g * (1.0 - ans * ans))
_unary("arcsinh", lambda g, ans, x: g / lnp.sqrt(x * x + 1.0))
_unary("arccosh", lambda g, ans, x: g / lnp.sqrt(x * x - 1.0))
_unary("arctanh", lambda g, ans, x: g / (1.0 - x * x))
_unary("deg2rad radians", lambda g, ans, x: g * (math.pi / 180.0))
_unary("rad2deg degrees", lambda g, ans, x: g * (180.0 / math.pi))
_unary("floor ceil rint trunc spacing", lambda g, ans, x: None)


def _sign_rule(g, ans, x):
    """``sign``: piecewise constant for real ``x``; ``z / |z|`` for complex ``z``:
    ``g / |z| - Re(g z) conj(z) / |z|**3`` (0 at 0) in the convention ``df/dx - i df/dy``."""
    if getattr(x, "dtype", np.dtype(float)).kind != "c":
        return None
    r = lnp.abs(x)
    safe = lnp.where(r == 0, 1.0, r)
    c = g / safe - lnp.real(g * x) * lnp.conjugate(x) / (safe * safe * safe)
    return lnp.where(r == 0, 0.0, c)


_unary("sign", _sign_rule)


def _minmax(g, ans, x, y):
    """maximum/minimum/fmax/fmin: the gradient goes to the argument equal to the answer; on
    ties it is split evenly (autograd's and JAX's convention)."""
    mx = lnp.equal(x, ans) if not _is_const(x) else None
    my = lnp.equal(y, ans) if not _is_const(y) else None
    if mx is None or my is None:
        m = mx if mx is not None else my
        gm = lnp.where(m, g, 0.0)
        return (gm, None) if mx is not None else (None, gm)
    tot = mx.astype(g.dtype) + my.astype(g.dtype)
    w = g / lnp.where(tot == 0, 1.0, tot)
    return lnp.where(mx, w, 0.0), lnp.where(my, w, 0.0)


def _is_const(v):
    return not hasattr(v, "_node")


def _power_x(g, ans, x, y):
    """``y x**(y-1)``, with ``x**0`` for ``y == 0`` (autograd's): ``x ** 0.0`` has the
    gradient 0 at ``x == 0`` too, not NaN."""
    if _is_const(y) and np.ndim(y) == 0:
        return g * 0.0 * x if y == 0 else g * y * x ** (y - 1)
    return g * y * x ** lnp.where(y == 0, 1.0, y - 1)


def _power_y(g, ans, x, y):
    return g * ans * lnp.log(lnp.where(x == 0, 1.0, x))


def _fmod_like(trunc_name):
    def rule(g, ans, x, y):
        q = getattr(lnp, trunc_name)(x / y) if not _is_const(y) else None
        return g, (None if q is None else -g * q)
    return rule


_binary("add", lambda g, ans, x, y: (g, g))
_binary_parts("subtract", lambda g, ans, x, y: g, lambda g, ans, x, y: -g)
_binary_parts("multiply", lambda g, ans, x, y: g * y, lambda g, ans, x, y: g * x)
_binary_parts("divide true_divide", lambda g, ans, x, y: g / y,
              lambda g, ans, x, y: -g * x / (y * y))
_binary_parts("power float_power", _power_x, _power_y)
_binary("maximum minimum fmax fmin", _minmax)
_binary("arctan2", lambda g, ans, x, y: (g * y / (x * x + y * y), -g * x / (x * x + y * y)))
_binary("hypot", lambda g, ans, x, y: (g * x / ans, g * y / ans))
_binary("copysign", lambda g, ans, x, y: (
    lnp.where(lnp.signbit(x) == lnp.signbit(ans), g, -g), None))
_binary("logaddexp", lambda g, ans, x, y: (g * lnp.exp(x - ans), g * lnp.exp(y - ans)))
_binary("logaddexp2", lambda g, ans, x, y: (g * lnp.exp2(x - ans),
                                            g * lnp.exp2(y - ans)))
_binary("ldexp", lambda g, ans, x, y: (g * lnp.exp2(y), None))
_binary("remainder mod", _fmod_like("floor"))
_binary("fmod", _fmod_like("trunc"))
_binary("floor_divide heaviside", lambda g, ans, x, y: (None, None))
_binary("nextafter", lambda g, ans, x, y: (g, None))     # the next float: slope 1 in x


def _elementwise(name, g, ans, xs):
    if len(xs) == 1:
        f = UNARY.get(name)
        if f is None:
            raise NotImplementedError(f"lazynp.autograd: no gradient rule for ufunc {name!r}")
        return [f(g, ans, xs[0])]
    f = BINARY.get(name)
    if f is None:
        raise NotImplementedError(f"lazynp.autograd: no gradient rule for ufunc {name!r}")
    return list(f(g, ans, xs[0], xs[1]))


class Multi:
    """Cotangent of a multi-output node: ``g[i]`` is None when output i has none."""

    __slots__ = ("parts",)

    def __init__(self):
        self.parts = {}

    def __getitem__(self, i):
        return self.parts.get(i)


def vjp(node: Node, args: tuple, params, g, need: list):
    """Cotangents of ``node``'s args (list aligned with args; None = zero)."""
    op = node.op
    name = op.name
    ufunc = op.ufunc
    if ufunc is not None and op.kind == "elementwise":
        xs = [as_array(a) for a in args]
        if len(xs) == 2 and not (need[0] and need[1]):
            parts = BINARY_PARTS.get(ufunc.__name__)
            if parts is not None:
                ans = as_array(node)
                return [parts[k](g, ans, xs[0], xs[1]) if need[k] else None
                        for k in (0, 1)]
        return _elementwise(ufunc.__name__, g, as_array(node), xs)
    rule = RULES.get(name)
    if rule is not None:
        return rule(g, node, args, params, need)
    if params and "tpl" in params:
        return _call_vjp(name, g, node, args, params, need)
    raise NotImplementedError(f"lazynp.autograd: no gradient rule for op {name!r}")


def _registrar(table: dict):
    """A decorator factory: ``@reg("a", "b")`` enters the function in ``table`` under each name."""
    def names(*keys):
        def deco(f):
            for n in keys:
                table[n] = f
            return f
        return deco
    return names


op_rule = _registrar(RULES)


@op_rule("copy", "element", "ad.copy")
def _copy_vjp(g, node, args, params, need):
    return [g]


@op_rule("astype")
def _astype_vjp(g, node, args, params, need):
    return [g]


@op_rule("ad.stop_gradient")
def _stop_vjp(g, node, args, params, need):
    return [None]


@op_rule("ufunc_call")
def _ufunc_call_vjp(g, node, args, params, need):
    uf = params["ufunc"]
    xs = [as_array(a) for a in args]
    if params["has_where"]:
        w = xs[-1]
        xs = xs[:-1]
    if uf.nout > 1:
        return _multi_ufunc(uf.__name__, g, node, xs) + ([None] if params["has_where"] else [])
    if params["has_where"]:
        g = lnp.where(w, g, 0.0)
    res = _elementwise(uf.__name__, g, as_array(node), xs)
    return res + ([None] if params["has_where"] else [])


def _multi_ufunc(name, g, node, xs):
    if name == "modf":
        return [g[0]]
    if name == "divmod":
        gr = g[1]
        if gr is None:
            return [None, None]
        return [gr, -gr * lnp.floor_divide(xs[0], xs[1])]
    if name == "frexp":
        if g[0] is None:
            return [None]
        return [g[0] * lnp.exp2(-lnp.frexp(xs[0])[1].astype(g[0].dtype))]
    raise NotImplementedError(f"lazynp.autograd: no gradient rule for ufunc {name!r}")


@op_rule("where")
def _where_vjp(g, node, args, params, need):
    c = as_array(args[0])
    return [None, lnp.where(c, g, 0.0) if need[1] else None,
            lnp.where(c, 0.0, g) if need[2] else None]


@op_rule("clip")
def _clip_vjp(g, node, args, params, need):
    return _clip_cots(g, [as_array(a) for a in args], need)


def _clip_cots(g, xs, need):
    """clip(a, lo, hi): ``a`` gets g where lo <= a <= hi (bounds included), ``lo`` where
    a < lo, ``hi`` where a > hi."""
    a, lo, hi = xs
    inside = None
    out = [None, None, None]
    below = above = None
    if lo is not None:
        below = lnp.less(a, lo)
    if hi is not None:
        above = lnp.greater(a, hi)
        if below is not None:
            above = lnp.logical_and(above, lnp.logical_not(below))  # NumPy: min(max(a,lo),hi)
            # when lo > hi NumPy returns hi everywhere
    if below is not None and above is not None:
        inside = lnp.logical_not(lnp.logical_or(below, above))
    else:
        inside = lnp.logical_not(below if below is not None else above) \
            if (below is not None or above is not None) else None
    if need[0]:
        out[0] = g if inside is None else lnp.where(inside, g, 0.0)
    if len(need) > 1 and need[1] and below is not None:
        out[1] = lnp.where(below, g, 0.0)
    if len(need) > 2 and need[2] and above is not None:
        out[2] = lnp.where(above, g, 0.0)
    return out


@op_rule("tuple_get")
def _tuple_get_vjp(g, node, args, params, need):   # handled by the walker (Multi)
    raise AssertionError


# --- views, indexing, writes -----------------------------------------------------------------

@op_rule("view")
def _view_vjp(g, node, args, params, need):
    base = args[0]
    p = params
    geom = (p["offset"], tuple(p["shape"]), tuple(p["strides"]), p["dtype"])
    vdt = np.dtype(p["dtype"])
    if vdt != base.dtype:
        if base.dtype.kind == "c" and vdt.kind == "f" and 2 * vdt.itemsize == \
                base.dtype.itemsize:
            # .real/.imag of a complex array: scatter into its (re, im) pairs, then
            # re - 1j*im (autograd's convention: d/dx - i d/dy)
            pairs = region_add(g, (), geom, None, base.shape + (2,), vdt)
            return [pairs[..., 0] - 1j * pairs[..., 1]]
        raise NotImplementedError("lazynp.autograd: cannot differentiate through a view that "
                                  "reinterprets the dtype")
    return [region_add(g, (), geom, None, base.shape, base.dtype)]


@op_rule("ad.region_get")
def _region_get_vjp(g, node, args, params, need):
    x = args[0]
    return [region_add(g, args[1:], params["geom"], params["index"], x.shape, x.dtype)] + \
        [None] * (len(args) - 1)


@op_rule("ad.region_add")
def _region_add_vjp(g, node, args, params, need):
    gi = args[0]
    return [region_get(g, args[1:], params["geom"], params["index"], gi.shape, gi.dtype)] + \
        [None] * (len(args) - 1)


@op_rule("ad.region_zero")
def _region_zero_vjp(g, node, args, params, need):
    return [region_zero(g, args[1:], params["geom"], params["index"])] + [None] * (len(args) - 1)


@op_rule("ad.take_along_axis_add")
def _tal_vjp(g, node, args, params, need):
    idx = as_array(args[1])
    if params["axis"] is None:
        return [lnp.take(lnp.reshape(g, -1), idx), None]
    return [lnp.take_along_axis(g, idx, params["axis"]), None]


@op_rule("getitem")
def _getitem_vjp(g, node, args, params, need):
    base = args[0]
    return [region_add(g, args[1:], None, params["index"], base.shape, base.dtype)] + \
        [None] * (len(args) - 1)


def _geom_shape(node, geom):
    return node.shape if geom is None else tuple(geom[1])


@op_rule("setitem")
def _setitem_vjp(g, node, args, params, need):
    old = args[0]
    idx = args[2:]
    geom, index = params["geom"], params["index"]
    out = [None] * len(args)
    if need[0]:
        out[0] = region_zero(g, idx, geom, index)
    if need[1]:
        shp = _region_shape(old.shape, old.dtype, geom, index, idx)
        out[1] = region_get(g, idx, geom, index, shp, g.dtype)
    return out


@op_rule("ufunc_out")
def _ufunc_out_vjp(g, node, args, params, need):
    geom, uf = params["geom"], params["ufunc"]
    has_where = params["has_where"]
    ops = list(args[1:])
    w = None
    if has_where:
        w = as_array(ops.pop())
    tshape = _geom_shape(node, geom)
    gr = region_get(g, (), geom, None, tshape, g.dtype)
    out = [None] * len(args)
    if need[0]:
        if w is None:
            out[0] = region_zero(g, (), geom, None)
        else:
            out[0] = region_zero(g, (), geom, None) + \
                region_add(lnp.where(w, 0.0, gr), (), geom, None, node.shape, g.dtype)
    if w is not None:
        gr = lnp.where(w, gr, 0.0)
    if not any(need[1:1 + len(ops)]):
        return out
    ans = as_array(node) if geom is None else as_array(graph.view_node(node, *geom))
    if uf.nout > 1:
        raise NotImplementedError(f"lazynp.autograd: no gradient for {uf.__name__} with out=")
    res = _elementwise(uf.__name__, gr, ans, [as_array(a) for a in ops])
    for i, c in enumerate(res):
        out[1 + i] = c
    return out


@op_rule("ufunc_at")
def _ufunc_at_vjp(g, node, args, params, need):
    uf = params["ufunc"]
    has_b = params["has_b"]
    idx = args[1:-1] if has_b else args[1:]
    geom, index = params["geom"], params["index"]
    out = [None] * len(args)
    name = uf.__name__
    if name not in ("add", "subtract"):
        if any(need):
            raise NotImplementedError(f"lazynp.autograd: no gradient rule for {name}.at")
        return out
    out[0] = g
    if has_b and need[-1]:
        old = args[0]
        shp = _region_shape(old.shape, old.dtype, geom, index, idx)
        gb = region_get(g, idx, geom, index, shp, g.dtype)
        out[-1] = gb if name == "add" else -gb
    return out


# --- reductions and scans -----------------------------------------------------------------

def _axes(shape, axis):
    nd = len(shape)
    if axis is None or nd == 0:
        return tuple(range(nd))
    return normalize_axis_tuple(axis, nd)


def _expand(g, shape, axis, keepdims):
    """Broadcast a reduction's cotangent back to the input shape."""
    axes = _axes(shape, axis)
    kshape = tuple(1 if i in axes else s for i, s in enumerate(shape))
    if not keepdims:
        g = lnp.reshape(g, kshape)
    return lnp.broadcast_to(g, shape)


def _red_info(args, params):
    p = params or {}
    x = as_array(args[0])
    w = as_array(args[1]) if p.get("_where") else None
    return x, p.get("axis"), bool(p.get("keepdims", False)), w


@op_rule("sum", "add.reduce", "nansum")
def _sum_vjp(g, node, args, params, need):
    x, axis, kd, w = _red_info(args, params)
    gb = _expand(g, x.shape, axis, kd)
    if w is not None:
        gb = lnp.where(w, gb, 0.0)
    if node.op.name == "nansum":
        gb = lnp.where(lnp.isnan(x), 0.0, gb)
    return [gb] + [None] * (len(args) - 1)


@op_rule("mean", "nanmean")
def _mean_vjp(g, node, args, params, need):
    x, axis, kd, w = _red_info(args, params)
    gb = _expand(g, x.shape, axis, kd)
    axes = _axes(x.shape, axis)
    if w is None and node.op.name == "mean":
        n = 1
        for a in axes:
            n *= x.shape[a]
        return [gb / n] + [None] * (len(args) - 1)
    mask = lnp.broadcast_to(w, x.shape) if w is not None else lnp.ones(x.shape, bool)
    if node.op.name == "nanmean":
        mask = lnp.logical_and(mask, lnp.logical_not(lnp.isnan(x)))
    cnt = lnp.sum(mask, axis=axes, keepdims=True).astype(gb.dtype)
    return [lnp.where(mask, gb / cnt, 0.0)] + [None] * (len(args) - 1)


@op_rule("prod", "multiply.reduce")
def _prod_vjp(g, node, args, params, need):
    x, axis, kd, w = _red_info(args, params)
    gb = _expand(g * as_array(node), x.shape, axis, kd) / x
    if w is not None:
        gb = lnp.where(w, gb, 0.0)
    return [gb] + [None] * (len(args) - 1)


def _max_cot(g, ans, x, axis, kd, w=None):
    ab = _expand(ans, x.shape, axis, kd)
    mask = lnp.equal(x, ab)
    if w is not None:
        mask = lnp.logical_and(mask, w)
    cnt = lnp.sum(mask, axis=_axes(x.shape, axis), keepdims=True).astype(g.dtype)
    return lnp.where(mask, _expand(g, x.shape, axis, kd) / cnt, 0.0)


@op_rule("max", "min", "maximum.reduce", "minimum.reduce", "nanmax", "nanmin", "amax", "amin")
def _max_vjp(g, node, args, params, need):
    """max/min reductions: the gradient is split evenly among tied extrema."""
    x, axis, kd, w = _red_info(args, params)
    return [_max_cot(g, as_array(node), x, axis, kd, w)] + [None] * (len(args) - 1)


@op_rule("ptp")
def _ptp_vjp(g, node, args, params, need):
    x, axis, kd, w = _red_info(args, params)
    mx = lnp.max(x, axis=axis, keepdims=kd)
    mn = lnp.min(x, axis=axis, keepdims=kd)
    return [_max_cot(g, mx, x, axis, kd) - _max_cot(g, mn, x, axis, kd)]


def _reduced_count(shape, axis) -> int:
    """How many elements each result of a reduction over ``axis`` reads."""
    n = 1
    for a in _axes(shape, axis):
        n *= shape[a]
    return n


def _var_cot(g, x, axis, kd, ddof):
    """``var``'s cotangent ``2 g conj(x - mean) / (n - ddof)``: for complex ``x`` the
    conjugate is the project's convention (``df/dx - i df/dy`` for real ``f``: the
    gradient of ``mean(|z - mean(z)|**2)``, as autograd's)."""
    axes = _axes(x.shape, axis)
    n = _reduced_count(x.shape, axis)
    d = x - lnp.mean(x, axis=axes, keepdims=True)
    if d.dtype.kind == "c":
        d = lnp.conjugate(d)
    return _expand(g, x.shape, axis, kd) * (2.0 / (n - ddof)) * d


def _ddof(params):
    p = params or {}
    return p.get("correction", p.get("ddof", 0))


@op_rule("var")
def _var_vjp(g, node, args, params, need):
    x, axis, kd, w = _red_info(args, params)
    if w is not None:
        raise NotImplementedError("lazynp.autograd: var(where=) gradient")
    return [_var_cot(g, x, axis, kd, _ddof(params))]


@op_rule("std")
def _std_vjp(g, node, args, params, need):
    """``std``: ``var``'s cotangent times ``0.5 / std``.  Over one element (a length-1
    axis, a scalar) the gradient is 0, as autograd's (std is 0 there for every nearby
    input); at a constant array of more elements it is NaN (std is not differentiable)."""
    x, axis, kd, w = _red_info(args, params)
    if w is not None:
        raise NotImplementedError("lazynp.autograd: std(where=) gradient")
    if _reduced_count(x.shape, axis) <= 1:
        return [lnp.zeros(x.shape, g.dtype if x.dtype.kind != "c" else x.dtype)]
    return [_var_cot(g * 0.5 / as_array(node), x, axis, kd, _ddof(params))]


def _rev_cumsum(g, axis):
    return lnp.flip(lnp.cumsum(lnp.flip(g, axis), axis=axis), axis)


@op_rule("cumsum", "add.accumulate", "nancumsum")
def _cumsum_vjp(g, node, args, params, need):
    x = as_array(args[0])
    axis = (params or {}).get("axis")
    if axis is None:
        c = lnp.reshape(_rev_cumsum(g, 0), x.shape)
    else:
        c = _rev_cumsum(g, axis)
    if node.op.name == "nancumsum":
        c = lnp.where(lnp.isnan(x), 0.0, c)
    return [c]


@op_rule("cumprod", "multiply.accumulate")
def _cumprod_vjp(g, node, args, params, need):
    x = as_array(args[0])
    axis = (params or {}).get("axis")
    ans = as_array(node)
    if axis is None:
        return [lnp.reshape(_rev_cumsum(g * ans, 0), x.shape) / x]
    return [_rev_cumsum(g * ans, axis) / x]


# --- lazy_call ops (generic NumPy functions) -----------------------------------------------

def _slots(tpl, out):
    """Yield (slot index, cotangent) pairs walking a template and a cotangent structure."""
    if type(tpl) is _Slot:
        if out is not None:
            yield tpl.k, out
        return
    if type(tpl) in (tuple, list) and isinstance(out, (tuple, list)):
        for t, o in zip(tpl, out):
            yield from _slots(t, o)


def _slot_ids(tpl):
    if type(tpl) is _Slot:
        yield tpl.k
    elif type(tpl) in (tuple, list):
        for t in tpl:
            yield from _slot_ids(t)
    elif type(tpl) is dict:
        for t in tpl.values():
            yield from _slot_ids(t)


def _plain_tpl(tpl_a, tpl_k, n) -> bool:
    """True when a call's template is ``f(arg0, arg1, ...)`` (no constants, no keywords)."""
    if tpl_k or len(tpl_a) != n:
        return False
    for i, t in enumerate(tpl_a):
        if type(t) is not _Slot or t.k != i:
            return False
    return True


#: ids of the wrapped arguments of the call rule running now whose cotangent is not needed
#: (a constant operand): :func:`_needs` says False for them, so the rule does not record
#: a cotangent graph nobody reads
_NOT_NEEDED: frozenset = frozenset()


def _call_vjp(name, g, node, args, params, need):
    global _NOT_NEEDED
    fname = name[5:] if name.startswith("call:") else name
    rule = CALL_RULES.get(fname)
    tpl_a, tpl_k = params["tpl"]
    if rule is None:
        raise NotImplementedError(f"lazynp.autograd: no gradient rule for numpy.{fname}")
    vals = [as_array(a) for a in args]
    plain = _plain_tpl(tpl_a, tpl_k, len(args))
    if plain:
        A, K = tuple(vals), {}
    else:
        A = _fill_deep(tpl_a, vals)
        K = _fill_deep(tpl_k, vals)
    saved = _NOT_NEEDED
    _NOT_NEEDED = frozenset([id(v) for v, nd in zip(vals, need) if not nd])
    try:
        res = rule(g, as_array(node), A, K, node)
    finally:
        _NOT_NEEDED = saved
    out = [None] * len(args)
    pairs = zip(range(len(args)), res) if plain and isinstance(res, (tuple, list)) else \
        _slots(tpl_a, res)
    for k, c in pairs:
        if c is None:
            continue
        if c is NO_GRADIENT:
            if need[k]:
                raise NotImplementedError(f"lazynp.autograd: no gradient of numpy.{fname} "
                                          f"with respect to its argument {k}")
            continue
        out[k] = c if out[k] is None else out[k] + c
    for k in _slot_ids(tpl_k):
        if need[k] and out[k] is None:
            raise NotImplementedError(f"lazynp.autograd: no gradient of numpy.{fname} with "
                                      "respect to a keyword array argument")
    return out


call_rule = _registrar(CALL_RULES)


def _transposed(x):
    """``x`` with its last two axes swapped (``x.mT``)."""
    return lnp.swapaxes(x, -1, -2)


def _arg(A, K, i, name, default=None):
    if len(A) > i:
        return A[i]
    return K.get(name, default)


@call_rule("matmul")
def _matmul_rule(g, ans, A, K, node):
    a, b = A[0], A[1]
    a2 = a if a.ndim >= 2 else lnp.reshape(a, (1, -1))
    b2 = b if b.ndim >= 2 else lnp.reshape(b, (-1, 1))
    g2 = lnp.asarray(g)
    if a.ndim == 1:
        g2 = lnp.reshape(g2, g2.shape[:-1] + (1,) + g2.shape[-1:]) if g2.ndim else \
            lnp.reshape(g2, (1,))
    if b.ndim == 1:
        g2 = lnp.reshape(g2, g2.shape + (1,))
    ga = lnp.matmul(g2, _transposed(b2)) if _needs(a) else None
    gb = lnp.matmul(_transposed(a2), g2) if _needs(b) else None
    if ga is not None and a.ndim == 1:
        ga = lnp.squeeze(ga, -2)
    if gb is not None and b.ndim == 1:
        gb = lnp.squeeze(gb, -1)
    return (ga, gb)


def _needs(x):
    """Whether a call rule should build the cotangent of operand ``x`` (a lazy array whose
    cotangent the backward pass needs)."""
    return hasattr(x, "_node") and id(x) not in _NOT_NEEDED


_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


@call_rule("dot")
def _dot_rule(g, ans, A, K, node):
    a, b = A[0], A[1]
    if a.ndim <= 2 and b.ndim <= 2:
        return _matmul_rule(g, ans, (a, b), {}, node)
    la = _LETTERS[:a.ndim - 1] + "z"
    lb = _LETTERS[a.ndim - 1:a.ndim - 1 + b.ndim - 2]
    lb = lb + "z" + "y" if b.ndim >= 2 else "z"
    out = la[:-1] + lb.replace("z", "")
    return _einsum_cots(g, [la, lb], out, [a, b])


@call_rule("vdot")
def _vdot_rule(g, ans, A, K, node):
    a, b = A[0], A[1]
    return (lnp.reshape(g * lnp.ravel(b), a.shape) if _needs(a) else None,
            lnp.reshape(g * lnp.ravel(a), b.shape) if _needs(b) else None)


def _inner_rule(g, ans, A, K, node):
    a, b = A[0], A[1]
    if a.ndim == 0 or b.ndim == 0:
        raise NotImplementedError("lazynp.autograd: inner with a 0-d operand")
    la = _LETTERS[:a.ndim - 1] + "z"
    lb = _LETTERS[a.ndim - 1:a.ndim - 1 + b.ndim - 1] + "z"
    return _einsum_cots(g, [la, lb], la[:-1] + lb[:-1], [a, b])


@call_rule("outer")
def _outer_rule(g, ans, A, K, node):
    a, b = A[0], A[1]
    fa, fb = lnp.ravel(a), lnp.ravel(b)
    return (lnp.reshape(lnp.matmul(g, fb), a.shape) if _needs(a) else None,
            lnp.reshape(lnp.matmul(fa, g), b.shape) if _needs(b) else None)


@call_rule("tensordot")
def _tensordot_rule(g, ans, A, K, node):
    a, b = A[0], A[1]
    axes = _arg(A, K, 2, "axes", 2)
    try:
        iter(axes)
    except TypeError:
        n = int(axes)
        axes_a = list(range(a.ndim - n, a.ndim))
        axes_b = list(range(0, n))
    else:
        axes_a, axes_b = axes
        axes_a = [axes_a] if isinstance(axes_a, (int, np.integer)) else list(axes_a)
        axes_b = [axes_b] if isinstance(axes_b, (int, np.integer)) else list(axes_b)
    axes_a = [i % a.ndim for i in axes_a]
    axes_b = [i % b.ndim for i in axes_b]
    la = list(_LETTERS[:a.ndim])
    lb = list(_LETTERS[a.ndim:a.ndim + b.ndim])
    for i, j in zip(axes_a, axes_b):
        lb[j] = la[i]
    out = "".join(c for i, c in enumerate(la) if i not in axes_a) + \
        "".join(c for j, c in enumerate(lb) if j not in axes_b)
    return _einsum_cots(g, ["".join(la), "".join(lb)], out, [a, b])


def _einsum_cots(g, specs, out, ops, only=None):
    """Cotangents of ``einsum(",".join(specs) + "->" + out, *ops)`` (of operand ``only``
    alone when given)."""
    res = []
    for i, (spec, x) in enumerate(zip(specs, ops)):
        if not _needs(x) or (only is not None and i != only):
            res.append(None)
            continue
        if len(set(spec)) != len(spec):
            res.append(_einsum_diag_cot(g, specs, out, ops, i))
            continue
        others = [(s, o) for j, (s, o) in enumerate(zip(specs, ops)) if j != i]
        avail = set(out) | set("".join(s for s, _ in others))
        keep = "".join(c for c in spec if c in avail)
        sub = ",".join([out] + [s for s, _ in others]) + "->" + keep
        c = lnp.einsum(sub, g, *[o for _, o in others])
        if keep != spec:
            kshape = tuple(x.shape[k] if ch in avail else 1 for k, ch in enumerate(spec))
            c = lnp.broadcast_to(lnp.reshape(c, kshape), x.shape)
        elif c.shape != x.shape:
            # size-1 (broadcast) dimensions of this operand: sum them
            axes = tuple(k for k, (s1, s2) in enumerate(zip(x.shape, c.shape)) if s1 != s2)
            c = lnp.sum(c, axis=axes, keepdims=True)
        res.append(c)
    return res


def _einsum_diag_cot(g, specs, out, ops, i):
    """Cotangent of operand ``i`` whose subscripts repeat a letter (einsum reads a
    diagonal): the cotangent of its distinct letters, put back on that diagonal."""
    spec, x = specs[i], ops[i]
    first = {}
    for p, ch in enumerate(spec):
        first.setdefault(ch, p)
    uniq = "".join(first)
    sizes = {ch: x.shape[p] for ch, p in first.items()}
    specs2 = list(specs)
    specs2[i] = uniq
    ux = lnp.zeros(tuple(sizes[ch] for ch in uniq), x.dtype)    # a stand-in of its shape
    c = _einsum_cots(g, specs2, out, [ops[j] if j != i else _Needed(ux)
                                      for j in range(len(ops))], only=i)[i]
    c = lnp.reshape(c, tuple(x.shape[p] if first[ch] == p else 1 for p, ch in enumerate(spec)))
    for p, ch in enumerate(spec):
        q = first[ch]
        if q != p:
            n = sizes[ch]
            shp = [1] * len(spec)
            shp[q] = shp[p] = n
            c = c * lnp.reshape(lnp.eye(n, dtype=bool), shp)
    return lnp.broadcast_to(c, x.shape) if c.shape != x.shape else c


class _Needed:
    """A stand-in operand that :func:`_needs` accepts (only its shape is read)."""

    def __init__(self, like):
        self._like = like
        self.shape, self.ndim, self.dtype = like.shape, like.ndim, like.dtype

    def _node(self):
        return self._like._node()


def _sublist_subscripts(A):
    """``einsum(op0, sub0, op1, sub1, ..., [out])`` as ``(subscripts, operands)``."""
    def letters(sub):
        return "".join("..." if t is Ellipsis else _LETTERS[int(t)] for t in sub)
    items = list(A)
    ops, specs = items[0::2], items[1::2]
    out = None
    if len(items) % 2 == 1:
        out = items[-1]
        ops = ops[:-1]
    subs = ",".join(letters(sp) for sp in specs)
    if out is not None:
        subs += "->" + letters(out)
    return subs, ops


@call_rule("einsum")
def _einsum_rule(g, ans, A, K, node):
    subs = A[0]
    if not isinstance(subs, str):
        subs, ops = _sublist_subscripts(A)
        res = _einsum_rule(g, ans, [subs] + list(ops), K, node)[1:]
        out = []
        for c in res:                 # back to (op, sublist, op, sublist, ...)
            out += [c, None]
        if len(A) % 2 == 1:
            out.append(None)
        return out
    ops = list(A[1:])
    subs = subs.replace(" ", "")
    ins, arrow, out = subs.partition("->")
    specs = ins.split(",")
    if "..." in subs:
        used = set(subs)
        free = [c for c in _LETTERS if c not in used]
        nell = 0
        for s, x in zip(specs, ops):
            if "..." in s:
                nell = max(nell, x.ndim - (len(s) - 3))
        ell = "".join(free[:nell])
        new = []
        for s, x in zip(specs, ops):
            if "..." in s:
                k = x.ndim - (len(s) - 3)
                s = s.replace("...", ell[nell - k:] if k else "")
            new.append(s)
        specs = new
        if arrow:
            out = out.replace("...", ell)
        else:
            counts: dict = {}
            for c in "".join(specs):
                counts[c] = counts.get(c, 0) + 1
            out = ell + "".join(sorted(c for c, n in counts.items()
                                       if n == 1 and c not in ell))
    elif not arrow:
        counts = {}
        for c in "".join(specs):
            counts[c] = counts.get(c, 0) + 1
        out = "".join(sorted(c for c, n in counts.items() if n == 1))
    return [None] + _einsum_cots(g, specs, out, ops)


@call_rule("concatenate")
def _concatenate_rule(g, ans, A, K, node):
    arrs = A[0]
    axis = _arg(A, K, 1, "axis", 0)
    cuts = []
    acc = 0
    for a in arrs[:-1]:
        acc += a.shape[axis]
        cuts.append(acc)
    parts = lnp.split(g, cuts, axis=axis)
    return (list(parts),)


@call_rule("reshape")
def _reshape_rule(g, ans, A, K, node):
    a = A[0]
    order = K.get("order", "C")
    return (lnp.reshape(g, a.shape, order=order),)


@call_rule("ravel")
def _ravel_rule(g, ans, A, K, node):
    a = A[0]
    order = _arg(A, K, 1, "order", "C")
    return (lnp.reshape(g, a.shape, order=order),)


@call_rule("sort")
def _sort_rule(g, ans, A, K, node):
    a = A[0]
    axis = _arg(A, K, 1, "axis", -1)
    if axis is None:
        perm = lnp.argsort(lnp.ravel(a), kind="stable")
        inv = lnp.argsort(perm, kind="stable")
        return (lnp.reshape(lnp.take(g, inv), a.shape),)
    perm = lnp.argsort(a, axis=axis, kind="stable")
    inv = lnp.argsort(perm, axis=axis, kind="stable")
    return (lnp.take_along_axis(g, inv, axis),)


@call_rule("take_along_axis")
def _take_along_axis_rule(g, ans, A, K, node):
    a, idx = A[0], A[1]
    axis = _arg(A, K, 2, "axis", -1)
    idxn = idx._node() if hasattr(idx, "_node") else graph.leaf(np.asarray(idx))
    gn = lnp.asarray(g)._node()
    n = graph.record(TAL_ADD, (gn, idxn), {"shape": a.shape, "dtype": a.dtype, "axis": axis},
                     a.shape, a.dtype)
    return (ndarray._from_node(n), None)


@op_rule("roll1")
def _roll1_vjp(g, node, args, params, need):
    return [lnp.roll(g, -params["shift"], axis=params["axis"])]


@call_rule("roll")
def _roll_rule(g, ans, A, K, node):
    shift = _arg(A, K, 1, "shift")
    axis = _arg(A, K, 2, "axis", None)
    neg = tuple(-s for s in shift) if isinstance(shift, (tuple, list)) else -shift
    return (lnp.roll(g, neg, axis=axis),)


@call_rule("pad")
def _pad_rule(g, ans, A, K, node):
    a = A[0]
    pw = _arg(A, K, 1, "pad_width")
    mode = _arg(A, K, 2, "mode", "constant")
    if mode != "constant":
        raise NotImplementedError(f"lazynp.autograd: no gradient for pad(mode={mode!r})")
    pw = np.broadcast_to(np.asarray(pw, dtype=np.intp), (a.ndim, 2))
    sl = tuple(slice(int(b), g.shape[i] - int(e)) for i, (b, e) in enumerate(pw))
    return (g[sl],)


@call_rule("take")
def _take_rule(g, ans, A, K, node):
    a, idx = A[0], A[1]
    axis = _arg(A, K, 2, "axis", None)
    mode = _arg(A, K, 4, "mode", "raise")
    if mode != "raise":
        raise NotImplementedError(f"lazynp.autograd: no gradient for take(mode={mode!r})")
    if hasattr(idx, "_node"):
        ia, it = (idx._node(),), _Slot(0)
    else:
        ia, it = (), np.asarray(idx)
    if axis is None:
        c = region_add(g, ia, None, (it,), (a.size,), a.dtype)
        return (lnp.reshape(c, a.shape), None)
    ax = axis % a.ndim
    index = (slice(None),) * ax + (it,)
    return (region_add(g, ia, None, index, a.shape, a.dtype), None)


@call_rule("tril")
def _tril_rule(g, ans, A, K, node):
    return (lnp.tril(g, k=_arg(A, K, 1, "k", 0)),)


@call_rule("triu")
def _triu_rule(g, ans, A, K, node):
    return (lnp.triu(g, k=_arg(A, K, 1, "k", 0)),)


@call_rule("diag")
def _diag_rule(g, ans, A, K, node):
    v = A[0]
    k = _arg(A, K, 1, "k", 0)
    if v.ndim == 1:
        return (lnp.diagonal(g, k),)
    L = g.shape[0]
    rows = np.arange(L) + (max(-k, 0))
    cols = np.arange(L) + (max(k, 0))
    return (region_add(g, (), None, (rows, cols), v.shape, v.dtype),)


@call_rule("tile")
def _tile_rule(g, ans, A, K, node):
    a = A[0]
    reps = _arg(A, K, 1, "reps")
    reps = tuple(reps) if isinstance(reps, (tuple, list)) else (int(reps),)
    nd = max(a.ndim, len(reps))
    reps = (1,) * (nd - len(reps)) + reps
    shp = (1,) * (nd - a.ndim) + a.shape
    inter = []
    for r, s in zip(reps, shp):
        inter += [r, s]
    c = lnp.sum(lnp.reshape(g, inter), axis=tuple(range(0, 2 * nd, 2)))
    return (lnp.reshape(c, a.shape),)


@call_rule("repeat")
def _repeat_rule(g, ans, A, K, node):
    a = A[0]
    r = _arg(A, K, 1, "repeats")
    axis = _arg(A, K, 2, "axis", None)
    if not isinstance(r, (int, np.integer)):
        r = np.asarray(r)
        if r.size != 1:
            raise NotImplementedError("lazynp.autograd: repeat with an array of repeats")
        r = int(r.reshape(-1)[0])
    if axis is None:
        return (lnp.reshape(lnp.sum(lnp.reshape(g, (a.size, r)), axis=1), a.shape),)
    ax = axis % a.ndim
    shp = a.shape[:ax] + (a.shape[ax], r) + a.shape[ax + 1:]
    return (lnp.sum(lnp.reshape(g, shp), axis=ax + 1),)


@call_rule("nan_to_num")
def _nan_to_num_rule(g, ans, A, K, node):
    return (lnp.where(lnp.isfinite(A[0]), g, 0.0),)


@call_rule("round", "around", "fix")
def _round_rule(g, ans, A, K, node):
    return (None,)


@call_rule("clip")
def _clip_call_rule(g, ans, A, K, node):
    xs = [A[0], _arg(A, K, 1, "a_min"), _arg(A, K, 2, "a_max")]
    need = [_needs(x) for x in xs]
    return tuple(_clip_cots(g, xs, need))


@call_rule("broadcast_to")
def _broadcast_to_rule(g, ans, A, K, node):
    return (g,)   # the caller sums over broadcast dimensions


@call_rule("transpose", "swapaxes", "moveaxis", "squeeze", "expand_dims", "flip",
           "atleast_2d", "atleast_3d", "rot90", "diagonal", "fliplr", "flipud", "rollaxis")
def _empty_rule(g, ans, A, K, node):   # only recorded as copies for empty arrays
    a = A[0]
    return (lnp.zeros(a.shape, a.dtype),)


# --- linalg -------------------------------------------------------------------------------------

@call_rule("linalg.inv")
def _inv_rule(g, ans, A, K, node):
    return (-lnp.matmul(lnp.matmul(_transposed(ans), g), _transposed(ans)),)


@call_rule("linalg.solve")
def _solve_rule(g, ans, A, K, node):
    a, b = A[0], A[1]
    gb = lazy_linalg.solve(_transposed(a), g)
    if b.ndim == 1:
        ga = -lnp.expand_dims(gb, -1) * lnp.expand_dims(ans, -2)
    else:
        ga = -lnp.matmul(gb, _transposed(ans))
    return (ga if _needs(a) else None, gb if _needs(b) else None)


@call_rule("linalg.det")
def _det_rule(g, ans, A, K, node):
    a = A[0]
    return (lnp.expand_dims(lnp.expand_dims(g * ans, -1), -1) * _transposed(lazy_linalg.inv(a)),)


@call_rule("linalg.slogdet")
def _slogdet_rule(g, ans, A, K, node):
    """``logabsdet = Re(log det A)``: ``gl A^-T``; for a complex ``A`` the sign
    ``exp(i Im(log det A))`` has a gradient too, ``i Im(gs sign) A^-T`` (the convention
    ``df/dx - i df/dy``)."""
    a = A[0]
    gs, gl = g[0], g[1]
    coef = None if gl is None else gl
    if gs is not None and _is_complex(a):
        sign = _tuple_parts(node, [(a.shape[:-2], node.dtype)])[0]
        c = 1j * lnp.imag(gs * sign)
        coef = c if coef is None else coef + c
    if coef is None:
        return (None,)
    return (lnp.expand_dims(lnp.expand_dims(coef, -1), -1) * _transposed(lazy_linalg.inv(a)),)


def _one_triangle(G, lower):
    """Gradient w.r.t. a matrix of which only one triangle is read, from the gradient ``G``
    w.r.t. the symmetric matrix it stands for."""
    n = G.shape[-1]
    S = G + _transposed(G)
    half = 1.0 - 0.5 * lnp.eye(n, dtype=G.dtype)
    return (lnp.tril(S) if lower else lnp.triu(S)) * half


@call_rule("linalg.cholesky")
def _cholesky_rule(g, ans, A, K, node):
    if _is_complex(A[0]):
        raise NotImplementedError("lazynp.autograd: no gradient of a complex "
                                  "linalg.cholesky (real matrices only)")
    upper = K.get("upper", False)
    L = _transposed(ans) if upper else ans
    gL = _transposed(g) if upper else g
    n = L.shape[-1]
    P = lnp.matmul(_transposed(L), gL)
    phi = lnp.tril(P) * (1.0 - 0.5 * lnp.eye(n, dtype=P.dtype))
    Li = lazy_linalg.inv(L)
    S = lnp.matmul(lnp.matmul(_transposed(Li), phi), Li)
    G = 0.5 * (S + _transposed(S))          # gradient w.r.t. the symmetric matrix
    return (_one_triangle(G, not upper),)


def _eigh_G(wg, vg, w, v):
    n = w.shape[-1]
    inner = None
    if wg is not None:
        inner = lnp.expand_dims(wg, -1) * lnp.eye(n, dtype=w.dtype)
    if vg is not None:
        diff = lnp.expand_dims(w, -2) - lnp.expand_dims(w, -1)      # w_j - w_i
        off = 1.0 - lnp.eye(n, dtype=w.dtype)
        F = off / (diff + lnp.eye(n, dtype=w.dtype))
        t = F * lnp.matmul(_transposed(v), vg)
        inner = t if inner is None else inner + t
    return lnp.matmul(lnp.matmul(v, inner), _transposed(v))


def _eigh_raw_cot(gw, gv, w, v, lower):
    """Cotangent of the raw input of ``eigh`` (one triangle read; a complex Hermitian's
    diagonal read as real) from its outputs' cotangents: with
    ``N = V [diag(gw) + (F o V^T gv)^T] V^H`` (``dV = V (F o V^H dH V)``: eigenvectors in
    the gauge with ``v_i^H dv_i = 0``), the triangle of ``N^T + conj(N)``, halved on the
    diagonal."""
    n = w.shape[-1]
    eye = lnp.eye(n, dtype=w.dtype)
    inner = 0.0 * eye
    if gw is not None:
        inner = lnp.expand_dims(gw, -1) * eye
    if gv is not None:
        diff = lnp.expand_dims(w, -2) - lnp.expand_dims(w, -1)      # w_j - w_i
        F = (1.0 - eye) / (diff + eye)
        inner = inner + _transposed(F * lnp.matmul(_transposed(v), gv))
    N = lnp.matmul(lnp.matmul(v, inner), _adjoint(v) if _is_complex(v) else _transposed(v))
    S = _transposed(N) + (lnp.conjugate(N) if _is_complex(N) else N)
    half = 1.0 - 0.5 * eye
    return (lnp.tril(S) if lower else lnp.triu(S)) * half


def _eigh_parts(node, a):
    wdt = np.dtype(node.dtype)
    vdt = np.result_type(wdt, a.dtype) if a.dtype.kind == "c" else wdt
    return _tuple_parts(node, [(a.shape[:-1], wdt), (a.shape, vdt)])


def _eigh_rule_impl(g, node, A, K, any_gauge):
    uplo = _arg(A, K, 1, "UPLO", "L")
    a = A[0]
    if g[0] is None and g[1] is None:
        return (None,)
    if g[1] is None and _is_complex(a) and not any_gauge:
        # eigenvalues only: through an eigh whose eigenvector phases may be any (so that
        # this rule can be differentiated again)
        w, v = _eigh_inside_rule(a, uplo)
    else:
        w, v = _eigh_parts(node, a)
    gv = g[1]
    if gv is not None and _is_complex(v) and not any_gauge:
        # each eigenvector's phase is arbitrary: a gradient exists only for functions that
        # do not depend on it (abs(v), v v^H...), checked when the gradient is computed
        gv = _phase_checked(gv, _phase_derivative(v, gv), "linalg.eigh")
    return (_eigh_raw_cot(g[0], gv, w, v, uplo.upper() == "L"),)


@call_rule("linalg.eigh")
def _eigh_rule(g, ans, A, K, node):
    return _eigh_rule_impl(g, node, A, K, False)


@call_rule("ad.eigh_any_gauge")
def _eigh_any_gauge_rule(g, ans, A, K, node):
    """eigh inside gradient rules whose result does not depend on the eigenvectors' phases."""
    return _eigh_rule_impl(g, node, A, K, True)


def _eigh_inside_rule(a, uplo):
    a = lnp.asarray(a)
    r = np.linalg.eigh(np.eye(1, dtype=a.dtype))
    return lazy_call("ad.eigh_any_gauge", np.linalg.eigh, (a,), {"UPLO": uplo},
                     meta=lambda n, t: [(a.shape[:-1], r[0].dtype), (a.shape, r[1].dtype)],
                     nout=2)


@call_rule("linalg.eigvalsh")
def _eigvalsh_rule(g, ans, A, K, node):
    uplo = _arg(A, K, 1, "UPLO", "L")
    w, v = _eigh_inside_rule(A[0], uplo)
    return (_eigh_raw_cot(g, None, w, v, uplo.upper() == "L"),)


# --- issue 15: more rules (complex-aware: autograd's convention, see _abs_rule) -------------

def _is_complex(x):
    return getattr(x, "dtype", np.dtype(float)).kind == "c"


def _adjoint(x):
    """The conjugate transpose of the last two axes (``x.mH``)."""
    return lnp.conjugate(_transposed(x))


def _sgn(x):
    """``d|x|/dx`` in autograd's convention: ``sign(x)``, or ``conj(x)/|x|`` (0 at 0)."""
    if _is_complex(x):
        ax = lnp.abs(x)
        return lnp.conjugate(x) / lnp.where(ax == 0, 1.0, ax)
    return lnp.sign(x)


@call_rule("angle")
def _angle_rule(g, ans, A, K, node):
    z = A[0]
    if not _is_complex(z):
        return (None,)
    deg = _arg(A, K, 1, "deg", False)
    if deg:
        g = g * (180.0 / math.pi)
    a2 = lnp.real(z * lnp.conjugate(z))
    return (g * lnp.conjugate(z * 1j) / lnp.where(a2 == 0, 1.0, a2),)


@call_rule("sinc")
def _sinc_rule(g, ans, A, K, node):
    x = A[0]
    px = math.pi * x
    safe = lnp.where(lnp.abs(px) < 1e-3, 1.0, px)
    d = (lnp.cos(px) * math.pi - ans * math.pi) / safe    # (cos(pi x) - sinc x) / x
    small = lnp.abs(px) < 1e-3                  # Taylor: sinc'(x) = -pi^2 x / 3 + O(x^3)
    return (g * lnp.where(small, x * (-math.pi ** 2 / 3.0), d),)


@call_rule("inner")
def _inner_rule_0d(g, ans, A, K, node):
    a, b = A[0], A[1]
    if a.ndim == 0 or b.ndim == 0:         # a scalar operand: a product
        ga = lnp.sum(g * b) if a.ndim == 0 else g * b
        gb = lnp.sum(g * a) if b.ndim == 0 else g * a
        return (ga if _needs(a) else None, gb if _needs(b) else None)
    return _inner_rule(g, ans, A, K, node)


@call_rule("kron")
def _kron_rule(g, ans, A, K, node):
    a, b = A[0], A[1]
    nd = max(a.ndim, b.ndim)
    sa = (1,) * (nd - a.ndim) + a.shape
    sb = (1,) * (nd - b.ndim) + b.shape
    inter = []
    for p, q in zip(sa, sb):
        inter += [p, q]
    g2 = lnp.reshape(g, inter)
    la = _LETTERS[:nd]
    lb = _LETTERS[nd:2 * nd]
    gl = "".join(x + y for x, y in zip(la, lb))
    out = []
    if _needs(a):
        out.append(lnp.reshape(lnp.einsum(f"{gl},{lb}->{la}", g2, lnp.reshape(b, sb)), a.shape))
    else:
        out.append(None)
    if _needs(b):
        out.append(lnp.reshape(lnp.einsum(f"{gl},{la}->{lb}", g2, lnp.reshape(a, sa)), b.shape))
    else:
        out.append(None)
    return tuple(out)


@call_rule("cross")
def _cross_rule(g, ans, A, K, node):
    a, b = A[0], A[1]
    axis = _arg(A, K, 5, "axis", None)
    axa, axb, axc = (axis, axis, axis) if axis is not None else \
        (_arg(A, K, 2, "axisa", -1), _arg(A, K, 3, "axisb", -1), _arg(A, K, 4, "axisc", -1))
    am = lnp.moveaxis(a, axa, -1)
    bm = lnp.moveaxis(b, axb, -1)
    if am.shape[-1] == 3 and bm.shape[-1] == 3:
        gm = lnp.moveaxis(g, axc, -1)
        ga = lnp.cross(bm, gm)            # d<g, a x b>/da = b x g
        gb = lnp.cross(gm, am)
    else:
        if am.shape[-1] == 3 or bm.shape[-1] == 3:     # a 2-vector is read as (x, y, 0)
            gm = lnp.moveaxis(g, axc, -1)
            a3 = am if am.shape[-1] == 3 else lnp.concatenate(
                [am, lnp.zeros(am.shape[:-1] + (1,), am.dtype)], axis=-1)
            b3 = bm if bm.shape[-1] == 3 else lnp.concatenate(
                [bm, lnp.zeros(bm.shape[:-1] + (1,), bm.dtype)], axis=-1)
            ga = lnp.cross(b3, gm)[..., :am.shape[-1]]
            gb = lnp.cross(gm, a3)[..., :bm.shape[-1]]
        else:                                   # 2-vectors: a0 b1 - a1 b0
            ge = lnp.expand_dims(g, -1)
            ga = ge * lnp.stack([bm[..., 1], -bm[..., 0]], axis=-1)
            gb = ge * lnp.stack([-am[..., 1], am[..., 0]], axis=-1)
    ga = _unbroadcast_to(ga, am.shape)
    gb = _unbroadcast_to(gb, bm.shape)
    return (lnp.moveaxis(ga, -1, axa) if _needs(a) else None,
            lnp.moveaxis(gb, -1, axb) if _needs(b) else None)


def _unbroadcast_to(c, shape):
    shape = tuple(shape)
    if c.ndim > len(shape):
        c = lnp.sum(c, axis=tuple(range(c.ndim - len(shape))))
    axes = tuple(i for i, s in enumerate(shape) if s == 1 and c.shape[i] != 1)
    if axes:
        c = lnp.sum(c, axis=axes, keepdims=True)
    return c


@call_rule("diagflat")
def _diagflat_rule(g, ans, A, K, node):
    v = A[0]
    k = _arg(A, K, 1, "k", 0)
    return (lnp.reshape(lnp.diagonal(g, k), v.shape),)


@call_rule("partition")
def _partition_rule(g, ans, A, K, node):
    a = A[0]
    kth = _arg(A, K, 1, "kth")
    axis = _arg(A, K, 2, "axis", -1)
    if axis is None:
        perm = lnp.argpartition(lnp.ravel(a), kth)
        c = region_add(g, (perm._node(),), None, (_Slot(0),), (a.size,), a.dtype)
        return (lnp.reshape(c, a.shape),)
    perm = lnp.argpartition(a, kth, axis=axis)
    return (_take_along_axis_cot(g, perm, a, axis),)


def _take_along_axis_cot(g, idx, a, axis):
    n = graph.record(TAL_ADD, (lnp.asarray(g)._node(), idx._node()),
                     {"shape": a.shape, "dtype": a.dtype, "axis": axis}, a.shape, a.dtype)
    return ndarray._from_node(n)


@call_rule("select")
def _select_rule(g, ans, A, K, node):
    condlist = A[0]
    choicelist = A[1]
    taken = None
    cots = []
    for c in condlist:
        c = lnp.asarray(c)
        here = c if taken is None else lnp.logical_and(c, lnp.logical_not(taken))
        cots.append(here)
        taken = c if taken is None else lnp.logical_or(taken, c)
    res = [lnp.where(m, g, 0.0) if _needs(ch) else None for m, ch in zip(cots, choicelist)]
    default = _arg(A, K, 2, "default", 0)
    gd = lnp.where(taken, 0.0, g) if _needs(default) else None
    return (None, res, gd)


@call_rule("diff")
def _diff_rule_ext(g, ans, A, K, node):
    """diff (also with constant ``prepend``/``append``): the transpose of the differences,
    restricted to ``a``'s part."""
    a = A[0]
    n = _arg(A, K, 1, "n", 1)
    axis = _arg(A, K, 2, "axis", -1)
    pre = _arg(A, K, 3, "prepend", np._NoValue)
    nd = g.ndim
    ax = axis % nd
    c = g
    for _ in range(n):
        pw = [(0, 0)] * nd
        pw[ax] = (1, 1)
        c = -lnp.diff(lnp.pad(c, pw), axis=ax)
    if c.shape == a.shape:
        return (c,)
    npre = 0 if pre is np._NoValue else (np.shape(pre)[ax] if np.ndim(pre) else 1)
    sl = [slice(None)] * nd
    sl[ax] = slice(npre, npre + a.shape[ax])
    return (c[tuple(sl)],)


@call_rule("ediff1d")
def _ediff1d_rule(g, ans, A, K, node):
    a = A[0]
    to_end = _arg(A, K, 1, "to_end", None)
    to_begin = _arg(A, K, 2, "to_begin", None)
    nb = 0 if to_begin is None else int(np.size(to_begin))
    ne = 0 if to_end is None else int(np.size(to_end))
    core = g[nb:g.shape[0] - ne]
    c = -lnp.diff(lnp.pad(core, [(1, 1)]))
    return (lnp.reshape(c, a.shape),)


@call_rule("trapezoid")
def _trapezoid_rule(g, ans, A, K, node):
    y = A[0]
    x = _arg(A, K, 1, "x", None)
    dx = _arg(A, K, 2, "dx", 1.0)
    axis = _arg(A, K, 3, "axis", -1)
    ym = lnp.moveaxis(y, axis, -1)
    gx = None
    if x is not None and _needs(x):
        if x.ndim != 1:
            raise NotImplementedError("lazynp.autograd: no gradient of numpy.trapezoid "
                                      "w.r.t. an n-d x")
        avg = (ym[..., 1:] + ym[..., :-1]) * 0.5          # d/dx_i: avg[i-1] - avg[i]
        pad0 = [(0, 0)] * (avg.ndim - 1)
        dx_ = lnp.pad(avg, pad0 + [(1, 0)]) - lnp.pad(avg, pad0 + [(0, 1)])
        gx = lnp.sum(lnp.expand_dims(g, -1) * dx_, axis=tuple(range(dx_.ndim - 1)))
    n = ym.shape[-1]
    if x is None:
        d = lnp.full((n - 1,), 1.0) * dx
    else:
        d = lnp.diff(lnp.asarray(x))
        if d.ndim > 1:
            d = lnp.moveaxis(d, axis, -1)
    w = lnp.pad(d, [(0, 0)] * (d.ndim - 1) + [(0, 1)]) * 0.5 + \
        lnp.pad(d, [(0, 0)] * (d.ndim - 1) + [(1, 0)]) * 0.5
    ge = lnp.expand_dims(g, -1) * w
    gy = lnp.moveaxis(_unbroadcast_to(ge, ym.shape), -1, axis) if _needs(y) else None
    return (gy, gx) if len(A) > 1 else (gy,)


@call_rule("polyval")
def _polyval_rule(g, ans, A, K, node):
    p, x = A[0], A[1]
    n = p.shape[0]
    gp = gx = None
    if _needs(p):
        pw = lnp.stack([lnp.ones_like(x) if k == 0 else x ** k for k in range(n - 1, -1, -1)])
        gp = lnp.sum(lnp.reshape(g, (1,) + g.shape) * pw,
                     axis=tuple(range(1, pw.ndim)))
    if _needs(x):
        dp = lnp.polyval(p[:-1] * lnp.arange(n - 1, 0, -1), x) if n > 1 else 0.0 * x
        gx = g * dp
    return (gp, gx)


@call_rule("vander")
def _vander_rule(g, ans, A, K, node):
    x = A[0]
    N = _arg(A, K, 1, "N", None)
    incr = _arg(A, K, 2, "increasing", False)
    n = x.shape[0] if N is None else N
    pw = np.arange(n) if incr else np.arange(n - 1, -1, -1)
    d = lnp.where(pw > 0, pw * lnp.expand_dims(x, -1) ** lnp.asarray(np.maximum(pw - 1, 0)),
                  0.0)
    return (lnp.sum(g * d, axis=-1),)


@call_rule("convolve", "correlate")
def _convolve_rule(g, ans, A, K, node):
    """Through the full convolution: ``ga[i] = sum_j gf[i + j] w[j]`` (a correlation)."""
    a, v = A[0], A[1]
    corr = node.op.name.endswith("correlate")
    mode = _arg(A, K, 2, "mode", "valid" if corr else "full")
    cplx = _is_complex(a) or _is_complex(v)
    if cplx and corr:
        raise NotImplementedError("lazynp.autograd: no gradient of numpy.correlate on "
                                  "complex input")
    w = lnp.flip(v) if corr else v          # correlate(a, v) == convolve(a, v[::-1])
    n, m = a.shape[0], w.shape[0]
    full = n + m - 1
    L = ans.shape[0]
    start = {"full": 0, "same": (min(n, m) - 1) // 2, "valid": min(n, m) - 1}[mode]
    gf = lnp.pad(g, [(start, full - start - L)])
    # (complex convolve is holomorphic: no conjugate in its rule, so the one numpy.correlate
    # applies to its second argument is undone)
    ga = lnp.correlate(gf, lnp.conjugate(w) if cplx else w, "valid") if _needs(a) else None
    gw = lnp.correlate(gf, lnp.conjugate(a) if cplx else a, "valid") if _needs(v) else None
    if gw is not None and corr:
        gw = lnp.flip(gw)
    return (ga, gw)


# --- linalg: norm of every ord, svd, pinv, eig ------------------------------------------------

def _tuple_parts(node, shapes_dtypes):
    return [ndarray._from_node(graph.record(TUPLE_GET, (node, i), None, tuple(sh), np.dtype(dt)))
            for i, (sh, dt) in enumerate(shapes_dtypes)]


def _svals_cot(gs, u, vh):
    """d(sum(gs * singular values)) / dA = conj(U diag(gs) Vh) (autograd's convention)."""
    r = lnp.matmul(u * lnp.expand_dims(gs, -2), vh)
    return lnp.conjugate(r) if _is_complex(r) else r


def _even_split(mask, axis):
    m = mask.astype(float)
    return m / lnp.sum(m, axis=axis, keepdims=True)


@call_rule("linalg.norm")
def _norm_rule(g, ans, A, K, node):
    x = A[0]
    ordv = _arg(A, K, 1, "ord", None)
    axis = _arg(A, K, 2, "axis", None)
    kd = _arg(A, K, 3, "keepdims", False)
    if axis is None:
        axes = tuple(range(x.ndim))
        matrix = x.ndim == 2 and ordv is not None
    else:
        axes = _axes(x.shape, axis)
        matrix = len(axes) == 2
    gb = _expand(g, x.shape, axes, kd)
    ab = _expand(ans, x.shape, axes, kd)
    if ordv is None or ordv == "fro" or (not matrix and ordv == 2):
        c = lnp.conjugate(x) if _is_complex(x) else x
        return (gb * c / lnp.where(ab == 0, 1.0, ab),)
    if not matrix:
        ax = lnp.abs(x)
        if ordv == 0:
            return (None,)
        if ordv == 1:
            return (gb * _sgn(x),)
        if ordv in (np.inf, -np.inf):
            return (gb * _even_split(ax == ab, axes) * _sgn(x),)
        p = float(ordv)
        ratio = ax / lnp.where(ab == 0, 1.0, ab)
        return (gb * ratio ** (p - 1.0) * _sgn(x),)
    r, c = axes
    xm = lnp.moveaxis(x, (r, c), (-2, -1))
    gm = lnp.moveaxis(gb, (r, c), (-2, -1))[..., :1, :1]
    am = lnp.moveaxis(ab, (r, c), (-2, -1))[..., :1, :1]
    if ordv == "nuc" or ordv in (2, -2):
        u, sv, vh = _svd_inside_rule(xm)
        if ordv == "nuc":
            w = lnp.ones_like(sv)
        else:       # (the extreme of these singular values: LAPACK drivers differ in ulps)
            ext = (lnp.max if ordv == 2 else lnp.min)(sv, axis=-1, keepdims=True)
            w = _even_split(sv == ext, -1)
        res = _svals_cot(w, u, vh) * gm
    elif ordv in (1, -1):
        colsum = lnp.sum(lnp.abs(xm), axis=-2, keepdims=True)
        res = _sgn(xm) * _even_split(colsum == am, -1) * gm
    elif ordv in (np.inf, -np.inf):
        rowsum = lnp.sum(lnp.abs(xm), axis=-1, keepdims=True)
        res = _sgn(xm) * _even_split(rowsum == am, -2) * gm
    else:
        raise NotImplementedError(f"lazynp.autograd: no gradient for linalg.norm(ord={ordv!r})")
    return (lnp.moveaxis(res, (-2, -1), (r, c)),)


@call_rule("linalg.svd", "ad.svd_any_gauge")
def _svd_rule(g, ans, A, K, node):
    a = A[0]
    full = _arg(A, K, 1, "full_matrices", True)
    compute_uv = _arg(A, K, 2, "compute_uv", True)
    if not compute_uv:
        u, _s, vh = _svd_inside_rule(a)
        return (_svals_cot(g, u, vh),)
    m, n = a.shape[-2:]
    k = min(m, n)
    gu, gs, gvh = g[0], g[1], g[2]
    dt = np.dtype(node.dtype)
    u, s, vh = _tuple_parts(node, [(a.shape[:-2] + (m, m if full else k), dt),
                                   (a.shape[:-2] + (k,), np.dtype(dt.char.lower()) if
                                    dt.kind == "c" else dt),
                                   (a.shape[:-2] + (n if full else k, n), dt)])
    if gu is None and gvh is None:
        if _is_complex(a):          # (through an SVD whose rule accepts any phases)
            u, _s, vh = _svd_inside_rule(a)
        return (_svals_cot(gs, u[..., :k], vh[..., :k, :]),)
    if full and m != n:
        raise NotImplementedError("lazynp.autograd: no gradient of linalg.svd("
                                  "full_matrices=True) of a non-square matrix through U or Vh "
                                  "(their extra columns are not unique; use "
                                  "full_matrices=False)")
    if _is_complex(a):
        if not node.op.name.endswith("ad.svd_any_gauge"):
            # U's column j and Vh's row j share one arbitrary phase: a gradient exists only
            # for functions that do not depend on it (abs(U), U S Vh...), checked when the
            # gradient is computed
            along, scale = 0.0, 0.0
            for vecs, cot, sign in ((u, gu, 1.0), (_transposed(vh), gvh, -1.0)):
                if cot is not None:
                    if sign < 0:
                        cot = _transposed(cot)
                    a_, s_ = _phase_derivative(vecs[..., :k], cot[..., :k])
                    along, scale = along + sign * a_, scale + s_
            if gu is not None:
                gu = _phase_checked(gu, (along, scale), "linalg.svd")
            else:
                gvh = _phase_checked(gvh, (along, scale), "linalg.svd")
        return (_complex_svd_cot(gu, gs, gvh, u, s, vh, m, n),)
    # Townsend (2016): A = U S V^T, reduced
    v = _transposed(vh)
    gv = None if gvh is None else _transposed(gvh)
    eye = lnp.eye(k, dtype=a.dtype)
    s2 = s * s
    F = (1.0 - eye) / (lnp.expand_dims(s2, -2) - lnp.expand_dims(s2, -1) + eye)
    inner = 0.0
    if gs is not None:
        inner = lnp.expand_dims(gs, -1) * eye
    Sd = lnp.expand_dims(s, -1) * eye
    sinv = 1.0 / s
    res = 0.0
    if gu is not None:
        J = F * (lnp.matmul(_transposed(u), gu) - lnp.matmul(_transposed(gu), u))
        inner = inner + lnp.matmul(J, Sd)
        if m > k:
            proj = lnp.eye(m, dtype=a.dtype) - lnp.matmul(u, _transposed(u))
            res = res + lnp.matmul(lnp.matmul(proj, gu) * lnp.expand_dims(sinv, -2), vh)
    if gv is not None:
        Kv = F * (lnp.matmul(_transposed(v), gv) - lnp.matmul(_transposed(gv), v))
        inner = inner + lnp.matmul(Sd, Kv)
        if n > k:
            proj = lnp.eye(n, dtype=a.dtype) - lnp.matmul(v, vh)
            res = res + lnp.matmul(u * lnp.expand_dims(sinv, -2), lnp.matmul(_transposed(gv), proj))
    res = res + lnp.matmul(lnp.matmul(u, inner), vh)
    return (res,)


@call_rule("linalg.pinv")
def _pinv_rule(g, ans, A, K, node):
    """d pinv(A) for constant rank (Golub and Pereyra): -P dA P + P P^T dA^T (I - A P)
    + (I - P A) dA^T P^T P, transposed."""
    a = A[0]
    if _is_complex(a):
        raise NotImplementedError("lazynp.autograd: no gradient of linalg.pinv of a complex "
                                  "matrix")
    P = ans
    m, n = a.shape[-2:]
    Q = lnp.eye(m, dtype=a.dtype) - lnp.matmul(a, P)
    R = lnp.eye(n, dtype=a.dtype) - lnp.matmul(P, a)
    gT = _transposed(g)
    return (-lnp.matmul(lnp.matmul(_transposed(P), g), _transposed(P))
            + lnp.matmul(lnp.matmul(Q, gT), lnp.matmul(P, _transposed(P)))
            + lnp.matmul(lnp.matmul(_transposed(P), P), lnp.matmul(gT, R)),)


def _phase_derivative(v, gv):
    """``(along, scale)``: the derivative of the differentiated function along each
    column's phase (``v_j -> exp(i t) v_j``), ``-Im(sum_i v_ij gv_ij)`` with cotangents in
    the convention ``df/dx - i df/dy`` (zero for a function that does not depend on the
    phases), and its size to compare it with (``sum_i |v_ij gv_ij|``)."""
    p = v * gv
    return -lnp.imag(lnp.sum(p, axis=-2)), lnp.sum(lnp.abs(p), axis=-2)


def _phase_check_impl(c, along, scale, *, what):
    """``c``, unless the function depends on the arbitrary phases (``along`` not zero to
    rounding relative to ``scale``): :class:`PhaseDependentGradient` then."""
    if np.any(np.abs(along) > 1e-8 * np.max(scale, initial=0.0) + 1e-300):
        raise PhaseDependentGradient(
            f"lazynp.autograd: the differentiated function depends on the phases of the "
            f"vectors of {what} of a complex matrix, which are arbitrary (LAPACK picks one): "
            f"it has no gradient; functions of abs(v), of v v^H or of the values have one")
    return c


def _phase_checked(c, along_scale, what):
    """``c`` (a cotangent of complex eigen/singular vectors) through a lazy check that the
    function does not depend on their phases (it raises when the gradient is computed)."""
    c = lnp.asarray(c)
    along, scale = along_scale
    return lazy_call("ad.phase_checked", _phase_check_impl, (c, along, scale),
                     {"what": what}, meta=lambda n, t: (c.shape, c.dtype))


@call_rule("ad.phase_checked")
def _phase_checked_rule(g, ans, A, K, node):
    """(The check is the identity on its first argument.)"""
    return (g, None, None)


def _complex_eig_cot(gw, gv, w, v):
    """eig with complex eigenvectors of unit length (LAPACK's; their phases arbitrary), as
    autograd's: ``A_bar = V^-T (diag(gw) + F o (P - V^T conj(V) diag(Re P))) V^T`` with
    ``P = V^T gv``, ``F_ij = 1 / (w_j - w_i)`` off the diagonal (the second term keeps the
    length); a function that depends on the phases raises when the gradient is
    computed."""
    n = v.shape[-1]
    eye = lnp.eye(n, dtype=v.dtype)
    gv = _phase_checked(gv, _phase_derivative(v, gv), "linalg.eig")
    vt = _transposed(v)
    P = lnp.matmul(vt, gv)
    F = (1.0 - eye) / (lnp.expand_dims(w, -2) - lnp.expand_dims(w, -1) + eye)
    inner = F * (P - lnp.matmul(lnp.matmul(vt, lnp.conjugate(v)), lnp.real(P) * eye))
    if gw is not None:
        inner = inner + lnp.expand_dims(gw, -1) * eye
    return lnp.matmul(lnp.matmul(lazy_linalg.inv(vt), inner), vt)


def _eigvals_cot(gw, v):
    """w = eigvals(A) (holomorphic in A): dA = V^-T diag(gw) V^T."""
    return lnp.matmul(_transposed(lazy_linalg.inv(v)) * lnp.expand_dims(gw, -2), _transposed(v))


@call_rule("linalg.eigvals")
def _eigvals_rule(g, ans, A, K, node):
    """(The eigenvectors inside: V^-T diag(g) V^T does not depend on their scaling.)"""
    a = lnp.asarray(A[0])
    wdt = np.dtype(node.dtype)
    vdt = wdt if wdt.kind == "c" else a.dtype
    _w, v = lazy_call("ad.eig_any_scale", np.linalg.eig, (a,), {},
                      meta=lambda n, t: [(a.shape[:-1], wdt), (a.shape, vdt)], nout=2)
    return (_eigvals_cot(g, v),)


@call_rule("linalg.eig", "ad.eig_any_scale")
def _eig_rule(g, ans, A, K, node):
    a = A[0]
    gw, gv = g[0], g[1]
    w, v = _tuple_parts(node, [(a.shape[:-1], node.dtype), (a.shape, node.dtype)])
    if gv is None:
        return (_eigvals_cot(gw, v),)
    any_scale = node.op.name.endswith("ad.eig_any_scale")
    if _is_complex(v) and not any_scale:
        return (_complex_eig_cot(gw, gv, w, v),)
    # real eigenvectors of unit length: dV = V (F o E) - V diag(V^T V (F o E)),
    # E = V^-1 dA V; transposed
    n = a.shape[-1]
    eye = lnp.eye(n, dtype=v.dtype)
    vinv = lazy_linalg.inv(v)
    F = (1.0 - eye) / (lnp.expand_dims(w, -2) - lnp.expand_dims(w, -1) + eye)
    gv2 = gv if any_scale else gv - v * lnp.sum(v * gv, axis=-2, keepdims=True)
    inner = F * lnp.matmul(_transposed(v), gv2)
    if gw is not None:
        inner = inner + lnp.expand_dims(gw, -1) * eye
    return (lnp.matmul(lnp.matmul(_transposed(vinv), inner), _transposed(v)),)



# --- fft (autograd's convention: a holomorphic linear map's VJP is its transpose; the DFT
# matrix is symmetric, so fft's VJP is fft and ifft's is ifft) -------------------------------

def _fit_len(c, ax, length):
    """``c`` cropped or zero-padded along ``ax`` to ``length``."""
    n = c.shape[ax]
    if n == length:
        return c
    if n > length:
        sl = [slice(None)] * c.ndim
        sl[ax] = slice(0, length)
        return c[tuple(sl)]
    pw = [(0, 0)] * c.ndim
    pw[ax] = (0, length - n)
    return lnp.pad(c, pw)


def _half_weights(n, m, ax, nd, dtype):
    """irfft's weights of the half spectrum: 1 for DC (and Nyquist when n is even), else 2."""
    w = np.full(m, 2.0)
    w[0] = 1.0
    if n % 2 == 0 and n // 2 < m:
        w[n // 2] = 1.0
    shp = [1] * nd
    shp[ax] = m
    return lnp.asarray(w.reshape(shp).astype(np.dtype(dtype).char.lower() if
                                               np.dtype(dtype).kind == "c" else dtype))


def _fft_axes_args(name, A, K, x):
    if name in ("fft", "ifft", "rfft", "irfft"):
        n = _arg(A, K, 1, "n", None)
        ax = _arg(A, K, 2, "axis", -1) % x.ndim
        m = x.shape[ax]
        length = (2 * (m - 1) if name == "irfft" else m) if n is None else n
        return [length], [ax], _arg(A, K, 3, "norm", None)
    default = (-2, -1) if name.endswith("2") else None
    s = _arg(A, K, 1, "s", None)
    axes = _arg(A, K, 2, "axes", default)
    ss, axs = lazy_fft._cook_nd(x.shape, s, axes, name.startswith("irfft"))
    return ss, [a % x.ndim for a in axs], _arg(A, K, 3, "norm", None)


@call_rule(*("fft." + name for name in ("fft", "ifft", "rfft", "irfft", "fftn", "ifftn", "rfftn",
                                        "irfftn", "fft2", "ifft2", "rfft2", "irfft2")))
def _fft_rule(g, ans, A, K, node):
    name = node.op.name[len("fft."):]
    x = A[0]
    s, axes, norm = _fft_axes_args(name, A, K, x)
    base = name.rstrip("n2")
    inverse = base.startswith("i")
    if base in ("fft", "ifft"):
        c = (lazy_fft.ifftn if inverse else lazy_fft.fftn)(g, axes=axes, norm=norm)
    elif base == "rfft":
        gp = _fit_len(g, axes[-1], s[-1])          # R^T: the dropped half is zero
        c = lnp.real(lazy_fft.fftn(gp, axes=axes, norm=norm)) if not _is_complex(x) else \
            lazy_fft.fftn(gp, axes=axes, norm=norm).real + 0j
    else:                                          # irfft: weights * ifft(g), half spectrum
        c = lazy_fft.ifftn(g, axes=axes, norm=norm)
        m = s[-1] // 2 + 1
        c = _fit_len(c, axes[-1], m) * _half_weights(s[-1], m, axes[-1], c.ndim, c.dtype)
    for ax in axes:
        c = _fit_len(c, ax, x.shape[ax])
    return (c,)


# --- nan reductions, median, cov, unwrap ------------------------------------------------------

@op_rule("nanprod")
def _nanprod_vjp(g, node, args, params, need):
    x, axis, kd, w = _red_info(args, params)
    nan = lnp.isnan(x)
    gb = _expand(g * as_array(node), x.shape, axis, kd) / lnp.where(nan, 1.0, x)
    gb = lnp.where(nan, 0.0, gb)
    if w is not None:
        gb = lnp.where(w, gb, 0.0)
    return [gb] + [None] * (len(args) - 1)


@op_rule("nanvar", "nanstd")
def _nanvar_vjp(g, node, args, params, need):
    x, axis, kd, w = _red_info(args, params)
    if w is not None:
        raise NotImplementedError(f"lazynp.autograd: {node.op.name}(where=) gradient")
    axes = _axes(x.shape, axis)
    ok = lnp.logical_not(lnp.isnan(x))
    n = lnp.sum(ok, axis=axes, keepdims=True).astype(g.real.dtype)
    m = lnp.nanmean(x, axis=axes, keepdims=True)
    d = lnp.where(ok, x - m, 0.0)
    if d.dtype.kind == "c":
        d = lnp.conjugate(d)        # (the convention of var's rule)
    c = _expand(g, x.shape, axis, kd) * 2.0 * d / (n - _ddof(params))
    if node.op.name == "nanstd":
        # times 0.5 / std; 0 where one value is read (std's rule)
        sd = _expand(as_array(node), x.shape, axis, kd)
        c = lnp.where(n <= 1, 0.0, c * 0.5 / lnp.where(n <= 1, 1.0, sd))
    return [c] + [None] * (len(args) - 1)


@op_rule("nancumprod")
def _nancumprod_vjp(g, node, args, params, need):
    x = as_array(args[0])
    axis = (params or {}).get("axis")
    nan = lnp.isnan(x)
    xf = lnp.where(nan, 1.0, x)
    ans = as_array(node)
    c = lnp.reshape(_rev_cumsum(g * ans, 0), x.shape) if axis is None else \
        _rev_cumsum(g * ans, axis)
    return [lnp.where(nan, 0.0, c / xf)]


@op_rule("median")
def _median_vjp(g, node, args, params, need):
    """The gradient goes to the middle element (split between the two middle ones for an
    even count), located by a stable sort."""
    x, axis, kd, _w = _red_info(args, params)
    axes = _axes(x.shape, axis)
    if len(axes) != 1 and not (axis is None):
        raise NotImplementedError("lazynp.autograd: median over several axes")
    xs = lnp.reshape(x, (-1,)) if axis is None else x
    ax = 0 if axis is None else axes[0]
    n = xs.shape[ax]
    wts = np.zeros(n)
    wts[(n - 1) // 2] += 0.5
    wts[n // 2] += 0.5
    shp = [1] * xs.ndim
    shp[ax] = n
    gx = _expand(g, x.shape, axis, kd)
    gx = lnp.reshape(gx, (-1,)) if axis is None else gx
    perm = lnp.argsort(xs, axis=ax, kind="stable")
    sorted_cot = gx * lnp.asarray(wts.reshape(shp))
    c = _take_along_axis_cot(sorted_cot, perm, xs, ax)
    return [lnp.reshape(c, x.shape)] + [None] * (len(args) - 1)


@call_rule("cov")
def _cov_rule(g, ans, A, K, node):
    m = A[0]
    extra = [k for k in ("y", "fweights", "aweights") if K.get(k) is not None] + \
        (["y"] if len(A) > 1 and A[1] is not None else [])
    if extra or K.get("ddof") is not None:
        raise NotImplementedError("lazynp.autograd: no gradient of numpy.cov with y, weights "
                                  "or ddof")
    rowvar = _arg(A, K, 2, "rowvar", True)
    bias = _arg(A, K, 3, "bias", False)
    X = lnp.reshape(m, (1, -1)) if m.ndim == 1 else (m if rowvar else _transposed(m))
    N = X.shape[1]
    Xc = X - lnp.mean(X, axis=1, keepdims=True)
    G = lnp.reshape(g, (X.shape[0], X.shape[0]))
    if _is_complex(Xc):     # C = Xc Xc^H / (N - 1): (G + G^H) conj(Xc) / (N - 1)
        gXc = lnp.matmul(G + _adjoint(G), lnp.conjugate(Xc)) / (N - (0 if bias else 1))
    else:
        gXc = lnp.matmul(G + _transposed(G), Xc) / (N - (0 if bias else 1))
    gX = gXc - lnp.mean(gXc, axis=1, keepdims=True)
    gm = lnp.reshape(gX, m.shape) if m.ndim == 1 else (gX if rowvar else _transposed(gX))
    return (gm,)


@call_rule("unwrap")
def _unwrap_rule(g, ans, A, K, node):
    """unwrap adds multiples of ``period`` that are constant almost everywhere: slope 1."""
    return (g,)


@call_rule("quantile", "percentile")
def _quantile_rule(g, ans, A, K, node):
    """Every NumPy method picks or interpolates between two neighbouring order statistics
    at a position that depends only on ``n`` and ``q``: the quantile of ``0, 1, ..., n-1``
    by the same method is that position ``h``, and the weights ``1 - t``, ``t``
    (``t = h - floor(h)``) carry the gradient back through a stable sort (``linear``:
    ``h = (n - 1) q``; ``lower``/``higher``/``nearest``: one order statistic, gradient 1;
    ``midpoint``: one half each; the ``*_cdf`` and unbiased methods their own ``h``)."""
    a = A[0]
    q = _arg(A, K, 1, "q")
    axis = _arg(A, K, 2, "axis", None)
    method = _arg(A, K, 5, "method", "linear")
    name = node.op.name.split(":")[-1]
    if K.get("weights") is not None or (axis is not None and np.ndim(axis) != 0 and
                                        len(axis) != 1):
        raise NotImplementedError(f"lazynp.autograd: no gradient of numpy.{name} with "
                                  f"weights or over several axes")
    if np.ndim(axis) == 1:
        axis = axis[0]
    qv = np.asarray(q, dtype=float) / (100.0 if name.endswith("percentile") else 1.0)
    xs = lnp.reshape(a, (-1,)) if axis is None else lnp.moveaxis(a, axis, -1)
    n = xs.shape[-1]
    h = np.quantile(np.arange(n, dtype=float), qv, method=method)
    lo = np.clip(np.floor(h), 0, n - 1).astype(int)
    hi = np.minimum(lo + 1, n - 1)
    t = h - lo
    W = np.zeros(qv.shape + (n,))
    idx = np.indices(qv.shape) if qv.ndim else ()
    W[tuple(idx) + (lo,)] += 1.0 - t
    W[tuple(idx) + (hi,)] += t
    # g: q.shape + reduced shape (keepdims: size-1 axes kept)
    rshape = xs.shape[:-1]
    gq = lnp.reshape(g, qv.shape + rshape)
    Wb = lnp.asarray(W.reshape(qv.shape + (1,) * len(rshape) + (n,)))
    sorted_cot = lnp.sum(lnp.expand_dims(gq, -1) * Wb, axis=tuple(range(qv.ndim))) \
        if qv.ndim else lnp.expand_dims(gq, -1) * Wb
    perm = lnp.argsort(xs, axis=-1, kind="stable")
    c = _take_along_axis_cot(sorted_cot, perm, xs, -1)
    c = lnp.reshape(c, a.shape) if axis is None else lnp.moveaxis(c, -1, axis)
    return (c, NO_GRADIENT)


@call_rule("corrcoef")
def _corrcoef_rule(g, ans, A, K, node):
    """R = C / (s s^T), s = sqrt(diag C): dR/dC_ij = 1/(s_i s_j) off the diagonal terms,
    and -R/2 (1/C_ii + 1/C_jj) through the diagonal; then cov's rule."""
    x = A[0]
    if (len(A) > 1 and A[1] is not None) or K.get("y") is not None:
        raise NotImplementedError("lazynp.autograd: no gradient of numpy.corrcoef with y")
    if _is_complex(x):
        raise NotImplementedError("lazynp.autograd: no gradient of a complex numpy.corrcoef")
    rowvar = _arg(A, K, 2, "rowvar", True)
    if x.ndim < 2 or (x.shape[0] if rowvar else x.shape[1]) == 1:
        return (lnp.zeros_like(x),)          # a single variable: R is the constant 1
    C = lnp.cov(x, rowvar=rowvar)
    d = lnp.diagonal(C)
    s = lnp.sqrt(d)
    R = C / lnp.outer(s, s)
    G = lnp.reshape(g, R.shape)
    GR = G * R
    v = -(lnp.sum(GR, axis=1) + lnp.sum(GR, axis=0)) / (2.0 * d)
    gC = G / lnp.outer(s, s) + lnp.eye(d.shape[0], dtype=R.dtype) * v
    return _cov_rule(gC, C, (x,), {"rowvar": rowvar}, node)


def _order_stat_cot(g, a, axis, kd, qv, nan, method="linear"):
    """Cotangent of order statistics at fractions ``qv`` (a NumPy array; the result has
    ``qv.shape`` in front) along ``axis`` of ``a``, interpolated by NumPy's ``method``; with
    ``nan``, NaNs are skipped (they sort last, and the count is per row).  The position
    ``h`` of a method other than ``linear`` is looked up, per row, in a table of the
    quantile of ``0, ..., m-1`` for every count ``m`` (as in :func:`_quantile_rule`)."""
    xs = lnp.reshape(a, (-1,)) if axis is None else lnp.moveaxis(a, axis, -1)
    n_len = xs.shape[-1]
    rshape = xs.shape[:-1]
    if nan:
        n = lnp.sum(lnp.logical_not(lnp.isnan(xs)), axis=-1, keepdims=True).astype(float)
    else:
        n = lnp.full(rshape + (1,), float(n_len))
    k = lnp.asarray(np.arange(n_len, dtype=float))
    gq = lnp.reshape(g, qv.shape + rshape)
    sorted_cot = None
    for i in np.ndindex(qv.shape):
        if method == "linear":
            h = (n - 1.0) * float(qv[i])
        else:
            table = np.array([np.quantile(np.arange(m, dtype=float), float(qv[i]),
                                          method=method) if m else 0.0
                              for m in range(n_len + 1)])
            h = lnp.take(lnp.asarray(table), n.astype(np.intp))
        lo = lnp.floor(h)
        hi = lnp.minimum(lo + 1.0, lnp.maximum(n - 1.0, 0.0))
        t = h - lo
        w = lnp.where(k == lo, 1.0 - t, 0.0) + lnp.where(k == hi, t, 0.0)
        term = lnp.expand_dims(gq[i], -1) * w
        sorted_cot = term if sorted_cot is None else sorted_cot + term
    perm = lnp.argsort(xs, axis=-1, kind="stable")
    c = _take_along_axis_cot(sorted_cot, perm, xs, -1)
    c = lnp.reshape(c, a.shape) if axis is None else lnp.moveaxis(c, -1, axis)
    return lnp.where(lnp.isnan(a), 0.0, c) if nan else c


@op_rule("nanmedian")
def _nanmedian_vjp(g, node, args, params, need):
    x, axis, kd, _w = _red_info(args, params)
    if axis is not None and len(_axes(x.shape, axis)) != 1:
        raise NotImplementedError("lazynp.autograd: nanmedian over several axes")
    ax = None if axis is None else _axes(x.shape, axis)[0]
    gg = g if not kd else lnp.squeeze(g, axis=ax) if ax is not None else lnp.reshape(g, ())
    return [_order_stat_cot(gg, x, ax, False, np.asarray(0.5), True)] + \
        [None] * (len(args) - 1)


@call_rule("nanquantile", "nanpercentile")
def _nanquantile_rule(g, ans, A, K, node):
    a = A[0]
    q = _arg(A, K, 1, "q")
    axis = _arg(A, K, 2, "axis", None)
    method = _arg(A, K, 5, "method", "linear")
    kd = _arg(A, K, 6, "keepdims", False)
    name = node.op.name.split(":")[-1]
    if K.get("weights") is not None or (axis is not None and np.ndim(axis) != 0 and
                                        len(axis) != 1):
        raise NotImplementedError(f"lazynp.autograd: no gradient of numpy.{name} with "
                                  f"weights or over several axes")
    if np.ndim(axis) == 1:
        axis = axis[0]
    qv = np.asarray(q, dtype=float) / (100.0 if name.endswith("percentile") else 1.0)
    if kd:
        ax = tuple(range(qv.ndim, g.ndim)) if axis is None else (qv.ndim + axis % a.ndim,)
        g = lnp.squeeze(g, axis=ax)
    return (_order_stat_cot(g, a, None if axis is None else axis % a.ndim, False, qv, True,
                            method), NO_GRADIENT)


def _qr_cot(gq, gr, q, r):
    """Reduced QR of a square or tall matrix (``R``'s diagonal real, LAPACK's gauge):
    with ``M = R gR^T - gQ^T Q`` and ``C = tril(M, -1) + tril(M, -1)^H + diag(Re M)``,
    ``gA = (gQ + conj(Q C)) R^-T`` (the real case is JAX's QR JVP transposed; for complex
    matrices the cotangents are ``df/dx - i df/dy``, and the real diagonal of ``C`` keeps
    ``R``'s diagonal real)."""
    M = lnp.matmul(r, _transposed(gr)) - lnp.matmul(_transposed(gq), q)
    low = lnp.tril(M, -1)
    eye = lnp.eye(M.shape[-1], dtype=M.real.dtype)
    if _is_complex(M):
        C = low + _adjoint(low) + lnp.real(M) * eye
        N = gq + lnp.conjugate(lnp.matmul(q, C))
    else:
        C = low + _transposed(low) + M * eye
        N = gq + lnp.matmul(q, C)
    # N R^-T = solve(R, N^T)^T
    return _transposed(lazy_linalg.solve(r, _transposed(N)))


@call_rule("linalg.qr")
def _qr_rule(g, ans, A, K, node):
    """Reduced QR (:func:`_qr_cot`).  A wide ``A = [X Y]`` (``m < n``) is ``X = Q R1``,
    ``R2 = Q^H Y``: ``gY = conj(Q) gR2``, and ``X`` gets the square rule with
    ``gQ + conj(Y gR2^T)``."""
    a = A[0]
    m, n = a.shape[-2:]
    k = min(m, n)
    dt = np.dtype(node.dtype)
    q, r = _tuple_parts(node, [(a.shape[:-2] + (m, k), dt), (a.shape[:-2] + (k, n), dt)])
    gq = g[0] if g[0] is not None else lnp.zeros_like(q)
    gr = g[1] if g[1] is not None else lnp.zeros_like(r)
    if m >= n:
        return (_qr_cot(gq, gr, q, r),)
    y, r1 = a[..., :, m:], r[..., :, :m]
    gr1, gr2 = gr[..., :, :m], gr[..., :, m:]
    conj = lnp.conjugate if _is_complex(a) else (lambda v: v)
    gy = lnp.matmul(conj(q), gr2)
    gx = _qr_cot(gq + conj(lnp.matmul(y, _transposed(gr2))), gr1, q, r1)
    return (lnp.concatenate([gx, gy], axis=-1),)


def _svd_inside_rule(a):
    """A reduced SVD for use inside rules whose result does not depend on the singular
    vectors' phases (its own rule then accepts complex U/Vh cotangents)."""
    a = lnp.asarray(a)
    m, n = a.shape[-2:]
    k = min(m, n)
    tw = np.linalg.svd(np.eye(1, dtype=a.dtype))
    b = a.shape[:-2]
    return lazy_call("ad.svd_any_gauge", np.linalg.svd, (a,), {"full_matrices": False},
                     meta=lambda nd, t: [(b + (m, k), tw[0].dtype), (b + (k,), tw[1].dtype),
                                         (b + (k, n), tw[2].dtype)], nout=3)


def _complex_svd_cot(gu, gs, gvh, u, s, vh, m, n):
    """JAX's complex SVD JVP (its gauge), transposed: with H = conj(cotangent),
    ``H_A = U Z V^H`` (+ the parts outside the span for non-square A), where
    ``Z = diag(gs) + Wu S + (E - E^H) / 2 + S Wv``, ``Wu = F o Ju + (F o Ju)^H``,
    ``Ju = U^H conj(gU)``, ``E = diag(Ju) / s``; the cotangent is ``conj(H_A)``."""
    k = min(m, n)
    eye = lnp.eye(k, dtype=s.dtype)
    s_row = lnp.expand_dims(s, -2)
    F = 1.0 / ((s_row + _transposed(s_row)) * (s_row - _transposed(s_row)) + eye) - eye
    sinv = 1.0 / s
    v = _adjoint(vh)
    Z = 0.0 * eye + 0j
    if gs is not None:
        Z = Z + lnp.expand_dims(gs, -1) * eye
    extra = 0.0
    if gu is not None:
        HU = lnp.conjugate(gu)
        Ju = lnp.matmul(_adjoint(u), HU)
        FJ = F * Ju
        Wu = FJ + _adjoint(FJ)
        E = Ju * eye * lnp.expand_dims(sinv, -2)
        Z = Z + Wu * s_row + 0.5 * (E - _adjoint(E))
        if m > n:
            proj = lnp.eye(m, dtype=u.dtype) - lnp.matmul(u, _adjoint(u))
            extra = extra + lnp.matmul(lnp.matmul(proj, HU) * s_row ** -1.0, _adjoint(v))
    if gvh is not None:
        HV = _transposed(gvh)                 # conj-transpose of conj(gVh)
        Jv = lnp.matmul(_adjoint(v), HV)
        FJ = F * Jv
        Wv = FJ + _adjoint(FJ)
        Z = Z + _transposed(s_row) * Wv
        if n > m:
            proj = lnp.eye(n, dtype=v.dtype) - lnp.matmul(v, _adjoint(v))
            extra = extra + lnp.matmul(u * s_row ** -1.0, lnp.matmul(_adjoint(HV), proj))
    HA = lnp.matmul(lnp.matmul(u, Z), _adjoint(v)) + extra
    return lnp.conjugate(HA)
