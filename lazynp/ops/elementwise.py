"""Elementwise ops: every NumPy math ufunc, one table line each.

The scalar expression of each line is the template both kernel generators (Numba CPU and
Numba CUDA) expand; ``{0}``, ``{1}`` are the scalar inputs.  Output dtypes follow NumPy's own
ufunc type resolution (NEP 50: Python scalars are weak), obtained once per signature from the
ufunc itself on empty arrays and cached, so lazynp can never disagree with NumPy.
"""
from __future__ import annotations

import warnings

import numpy as np

from .._base import split as _split

from .registry import Op, register

# name: scalar expression.  Names are NumPy's ufunc names.
UNARY = {
    "negative": "(-{0})", "positive": "(+{0})", "absolute": "np.abs({0})", "fabs": "np.fabs({0})",
    "sign": "np.sign({0})", "reciprocal": "np.reciprocal({0})", "conjugate": "np.conj({0})",
    "exp": "np.exp({0})", "exp2": "np.exp2({0})", "expm1": "np.expm1({0})",
    "log": "np.log({0})", "log2": "np.log2({0})", "log10": "np.log10({0})", "log1p": "np.log1p({0})",
    "sqrt": "np.sqrt({0})", "cbrt": "np.cbrt({0})", "square": "({0} * {0})",
    "sin": "np.sin({0})", "cos": "np.cos({0})", "tan": "np.tan({0})",
    "arcsin": "np.arcsin({0})", "arccos": "np.arccos({0})", "arctan": "np.arctan({0})",
    "sinh": "np.sinh({0})", "cosh": "np.cosh({0})", "tanh": "np.tanh({0})",
    "arcsinh": "np.arcsinh({0})", "arccosh": "np.arccosh({0})", "arctanh": "np.arctanh({0})",
    "deg2rad": "np.deg2rad({0})", "rad2deg": "np.rad2deg({0})",
    "degrees": "np.degrees({0})", "radians": "np.radians({0})",
    "floor": "np.floor({0})", "ceil": "np.ceil({0})", "rint": "np.rint({0})", "trunc": "np.trunc({0})",
    "isnan": "np.isnan({0})", "isinf": "np.isinf({0})", "isfinite": "np.isfinite({0})",
    "signbit": "np.signbit({0})", "spacing": "np.spacing({0})",
    "logical_not": "(not {0})", "invert": "(~{0})", "bitwise_count": "np.bitwise_count({0})",
    "isnat": None,
}
BINARY = {
    "add": "({0} + {1})", "subtract": "({0} - {1})", "multiply": "({0} * {1})",
    "divide": "({0} / {1})", "true_divide": "({0} / {1})", "floor_divide": "({0} // {1})",
    "remainder": "({0} % {1})", "mod": "({0} % {1})", "fmod": "np.fmod({0}, {1})",
    "power": "({0} ** {1})", "float_power": "np.float_power({0}, {1})",
    "maximum": "np.maximum({0}, {1})", "minimum": "np.minimum({0}, {1})",
    "fmax": "np.fmax({0}, {1})", "fmin": "np.fmin({0}, {1})",
    "arctan2": "np.arctan2({0}, {1})", "hypot": "np.hypot({0}, {1})",
    "copysign": "np.copysign({0}, {1})", "nextafter": "np.nextafter({0}, {1})",
    "logaddexp": "np.logaddexp({0}, {1})", "logaddexp2": "np.logaddexp2({0}, {1})",
    "ldexp": "np.ldexp({0}, {1})", "heaviside": "np.heaviside({0}, {1})",
    "gcd": "np.gcd({0}, {1})", "lcm": "np.lcm({0}, {1})",
    "equal": "({0} == {1})", "not_equal": "({0} != {1})", "less": "({0} < {1})",
    "less_equal": "({0} <= {1})", "greater": "({0} > {1})", "greater_equal": "({0} >= {1})",
    "logical_and": "({0} and {1})", "logical_or": "({0} or {1})", "logical_xor": "(bool({0}) != bool({1}))",
    "bitwise_and": "({0} & {1})", "bitwise_or": "({0} | {1})", "bitwise_xor": "({0} ^ {1})",
    "left_shift": "({0} << {1})", "right_shift": "({0} >> {1})",
    "bitwise_left_shift": "({0} << {1})", "bitwise_right_shift": "({0} >> {1})",
}
#: Ufuncs that never warn or raise whatever their input values (comparisons, logic, bits,
#: rounding, sign tests, NaN-aware extrema); every other ufunc can (overflow, divide by zero,
#: invalid value: ``Op.raises_on_values``).
SILENT = frozenset({
    "negative", "positive", "fabs", "sign", "conjugate", "floor", "ceil", "rint", "trunc",
    "isnan", "isinf", "isfinite", "signbit", "isnat", "logical_not", "invert",
    "bitwise_count", "copysign", "nextafter", "heaviside", "maximum", "minimum", "fmax",
    "fmin", "equal", "not_equal", "less", "less_equal", "greater", "greater_equal",
    "logical_and", "logical_or", "logical_xor", "bitwise_and", "bitwise_or", "bitwise_xor",
    "left_shift", "right_shift"})
# Ufuncs with two outputs, evaluated as one op returning a tuple (elementwise, not fused yet).
MULTI_OUTPUT = {"divmod": None, "modf": None, "frexp": None}

_ALIASES = {"abs": "absolute", "conj": "conjugate", "bitwise_not": "invert", "acos": "arccos",
            "asin": "arcsin", "atan": "arctan", "acosh": "arccosh", "asinh": "arcsinh",
            "atanh": "arctanh", "atan2": "arctan2", "pow": "power", "bitwise_invert": "invert"}


#: Unary ufuncs that NumPy builds with SIMD loops on x86 (X86_V3/V4 dispatch targets), which
#: run 4-13x faster than the scalar libm call a Numba kernel makes for them (llvmlite has no
#: SVML).  Measured per element on 65k float64 values: tanh 1.7 vs 11.6 ns, exp 0.8 vs 4.7 ns,
#: log 0.8 vs 3.5 ns, cbrt 1.0 vs 13.7 ns.  sin and cos are left out: NumPy's float64 loops
#: are no faster than libm; so is float64 exp, which the kernels compute with their own
#: vectorizable ``_fexp`` (2.3 ns, kernels/cpu.py).  The fusion pass leaves these to NumPy
#: on large arrays.
SIMD_UNARY = frozenset({
    "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "tan", "arcsin", "arccos",
    "arctan", "sinh", "cosh", "tanh", "arcsinh", "arccosh", "arctanh", "cbrt"})
#: Ufuncs whose kernel form calls a libm function (``Op.calls_libm``): the costly ones
#: (transcendental, general powers: lazynp._base.split.COSTLY) and those NumPy builds with
#: SIMD loops.  (A power by a scalar 2 is a square in a tree kernel, exact:
#: kernels/tree.py's ``squares``.)
CALLS_LIBM = frozenset(_split.COSTLY) | SIMD_UNARY


def _ufunc_impl(ufunc):
    def impl(*args):
        return ufunc(*args)
    impl.__name__ = ufunc.__name__
    return impl


def ufunc_impl_out(ufunc):
    """``impl_out`` of an op computed by a single-output ``ufunc``."""
    if ufunc.nout != 1:
        return None

    def impl_out(out, *args, **params):
        if params:
            ufunc(*args, out=out, **params)
        else:
            # (a large call on two threads: lazynp._base.split; NumPy's result bit for bit)
            _split.into(ufunc, args, out)
    impl_out.__name__ = ufunc.__name__
    return impl_out


def _register_ufuncs() -> dict[str, Op]:
    table = {}
    for group in (UNARY, BINARY, MULTI_OUTPUT):
        for name, expr in group.items():
            uf = getattr(np, name, None)
            if not isinstance(uf, np.ufunc):
                continue
            key = uf.__name__
            if key in table:  # an alias of a ufunc already registered (mod -> remainder)
                table[name] = table[key]
                continue
            op = register(Op(name=key, kind="elementwise", impl=_ufunc_impl(uf), expr=expr,
                             ufunc=uf, inplace=(0,) if uf.nin >= 1 else (),
                             impl_out=ufunc_impl_out(uf), raises_on_values=key not in SILENT,
                             fp_errors_only=True, calls_libm=key in CALLS_LIBM,
                             batch="elementwise"))
            table[key] = op
            table[name] = op
    for alias, target in _ALIASES.items():
        if target in table:
            table[alias] = table[target]
    return table


UFUNC_OPS = _register_ufuncs()

_simd_cache: dict = {}


def numpy_simd(op: Op, dtype: np.dtype) -> bool:
    """True when NumPy's loop of ``op`` for ``dtype`` is a SIMD build on this CPU (so it beats
    a fused Numba kernel's scalar math call)."""
    key = (op.name, dtype)
    hit = _simd_cache.get(key)
    if hit is None:
        hit = False
        if op.name in SIMD_UNARY and dtype.kind == "f":
            try:
                from numpy.lib.introspect import opt_func_info
                info = opt_func_info(func_name=f"^{op.name}$", signature=dtype.name)
                for loop in info.get(op.name, {}).values():
                    hit = not loop["current"].startswith("baseline")
            except Exception:       # an older NumPy without introspection: keep fusing
                hit = False
        _simd_cache[key] = hit
    return hit


_dtype_cache: dict = {}
_pyscalar_kind = {bool: "b", int: "i", float: "f", complex: "c"}


def scalar_key(x):
    """Key describing one ufunc operand for dtype inference (dtype or weak Python kind)."""
    t = type(x)
    if t in _pyscalar_kind:
        return t
    return x.dtype


def result_dtypes(ufunc: np.ufunc, keys: tuple, dtype=None, casting="same_kind") -> tuple:
    """Output dtypes of ``ufunc`` for operand keys (dtypes or Python scalar types).

    Raises NumPy's own exception (``UFuncTypeError``, ``TypeError``...) when NumPy would.
    """
    ck = (ufunc, keys, dtype, casting)
    out = _dtype_cache.get(ck)
    if out is None:
        probes = [np.empty(0, dtype=k) if isinstance(k, np.dtype) else k(0) for k in keys]
        kw = {}
        if dtype is not None:
            kw["dtype"] = dtype
        if casting != "same_kind":
            kw["casting"] = casting
        with np.errstate(all="ignore"):
            res = ufunc(*probes, **kw)
        if ufunc.nout == 1:
            out = (np.asarray(res).dtype,)
        else:
            out = tuple(np.asarray(r).dtype for r in res)
        _dtype_cache[ck] = out
    return out


_int_bounds: dict = {}
_loops: dict = {}


def _bounds(k: np.dtype):
    b = _int_bounds.get(k)
    if b is None:
        info = np.iinfo(k)
        b = _int_bounds[k] = (int(info.min), int(info.max))
    return b


def check_int_power(base, exponent, shape: tuple) -> None:
    """NumPy's error, raised at the call, for a non-empty integer array (``base``: its dtype
    or a Python type) to a negative Python int power.  (Call it after ``check_python_int``:
    NumPy first converts the exponent, so ``uint8 ** -1`` is an OverflowError.)"""
    if type(exponent) is int and exponent < 0 and isinstance(base, np.dtype) and \
            base.kind in "iu" and 0 not in shape:
        raise ValueError("Integers to negative integer powers are not allowed.")


def check_python_int(ufunc, args, keys) -> None:
    """Raise NumPy's OverflowError for a Python int that does not fit the integer dtype it is
    converted to (the other operands' dtypes and the ufunc loop's input dtypes)."""
    ints = [k for k in keys if isinstance(k, np.dtype) and k.kind in "iu"]
    lk = (ufunc, tuple(keys))
    loop = _loops.get(lk)
    if loop is None:
        try:
            loop = ufunc.resolve_dtypes(tuple(keys) + (None,) * ufunc.nout)[:ufunc.nin]
        except Exception:
            loop = ()
        _loops[lk] = loop
    ints += [d for d in loop if d.kind in "iu"]
    bounds = [_bounds(k) for k in ints]
    for a in args:
        if type(a) is int and any(not lo <= a <= hi for lo, hi in bounds):
            # NumPy decides (its exact error, or none: comparisons, ldexp's float mantissa):
            # the call on empty arrays of the operands' dtypes, scalars in their places
            # (silent: a cast warning comes when the operation runs)
            with warnings.catch_warnings(), np.errstate(all="ignore"):
                warnings.simplefilter("ignore")
                ufunc(*[np.empty(0, dtype=k) if isinstance(k, np.dtype) else v
                        for k, v in zip(keys, args)])
            return
